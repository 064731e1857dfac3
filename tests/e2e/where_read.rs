//! Calls run where they are read, on the real binary: a call runs on the reader that read its
//! request when a core is free and nothing waits, and `--inline off` queues every call for an
//! executor. (That a call run so is confined, and preempted like any other, is
//! `confinement`'s and `preempt`'s.)

use crate::platform::Platform;
use mote_api::DeployParams;

fn inline_calls(p: &Platform) -> u64 {
    let m = p.get("/metrics").text();
    m.lines()
        .find_map(|l| l.strip_prefix("mote_inline_calls_total ")?.parse().ok())
        .unwrap_or_else(|| panic!("no mote_inline_calls_total in\n{m}"))
}

#[test]
fn a_call_runs_on_the_reader_that_read_it_when_a_core_is_free() {
    let p = Platform::start(&["--cores", "1"]);
    assert_eq!(p.get("/v1/node").json()["inline"], true);
    p.deploy("hello", mote_guests::HELLO.wasm, &DeployParams::default());
    // One call at a time: each finds the core its predecessor let go before it answered.
    for i in 0..12 {
        let reply = p.invoke("hello", format!("caller {i}").as_bytes());
        assert_eq!(reply.status, 200, "{}", reply.text());
    }
    assert_eq!(inline_calls(&p), 12);
    // A WASI command's calls go to the executors.
    p.deploy("wc", mote_guests::WC.wasm, &DeployParams::default());
    assert_eq!(p.invoke("wc", b"one two").status, 200);
    assert_eq!(inline_calls(&p), 12);
}

#[test]
fn with_inline_off_every_call_is_queued() {
    let p = Platform::start(&["--cores", "1", "--inline", "off"]);
    assert_eq!(p.get("/v1/node").json()["inline"], false);
    p.deploy("hello", mote_guests::HELLO.wasm, &DeployParams::default());
    for _ in 0..12 {
        assert_eq!(p.invoke("hello", b"x").status, 200);
    }
    assert_eq!(inline_calls(&p), 0);
    let rows = p.get("/v1/dashboard").json()["executors"].clone();
    assert_eq!(
        rows.as_array().map(Vec::len),
        Some(1),
        "a row per core: {rows}"
    );
}
