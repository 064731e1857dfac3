//! The dashboard's API and files: a snapshot counts what the calls did, the event stream sends
//! one a second and ends when the node stops, and the page is served from the binary on the
//! dashboard's own listener. The page itself is tested in a browser by `tests/ui`
//! (`scripts/test-ui`); what the dashboard's listener refuses, by `attacks::dashboard`.

use crate::platform::Platform;
use mote_api::DeployParams;
use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

#[test]
fn a_snapshot_counts_calls_outcomes_cores_and_where_calls_ran() {
    let p = Platform::start(&["--cores", "2", "--node", "dash"]);
    p.deploy("hello", mote_guests::HELLO.wasm, &DeployParams::default());
    p.deploy("trap", &crate::fixtures::trap(), &DeployParams::default());
    for _ in 0..5 {
        assert_eq!(p.invoke("hello", b"m").status, 200);
    }
    for _ in 0..2 {
        assert_eq!(p.invoke("trap", b"").status, 500);
    }
    let snap = p.get("/v1/dashboard").json();
    assert_eq!(snap["node"], "dash");
    assert_eq!(snap["cores"], 2);
    let function = |name: &str| {
        snap["functions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {snap}"))
            .clone()
    };
    let hello = function("hello");
    assert_eq!(hello["calls"], 5);
    assert_eq!(hello["outcomes"], serde_json::json!({"ok": 5}));
    assert_eq!(hello["kind"], "mote-abi-v1");
    let p50 = hello["p50_ms"]
        .as_f64()
        .expect("p50 of calls in the window");
    let p99 = hello["p99_ms"]
        .as_f64()
        .expect("p99 of calls in the window");
    assert!(0.0 < p50 && p50 <= p99 && p99 < 1000.0, "{hello}");
    assert!(hello["stretch"].as_f64().unwrap() >= 1.0, "{hello}");
    assert!(hello["expected_ms"].as_f64().unwrap() > 0.0, "{hello}");
    assert!(hello["calls_per_s"].as_f64().unwrap() > 0.0, "{hello}");
    assert_eq!(function("trap")["outcomes"], serde_json::json!({"trap": 2}));

    // A row per core, whichever thread ran its calls.
    let rows = snap["executors"].as_array().unwrap();
    let indices: Vec<_> = rows.iter().map(|e| e["index"].as_u64().unwrap()).collect();
    assert_eq!(indices, [0, 1]);
    let ran: u64 = rows.iter().map(|e| e["calls"].as_u64().unwrap()).sum();
    assert_eq!(ran, 7, "every call is counted once, where it ran: {snap}");
    let nodes = snap["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 1);
    assert_eq!(
        (&nodes[0]["name"], &nodes[0]["me"]),
        (&"dash".into(), &true.into())
    );
    assert_eq!(nodes[0]["ran_here"], 7);
    assert_eq!(snap["store"]["reachable"], true);
    assert_eq!(snap["store"]["replicas"], serde_json::json!([]));
    assert_eq!(snap["classes"].as_array().unwrap().len(), 4);
}

#[test]
fn the_event_stream_sends_a_snapshot_a_second_and_ends_when_the_node_stops() {
    let p = Platform::start(&["--cores", "1"]);
    let response = ureq::get(format!("{}/v1/dashboard/events", p.url))
        .call()
        .expect("the stream opens");
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let (events, received) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut lines = BufReader::new(response.into_body().into_reader()).lines();
        let mut event = None;
        while let Some(Ok(line)) = lines.next() {
            if let Some(name) = line.strip_prefix("event: ") {
                event = Some(name.to_owned());
            } else if let Some(data) = line.strip_prefix("data: ") {
                let snap: serde_json::Value = serde_json::from_str(data).unwrap();
                let _ = events.send((event.take(), snap, Instant::now()));
            }
        }
    });
    let (first_name, first, at) = received.recv_timeout(Duration::from_secs(5)).unwrap();
    let (_, second, second_at) = received.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(first_name.as_deref(), Some("snapshot"));
    assert!(second["at_ms"].as_u64() > first["at_ms"].as_u64());
    let apart = second_at - at;
    assert!(
        apart > Duration::from_millis(500),
        "{apart:?} between events"
    );

    // An open stream does not hold the node's stop up until its 30 s timeout.
    let stopping = Instant::now();
    p.stop();
    assert!(
        stopping.elapsed() < Duration::from_secs(10),
        "{:?}",
        stopping.elapsed()
    );
    reader.join().unwrap();
}

#[test]
fn the_page_and_its_files_come_from_the_binary() {
    let p = Platform::start(&["--cores", "1"]);
    let ui = p.dashboard.clone().expect("a `dashboard on` line");
    for (path, content_type) in [
        ("/ui", "text/html; charset=utf-8"),
        ("/ui/", "text/html; charset=utf-8"),
        ("/ui/app.js", "text/javascript; charset=utf-8"),
        ("/ui/style.css", "text/css; charset=utf-8"),
    ] {
        let r = ureq::get(format!("{ui}{path}")).call().unwrap();
        let h = r.headers();
        assert_eq!(h["content-type"].to_str().unwrap(), content_type, "{path}");
        assert_eq!(h["cache-control"].to_str().unwrap(), "no-cache", "{path}");
        let csp = h["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("connect-src 'self'"), "{csp}");
        let etag = h["etag"].to_str().unwrap().to_owned();
        let again = ureq::get(format!("{ui}{path}"))
            .header("if-none-match", &etag)
            .call()
            .unwrap();
        assert_eq!(again.status(), 304, "{path}");
    }
    let agent = Platform::agent_trusting(None);
    let page = agent.get(format!("{ui}/ui")).call().unwrap();
    let page = page.into_body().read_to_string().unwrap();
    assert!(page.contains("<script src=\"/ui/app.js\""), "{page}");
    let mut missing = agent.get(format!("{ui}/ui/nope.js")).call().unwrap();
    assert_eq!(missing.status(), 404);
    let error = missing.body_mut().read_to_string().unwrap();
    assert!(error.contains("`nope.js`"), "{error}");
}
