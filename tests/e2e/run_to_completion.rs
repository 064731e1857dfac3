//! Run-to-completion on the real binary: short calls run on the thread that read them, a
//! function that turns long is stopped by its budget while the node keeps answering, and
//! `--inline-below-us 0` queues every call.

use crate::platform::Platform;
use mote_api::DeployParams;
use std::time::{Duration, Instant};

fn inline_calls(p: &Platform) -> u64 {
    let m = p.get("/metrics").text();
    m.lines()
        .find_map(|l| l.strip_prefix("mote_inline_calls_total ")?.parse().ok())
        .unwrap_or_else(|| panic!("no mote_inline_calls_total in\n{m}"))
}

#[test]
fn a_short_function_runs_on_the_reading_thread_until_it_turns_long() {
    let p = Platform::start(&["--cores", "1"]);
    assert_eq!(p.get("/v1/node").json()["inline_below_us"], 1000);
    let limits = DeployParams {
        timeout_ms: Some(1000),
        ..DeployParams::default()
    };
    p.deploy("turncoat", &crate::fixtures::turncoat(), &limits);
    for _ in 0..12 {
        assert_eq!(p.invoke("turncoat", b"").status, 200);
    }
    let short = inline_calls(&p);
    assert!(short >= 8, "{short} of 12 short calls ran to completion");

    // Its eleventh-and-later calls are expected to be short, so this one starts on the thread
    // that read it, never preempted: only its budget stops it, and the node answers meanwhile.
    std::thread::scope(|s| {
        let long = s.spawn(|| p.invoke("turncoat", b"now long"));
        std::thread::sleep(Duration::from_millis(100));
        for _ in 0..5 {
            let asked = Instant::now();
            assert_eq!(p.get("/healthz").status, 200);
            assert!(
                asked.elapsed() < Duration::from_millis(300),
                "{:?}",
                asked.elapsed()
            );
        }
        let long = long.join().unwrap();
        assert_eq!(long.status, 504, "{}", long.text());
    });
    assert_eq!(
        inline_calls(&p),
        short + 1,
        "the long call ran on its reading thread"
    );

    // Its history now holds a second of run time: its calls go to the executors.
    assert_eq!(p.invoke("turncoat", b"").status, 200);
    assert_eq!(inline_calls(&p), short + 1);
}

#[test]
fn with_inline_below_zero_every_call_is_queued() {
    let p = Platform::start(&["--cores", "1", "--inline-below-us", "0"]);
    assert_eq!(p.get("/v1/node").json()["inline_below_us"], 0);
    p.deploy(
        "turncoat",
        &crate::fixtures::turncoat(),
        &DeployParams::default(),
    );
    for _ in 0..12 {
        assert_eq!(p.invoke("turncoat", b"").status, 200);
    }
    assert_eq!(inline_calls(&p), 0);
    let rows = p.get("/v1/dashboard").json()["executors"].clone();
    assert_eq!(
        rows.as_array().map(Vec::len),
        Some(1),
        "no caller slots: {rows}"
    );
}
