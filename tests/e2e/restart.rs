//! State survives restarts, clean or not, and compiled artefacts are reused.

use crate::platform::{Platform, wait};
use mote_api::DeployParams;
use mote_testbed::KilledOnDrop;
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
    p.deploy(
        "hello",
        mote_guests::HELLO.wasm,
        &DeployParams {
            timeout_ms: Some(1234),
            ..Default::default()
        },
    );
    p.deploy("wc", mote_guests::WC.wasm, &DeployParams::default());
    let before = artefacts(&p);
    assert_eq!(before.len(), 2);
    p.kill();

    let p = Platform::start_in(&data, &[]);
    assert_eq!(p.invoke("hello", b"again").text(), "Hello, again!\n");
    assert_eq!(wait(p.api().function("hello")).timeout_ms, 1234);
    assert_eq!(p.invoke("wc", b"a b").status, 200);
    // Deploying the same bytes again loads the cached artefact instead of compiling.
    p.deploy("hello2", mote_guests::HELLO.wasm, &DeployParams::default());
    assert_eq!(artefacts(&p), before, "artefacts were rewritten");
    p.stop();

    let p = Platform::start_in(&data, &[]);
    assert_eq!(p.function_names(), ["hello", "hello2", "wc"]);
}

/// The review's reproduction of issue 18: bytes flipped in the middle of a cached artefact,
/// then a restart and a call. The node ran the damaged code; it must compile the module again.
#[test]
fn a_damaged_artefact_is_compiled_again_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let p = Platform::start_in(&data, &[]);
    p.deploy("hello", mote_guests::HELLO.wasm, &DeployParams::default());
    let (name, _) = artefacts(&p).pop().unwrap();
    p.stop();
    let path = data.join("artifacts").join(&name);
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    for byte in &mut bytes[middle..middle + 64] {
        *byte ^= 0x5a;
    }
    std::fs::write(&path, &bytes).unwrap();

    let p = Platform::start_in(&data, &[]);
    let reply = p.invoke("hello", b"again");
    assert_eq!(
        (reply.status, reply.text()),
        (200, "Hello, again!\n".into())
    );
    assert_eq!(p.get("/healthz").status, 200);
    let rewritten = std::fs::read(&path).unwrap() != bytes;
    assert!(rewritten, "the damaged artefact was kept and run");
    p.stop();
}

#[test]
fn removing_a_function_removes_it_for_good_and_frees_unused_modules() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let p = Platform::start_in(&data, &[]);
    p.deploy("a", mote_guests::HELLO.wasm, &DeployParams::default());
    p.deploy("b", mote_guests::HELLO.wasm, &DeployParams::default());
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
    p.deploy("hello", mote_guests::HELLO.wasm, &DeployParams::default());
    p.deploy("echo", mote_guests::ECHO.wasm, &DeployParams::default());
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

/// Starts `mote store` on free ports and answers its etcd URL; killed on drop.
struct StoreProcess {
    _process: KilledOnDrop,
    url: String,
}

impl StoreProcess {
    fn start() -> Self {
        use std::io::BufRead;
        let mut child = std::process::Command::new(crate::platform::mote_bin())
            .args(["store", "--name", "external", "--listen", "127.0.0.1:0"])
            .args(["--peer-listen", "127.0.0.1:0", "--log", "warn"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("starting mote store");
        let stdout = child.stdout.take().unwrap();
        let line = std::io::BufReader::new(stdout)
            .lines()
            .next()
            .expect("mote store exited before it was up")
            .unwrap();
        let url = line
            .split("etcd v3 API on ")
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .unwrap_or_else(|| panic!("unexpected first line from mote store: {line}"))
            .to_owned();
        Self {
            _process: KilledOnDrop::new(child),
            url,
        }
    }
}

#[test]
fn with_store_url_functions_live_in_that_store() {
    let store = StoreProcess::start();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let p = Platform::start_in(&data, &["--store", &store.url]);
    p.deploy("hello", mote_guests::HELLO.wasm, &DeployParams::default());
    p.kill();
    assert!(
        !data.join("store").exists(),
        "records went to an embedded store although --store was given"
    );

    let p = Platform::start_in(&data, &["--store", &store.url]);
    assert_eq!(p.invoke("hello", b"store").text(), "Hello, store!\n");
    p.stop();
    // Without --store the platform uses its own embedded store, which never saw `hello`.
    let p = Platform::start_in(&data, &[]);
    assert_eq!(p.get("/v1/functions/hello").status, 404);
}

#[test]
fn an_unreachable_store_is_named_and_the_platform_does_not_start() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(crate::platform::mote_bin())
        .args([
            "up",
            "--listen",
            "127.0.0.1:0",
            "--store",
            "http://127.0.0.1:9",
        ])
        .arg("--data")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot reach the state store") && stderr.contains("127.0.0.1:9"),
        "stderr does not name the store: {stderr}"
    );
}
