//! Limits a guest cannot escape: timeouts and memory, while other calls carry on. The platform
//! runs in this process ([`Platform::in_process`]) except where the test reads the process's
//! own memory.

use crate::fixtures;
use crate::platform::{Platform, wait};
use mote_api::DeployParams;
use std::time::{Duration, Instant};

#[test]
fn an_infinite_loop_is_stopped_at_its_timeout_and_frees_its_core() {
    let p = Platform::in_process(|c| c.cores = Some(1));
    p.deploy(
        "spin",
        &fixtures::spin(),
        &DeployParams {
            timeout_ms: Some(200),
            ..Default::default()
        },
    );
    p.deploy("hello", mote_guests::HELLO.wasm, &DeployParams::default());
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
    let p = Platform::in_process(|_| {});
    p.deploy(
        "probe",
        &fixtures::memory_probe(),
        &DeployParams {
            memory_mb: Some(16),
            ..Default::default()
        },
    );
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
    let p = Platform::in_process(|c| c.cores = Some(2));
    p.deploy(
        "bomb",
        &fixtures::memory_bomb(),
        &DeployParams {
            memory_mb: Some(64),
            ..Default::default()
        },
    );
    p.deploy("hello", mote_guests::HELLO.wasm, &DeployParams::default());
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

#[test]
fn a_100_microsecond_budget_is_enforced_and_repeat_offenders_are_quarantined() {
    let p = Platform::in_process(|c| {
        c.cores = Some(1);
        c.quarantine_after = 3;
    });
    let d = p.deploy(
        "spin",
        &fixtures::spin(),
        &DeployParams {
            timeout_us: Some(100),
            ..Default::default()
        },
    );
    assert_eq!((d.timeout_us, d.timeout_ms), (100, 1));
    p.deploy("hello", mote_guests::HELLO.wasm, &DeployParams::default());
    for _ in 0..3 {
        let r = p.invoke("spin", b"");
        assert_eq!(r.status, 504, "{}", r.text());
        assert!(r.error().contains("timeout of 100 µs"), "{}", r.error());
    }
    // Three kills in a row: the function refuses calls, saying why and what to do.
    let r = p.invoke("spin", b"");
    assert_eq!(r.status, 409, "{}", r.text());
    for needle in [
        "`spin` is quarantined",
        "3 calls in a row",
        "100 µs",
        "release",
    ] {
        assert!(
            r.error().contains(needle),
            "missing {needle:?}: {}",
            r.error()
        );
    }
    assert_eq!(
        wait(p.api().function("spin")).quarantined_after_kills,
        Some(3)
    );
    assert!(
        p.get("/metrics")
            .text()
            .contains("mote_functions_quarantined 1")
    );
    // Other functions are unaffected.
    assert_eq!(p.invoke("hello", b"x").text(), "Hello, x!\n");

    // The operator releases it: it runs (and is killed) again.
    assert!(wait(p.api().release("spin")).released);
    assert_eq!(wait(p.api().function("spin")).quarantined_after_kills, None);
    assert_eq!(p.invoke("spin", b"").status, 504);
    assert!(!wait(p.api().release("spin")).released);
    assert_eq!(p.post("/v1/functions/nope/release", b"").status, 404);

    // A redeploy starts clean, and a fixed function is not counted against.
    for _ in 0..3 {
        p.invoke("spin", b"");
    }
    assert_eq!(p.invoke("spin", b"").status, 409);
    p.deploy(
        "spin",
        &fixtures::busy(10),
        &DeployParams {
            timeout_us: Some(100000),
            ..Default::default()
        },
    );
    assert_eq!(p.invoke("spin", b"").status, 200);
    assert!(
        p.get("/metrics")
            .text()
            .contains("mote_functions_quarantined 0")
    );
}

#[test]
fn budgets_below_100_microseconds_or_in_two_units_are_refused() {
    let p = Platform::in_process(|_| {});
    let r = p.put("/v1/functions/f?timeout_us=99", mote_guests::ECHO.wasm);
    assert_eq!(r.status, 400);
    assert!(
        r.error()
            .contains("timeout_us=99 is out of range; use 100 to"),
        "{}",
        r.error()
    );
    let r = p.put(
        "/v1/functions/f?timeout_us=500&timeout_ms=5",
        mote_guests::ECHO.wasm,
    );
    assert_eq!(r.status, 400);
    assert!(r.error().contains("not both"), "{}", r.error());
    assert_eq!(p.get("/v1/functions/f").status, 404);
}

#[test]
fn killed_calls_release_everything_they_held() {
    // Each call dirties 4 MiB and is killed at its budget: resident memory must not grow with
    // the number of kills (the benchmark runs a million; this runs a few thousand).
    let p = Platform::start(&["--cores", "1", "--quarantine-after", "0"]);
    p.deploy(
        "hog",
        &fixtures::hog(),
        &DeployParams {
            timeout_us: Some(200),
            ..Default::default()
        },
    );
    let kill = |n: usize| {
        for _ in 0..n {
            let r = p.invoke("hog", b"");
            assert_eq!(r.status, 504, "{}", r.text());
        }
    };
    kill(300);
    let before = p.resident_bytes();
    kill(3000);
    let after = p.resident_bytes();
    assert!(
        after < before + (8 << 20),
        "resident memory grew from {before} to {after} bytes over 3000 killed calls"
    );
}
