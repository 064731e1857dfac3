//! Run-to-completion through the node's API: which calls run on their caller's thread, and that
//! such calls never add a call on a core that is not idle.

use super::*;
use crate::ExecutorsConfig;
use crate::fixtures::fold;
use bytes::Bytes;
use mote_types::{FunctionName, Limits};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

/// A node with `fold` deployed, started on a runtime of two workers that the test's callers,
/// threads of their own, are not part of.
fn node_with(config: ExecutorsConfig) -> (Node, tempfile::TempDir, tokio::runtime::Runtime) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let node = runtime.block_on(async {
        let node = Node::start_embedded(dir.path(), config).await.unwrap();
        let wasm = Bytes::from(wat::parse_str(fold(false)).unwrap());
        node.deploy(FunctionName::new("fold").unwrap(), wasm, Limits::default())
            .await
            .unwrap();
        node
    });
    (node, dir, runtime)
}

/// `fold` for about `ms` milliseconds; 0: no work.
fn millis(ms: u32) -> Bytes {
    match ms {
        0 => Bytes::new(),
        ms => Bytes::copy_from_slice(&ms.to_le_bytes()),
    }
}

fn inline(node: &Node) -> u64 {
    node.metrics.inline_calls.get()
}

fn call(node: &Node, ms: u32) {
    let reply = node
        .invoke_blocking("fold", millis(ms), Duration::from_micros(50))
        .unwrap();
    assert_eq!(reply.result.unwrap().len(), 8);
}

#[test]
fn a_short_call_runs_on_its_callers_thread() {
    let (node, _dir, runtime) = node_with(ExecutorsConfig::new(2));
    call(&node, 0);
    assert_eq!(inline(&node), 0, "a function that never ran is queued");
    for _ in 0..20 {
        call(&node, 0);
    }
    assert!(inline(&node) >= 15, "{} of 20 ran here", inline(&node));
    // The same from an async caller, with one worker left free.
    let before = inline(&node);
    runtime.block_on(async {
        for _ in 0..20 {
            node.invoke("fold", Bytes::new()).await.unwrap();
        }
    });
    assert!(
        inline(&node) > before,
        "none ran on the async caller's thread"
    );
}

#[test]
fn calls_expected_to_be_long_and_calls_with_it_turned_off_are_queued() {
    let (node, _dir, _runtime) = node_with(ExecutorsConfig::new(2));
    for _ in 0..3 {
        call(&node, 5);
    }
    assert_eq!(inline(&node), 0, "5 ms calls are over the 1 ms default");
    let off = ExecutorsConfig {
        inline_below: Duration::ZERO,
        ..ExecutorsConfig::new(2)
    };
    let (node, _dir, _runtime) = node_with(off);
    for _ in 0..10 {
        call(&node, 0);
    }
    assert_eq!(inline(&node), 0);
}

#[test]
fn the_only_thread_of_a_runtime_never_runs_a_call() {
    let (node, _dir, _runtime) = node_with(ExecutorsConfig::new(1));
    call(&node, 0);
    let before = inline(&node);
    let one = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    one.block_on(async {
        for _ in 0..10 {
            node.invoke("fold", Bytes::new()).await.unwrap();
        }
    });
    assert_eq!(inline(&node), before);
}

#[test]
fn a_busy_core_is_never_borrowed() {
    let (node, _dir, _runtime) = node_with(ExecutorsConfig::new(1));
    call(&node, 0);
    // An executor counts as busy until its instance is torn down, after it replied.
    while node.metrics.busy_executors.get() != 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let node = Arc::new(node);
    let long = {
        let node = node.clone();
        std::thread::spawn(move || call(&node, 300))
    };
    while node.metrics.busy_executors.get() == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let reply = node
        .invoke_blocking("fold", Bytes::new(), Duration::ZERO)
        .unwrap();
    assert!(
        reply.queued > Duration::from_millis(100),
        "it ran after {:?}, beside the long call",
        reply.queued
    );
    long.join().unwrap();
}

/// Callers' threads and executors racing for two cores: every call is answered, and never more
/// than two run at once.
#[test]
fn never_more_calls_running_than_cores() {
    let (node, _dir, _runtime) = node_with(ExecutorsConfig::new(2));
    call(&node, 0);
    let node = Arc::new(node);
    let done = Arc::new(AtomicBool::new(false));
    let most = Arc::new(AtomicI64::new(0));
    let watcher = {
        let (node, done, most) = (node.clone(), done.clone(), most.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                most.fetch_max(node.metrics.busy_executors.get(), Ordering::Relaxed);
                std::hint::spin_loop();
            }
        })
    };
    let callers: Vec<_> = (0..6)
        .map(|i| {
            let node = node.clone();
            std::thread::spawn(move || {
                for j in 0..300 {
                    call(&node, u32::from((i + j) % 7 == 0));
                }
            })
        })
        .collect();
    for c in callers {
        c.join().unwrap();
    }
    done.store(true, Ordering::Relaxed);
    watcher.join().unwrap();
    assert!(
        most.load(Ordering::Relaxed) <= 2,
        "{most:?} running at once"
    );
    assert!(inline(&node) > 0, "no call ran on its caller's thread");
    let answered: u64 = node.registry.get("fold").unwrap().outcomes().iter().sum();
    assert_eq!(answered, 1 + 6 * 300);
}

/// Writes `hi` to its standard output through WASI preview1, then answers it.
const WRITER: &str = r#"(module
    (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
    (memory (export "memory") 1)
    (data (i32.const 16) "hi")
    (func (export "mote_alloc") (param i32) (result i32) i32.const 1024)
    (func (export "mote_handle") (param i32 i32) (result i64)
      (i32.store (i32.const 0) (i32.const 16))
      (i32.store (i32.const 4) (i32.const 2))
      (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))
      (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 2))))"#;

#[test]
fn a_guest_that_calls_wasi_from_an_async_caller_runs_on_an_executor() {
    let (node, _dir, runtime) = node_with(ExecutorsConfig::new(2));
    let wasm = Bytes::from(wat::parse_str(WRITER).unwrap());
    runtime
        .block_on(node.deploy(
            FunctionName::new("writer").unwrap(),
            wasm,
            Limits::default(),
        ))
        .unwrap();
    let before = inline(&node);
    for _ in 0..3 {
        let reply = runtime
            .block_on(node.invoke_traced("writer", Bytes::new()))
            .unwrap();
        assert_eq!(reply.result.unwrap(), b"hi");
    }
    assert_eq!(
        inline(&node),
        before,
        "WASI cannot run on an async caller's thread"
    );
    assert!(!node.registry.get("writer").unwrap().runs_on_workers());
    // A thread of its own may run it, once the executor that ran the last call is idle.
    while node.metrics.busy_executors.get() != 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let reply = node
        .invoke_blocking("writer", Bytes::new(), Duration::from_micros(50))
        .unwrap();
    assert_eq!(reply.result.unwrap(), b"hi");
    assert_eq!(inline(&node), before + 1);
}
