//! Function logs (issue 23): what calls write (`mote.log`, WASI stderr) and why failing calls
//! failed, kept per function in a bounded ring, read with `GET /v1/functions/NAME/logs` (and
//! `follow=true`) or `mote logs`, merged across the nodes of a cluster.

use crate::cli::{mote, stdout};
use crate::cluster::Cluster;
use crate::fixtures;
use crate::platform::{Platform, api_client, wait};
use mote_api::{DeployParams, LogLine, LogStream};
use std::time::{Duration, Instant};

/// A call's answer: status, the `mote-call-id` and `mote-node` it named, and the body.
struct Called {
    status: u16,
    call: String,
    node: String,
}

fn agent() -> ureq::Agent {
    Platform::agent_trusting(None)
}

fn call(base: &str, name: &str, body: &[u8]) -> Called {
    answered(agent().post(format!("{base}/v1/invoke/{name}")).send(body))
}

/// A call of `name` that the node at `base` runs itself, as it does a call a peer forwarded.
fn call_here(base: &str, name: &str, body: &[u8]) -> Called {
    answered(
        agent()
            .post(format!("{base}/v1/invoke/{name}"))
            .header("mote-forwarded-by", "the-test")
            .send(body),
    )
}

fn answered(r: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Called {
    let mut r = r.expect("request reached the server");
    let header = |name: &str| {
        r.headers()
            .get(name)
            .unwrap_or_else(|| panic!("the response has no {name}"))
            .to_str()
            .unwrap()
            .to_owned()
    };
    let (call, node) = (header("mote-call-id"), header("mote-node"));
    r.body_mut().read_to_vec().unwrap();
    Called {
        status: r.status().as_u16(),
        call,
        node,
    }
}

/// The entries of `name`'s log at the node at `base`, the newest `tail` if given, read with the
/// typed client.
fn entries(base: &str, name: &str, tail: Option<usize>) -> Vec<LogLine> {
    let client = api_client(base, None, None);
    let mut log = wait(client.logs(name, tail, false));
    let mut entries = Vec::new();
    while let Some(entry) = wait(log.next_entry()) {
        entries.push(entry);
    }
    entries
}

/// A followed log (`follow=true`), read an entry at a time with the typed client.
struct Followed(LogStream);

impl Followed {
    fn start(base: &str, name: &str, tail: Option<usize>) -> Self {
        let client = api_client(base, None, None).with_timeout(Duration::from_secs(60));
        Self(wait(client.logs(name, tail, true)))
    }

    /// The next entry, or `None` once the stream ended.
    fn next(&mut self) -> Option<LogLine> {
        wait(self.0.next_entry())
    }
}

fn of_call<'a>(entries: &'a [LogLine], call: &str) -> Vec<&'a LogLine> {
    entries.iter().filter(|e| e.call == call).collect()
}

#[test]
fn a_call_s_lines_and_stderr_carry_the_id_its_response_named() {
    let p = Platform::start(&[]);
    p.deploy("hello", mote_guests::HELLO.wasm, &DeployParams::default());
    p.deploy("exits", &fixtures::wasi_exit3(), &DeployParams::default());
    let first = call(&p.url, "hello", b"one");
    let second = call(&p.url, "hello", b"two");
    assert_eq!((first.status, second.status), (200, 200));
    assert_ne!(first.call, second.call);
    assert!(
        first.call.starts_with(&format!("{}-", first.node)),
        "{}",
        first.call
    );

    // The wire format: NDJSON, a line per entry.
    let mut raw = agent()
        .get(format!("{}/v1/functions/hello/logs", p.url))
        .call()
        .expect("request reached the server");
    assert_eq!(raw.status().as_u16(), 200);
    assert_eq!(raw.headers()["content-type"], "application/x-ndjson");
    let text = raw.body_mut().read_to_string().unwrap();
    assert_eq!(text.lines().count(), 2, "{text}");
    let log = entries(&p.url, "hello", None);
    let lines = of_call(&log, &second.call);
    assert_eq!(lines.len(), 1, "{log:?}");
    let line = lines[0];
    assert_eq!(line.text, "greeting two");
    assert_eq!(line.stream, "log");
    assert_eq!(line.outcome, "ok");
    assert_eq!(line.node, second.node);
    assert!(line.time.ends_with('Z'), "{line:?}");
    assert!(line.seq > of_call(&log, &first.call)[0].seq);
    assert_eq!(
        entries(&p.url, "hello", Some(1)),
        std::slice::from_ref(line)
    );

    // A WASI command's stderr, and then why its call failed.
    let exited = call(&p.url, "exits", b"");
    assert_eq!(exited.status, 500);
    let log = entries(&p.url, "exits", None);
    let lines = of_call(&log, &exited.call);
    let shown: Vec<(&str, &str)> = lines
        .iter()
        .map(|e| (e.stream.as_str(), e.text.as_str()))
        .collect();
    assert_eq!(shown[0], ("stderr", "oops"), "{log:?}");
    assert_eq!(shown[1].0, "outcome");
    assert!(shown[1].1.contains("exited with status 3"), "{log:?}");
    assert!(lines.iter().all(|e| e.outcome == "exit"), "{log:?}");

    let missing = agent()
        .get(format!("{}/v1/functions/nobody/logs", p.url))
        .call()
        .unwrap();
    assert_eq!(missing.status().as_u16(), 404);
}

#[test]
fn a_trap_and_a_budget_kill_leave_their_errors_in_the_log() {
    let p = Platform::start(&["--cores", "1"]);
    p.deploy("trap", &fixtures::trap(), &DeployParams::default());
    p.deploy(
        "spin",
        &fixtures::spin(),
        &DeployParams {
            timeout_ms: Some(100),
            ..Default::default()
        },
    );
    let trapped = call(&p.url, "trap", b"");
    assert_eq!(trapped.status, 500);
    let log = entries(&p.url, "trap", None);
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(log[0].call, trapped.call);
    assert_eq!(log[0].stream, "outcome");
    assert_eq!(log[0].outcome, "trap");
    let text = &log[0].text;
    assert!(
        text.contains("trapped") && text.contains("unreachable"),
        "{text}"
    );

    let killed = call(&p.url, "spin", b"");
    assert_eq!(killed.status, 504);
    let log = entries(&p.url, "spin", None);
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(log[0].call, killed.call);
    assert_eq!(log[0].outcome, "timeout");
    let text = &log[0].text;
    assert!(text.contains("timeout of 100 ms"), "{text}");
}

/// Writes `lines` lines of 200 bytes with `mote.log` in one call.
fn flood(lines: u32) -> Vec<u8> {
    let line = "x".repeat(200);
    fixtures::wasm(&format!(
        r#"(module
            (import "mote" "log" (func $log (param i32 i32)))
            (memory (export "memory") 1)
            (data (i32.const 0) "{line}")
            (func (export "mote_alloc") (param i32) (result i32) i32.const 1024)
            (func (export "mote_handle") (param i32 i32) (result i64) (local $i i32)
              (local.set $i (i32.const {lines}))
              (loop $l (call $log (i32.const 0) (i32.const 200))
                       (local.set $i (i32.sub (local.get $i) (i32.const 1)))
                       (br_if $l (local.get $i)))
              i64.const 0))"#
    ))
}

#[test]
fn a_flood_of_lines_keeps_the_log_within_its_bound_and_the_newest_entries() {
    const KB: usize = 16;
    let p = Platform::start(&["--function-log-kb", &KB.to_string()]);
    p.deploy("flood", &flood(5000), &DeployParams::default());
    let mut last = None;
    for i in 0..5 {
        if i == 2 {
            // A redeploy keeps the function's log: its sequence numbers go on.
            p.deploy(
                "flood",
                &flood(5000),
                &DeployParams {
                    timeout_ms: Some(5000),
                    ..Default::default()
                },
            );
        }
        let flooded = call(&p.url, "flood", b"");
        assert_eq!(flooded.status, 200);
        last = Some(flooded.call);
    }
    let log = entries(&p.url, "flood", None);
    let bytes: usize = log
        .iter()
        .map(|e| mote_node::ENTRY_BYTES + e.text.len())
        .sum();
    assert!(
        bytes <= KB << 10,
        "{bytes} bytes kept under a bound of {KB} KiB"
    );
    assert!(log.len() > 10, "only {} entries kept", log.len());
    let seqs: Vec<u64> = log.iter().map(|e| e.seq).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    // The newest survive: the last call's, ending with the note of what it dropped.
    let newest = log.last().unwrap();
    assert_eq!(newest.call, last.unwrap());
    assert_eq!(newest.stream, "outcome");
    let text = &newest.text;
    assert!(text.contains("4000 more lines were dropped"), "{text}");
    assert_eq!(*seqs.last().unwrap(), 5 * 1001);
}

#[test]
fn follow_streams_an_entry_written_after_the_request_and_ends_when_the_node_stops() {
    let p = Platform::start(&[]);
    p.deploy("hello", mote_guests::HELLO.wasm, &DeployParams::default());
    let before = call(&p.url, "hello", b"before");
    let mut followed = Followed::start(&p.url, "hello", Some(1));
    let entry = |e: Option<LogLine>| e.expect("the stream goes on");
    assert_eq!(entry(followed.next()).call, before.call);
    let after = call(&p.url, "hello", b"after");
    let streamed = entry(followed.next());
    assert_eq!(streamed.call, after.call);
    assert_eq!(streamed.text, "greeting after");

    let stopping = Instant::now();
    let pid = p.pid().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(
        followed.next().is_none(),
        "the stream ends when the node stops"
    );
    assert!(
        stopping.elapsed() < Duration::from_secs(10),
        "the followed log held the node's stop for {:?}",
        stopping.elapsed()
    );
    p.stop();
}

#[test]
fn mote_logs_prints_a_line_per_entry() {
    let p = Platform::start(&[]);
    p.deploy("hello", mote_guests::HELLO.wasm, &DeployParams::default());
    p.deploy("trap", &fixtures::trap(), &DeployParams::default());
    let greeted = call(&p.url, "hello", b"cli");
    let trapped = call(&p.url, "trap", b"");

    let o = mote(&p, &["logs", "hello"]);
    assert!(o.status.success(), "{o:?}");
    let out = stdout(&o);
    let line = out.lines().next().unwrap();
    assert!(
        line.contains(&format!(
            "{} {} log: greeting cli",
            greeted.node, greeted.call
        )),
        "{out}"
    );
    let o = mote(&p, &["logs", "trap", "--tail", "1"]);
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(
        out.contains(&format!("{} outcome/trap: function trapped", trapped.call)),
        "{out}"
    );
    let o = mote(&p, &["logs", "hello", "--json"]);
    let entry: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(entry["call"], greeted.call.as_str());

    let o = mote(&p, &["logs", "nobody"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("nobody") && err.contains("404"), "{err}");
}

#[test]
fn a_component_s_stderr_and_trap_are_in_its_log() {
    let p = Platform::start(&[]);
    p.deploy(
        "web",
        mote_guests::HTTP_HELLO.wasm,
        &DeployParams::default(),
    );
    let hello = call(&p.url, "web", b"");
    assert_eq!(hello.status, 200);
    let r = agent()
        .get(format!("{}/v1/invoke/web/trap", p.url))
        .call()
        .unwrap();
    assert_eq!(r.status().as_u16(), 500);
    let log = entries(&p.url, "web", None);
    assert!(of_call(&log, &hello.call).is_empty(), "{log:?}");
    let panicked = log
        .iter()
        .find(|e| e.stream == "stderr" && e.text == "asked to trap")
        .unwrap_or_else(|| panic!("the panic's message on stderr: {log:?}"));
    let outcome = log.last().unwrap();
    assert_eq!(outcome.stream, "outcome");
    assert_eq!(outcome.outcome, "trap");
    assert_eq!(outcome.call, panicked.call);
    assert!(log.iter().all(|e| e.call == panicked.call), "{log:?}");
}

#[test]
fn a_node_merges_its_peers_logs_and_names_a_peer_that_does_not_answer() {
    let mut cluster = Cluster::shared(2);
    cluster.deploy_everywhere("hello", mote_guests::HELLO.wasm);
    let (n1, n2) = (cluster.node(0).url.clone(), cluster.node(1).url.clone());
    let first = call_here(&n1, "hello", b"on-n1");
    let second = call_here(&n2, "hello", b"on-n2");
    assert_eq!((first.node.as_str(), second.node.as_str()), ("n1", "n2"));
    for base in [&n1, &n2] {
        let log = entries(base, "hello", None);
        let texts: Vec<&str> = log.iter().map(|e| e.text.as_str()).collect();
        assert_eq!(texts, ["greeting on-n1", "greeting on-n2"], "from {base}");
        assert_eq!(log[1].call, second.call);
        assert_eq!(log[1].node, "n2");
    }
    // Asked for its own log only (a query the typed client does not make: peers use it), a
    // node does not ask its peers.
    let local = cluster.node(1).get("/v1/functions/hello/logs?local=true");
    assert_eq!(local.text().lines().count(), 1, "{}", local.text());

    let mut followed = Followed::start(&n1, "hello", Some(0));
    let third = call_here(&n2, "hello", b"later");
    let streamed = followed.next().unwrap();
    assert_eq!(streamed.call, third.call);
    assert_eq!(streamed.node, "n2");

    cluster.nodes[1].take().unwrap().kill();
    let gone = followed.next().unwrap();
    assert_eq!(
        (gone.stream.as_str(), gone.node.as_str()),
        ("missing", "n2")
    );
    let r = agent()
        .get(format!("{n1}/v1/functions/hello/logs"))
        .call()
        .unwrap();
    let missing = r.headers()["mote-logs-missing"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(missing.starts_with("n2 ("), "{missing}");
    let log = entries(&n1, "hello", None);
    let last = log.last().unwrap();
    assert_eq!(
        (last.stream.as_str(), last.node.as_str()),
        ("missing", "n2")
    );
    assert_eq!(
        log.iter().filter(|e| e.stream == "log").count(),
        1,
        "{log:?}"
    );
}
