//! Late correction between two real nodes (issue 37): calls that wait on a node move, before
//! they start, to a peer that asks for them (`POST /v1/internal/pull`), each once, and each is
//! answered once, by the node that ran it.
//!
//! The nodes run without preemption, so that calls queued behind a long one stay queued, and
//! without pulls of their own (`--pull-every-us 0`), so that the test's pull is the only one.

use crate::cluster::{Cluster, post, wait_until};
use crate::fixtures;
use crate::platform::{Platform, Reply};

/// A counter or gauge of `node`'s `/metrics`, summed over the lines that start with `series`.
fn metric(node: &Platform, series: &str) -> u64 {
    let metrics = node.get("/metrics").text();
    metrics
        .lines()
        .filter(|l| l.starts_with(series))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap() as u64)
        .sum()
}

/// A call of `name` that `node` runs itself, as it runs a peer's: placement would send a call
/// to the other node while this one's executor still tears the last instance down.
fn run_on(node: &Platform, name: &str) {
    let agent: ureq::Agent = ureq::Agent::config_builder().build().into();
    let r = agent
        .post(format!("{}/v1/invoke/{name}", node.url))
        .header("mote-forwarded-by", "the-test")
        .send(&[][..])
        .unwrap();
    assert_eq!(r.status(), 200);
}

fn pull(node: &Platform, by: &str, calls: u32) -> Reply {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut r = agent
        .post(format!("{}/v1/internal/pull", node.url))
        .header("mote-forwarded-by", by)
        .header("content-type", "application/json")
        .send(format!(r#"{{"calls":{calls}}}"#).as_bytes())
        .unwrap();
    Reply {
        status: r.status().as_u16(),
        node: None,
        body: r.body_mut().read_to_vec().unwrap(),
    }
}

#[test]
fn waiting_calls_move_once_to_the_peer_that_pulls_them() {
    let cluster = Cluster::shared_with(2, &["--preempt", "off", "--pull-every-us", "0"]);
    // About a second, and a millisecond, of one core.
    cluster.deploy_everywhere("hold", &fixtures::long_busy(3));
    cluster.deploy_everywhere("short", &fixtures::busy(3_000_000));
    let (n1, n2) = (cluster.node(0), cluster.node(1));
    // Each node learns one function's time: n1 how long the calls that will wait take (a
    // node hands over only calls it knows to wait), n2 that `hold` is long, so that n1 sees
    // n2 busy for a while and keeps the calls it is sent.
    for _ in 0..3 {
        run_on(n1, "short");
    }
    run_on(n2, "hold");
    let ok = |node: &Platform| {
        metric(
            node,
            r#"mote_invocations_total{function="short",outcome="ok"}"#,
        )
    };
    let ok_before = ok(n1) + ok(n2);
    std::thread::scope(|s| {
        let hold_n2 = s.spawn(move || run_on(n2, "hold"));
        wait_until("n1 sees n2 busy with a long call", || {
            let view = crate::platform::wait(n1.api().cluster());
            view.nodes
                .iter()
                .any(|m| m.name == "n2" && m.running == 1 && m.work_ms >= 100.0)
        });
        let hold_n1 = s.spawn(move || run_on(n1, "hold"));
        wait_until("n1 runs a call", || metric(n1, "mote_executors_busy ") == 1);
        let calls: Vec<_> = (0..4)
            .map(|_| s.spawn(move || post(&n1.url, "/v1/invoke/short", b"")))
            .collect();
        wait_until("n1 queues the calls", || {
            metric(n1, "mote_queue_length ") == 4
        });
        // A node this one does not know gets nothing.
        let stranger = pull(n1, "n9", 4);
        assert_eq!(stranger.status, 200, "{}", stranger.text());
        assert_eq!(stranger.json()["moved"], 0);
        // Each call with at least 1.15 ms of calls ahead of it (1 ms each) moves: three of
        // the four.
        let pulled = pull(n1, "n2", 4);
        assert_eq!(pulled.status, 200, "{}", pulled.text());
        assert_eq!(pulled.json()["moved"], 3);
        // The moved calls wait on n2 now, and cannot move again: n2 hands over nothing.
        wait_until("the moved calls reach n2", || {
            metric(n2, "mote_queue_length ") == 3
        });
        assert_eq!(pull(n2, "n1", 4).json()["moved"], 0);
        let replies: Vec<Reply> = calls.into_iter().map(|c| c.join().unwrap()).collect();
        for r in &replies {
            assert_eq!(r.status, 200, "{}", r.text());
        }
        let ran_on = |name: &str| {
            replies
                .iter()
                .filter(|r| r.node.as_deref() == Some(name))
                .count()
        };
        assert_eq!((ran_on("n1"), ran_on("n2")), (1, 3));
        assert_eq!(ok(n1) + ok(n2) - ok_before, 4, "each call ran once");
        assert_eq!(metric(n1, "mote_handed_over_calls_total "), 3);
        for hold in [hold_n1, hold_n2] {
            hold.join().unwrap();
        }
    });
}
