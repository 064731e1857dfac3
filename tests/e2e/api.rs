//! The happy paths of the HTTP API: deploy, invoke, list, get, remove, health and metrics.

use crate::platform::Platform;
use mote_api::DeployParams;

#[test]
fn deploy_invoke_list_get_remove() {
    let p = Platform::start(&[]);
    assert_eq!(p.get("/healthz").text(), "ok\n");

    let d = p.deploy(
        "hello",
        mote_guests::HELLO.wasm,
        &DeployParams {
            timeout_ms: Some(500),
            memory_mb: Some(32),
            ..Default::default()
        },
    );
    assert_eq!(d.name, "hello");
    assert_eq!(d.kind, "mote-abi-v1");
    assert_eq!(d.timeout_ms, 500);
    assert_eq!(d.memory_mb, 32);
    assert_eq!(d.sha256.len(), 64);

    let r = p.invoke("hello", b"mote");
    assert_eq!((r.status, r.text().as_str()), (200, "Hello, mote!\n"));
    let r = p.invoke("hello", b"");
    assert_eq!(r.text(), "Hello, world!\n");

    let wc = p.deploy("wc", mote_guests::WC.wasm, &DeployParams::default());
    assert_eq!(wc.kind, "wasi-command");
    let r = p.invoke("wc", b"one two\nthree\n");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json(),
        serde_json::json!({"lines": 2, "words": 3, "bytes": 14})
    );

    assert_eq!(p.function_names(), ["hello", "wc"]);
    assert_eq!(p.get("/v1/functions/wc").json()["kind"], "wasi-command");

    assert_eq!(p.delete("/v1/functions/wc").status, 200);
    assert_eq!(p.get("/v1/functions/wc").status, 404);
    assert_eq!(p.invoke("wc", b"x").status, 404);
    assert_eq!(p.delete("/v1/functions/wc").status, 404);
    assert_eq!(p.invoke("hello", b"again").text(), "Hello, again!\n");
}

#[test]
fn redeploy_replaces_the_function() {
    let p = Platform::start(&[]);
    p.deploy("f", mote_guests::HELLO.wasm, &DeployParams::default());
    assert_eq!(p.invoke("f", b"x").text(), "Hello, x!\n");
    let d = p.deploy(
        "f",
        mote_guests::ECHO.wasm,
        &DeployParams {
            timeout_ms: Some(100),
            ..Default::default()
        },
    );
    assert_eq!(d.timeout_ms, 100);
    assert_eq!(p.invoke("f", b"x").text(), "x");
    assert_eq!(p.function_names(), ["f"]);
}

#[test]
fn concurrent_calls_each_get_their_own_answer() {
    let p = Platform::start(&["--cores", "2"]);
    p.deploy("hello", mote_guests::HELLO.wasm, &DeployParams::default());
    std::thread::scope(|s| {
        for t in 0..16 {
            let p = &p;
            s.spawn(move || {
                for i in 0..25 {
                    let name = format!("caller{t}-{i}");
                    let r = p.invoke("hello", name.as_bytes());
                    assert_eq!(r.status, 200);
                    assert_eq!(r.text(), format!("Hello, {name}!\n"));
                }
            });
        }
    });
    let metrics = p.get("/metrics").text();
    assert!(
        metrics.contains(r#"mote_invocations_total{function="hello",outcome="ok"} 400"#),
        "{metrics}"
    );
}

#[test]
fn metrics_describe_calls_queue_and_executors() {
    // One core, and under preemption (the default) one parked thread per call that may be
    // suspended.
    let p = Platform::start(&["--cores", "1", "--max-suspended", "4"]);
    p.deploy("hello", mote_guests::HELLO.wasm, &DeployParams::default());
    p.deploy("trap", &crate::fixtures::trap(), &DeployParams::default());
    for _ in 0..3 {
        assert_eq!(p.invoke("hello", b"m").status, 200);
    }
    assert_eq!(p.invoke("trap", b"").status, 500);
    // The reply goes out before the instance is torn down, and the executor counts as busy
    // until its teardown is done, so the gauge may lag the last reply by a few microseconds.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let m = loop {
        let m = p.get("/metrics").text();
        if gauge(&m, "mote_executors_busy") == 0 || std::time::Instant::now() > deadline {
            break m;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    for expected in [
        r#"mote_invocations_total{function="hello",outcome="ok"} 3"#,
        r#"mote_invocations_total{function="trap",outcome="trap"} 1"#,
        r#"mote_call_duration_seconds_count{function="hello"} 3"#,
        "mote_queue_length 0",
        "mote_executors_busy 0",
        "mote_executors 5",
        "mote_preemptions_total 0",
        "mote_suspended_calls 0",
        "mote_functions_deployed 2",
    ] {
        assert!(m.contains(expected), "missing {expected:?} in\n{m}");
    }
}

/// Reads a gauge's value from the metrics text.
fn gauge(metrics: &str, name: &str) -> i64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no gauge {name} in\n{metrics}"))
}

#[test]
fn one_running_call_per_core() {
    // With one executor core, three slow calls sent together run one at a time: the node shows
    // at most one busy executor and the others waiting in its queue.
    let p = Platform::start(&["--cores", "1"]);
    p.deploy(
        "slow",
        &crate::fixtures::busy(150_000_000),
        &DeployParams::default(),
    );
    let (mut max_busy, mut max_queued) = (0, 0);
    std::thread::scope(|s| {
        let calls: Vec<_> = (0..3)
            .map(|_| s.spawn(|| assert_eq!(p.invoke("slow", b"").status, 200)))
            .collect();
        while !calls.iter().all(|c| c.is_finished()) {
            let m = p.get("/metrics").text();
            max_busy = max_busy.max(gauge(&m, "mote_executors_busy"));
            max_queued = max_queued.max(gauge(&m, "mote_queue_length"));
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    });
    assert_eq!(
        max_busy, 1,
        "more calls ran at once than there are executor cores"
    );
    assert!(max_queued >= 1, "calls never waited for the busy core");
}

#[test]
fn the_node_reports_its_policy_and_what_it_learned() {
    let p = Platform::start(&["--policy", "sept", "--cores", "1", "--max-suspended", "2"]);
    p.deploy("hello", mote_guests::HELLO.wasm, &DeployParams::default());
    p.deploy(
        "slow",
        &crate::fixtures::busy(20_000_000),
        &DeployParams::default(),
    );
    for _ in 0..3 {
        assert_eq!(p.invoke("hello", b"x").status, 200);
        assert_eq!(p.invoke("slow", b"").status, 200);
    }
    let node = p.get("/v1/node").json();
    assert_eq!(node["policy"], "sept");
    assert_eq!(node["cores"], 1);
    assert_eq!(
        node["executor_threads"], 3,
        "a core and two threads for suspended calls"
    );
    assert_eq!(node["preempt"]["max_suspended"], 2);
    assert_eq!(node["queue_length"], 0);
    let expected = |name: &str| {
        let f = node["functions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .unwrap();
        assert_eq!(f["recent_ms"].as_array().unwrap().len(), 3, "{f}");
        f["expected_ms"].as_f64().unwrap()
    };
    assert!(expected("slow") > expected("hello"), "{node}");
    let m = p.get("/metrics").text();
    assert!(m.contains(r#"mote_policy{policy="sept"} 1"#), "{m}");
    assert!(
        m.contains(r#"mote_expected_processing_seconds{function="slow"}"#),
        "{m}"
    );
}

#[test]
fn the_baseline_runs_more_calls_than_cores() {
    let p = Platform::start(&[
        "--policy",
        "baseline",
        "--cores",
        "1",
        "--baseline-cap",
        "4",
    ]);
    assert_eq!(p.get("/v1/node").json()["executor_threads"], 4);
    p.deploy(
        "slow",
        &crate::fixtures::busy(150_000_000),
        &DeployParams::default(),
    );
    let mut max_busy = 0;
    std::thread::scope(|s| {
        let calls: Vec<_> = (0..3)
            .map(|_| s.spawn(|| assert_eq!(p.invoke("slow", b"").status, 200)))
            .collect();
        while !calls.iter().all(|c| c.is_finished()) {
            max_busy = max_busy.max(gauge(&p.get("/metrics").text(), "mote_executors_busy"));
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    });
    assert!(
        max_busy >= 2,
        "the baseline never ran calls side by side on its one core"
    );
}
