//! Fuzz targets for every parser of bytes mote takes from someone it does not trust: a plain
//! function per target that parses its input and checks what must hold of the result, so the
//! same code runs in CI's short pass (`tests/short_pass.rs`, over seeds and their mutations)
//! and in the long coverage-guided runs (the `fuzz/` package, libFuzzer, `scripts/fuzz`).
//!
//! - [`tokens`]: the `Authorization` header against a token table, token names, token records
//!   in JSON, scope names (`mote_access`).
//! - [`job_messages`]: the worker messages between nodes (postcard) and the job specs and
//!   reports (JSON) of `mote_jobs::message`.
//! - [`job_images`]: partition images (`mote_jobs::image`), read and made.
//! - [`abi_response`]: the response location a guest returns, checked against its memory
//!   (`mote_abi::response_range`).
//! - [`store_peer`]: mote store's pull requests and responses (prost), answered and merged by
//!   a replica's engine.
//! - [`routes`]: what a method and path need (`mote_access::need`), against the segments.
//! - [`host`]: the `Host` header against a node's allow-list (`mote_access::HostAllowList`).
//!
//! Every target fails by panicking. Besides what each checks, the decoders are held to what
//! their input justifies in memory ([`alloc`]): a binary that runs the targets installs
//! [`alloc::Counting`] as its global allocator.

mod abi_response;
pub mod alloc;
mod generate;
mod host;
mod job_images;
mod job_messages;
mod routes;
mod store_peer;
mod target;
mod tokens;

pub use abi_response::abi_response;
pub use generate::short_pass;
pub use host::host;
pub use job_images::job_images;
pub use job_messages::job_messages;
pub use routes::routes;
pub use store_peer::store_peer;
pub use target::Target;
pub use tokens::tokens;

/// Every target.
pub const TARGETS: [Target; 7] = [
    Target {
        name: "tokens",
        run: tokens,
        seeds: tokens::seeds,
    },
    Target {
        name: "job_messages",
        run: job_messages,
        seeds: job_messages::seeds,
    },
    Target {
        name: "job_images",
        run: job_images,
        seeds: job_images::seeds,
    },
    Target {
        name: "abi_response",
        run: abi_response,
        seeds: abi_response::seeds,
    },
    Target {
        name: "store_peer",
        run: store_peer,
        seeds: store_peer::seeds,
    },
    Target {
        name: "routes",
        run: routes,
        seeds: routes::seeds,
    },
    Target {
        name: "host",
        run: host,
        seeds: host::seeds,
    },
];

/// The target named `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

/// The variable naming the directory [`write_seeds_from_env`] writes seeds into.
pub const SEEDS_DIR_VAR: &str = "MOTE_FUZZ_SEEDS";

/// Writes the seeds of target `name` into the directory [`SEEDS_DIR_VAR`] names, if it is set,
/// one file per seed: what a libFuzzer binary does when it starts (`scripts/fuzz` sets it to the
/// corpus), so that a run starts from inputs that reach every part of the target without a
/// second, uninstrumented build.
///
/// # Panics
///
/// If there is no target `name` or the directory cannot be written: the run would start blind.
pub fn write_seeds_from_env(name: &str) {
    let Some(dir) = std::env::var_os(SEEDS_DIR_VAR).map(std::path::PathBuf::from) else {
        return;
    };
    let target = target(name).unwrap_or_else(|| panic!("no fuzz target {name}"));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot make {}: {e}", dir.display()));
    for (i, seed) in (target.seeds)().iter().enumerate() {
        let path = dir.join(format!("seed-{name}-{i:03}"));
        std::fs::write(&path, seed)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    }
}
