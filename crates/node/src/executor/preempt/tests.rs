//! Preemption on the executors, through a node of one core under preemptive SEPT.

use crate::{ExecutorsConfig, InvokeError, Node, PreemptConfig, Reply};
use bytes::Bytes;
use mote_runtime::CallError;
use mote_sched::Policy;
use mote_types::{FunctionName, Limits, Timeout};
use std::time::{Duration, Instant};

fn millions(n: u32) -> Bytes {
    Bytes::copy_from_slice(&n.to_le_bytes())
}

/// A node of one core under preemptive SEPT, with the fold deployed under `names`, each
/// with `limits`.
async fn node(dir: &std::path::Path, max_suspended: usize, names: &[(&str, Limits)]) -> Node {
    let config = ExecutorsConfig {
        policy: Policy::Sept,
        preempt: Some(PreemptConfig {
            quantum: Duration::from_millis(1),
            max_suspended,
            ..PreemptConfig::default()
        }),
        ..ExecutorsConfig::new(1)
    };
    let node = Node::start_embedded(dir, config).await.unwrap();
    let wasm = Bytes::from(wat::parse_str(crate::fixtures::fold(false)).unwrap());
    for &(name, limits) in names {
        node.deploy(FunctionName::new(name).unwrap(), wasm.clone(), limits)
            .await
            .unwrap();
    }
    node
}

/// Runs `n` calls of `name` one at a time, so that the node learns how long it takes.
async fn teach(node: &Node, name: &str, body: Bytes, n: usize) -> Duration {
    let mut last = Duration::ZERO;
    for _ in 0..n {
        last = node
            .invoke_traced(name, body.clone())
            .await
            .unwrap()
            .processing;
    }
    last
}

/// Waits for `call` on a task of its own, noting when its reply came.
fn spawn_timed(
    call: crate::PendingCall,
) -> tokio::task::JoinHandle<(Result<Reply, InvokeError>, Instant)> {
    tokio::spawn(async move {
        let reply = call.await;
        (reply, Instant::now())
    })
}

fn wait_until_running(node: &Node) {
    while node.busy_executors() == 0 {
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn preemptions(node: &Node) -> (u64, u64) {
    let p = node.schedule().preempt.expect("the node preempts");
    (p.preemptions, p.refused_at_bound)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_preempted_call_answers_what_it_answers_unpreempted() {
    let dir = tempfile::tempdir().unwrap();
    let node = node(
        dir.path(),
        4,
        &[("long", Limits::default()), ("short", Limits::default())],
    )
    .await;
    teach(&node, "short", millions(1), 3).await;
    let alone = node.invoke_traced("long", millions(150)).await.unwrap();
    assert_eq!(
        preemptions(&node),
        (0, 0),
        "nothing waited, nothing was preempted"
    );

    let long = spawn_timed(node.submit("long", millions(150)).unwrap());
    wait_until_running(&node);
    std::thread::sleep(Duration::from_millis(5));
    let shorts: Vec<_> = (0..5)
        .map(|_| spawn_timed(node.submit("short", millions(1)).unwrap()))
        .collect();
    let mut shorts_done = Vec::new();
    for short in shorts {
        let (reply, done) = short.await.unwrap();
        reply.unwrap().result.unwrap();
        shorts_done.push(done);
    }
    let (long, long_done) = long.await.unwrap();
    let long = long.unwrap();
    assert_eq!(
        long.result.as_ref().unwrap(),
        alone.result.as_ref().unwrap()
    );
    let (preempted, _) = preemptions(&node);
    assert!(preempted >= 1, "the short calls took the core");
    assert!(shorts_done.iter().all(|&t| t < long_done));
    // Suspended time counts as waiting, not as processing.
    assert!(
        long.processing < alone.processing * 3,
        "{:?} against {:?}",
        long.processing,
        alone.processing
    );
    assert_eq!(node.schedule().preempt.unwrap().suspended, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn at_the_bound_a_call_that_would_be_preempted_keeps_its_core() {
    let dir = tempfile::tempdir().unwrap();
    let functions = [
        ("long", Limits::default()),
        ("medium", Limits::default()),
        ("short", Limits::default()),
    ];
    let node = node(dir.path(), 1, &functions).await;
    teach(&node, "long", millions(200), 1).await;
    teach(&node, "medium", millions(60), 1).await;
    teach(&node, "short", millions(1), 2).await;

    let long = node.submit("long", millions(200)).unwrap();
    wait_until_running(&node);
    std::thread::sleep(Duration::from_millis(5));
    let medium = node.submit("medium", millions(60)).unwrap();
    // The medium call takes the core and the long one is the one call suspended; the
    // short call outranks the medium one but may not suspend a second call.
    while node.schedule().preempt.unwrap().suspended == 0 {
        std::thread::sleep(Duration::from_micros(200));
    }
    std::thread::sleep(Duration::from_millis(5));
    let short = node.submit("short", millions(1)).unwrap();
    long.await.unwrap().result.unwrap();
    medium.await.unwrap().result.unwrap();
    short.await.unwrap().result.unwrap();
    let (preempted, refused) = preemptions(&node);
    // The medium call took the long one's core; the short one, better ranked than the
    // medium one, could not take it in turn (a second suspension), and no call ranks
    // better than the short one once it runs.
    assert_eq!(preempted, 1, "only the long call was ever suspended");
    assert!(refused >= 1, "the bound refused a second suspension");
}

/// Sleeps 300 ms (WASI `poll_oneoff` on one relative clock), then answers "woke".
const SLEEPER: &str = r#"(module
    (import "wasi_snapshot_preview1" "poll_oneoff" (func $poll (param i32 i32 i32 i32) (result i32)))
    (memory (export "memory") 1)
    (data (i32.const 512) "woke")
    (func (export "mote_alloc") (param i32) (result i32) i32.const 1024)
    (func (export "mote_handle") (param i32 i32) (result i64)
      (i64.store (i32.const 0) (i64.const 1))
      (i32.store8 (i32.const 8) (i32.const 0))
      (i32.store (i32.const 16) (i32.const 1))
      (i64.store (i32.const 24) (i64.const 300000000))
      (i64.store (i32.const 32) (i64.const 0))
      (i32.store16 (i32.const 40) (i32.const 0))
      (drop (call $poll (i32.const 0) (i32.const 128) (i32.const 1) (i32.const 256)))
      i64.const 0x0000020000000004))"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_sleeping_call_gives_its_core_to_others_and_gets_one_back() {
    let dir = tempfile::tempdir().unwrap();
    let node = node(dir.path(), 4, &[("short", Limits::default())]).await;
    let wasm = Bytes::from(wat::parse_str(SLEEPER).unwrap());
    node.deploy(
        FunctionName::new("sleeper").unwrap(),
        wasm,
        Limits::default(),
    )
    .await
    .unwrap();
    let sleeper = spawn_timed(node.submit("sleeper", Bytes::new()).unwrap());
    while node.schedule().preempt.unwrap().suspended == 0 {
        std::thread::sleep(Duration::from_micros(200));
    }
    // The only core is free while the sleeper sleeps: three calls of about 10 ms run
    // meanwhile.
    let shorts: Vec<_> = (0..3)
        .map(|_| spawn_timed(node.submit("short", millions(10)).unwrap()))
        .collect();
    let mut last_short = None;
    for short in shorts {
        let (reply, done) = short.await.unwrap();
        reply.unwrap().result.unwrap();
        last_short = Some(done);
    }
    let (reply, woke) = sleeper.await.unwrap();
    let reply = reply.unwrap();
    assert_eq!(reply.result.unwrap(), b"woke");
    assert!(
        last_short.unwrap() < woke,
        "the short calls ran while it slept"
    );
    assert!(
        reply.processing < Duration::from_millis(100),
        "its time asleep is not processing: {:?}",
        reply.processing
    );
    assert_eq!(node.schedule().preempt.unwrap().suspended, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_suspended_call_is_stopped_when_its_budget_ends() {
    let dir = tempfile::tempdir().unwrap();
    let budget = Limits::new(Some(Timeout::Ms(150)), None).unwrap();
    let node = node(
        dir.path(),
        4,
        &[("runaway", budget), ("short", Limits::default())],
    )
    .await;
    let short_takes = teach(&node, "short", millions(10), 3).await;
    // Enough short calls to keep the core for 400 ms, all outranking the runaway call once
    // it has run 20 ms: it is suspended when its budget ends.
    let shorts = (400 / short_takes.as_millis().max(1)) as usize + 1;
    let started = Instant::now();
    let runaway = node.submit("runaway", millions(5_000)).unwrap();
    wait_until_running(&node);
    std::thread::sleep(Duration::from_millis(20));
    let calls: Vec<_> = (0..shorts)
        .map(|_| node.submit("short", millions(10)).unwrap())
        .collect();
    let stopped = runaway.await.unwrap();
    let stopped_after = started.elapsed();
    assert!(
        matches!(
            stopped.result,
            Err(InvokeError::Call(CallError::Timeout { .. }))
        ),
        "{:?}",
        stopped.result
    );
    assert!(preemptions(&node).0 >= 1, "it was suspended");
    assert!(
        stopped_after < Duration::from_millis(250),
        "stopped {stopped_after:?} after it started, its budget being 150 ms"
    );
    for call in calls {
        call.await.unwrap().result.unwrap();
    }
    assert_eq!(node.schedule().preempt.unwrap().suspended, 0);
    // The core went back to work: a call after all this runs.
    node.invoke("short", millions(1)).await.unwrap();
}
