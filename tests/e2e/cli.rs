//! The client commands against a running platform.

use crate::platform::{Platform, mote_bin};
use std::process::{Command, Output};

pub(crate) fn mote(p: &Platform, args: &[&str]) -> Output {
    Command::new(mote_bin())
        .args(args)
        .args(["--server", &p.url])
        .output()
        .unwrap()
}

pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn deploy_invoke_ls_rm() {
    let p = Platform::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("hello.wasm");
    std::fs::write(&wasm, mote_guests::HELLO.wasm).unwrap();
    let input = dir.path().join("name.txt");
    std::fs::write(&input, "file").unwrap();

    let o = mote(
        &p,
        &[
            "deploy",
            "greet",
            wasm.to_str().unwrap(),
            "--timeout-ms",
            "300",
        ],
    );
    assert!(o.status.success(), "{o:?}");
    assert!(
        stdout(&o).contains("deployed greet (mote-abi-v1"),
        "{}",
        stdout(&o)
    );

    let o = mote(&p, &["invoke", "greet", "--data", "cli"]);
    assert_eq!(stdout(&o), "Hello, cli!\n");
    let o = mote(
        &p,
        &[
            "invoke",
            "greet",
            "--data",
            &format!("@{}", input.display()),
        ],
    );
    assert_eq!(stdout(&o), "Hello, file!\n");

    let o = mote(&p, &["ls"]);
    assert!(
        stdout(&o).contains("greet") && stdout(&o).contains("300 ms"),
        "{}",
        stdout(&o)
    );

    let o = mote(&p, &["release", "greet"]);
    assert_eq!(stdout(&o), "greet was not quarantined\n");

    let o = mote(&p, &["rm", "greet"]);
    assert!(o.status.success());
    let o = mote(&p, &["invoke", "greet"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("`greet` is not deployed") && err.contains("404"),
        "{err}"
    );
}

#[test]
fn unreachable_server_says_so() {
    let o = Command::new(mote_bin())
        .args(["ls", "--server", "http://127.0.0.1:9"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cannot reach mote at http://127.0.0.1:9"),
        "{err}"
    );
}
