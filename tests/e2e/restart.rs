//! State survives restarts, clean or not, and compiled artefacts are reused.

use crate::platform::Platform;
use std::time::SystemTime;

fn artefacts(p: &Platform) -> Vec<(String, SystemTime)> {
    let mut files: Vec<_> = std::fs::read_dir(p.data.join("artifacts"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".cwasm"))
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().modified().unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

#[test]
fn functions_survive_kill_and_restart_without_recompiling() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let p = Platform::start_in(&data, &[]);
    p.deploy("hello", mote_guests::HELLO.wasm, "?timeout_ms=1234");
    p.deploy("wc", mote_guests::WC.wasm, "");
    let before = artefacts(&p);
    assert_eq!(before.len(), 2);
    p.kill();

    let p = Platform::start_in(&data, &[]);
    assert_eq!(p.invoke("hello", b"again").text(), "Hello, again!\n");
    assert_eq!(p.get("/v1/functions/hello").json()["timeout_ms"], 1234);
    assert_eq!(p.invoke("wc", b"a b").status, 200);
    // Deploying the same bytes again loads the cached artefact instead of compiling.
    p.deploy("hello2", mote_guests::HELLO.wasm, "");
    assert_eq!(artefacts(&p), before, "artefacts were rewritten");
    p.stop();

    let p = Platform::start_in(&data, &[]);
    assert_eq!(p.function_names(), ["hello", "hello2", "wc"]);
}

#[test]
fn removing_a_function_removes_it_for_good_and_frees_unused_modules() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let p = Platform::start_in(&data, &[]);
    p.deploy("a", mote_guests::HELLO.wasm, "");
    p.deploy("b", mote_guests::HELLO.wasm, "");
    assert_eq!(p.delete("/v1/functions/a").status, 200);
    // `b` still uses the module.
    assert_eq!(artefacts(&p).len(), 1);
    assert_eq!(p.delete("/v1/functions/b").status, 200);
    assert_eq!(artefacts(&p).len(), 0);
    p.kill();
    let p = Platform::start_in(&data, &[]);
    assert_eq!(p.get("/v1/functions/a").status, 404);
    assert_eq!(p.get("/v1/functions/b").status, 404);
}

#[test]
fn past_the_resident_budget_functions_are_evicted_and_start_cold_from_their_artefacts() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // A zero budget keeps only the most recently loaded function resident.
    let p = Platform::start_in(&data, &["--resident-mb", "0"]);
    p.deploy("hello", mote_guests::HELLO.wasm, "");
    p.deploy("echo", mote_guests::ECHO.wasm, "");
    for round in 0..3 {
        assert_eq!(
            p.invoke("hello", b"cold").text(),
            "Hello, cold!\n",
            "round {round}"
        );
        assert_eq!(p.invoke("echo", b"again").text(), "again", "round {round}");
    }
    let metrics = p.get("/metrics").text();
    assert!(metrics.contains("mote_cold_starts_total 6"), "{metrics}");
    assert!(metrics.contains("mote_functions_resident 1"), "{metrics}");
    p.kill();

    // After a restart with the same budget, functions that did not fit load on first call.
    let p = Platform::start_in(&data, &["--resident-mb", "0"]);
    assert_eq!(p.invoke("echo", b"x").text(), "x");
    assert_eq!(p.invoke("hello", b"y").text(), "Hello, y!\n");
    p.stop();
}
