//! Calls handed to another node before they start ([`Node::hand_over`]): each call is answered
//! exactly once, by its result or by [`InvokeError::Moved`], and a moved call never ran here.

use super::*;
use crate::{ExecutorsConfig, InvokeError};
use bytes::Bytes;
use mote_sched::Policy;
use mote_types::{FunctionName, Limits};
use std::time::Duration;

/// Busy-loops for `iterations` before answering.
fn spin(iterations: u32) -> Vec<u8> {
    let wat = format!(
        r#"(module (memory (export "memory") 1)
    (func (export "mote_alloc") (param i32) (result i32) i32.const 0)
    (func (export "mote_handle") (param i32 i32) (result i64) (local $i i32)
      (local.set $i (i32.const {iterations}))
      (loop $l (local.set $i (i32.sub (local.get $i) (i32.const 1))) (br_if $l (local.get $i)))
      i64.const 0))"#
    );
    wat::parse_str(wat).unwrap()
}

async fn node_with(dir: &std::path::Path, config: ExecutorsConfig) -> Arc<Node> {
    let node = Node::start_embedded(dir, config).await.unwrap();
    for (name, iterations) in [
        ("slow", 300_000_000),
        ("slower", 2_000_000_000),
        ("short", 200_000),
    ] {
        let wasm = Bytes::from(spin(iterations));
        node.deploy(FunctionName::new(name).unwrap(), wasm, Limits::default())
            .await
            .unwrap();
    }
    Arc::new(node)
}

fn ok_calls(node: &Node, function: &str) -> u64 {
    node.registry.get(function).unwrap().outcomes()[0]
}

/// Waits up to ten seconds for `done` to hold.
/// Calls `name` on `node` in a task of its own, movable or not.
fn spawn_call(
    node: &Arc<Node>,
    name: &'static str,
    movable: bool,
) -> tokio::task::JoinHandle<Result<crate::Reply, InvokeError>> {
    let node = node.clone();
    tokio::spawn(async move {
        match movable {
            true => node.invoke_movable(name, Bytes::new()).await,
            false => node.invoke_traced(name, Bytes::new()).await,
        }
    })
}

async fn until(what: &str, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "waited 10 s for {what}"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn only_movable_calls_that_wait_are_handed_over() {
    let dir = tempfile::tempdir().unwrap();
    // Without preemption, so the short calls wait behind the slow one.
    let config = ExecutorsConfig {
        preempt: None,
        ..ExecutorsConfig::new(1)
    };
    let node = node_with(dir.path(), config).await;
    let running = spawn_call(&node, "slow", true);
    until("a busy executor", || node.busy_executors() > 0).await;
    let waiting = [true, false, true].map(|movable| spawn_call(&node, "short", movable));
    until("three waiting calls", || node.queued() == 3).await;
    let to: Arc<str> = Arc::from("n2");
    // Nothing waits an hour behind the calls ahead of it.
    assert_eq!(node.hand_over(5, Duration::from_secs(3600), &to), 0);
    assert_eq!(node.hand_over(5, Duration::ZERO, &to), 2);
    assert_eq!(node.queued(), 1);
    let [first, fixed, last] = waiting;
    for moved in [first, last] {
        let e = moved.await.unwrap().unwrap_err();
        assert!(
            matches!(&e, InvokeError::Moved { to } if &**to == "n2"),
            "{e}"
        );
        assert!(e.to_string().contains("handed to node `n2`"), "{e}");
    }
    fixed.await.unwrap().unwrap().result.unwrap();
    running.await.unwrap().unwrap().result.unwrap();
    assert_eq!(
        ok_calls(&node, "short"),
        1,
        "the moved calls did not run here"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn arrival_order_hands_nothing_over() {
    let dir = tempfile::tempdir().unwrap();
    let config = ExecutorsConfig {
        policy: Policy::Fifo,
        ..ExecutorsConfig::new(1)
    };
    let node = node_with(dir.path(), config).await;
    let running = spawn_call(&node, "slow", true);
    until("a busy executor", || node.busy_executors() > 0).await;
    let waiting = spawn_call(&node, "short", true);
    until("a waiting call", || node.queued() == 1).await;
    assert_eq!(node.hand_over(5, Duration::ZERO, &Arc::from("n2")), 0);
    waiting.await.unwrap().unwrap().result.unwrap();
    running.await.unwrap().unwrap().result.unwrap();
}

/// Two cores run a stream of calls while another thread keeps handing waiting ones over: every
/// call gets one answer, and the calls that ran here are exactly those answered with a result.
/// Both paths are taken by construction: the calls queue behind two slower ones, a hundred move
/// before those end, and the calls that may not move run here; the hand-overs then race the
/// executors for the rest.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_is_answered_once_whether_it_ran_or_moved() {
    let dir = tempfile::tempdir().unwrap();
    // Without preemption, so the calls wait behind the slower ones until those end.
    let config = ExecutorsConfig {
        preempt: None,
        ..ExecutorsConfig::new(2)
    };
    let node = node_with(dir.path(), config).await;
    let slow = [false, false].map(|movable| spawn_call(&node, "slower", movable));
    until("both cores busy", || node.busy_executors() == 2).await;
    let calls: Vec<_> = (0..300)
        .map(|i| {
            let movable = i % 5 != 0;
            (movable, spawn_call(&node, "short", movable))
        })
        .collect();
    until("every call queued", || node.queued() == 300).await;
    let to: Arc<str> = Arc::from("n2");
    let first = node.hand_over(100, Duration::ZERO, &to);
    assert_eq!(first, 100, "a hundred of the 240 movable calls moved");
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mover = std::thread::spawn({
        let (node, done) = (node.clone(), done.clone());
        move || {
            let to: Arc<str> = Arc::from("n2");
            let mut moved = first;
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                moved += node.hand_over(3, Duration::ZERO, &to);
                std::thread::sleep(Duration::from_micros(200));
            }
            moved
        }
    });
    let (mut ran, mut moved) = (0u64, 0usize);
    for (movable, call) in calls {
        match (movable, call.await.unwrap()) {
            (_, Ok(reply)) => {
                reply.result.unwrap();
                ran += 1;
            }
            (true, Err(InvokeError::Moved { .. })) => moved += 1,
            (movable, Err(e)) => panic!("a call (movable: {movable}) failed: {e}"),
        }
    }
    done.store(true, std::sync::atomic::Ordering::Release);
    assert_eq!(
        mover.join().unwrap(),
        moved,
        "each moved call was answered once"
    );
    for call in slow {
        call.await.unwrap().unwrap().result.unwrap();
    }
    assert_eq!(ran as usize + moved, 300);
    assert_eq!(ok_calls(&node, "short"), ran, "no moved call ran here");
    assert!(
        moved >= 100 && ran >= 60,
        "ran {ran}, moved {moved}: both paths were taken"
    );
}
