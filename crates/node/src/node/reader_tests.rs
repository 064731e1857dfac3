//! Calls run where they are read, through the node's API on readers confined as the gateway
//! confines them: which calls run there, that they never add a call on a core that is not
//! free, that they are preempted like any other, and what goes to the executors instead.

use super::*;
use crate::fixtures::{self, fold, on_reader};
use crate::{ExecutorsConfig, PreemptConfig, Reply};
use bytes::Bytes;
use mote_sched::Policy;
use mote_types::{FunctionName, Limits};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

/// A node with `fold` deployed, on a runtime of its own (the node's I/O runtime).
fn node_with(config: ExecutorsConfig) -> (Arc<Node>, tempfile::TempDir, tokio::runtime::Runtime) {
    fixtures::node_with(config, 2, &[("fold", &fold(false))])
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

/// Calls `fold` for `ms` on `reader`; its reply.
async fn here(node: &Node, reader: &Reader, ms: u32) -> Reply {
    let reply = node
        .invoke_here(reader, "fold", millis(ms), false)
        .await
        .unwrap();
    assert_eq!(reply.result.as_ref().unwrap().len(), 8);
    reply
}

#[test]
fn a_call_runs_on_the_reader_that_read_it_and_nowhere_else_that_is_not_confined() {
    let (node, _dir, runtime) = node_with(ExecutorsConfig::new(2));
    let seccomp = on_reader(node.clone(), async |node, reader| {
        for _ in 0..20 {
            here(node, reader, 0).await;
        }
        std::fs::read_to_string("/proc/thread-self/status").is_err()
    })
    .join()
    .unwrap();
    assert!(seccomp, "the reader could read a file");
    assert_eq!(inline(&node), 20, "every call found a free core");
    // Anywhere else, calls are queued for the executors.
    runtime.block_on(async {
        for _ in 0..10 {
            node.invoke("fold", Bytes::new()).await.unwrap();
        }
    });
    node.invoke_blocking("fold", Bytes::new(), Duration::ZERO)
        .unwrap();
    assert_eq!(inline(&node), 20);
    assert!(node.reader().is_err(), "this thread is no reader");
}

#[test]
fn with_inline_off_every_call_is_queued() {
    let off = ExecutorsConfig {
        inline: false,
        ..ExecutorsConfig::new(2)
    };
    let (node, _dir, _runtime) = node_with(off);
    on_reader(node.clone(), async |node, reader| {
        for _ in 0..10 {
            here(node, reader, 0).await;
        }
    })
    .join()
    .unwrap();
    assert_eq!(inline(&node), 0);
}

#[test]
fn a_busy_core_is_never_taken() {
    let config = ExecutorsConfig {
        preempt: None,
        ..ExecutorsConfig::new(1)
    };
    let (node, _dir, _runtime) = node_with(config);
    let long = {
        let node = node.clone();
        std::thread::spawn(move || node.invoke_blocking("fold", millis(300), Duration::ZERO))
    };
    while node.metrics.busy_executors.get() == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let reply = on_reader(node.clone(), async |node, reader| {
        here(node, reader, 0).await
    })
    .join()
    .unwrap();
    assert!(
        reply.queued > Duration::from_millis(100),
        "it ran after {:?}, beside the long call",
        reply.queued
    );
    assert_eq!(inline(&node), 0, "it waited for the executor's core");
    long.join().unwrap().unwrap();
}

/// Readers and executors racing for two cores: every call is answered, and never more than two
/// run at once.
#[test]
fn never_more_calls_running_than_cores() {
    let (node, _dir, _runtime) = node_with(ExecutorsConfig::new(2));
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
    let readers: Vec<_> = (0..4u32)
        .map(|i| {
            on_reader(node.clone(), async move |node, reader| {
                for j in 0..300 {
                    here(node, reader, u32::from((i + j) % 7 == 0)).await;
                }
            })
        })
        .collect();
    let callers: Vec<_> = (0..2u32)
        .map(|i| {
            let node = node.clone();
            std::thread::spawn(move || {
                for j in 0..300 {
                    let ms = millis(u32::from((i + j) % 5 == 0));
                    node.invoke_blocking("fold", ms, Duration::ZERO).unwrap();
                }
            })
        })
        .collect();
    readers.into_iter().for_each(|r| r.join().unwrap());
    callers.into_iter().for_each(|c| c.join().unwrap());
    done.store(true, Ordering::Relaxed);
    watcher.join().unwrap();
    assert!(
        most.load(Ordering::Relaxed) <= 2,
        "{most:?} running at once"
    );
    assert!(inline(&node) > 0, "no call ran on a reader");
    let answered: u64 = node.registry.get("fold").unwrap().outcomes().iter().sum();
    assert_eq!(answered, 6 * 300);
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
fn a_guest_that_calls_wasi_on_a_reader_runs_on_an_executor() {
    let (node, _dir, runtime) = node_with(ExecutorsConfig::new(2));
    let wasm = Bytes::from(wat::parse_str(WRITER).unwrap());
    runtime
        .block_on(node.deploy(
            FunctionName::new("writer").unwrap(),
            wasm,
            Limits::default(),
        ))
        .unwrap();
    let answers = on_reader(node.clone(), async |node, reader| {
        let mut answers = Vec::new();
        for _ in 0..3 {
            let reply = node
                .invoke_here(reader, "writer", Bytes::new(), false)
                .await
                .unwrap();
            answers.push(reply.result.unwrap());
        }
        answers
    })
    .join()
    .unwrap();
    assert_eq!(answers, vec![b"hi".to_vec(); 3]);
    assert_eq!(inline(&node), 0, "WASI cannot run on a reader");
    assert!(!node.registry.get("writer").unwrap().runs_on_readers());
    let outcomes = node.registry.get("writer").unwrap().outcomes();
    assert_eq!(
        outcomes.iter().sum::<u64>(),
        3,
        "each call ran once: {outcomes:?}"
    );
}

/// A call that started on a reader and runs long gives its core to a shorter one that waits,
/// once it has run its quantum, and answers as it would have unpreempted.
#[test]
fn a_call_on_a_reader_is_preempted_for_a_better_one() {
    let config = ExecutorsConfig {
        policy: Policy::Sept,
        preempt: Some(PreemptConfig {
            quantum: Duration::from_millis(1),
            ..PreemptConfig::default()
        }),
        ..ExecutorsConfig::new(1)
    };
    let (node, _dir, runtime) = node_with(config);
    runtime.block_on(async {
        let wasm = Bytes::from(wat::parse_str(fold(false)).unwrap());
        node.deploy(FunctionName::new("short").unwrap(), wasm, Limits::default())
            .await
            .unwrap();
        for _ in 0..3 {
            node.invoke("short", millis(1)).await.unwrap();
        }
    });
    let alone = node
        .invoke_blocking("fold", millis(200), Duration::ZERO)
        .unwrap();
    // Its executor holds the core until the instance is torn down, after it replied.
    while node.metrics.busy_executors.get() != 0 {
        std::thread::sleep(Duration::from_micros(200));
    }
    let started = Instant::now();
    let long = on_reader(node.clone(), async |node, reader| {
        let reply = here(node, reader, 200).await;
        (reply, Instant::now())
    });
    while node.metrics.busy_executors.get() == 0 {
        std::thread::sleep(Duration::from_micros(200));
    }
    std::thread::sleep(Duration::from_millis(20));
    let short = node
        .invoke_blocking("short", millis(1), Duration::ZERO)
        .unwrap();
    let short_done = Instant::now();
    let (long, long_done) = long.join().unwrap();
    assert_eq!(inline(&node), 1, "the long call started on its reader");
    assert!(
        short_done < long_done,
        "the short call ended after the long one ({:?} in)",
        short_done - started
    );
    assert!(
        short.queued < Duration::from_millis(50),
        "{:?}",
        short.queued
    );
    assert_eq!(long.result.unwrap(), alone.result.unwrap());
    assert!(node.schedule().preempt.unwrap().preemptions >= 1);
}
