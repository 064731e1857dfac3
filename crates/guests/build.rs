//! Compiles the guest workspace in `wasm/` to `wasm32-wasip1` and copies each example's, each
//! suite, benchmark and sort function's and each job's module into `OUT_DIR`, where `src/lib.rs`
//! includes it. The `wasi:http` guests' modules are made components first.

use std::env;
use std::path::PathBuf;
use std::process::Command;

const EXAMPLES: [&str; 4] = ["hello", "echo", "wc", "ls"];
/// The suite's functions (`wasm/suite/`), by package name.
const SUITE: [&str; 8] = [
    "graph-bfs",
    "graph-mst",
    "graph-pagerank",
    "dynamic-html",
    "thumbnailer",
    "compression",
    "sleep",
    "dna-visualisation",
];
/// Guests of the microsecond benchmark (`wasm/micro/`).
const MICRO: [&str; 1] = ["sha512"];
/// The microtask sort's functions (`wasm/sort/`), by package name; `sort/records` and
/// `sort/stage` are libraries they share, not functions.
const SORT: [&str; 4] = [
    "sort-gen",
    "sort-partition",
    "sort-category",
    "sort-validate",
];
/// The data-parallel jobs (`wasm/jobs/`), by package name; `jobs/data` is the library of their
/// generators and input formats, not a job.
const JOBS: [&str; 7] = [
    "lr",
    "kmeans",
    "pagerank",
    "wordcount",
    "sales",
    "busy",
    "wordcount-shuffle",
];
/// The `wasi:http/proxy` guests (`wasm/http/`), by package name. Each builds to a core module
/// whose WASI preview1 imports and embedded WIT make it a component here (see [`componentize`]);
/// `OUT_DIR` gets the component.
const COMPONENTS: [&str; 2] = ["http-hello", "http-spin"];
const TARGET: &str = "wasm32-wasip1";

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    let workspace = manifest_dir.join("wasm");
    let target_dir = out_dir.join("target");
    println!("cargo:rerun-if-changed={}", workspace.display());
    // The guest SDK shares the ABI's names and status codes with the host.
    println!(
        "cargo:rerun-if-changed={}",
        manifest_dir.join("../abi").display()
    );
    ensure_target_installed();

    let mut cargo = Command::new(env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cargo
        .current_dir(&workspace)
        .args([
            "build",
            "--release",
            "--workspace",
            "--target",
            TARGET,
            "--target-dir",
        ])
        .arg(&target_dir);
    // The host build's flags and settings must not leak into a build for another target.
    for (key, _) in env::vars_os() {
        let key = key.to_string_lossy();
        if key.starts_with("CARGO_") && key != "CARGO_HOME" && key != "CARGO_NET_OFFLINE"
            || key == "RUSTFLAGS"
            || key == "RUSTC_WORKSPACE_WRAPPER"
        {
            cargo.env_remove(key.as_ref());
        }
    }
    let status = cargo
        .status()
        .expect("running cargo to build the guest functions");
    assert!(
        status.success(),
        "building the guest functions in {} failed (see the compiler's output above)",
        workspace.display()
    );
    // Cargo names a cdylib after its crate, whose name has `_` where the package has `-`.
    let built = |name: &str| {
        target_dir
            .join(TARGET)
            .join("release")
            .join(format!("{}.wasm", name.replace('-', "_")))
    };
    for name in EXAMPLES
        .into_iter()
        .chain(SUITE)
        .chain(MICRO)
        .chain(SORT)
        .chain(JOBS)
    {
        let built = built(name);
        std::fs::copy(&built, out_dir.join(format!("{name}.wasm")))
            .unwrap_or_else(|e| panic!("copying {}: {e}", built.display()));
    }
    for name in COMPONENTS {
        let built = built(name);
        let core =
            std::fs::read(&built).unwrap_or_else(|e| panic!("reading {}: {e}", built.display()));
        let component = componentize(name, &core);
        let out = out_dir.join(format!("{name}.wasm"));
        std::fs::write(&out, component)
            .unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));
    }
}

/// Makes the core module of a `wasi:http` guest a component of the `wasi:http/proxy` world, and
/// validates it. The component-type section the module's WIT bindings embed gives its `wasi:http`
/// imports and exports. Its WASI preview1 imports, which Rust's std links, go through wasmtime's
/// proxy adapter, which imports nothing outside the proxy world: stdio, clocks and random, but no
/// files, sockets, environment or exit.
fn componentize(name: &str, core: &[u8]) -> Vec<u8> {
    use wasi_preview1_component_adapter_provider::{
        WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME, WASI_SNAPSHOT_PREVIEW1_PROXY_ADAPTER,
    };
    wit_component::ComponentEncoder::default()
        .module(core)
        .and_then(|encoder| {
            encoder.adapter(
                WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME,
                WASI_SNAPSHOT_PREVIEW1_PROXY_ADAPTER,
            )
        })
        .and_then(|encoder| encoder.validate(true).encode())
        .unwrap_or_else(|e| panic!("making {name} a component: {e:?}"))
}

/// Installs the wasm target into the toolchain this build uses if it is missing, so a fresh
/// machine needs nothing but rustup. (rustup installs a toolchain file's targets only when it
/// installs the toolchain itself, not when the toolchain is already there.)
fn ensure_target_installed() {
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let output = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .expect("running rustc --print sysroot");
    let sysroot = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    if sysroot.join("lib").join("rustlib").join(TARGET).exists() {
        return;
    }
    let toolchain = sysroot
        .file_name()
        .map(|n| n.to_string_lossy().into_owned());
    let mut rustup = Command::new("rustup");
    rustup.args(["target", "add", TARGET]);
    if let Some(toolchain) = &toolchain {
        rustup.args(["--toolchain", toolchain]);
    }
    let installed = rustup.status().map(|s| s.success()).unwrap_or(false);
    assert!(
        installed,
        "the {TARGET} target is not installed for {} and `rustup target add {TARGET}` failed; \
         install it and build again",
        sysroot.display()
    );
}
