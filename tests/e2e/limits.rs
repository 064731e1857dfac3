//! Limits a guest cannot escape: timeouts and memory, while other calls carry on.

use crate::fixtures;
use crate::platform::Platform;
use std::time::{Duration, Instant};

#[test]
fn an_infinite_loop_is_stopped_at_its_timeout_and_frees_its_core() {
    let p = Platform::start(&["--cores", "1"]);
    p.deploy("spin", &fixtures::spin(), "?timeout_ms=200");
    p.deploy("hello", mote_guests::HELLO.wasm, "");
    for _ in 0..3 {
        let t = Instant::now();
        let r = p.invoke("spin", b"");
        let elapsed = t.elapsed();
        assert_eq!(r.status, 504, "{}", r.text());
        assert!(r.error().contains("timeout of 200 ms"), "{}", r.error());
        assert!(
            elapsed >= Duration::from_millis(200),
            "stopped early: {elapsed:?}"
        );
        // Generous: the overshoot is measured precisely in the runtime's tests and benchmarks;
        // here it only has to be clear that the loop did not run on.
        assert!(
            elapsed < Duration::from_millis(1200),
            "stopped late: {elapsed:?}"
        );
    }
    // The only core was freed each time.
    assert_eq!(p.invoke("hello", b"after").text(), "Hello, after!\n");
    let m = p.get("/metrics").text();
    assert!(
        m.contains(r#"mote_invocations_total{function="spin",outcome="timeout"} 3"#),
        "{m}"
    );
}

#[test]
fn memory_grow_fails_at_the_limit() {
    let p = Platform::start(&[]);
    p.deploy("probe", &fixtures::memory_probe(), "?memory_mb=16");
    let r = p.invoke("probe", b"");
    assert_eq!(r.status, 200, "{}", r.text());
    let reached = u32::from_le_bytes(r.body[..4].try_into().unwrap());
    assert_eq!(
        reached, 16,
        "memory grew to {reached} MiB under a 16 MiB limit"
    );
}

#[test]
fn a_memory_bomb_is_a_500_naming_the_limit_and_others_keep_running() {
    let p = Platform::start(&["--cores", "2"]);
    p.deploy("bomb", &fixtures::memory_bomb(), "?memory_mb=64");
    p.deploy("hello", mote_guests::HELLO.wasm, "");
    std::thread::scope(|s| {
        let bombs = s.spawn(|| {
            for _ in 0..20 {
                let r = p.invoke("bomb", b"");
                assert_eq!(r.status, 500);
                assert!(
                    r.error().contains("memory limit of 64 MiB"),
                    "{}",
                    r.error()
                );
            }
        });
        for i in 0..100 {
            let r = p.invoke("hello", format!("{i}").as_bytes());
            assert_eq!(r.text(), format!("Hello, {i}!\n"));
        }
        bombs.join().unwrap();
    });
}
