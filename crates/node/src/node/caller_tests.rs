//! Calls a confined thread makes itself ([`Node::invoke_on`]): they run on that thread when a
//! core is free, are preempted there like an executor's, and a thread that is not confined may
//! not make them.

use super::*;
use crate::fixtures::{self, fold};
use crate::{ExecutorsConfig, NodeConfig, PreemptConfig};
use bytes::Bytes;
use mote_confine::Filter;
use mote_sched::Policy;
use std::time::{Duration, Instant};

/// Answers nothing at once.
const NOOP: &str = r#"(module
    (memory (export "memory") 1)
    (func (export "mote_alloc") (param i32) (result i32) i32.const 0)
    (func (export "mote_handle") (param i32 i32) (result i64) i64.const 0))"#;

/// A node with `fold` deployed, then `noop` (which evicts `fold` if nothing else stays
/// resident); its I/O runtime.
fn node_with(
    config: impl Into<NodeConfig>,
) -> (Arc<Node>, tempfile::TempDir, tokio::runtime::Runtime) {
    fixtures::node_with(config, 1, &[("fold", &fold(false)), ("noop", NOOP)])
}

/// The CPU time this thread has used.
fn thread_cpu() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec for the call to fill.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    assert_eq!(rc, 0);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Runs `work` on a new thread confined to run guest code, with its standing as a caller.
fn on_caller<T: Send + 'static>(
    node: Arc<Node>,
    work: impl FnOnce(&Node, &Caller) -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let filter = Filter::new(Role::Guest).unwrap();
    std::thread::spawn(move || {
        filter.confine_this_thread().unwrap();
        let caller = node.caller().unwrap();
        work(&node, &caller)
    })
}

fn millis(ms: u32) -> Bytes {
    Bytes::copy_from_slice(&ms.to_le_bytes())
}

#[test]
fn a_confined_caller_runs_its_calls_on_its_own_thread_and_loads_what_is_cold_elsewhere() {
    let (node, _dir, _runtime) = node_with(NodeConfig {
        resident_mb: 0,
        ..ExecutorsConfig::new(2).into()
    });
    let (burnt, took, cold) = on_caller(node.clone(), |node, caller| {
        // With nothing resident, the first call's code is loaded on the I/O runtime (this
        // thread may not open the artefact).
        let first = node
            .invoke_on(caller, "fold", millis(40), Duration::ZERO)
            .unwrap();
        let (before, t) = (thread_cpu(), Instant::now());
        for _ in 0..4 {
            let reply = node
                .invoke_on(caller, "fold", millis(40), Duration::ZERO)
                .unwrap();
            assert_eq!(reply.result.unwrap().len(), 8);
        }
        (
            thread_cpu() - before,
            t.elapsed(),
            first.cold_start.is_some(),
        )
    })
    .join()
    .unwrap();
    assert!(cold, "the first call was not a cold start");
    // Had the calls run on an executor, this thread would have slept through them (no poll:
    // a spin of zero), using next to no CPU.
    assert!(
        burnt * 2 >= took,
        "the caller's thread used {burnt:?} of CPU in {took:?}: its calls ran elsewhere"
    );
    assert!(node.caller().is_err(), "this thread is not confined");
}

#[test]
fn a_callers_long_call_gives_its_core_to_a_short_one_after_its_quantum() {
    let (node, _dir, _runtime) = node_with(ExecutorsConfig {
        policy: Policy::Sept,
        preempt: Some(PreemptConfig::default()),
        ..ExecutorsConfig::new(1)
    });
    // History: short calls are short, so a short one ranks better than the long one.
    for _ in 0..3 {
        node.invoke_blocking("fold", millis(1), Duration::ZERO)
            .unwrap();
    }
    // The warm-up's executor has let its core go: the next to take it is the caller.
    while node.busy_executors() != 0 {
        std::thread::yield_now();
    }
    let long = on_caller(node.clone(), |node, caller| {
        let t = Instant::now();
        let reply = node
            .invoke_on(caller, "fold", millis(400), Duration::ZERO)
            .unwrap();
        (reply, t.elapsed())
    });
    while node.busy_executors() == 0 {
        std::thread::yield_now();
    }
    let t = Instant::now();
    let short = node
        .invoke_blocking("fold", millis(1), Duration::ZERO)
        .unwrap();
    let waited = t.elapsed();
    let (long, took) = long.join().unwrap();
    assert_eq!(short.result.unwrap().len(), 8);
    assert_eq!(long.result.unwrap().len(), 8);
    assert!(
        waited * 2 < took,
        "the short call waited {waited:?} behind a call of {took:?}"
    );
    let preempt = node.schedule().preempt.expect("the node preempts");
    assert!(
        preempt.preemptions >= 1,
        "the long call was never suspended"
    );
}
