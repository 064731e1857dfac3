//! Compiles the guest workspace in `wasm/` to `wasm32-wasip1` and copies each example's module
//! into `OUT_DIR`, where `src/lib.rs` includes it.

use std::env;
use std::path::PathBuf;
use std::process::Command;

const EXAMPLES: [&str; 3] = ["hello", "echo", "wc"];
const TARGET: &str = "wasm32-wasip1";

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    let workspace = manifest_dir.join("wasm");
    let target_dir = out_dir.join("target");
    println!("cargo:rerun-if-changed={}", workspace.display());

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
        "building the guest functions in {} failed; is the {TARGET} target installed? \
         (rust-toolchain.toml lists it, so rustup installs it on first use)",
        workspace.display()
    );
    for name in EXAMPLES {
        let built = target_dir
            .join(TARGET)
            .join("release")
            .join(format!("{name}.wasm"));
        std::fs::copy(&built, out_dir.join(format!("{name}.wasm")))
            .unwrap_or_else(|e| panic!("copying {}: {e}", built.display()));
    }
}
