//! The node's tests, through its API: the call path, scheduling, residency, deploys.

use super::*;
use crate::{ExecutorsConfig, InvokeError, MicrotaskMode, PreemptConfig, Reply};
use bytes::Bytes;
use mote_sched::{Policy, SplitMode};
use mote_state::EmbeddedStore;
use mote_types::{FunctionName, Limits};
use std::time::{Duration, Instant};

/// Busy-loops long enough to keep an executor occupied while the test queues more calls.
const SLOW: &str = r#"(module (memory (export "memory") 1)
    (func (export "mote_alloc") (param i32) (result i32) i32.const 0)
    (func (export "mote_handle") (param i32 i32) (result i64) (local $i i32)
      (local.set $i (i32.const 300000000))
      (loop $l (local.set $i (i32.sub (local.get $i) (i32.const 1))) (br_if $l (local.get $i)))
      i64.const 0))"#;

async fn node(dir: &std::path::Path, config: impl Into<NodeConfig>) -> Node {
    let node = Node::start_embedded(dir, config).await.unwrap();
    deploy(&node, "slow", SLOW).await;
    node
}

/// Deploys the module written in `wat` as `name`, with default limits.
async fn deploy(node: &Node, name: &str, wat: &str) {
    let wasm = Bytes::from(wat::parse_str(wat).unwrap());
    node.deploy(FunctionName::new(name).unwrap(), wasm, Limits::default())
        .await
        .unwrap();
}

/// A node of one executor with no resident budget: only the function loaded last stays
/// resident.
fn no_resident_budget() -> NodeConfig {
    NodeConfig {
        resident_mb: 0,
        ..ExecutorsConfig::new(1).into()
    }
}

fn wait_until_busy(node: &Node) {
    while node.metrics.busy_executors.get() == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Declares a light phase, then waits 200 ms on a timer, or traps if the body is not empty.
const SLEEPER: &str = r#"(module
    (import "mote" "phase" (func $phase (param i32)))
    (import "mote" "sleep_us" (func $sleep (param i64)))
    (memory (export "memory") 1)
    (func (export "mote_alloc") (param i32) (result i32) i32.const 0)
    (func (export "mote_handle") (param i32 i32) (result i64)
      (call $phase (i32.const 100))
      (if (local.get 1) (then unreachable))
      (call $sleep (i64.const 200000))
      i64.const 0))"#;

/// How long 4 calls of `SLEEPER` take on one core under `mode`.
async fn four_sleepers(mode: MicrotaskMode) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let mut config = NodeConfig::from(ExecutorsConfig::new(1));
    config.microtasks.mode = mode;
    let node = Node::start_embedded(dir.path(), config).await.unwrap();
    deploy(&node, "sleeper", SLEEPER).await;
    let started = Instant::now();
    let calls: Vec<_> = (0..4)
        .map(|_| node.submit("sleeper", Bytes::new()).unwrap())
        .collect();
    for call in calls {
        call.await.unwrap().result.unwrap();
    }
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread")]
async fn calls_waiting_on_a_timer_hold_no_core_unless_task_based() {
    let task_based = four_sleepers(MicrotaskMode::Off).await;
    assert!(
        task_based >= Duration::from_millis(800),
        "one core, each call holds it for 200 ms: {task_based:?}"
    );
    let microtasks = four_sleepers(MicrotaskMode::On(SplitMode::Dynamic)).await;
    assert!(
        microtasks < Duration::from_millis(700),
        "the four waits overlap: {microtasks:?}"
    );
}

/// The nice value of every thread of this process named `name`.
fn nice_of_threads(name: &str) -> Vec<i64> {
    let mut nice = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let task = task.unwrap().path();
        // A thread that ended since the listing has no files left: skip it.
        let (Ok(comm), Ok(stat)) = (
            std::fs::read_to_string(task.join("comm")),
            std::fs::read_to_string(task.join("stat")),
        ) else {
            continue;
        };
        if comm.trim_end() == name {
            // Field 19 of stat is nice; the fields after the `)` ending the name start at 3.
            let after_name = &stat[stat.rfind(')').unwrap() + 1..];
            nice.push(
                after_name
                    .split_whitespace()
                    .nth(16)
                    .unwrap()
                    .parse()
                    .unwrap(),
            );
        }
    }
    nice
}

#[tokio::test(flavor = "multi_thread")]
async fn object_io_runs_below_the_threads_that_run_guests() {
    let dir = tempfile::tempdir().unwrap();
    let _node = Node::start_embedded(dir.path(), ExecutorsConfig::new(1))
        .await
        .unwrap();
    // The threads set their priority as they start, which may be just after the node did.
    let deadline = Instant::now() + Duration::from_secs(5);
    let io = loop {
        let io = nice_of_threads("mote-object-io");
        if (!io.is_empty() && io.iter().all(|&n| n == 10)) || Instant::now() > deadline {
            break io;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(
        !io.is_empty() && io.iter().all(|&n| n == 10),
        "object I/O threads: {io:?}"
    );
    let guests = nice_of_threads("mote-microtask");
    assert!(
        !guests.is_empty() && guests.iter().all(|&n| n == 0),
        "guest threads: {guests:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_that_fails_mid_phase_gives_its_share_back() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start_embedded(dir.path(), ExecutorsConfig::new(1))
        .await
        .unwrap();
    deploy(&node, "sleeper", SLEEPER).await;
    for _ in 0..3 {
        let err = node
            .invoke("sleeper", Bytes::from_static(b"trap"))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("unreachable"), "{err}");
    }
    let schedule = node.schedule();
    assert_eq!(schedule.microtasks, "on");
    assert!(
        schedule
            .classes
            .iter()
            .all(|c| c.running == 0 && c.waiting == 0),
        "{:?}",
        schedule.classes
    );
    // With nothing running, the whole-core class has every core again.
    assert_eq!(schedule.classes[0].cores, 1);
    node.invoke("sleeper", Bytes::new()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_queue_refuses_calls_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let config = ExecutorsConfig {
        max_queue: 2,
        ..ExecutorsConfig::new(1)
    };
    let node = node(dir.path(), config).await;
    let running = node.submit("slow", Bytes::new()).unwrap();
    wait_until_busy(&node);
    let queued: Vec<_> = (0..2)
        .map(|_| node.submit("slow", Bytes::new()).unwrap())
        .collect();
    let err = node.submit("slow", Bytes::new()).unwrap_err();
    assert!(
        matches!(
            err,
            InvokeError::QueueFull {
                waiting: 2,
                limit: 2
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("retry later"));
    let metrics = node.metrics.encode();
    assert!(
        metrics.contains(r#"mote_invocations_total{function="slow",outcome="rejected"} 1"#),
        "{metrics}"
    );
    running.await.unwrap().result.unwrap();
    for reply in queued {
        reply.await.unwrap().result.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn calls_whose_caller_left_are_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let node = node(dir.path(), ExecutorsConfig::new(1)).await;
    let running = node.submit("slow", Bytes::new()).unwrap();
    wait_until_busy(&node);
    drop(node.submit("slow", Bytes::new()).unwrap());
    running.await.unwrap().result.unwrap();
    // The abandoned call is dropped as soon as the executor reaches it.
    let finished = node.submit("slow", Bytes::new()).unwrap();
    finished.await.unwrap().result.unwrap();
    let metrics = node.metrics.encode();
    assert!(
        metrics.contains(r#"mote_invocations_total{function="slow",outcome="cancelled"} 1"#),
        "{metrics}"
    );
    assert!(metrics.contains(r#"mote_invocations_total{function="slow",outcome="ok"} 2"#));
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_finishes_running_calls_and_answers_queued_ones() {
    let dir = tempfile::tempdir().unwrap();
    // In arrival order, without preemption: the second call stays queued until the node stops
    // (under a preemptive policy it could take the core after the first's quantum and run).
    let executors = ExecutorsConfig {
        policy: Policy::Fifo,
        preempt: None,
        ..ExecutorsConfig::new(1)
    };
    let node = node(dir.path(), executors).await;
    let running = node.submit("slow", Bytes::new()).unwrap();
    wait_until_busy(&node);
    let queued = node.submit("slow", Bytes::new()).unwrap();
    tokio::task::spawn_blocking(move || drop(node))
        .await
        .unwrap();
    running.await.unwrap().result.unwrap();
    assert!(matches!(
        queued.await.unwrap().result,
        Err(InvokeError::ShuttingDown)
    ));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rejected_redeploy_keeps_the_running_function() {
    let dir = tempfile::tempdir().unwrap();
    let node = node(dir.path(), ExecutorsConfig::new(1)).await;
    let before = node.get("slow").unwrap();
    let err = node
        .deploy(
            FunctionName::new("slow").unwrap(),
            Bytes::from_static(b"junk"),
            Limits::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, DeployError::Compile(_)), "{err}");
    assert_eq!(node.get("slow").unwrap(), before);
    assert!(node.invoke("slow", Bytes::new()).await.is_ok());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_corrupt_record_is_skipped_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    drop(node(dir.path(), ExecutorsConfig::new(1)).await);
    let path = dir.path().join("state.redb");
    {
        let store = EmbeddedStore::open(&path).unwrap();
        store
            .put("/mote/functions/broken", b"{not json".to_vec())
            .await
            .unwrap();
    }
    let node = node(dir.path(), ExecutorsConfig::new(1)).await;
    let names: Vec<_> = node
        .list()
        .into_iter()
        .map(|r| r.name.to_string())
        .collect();
    assert_eq!(names, ["slow"]);
    drop(node);
    let store = EmbeddedStore::open(&path).unwrap();
    assert!(store.get("/mote/functions/broken").await.unwrap().is_some());
}

const FAST: &str = r#"(module (memory (export "memory") 1)
    (func (export "mote_alloc") (param i32) (result i32) i32.const 0)
    (func (export "mote_handle") (param i32 i32) (result i64) i64.const 0))"#;

#[tokio::test(flavor = "multi_thread")]
async fn sept_runs_the_short_function_ahead_of_queued_long_calls() {
    let dir = tempfile::tempdir().unwrap();
    let config = ExecutorsConfig {
        policy: Policy::Sept,
        ..ExecutorsConfig::new(1)
    };
    let node = node(dir.path(), config).await;
    deploy(&node, "fast", FAST).await;
    // Teach the node both functions' processing times.
    node.invoke("slow", Bytes::new()).await.unwrap();
    node.invoke("fast", Bytes::new()).await.unwrap();

    let running = node.submit("slow", Bytes::new()).unwrap();
    wait_until_busy(&node);
    let queued_slow = node.submit("slow", Bytes::new()).unwrap();
    let queued_fast = node.submit("fast", Bytes::new()).unwrap();
    running.await.unwrap().result.unwrap();
    let fast = queued_fast.await.unwrap();
    let slow = queued_slow.await.unwrap();
    // The fast call started before the long call queued ahead of it.
    assert!(fast.queued < slow.queued, "the long call ran first");
    slow.result.unwrap();

    let schedule = node.schedule();
    assert_eq!(schedule.policy, "sept");
    let by_name = |n: &str| {
        schedule
            .functions
            .iter()
            .find(|f| f.name == n)
            .unwrap()
            .clone()
    };
    assert!(by_name("slow").expected_ms > 10.0 * by_name("fast").expected_ms.max(0.001));
    assert_eq!(by_name("slow").recent_ms.len(), 3);
    assert!(
        node.metrics
            .encode()
            .contains(r#"mote_policy{policy="sept"} 1"#)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn past_the_resident_budget_the_least_recently_called_are_evicted_and_load_cold() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start_embedded(dir.path(), no_resident_budget())
        .await
        .unwrap();
    for name in ["a", "b"] {
        deploy(&node, name, FAST).await;
    }
    let resident = |n: &str| node.registry.get(n).unwrap().is_resident();
    assert!(!resident("a") && resident("b"));

    let warm = node.invoke_traced("b", Bytes::new()).await.unwrap();
    assert!(warm.result.is_ok() && warm.cold_start.is_none());
    let cold = node.invoke_traced("a", Bytes::new()).await.unwrap();
    assert!(cold.result.is_ok() && cold.cold_start.is_some());
    assert!(resident("a") && !resident("b"));
    let again = node.invoke_traced("a", Bytes::new()).await.unwrap();
    assert!(again.cold_start.is_none(), "a second call is warm");

    let metrics = node.metrics.encode();
    assert!(metrics.contains("mote_cold_starts_total 1"), "{metrics}");
    assert!(metrics.contains("mote_functions_resident 1"), "{metrics}");

    // Removing functions takes their code out of the resident set and its accounting.
    node.remove("a").await.unwrap();
    node.remove("b").await.unwrap();
    let metrics = node.metrics.encode();
    assert!(metrics.contains("mote_functions_resident 0"), "{metrics}");
    assert!(metrics.contains("mote_resident_bytes 0"), "{metrics}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_function_whose_code_is_gone_fails_with_a_load_error_and_others_still_run() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start_embedded(dir.path(), no_resident_budget())
        .await
        .unwrap();
    deploy(&node, "gone", FAST).await;
    deploy(&node, "slow", SLOW).await;
    // Both the compiled artefact and the module blob of `gone` disappear from disk.
    for sub in ["artifacts", "modules"] {
        for entry in std::fs::read_dir(dir.path().join(sub)).unwrap() {
            let path = entry.unwrap().path();
            let sha = node.get("gone").unwrap().sha256;
            if path
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&sha)
            {
                std::fs::remove_file(path).unwrap();
            }
        }
    }
    let err = node.invoke("gone", Bytes::new()).await.unwrap_err();
    assert!(matches!(err, InvokeError::Load { .. }), "{err}");
    assert!(err.to_string().contains("redeploy"), "{err}");
    assert!(node.invoke("slow", Bytes::new()).await.is_ok());
}

/// A module that takes a while to compile: `functions` functions of arithmetic, and a
/// handler that answers nothing.
fn slow_to_compile(functions: usize) -> String {
    let mut wat = String::from(
        r#"(module (memory (export "memory") 1)
        (func (export "mote_alloc") (param i32) (result i32) i32.const 0)
        (func (export "mote_handle") (param i32 i32) (result i64) i64.const 0)"#,
    );
    for i in 0..functions {
        wat.push_str(&format!("(func $f{i} (param i64) (result i64) local.get 0"));
        for k in 0..40 {
            wat.push_str(&format!(" i64.const {k} i64.mul local.get 0 i64.xor"));
        }
        wat.push(')');
    }
    wat.push(')');
    wat
}

/// Deletes the compiled artefact of `name`, so that its next cold start compiles.
fn delete_artefact(node: &Node, dir: &Path, name: &str) {
    let sha = node.get(name).unwrap().sha256;
    for entry in std::fs::read_dir(dir.join("artifacts")).unwrap() {
        let path = entry.unwrap().path();
        if path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with(&sha)
        {
            std::fs::remove_file(path).unwrap();
        }
    }
}

/// A node of one executor with `big` (slow to compile) deployed but not resident, and its
/// artefact gone, so that its next call compiles it.
async fn big_and_cold(dir: &Path) -> Node {
    let node = Node::start_embedded(dir, no_resident_budget())
        .await
        .unwrap();
    deploy(&node, "big", &slow_to_compile(3000)).await;
    deploy(&node, "fast", FAST).await;
    assert!(!node.registry.get("big").unwrap().is_resident());
    delete_artefact(&node, dir, "big");
    node
}

/// The regression of issue 18: a cold start that compiled ran on the caller's async thread,
/// so nothing else on that runtime moved meanwhile.
#[tokio::test(flavor = "current_thread")]
async fn a_cold_start_that_compiles_leaves_the_callers_thread_free() {
    let dir = tempfile::tempdir().unwrap();
    let node = big_and_cold(dir.path()).await;
    let beats = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let heart = tokio::spawn({
        let beats = beats.clone();
        async move {
            loop {
                tokio::time::sleep(Duration::from_millis(1)).await;
                beats.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    });
    tokio::task::yield_now().await;
    let before = beats.load(std::sync::atomic::Ordering::Relaxed);
    let reply = node.invoke_traced("big", Bytes::new()).await.unwrap();
    let during = beats.load(std::sync::atomic::Ordering::Relaxed) - before;
    heart.abort();
    reply.result.unwrap();
    let cold = reply.cold_start.expect("a cold start");
    assert!(
        cold >= Duration::from_millis(30),
        "the compile took {cold:?}: too short to tell whether the thread was free"
    );
    assert!(
        during >= 5,
        "the runtime's only thread beat {during} times during a {cold:?} cold start"
    );
}

/// The regression of issue 18: concurrent cold calls of one function each compiled it.
#[test]
fn concurrent_cold_calls_of_a_function_wait_for_one_load() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let node = rt.block_on(big_and_cold(dir.path()));
    let start = std::sync::Barrier::new(4);
    let replies: Vec<Reply> = std::thread::scope(|scope| {
        let calls: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    start.wait();
                    node.invoke_blocking("big", Bytes::new(), Duration::ZERO)
                })
            })
            .collect();
        calls
            .into_iter()
            .map(|c| c.join().unwrap().unwrap())
            .collect()
    });
    for reply in &replies {
        assert!(reply.result.is_ok() && reply.cold_start.is_some());
    }
    let metrics = node.metrics().encode();
    assert!(metrics.contains("mote_cold_starts_total 1\n"), "{metrics}");
    drop(node);
    drop(rt);
}

/// The regression of issue 18: calls of microtask functions never recorded their
/// processing time, so the node showed 0 ms expected for them.
#[tokio::test(flavor = "multi_thread")]
async fn microtask_calls_record_their_processing_time() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start_embedded(dir.path(), ExecutorsConfig::new(1))
        .await
        .unwrap();
    deploy(&node, "sleeper", SLEEPER).await;
    for _ in 0..2 {
        node.invoke("sleeper", Bytes::new()).await.unwrap();
    }
    let schedule = node.schedule();
    let sleeper = schedule
        .functions
        .iter()
        .find(|f| f.name == "sleeper")
        .unwrap();
    assert_eq!(sleeper.recent_ms.len(), 2, "{sleeper:?}");
    assert!(sleeper.expected_ms >= 190.0, "{sleeper:?}");
    let metrics = node.metrics().encode();
    let expected = metrics
        .lines()
        .find(|l| l.starts_with(r#"mote_expected_processing_seconds{function="sleeper"}"#))
        .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .unwrap();
    assert!(expected >= 0.19, "{metrics}");
}

/// The files under `dir/sub`.
fn files_in(dir: &Path, sub: &str) -> Vec<String> {
    std::fs::read_dir(dir.join(sub))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// The regression of issue 18: a deploy refused for its memory limit had already written
/// its compiled artefact.
#[tokio::test(flavor = "multi_thread")]
async fn a_deploy_refused_for_its_memory_limit_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start_embedded(dir.path(), ExecutorsConfig::new(1))
        .await
        .unwrap();
    let big_memory = r#"(module (memory (export "memory") 512)
        (func (export "mote_alloc") (param i32) (result i32) i32.const 0)
        (func (export "mote_handle") (param i32 i32) (result i64) i64.const 0))"#;
    let limits = Limits {
        memory_mb: 16,
        ..Limits::default()
    };
    let wasm = Bytes::from(wat::parse_str(big_memory).unwrap());
    let err = node
        .deploy(FunctionName::new("big").unwrap(), wasm, limits)
        .await
        .unwrap_err();
    assert!(matches!(err, DeployError::MemoryTooSmall { .. }), "{err}");
    assert_eq!(files_in(dir.path(), "artifacts"), Vec::<String>::new());
    assert_eq!(files_in(dir.path(), "modules"), Vec::<String>::new());
}

/// A store whose writes all fail, as a full disk or an unreachable store would.
struct RefusingWrites(EmbeddedStore);

#[async_trait::async_trait]
impl StateStore for RefusingWrites {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        self.0.get(key).await
    }
    async fn put(&self, _key: &str, _value: Vec<u8>) -> Result<(), StateError> {
        Err(StateError::Storage {
            path: "test".into(),
            message: "no space left on device".into(),
        })
    }
    async fn delete(&self, key: &str) -> Result<bool, StateError> {
        self.0.delete(key).await
    }
    async fn list(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, StateError> {
        self.0.list(prefix).await
    }
}

/// The regression of issue 18: a deploy whose record could not be written left its module
/// blob and compiled artefact behind.
#[tokio::test(flavor = "multi_thread")]
async fn a_deploy_whose_record_cannot_be_written_leaves_no_files() {
    let dir = tempfile::tempdir().unwrap();
    let store = RefusingWrites(EmbeddedStore::open(&dir.path().join("state.redb")).unwrap());
    let runtime = Runtime::new(RuntimeConfig::new(dir.path().join("artifacts"), 1)).unwrap();
    let blobs = ModuleBlobs::open(&dir.path().join("modules")).unwrap();
    let node = Node::start(
        Arc::new(runtime),
        Arc::new(store),
        blobs,
        ExecutorsConfig::new(1),
    )
    .await
    .unwrap();
    let wasm = Bytes::from(wat::parse_str(FAST).unwrap());
    let err = node
        .deploy(FunctionName::new("f").unwrap(), wasm, Limits::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no space left"), "{err}");
    assert!(node.list().is_empty());
    assert_eq!(files_in(dir.path(), "artifacts"), Vec::<String>::new());
    assert_eq!(files_in(dir.path(), "modules"), Vec::<String>::new());
}

/// On one core under SEPT: teaches the node a long and a short phased function, then sends
/// the short one while the long one runs. Returns whether the short call ended first.
async fn short_phase_beside_a_long_one(preempt: Option<PreemptConfig>) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ExecutorsConfig::new(1);
    config.policy = Policy::Sept;
    config.preempt = preempt;
    let node = Node::start_embedded(dir.path(), config).await.unwrap();
    let wasm = Bytes::from(wat::parse_str(crate::fixtures::fold(true)).unwrap());
    for name in ["long", "short"] {
        node.deploy(
            mote_types::FunctionName::new(name).unwrap(),
            wasm.clone(),
            mote_types::Limits::default(),
        )
        .await
        .unwrap();
    }
    let body = |n: u32| Bytes::copy_from_slice(&n.to_le_bytes());
    node.invoke("long", body(200)).await.unwrap();
    node.invoke("short", body(2)).await.unwrap();
    let long = tokio::spawn(node.submit("long", body(200)).unwrap());
    while node.microtasks.classes()[0].running == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    node.submit("short", body(2))
        .unwrap()
        .await
        .unwrap()
        .result
        .unwrap();
    let short_first = !long.is_finished();
    long.await.unwrap().unwrap().result.unwrap();
    short_first
}

#[tokio::test(flavor = "multi_thread")]
async fn a_short_phase_takes_the_core_from_a_long_one_only_under_preemption() {
    let preempt = Some(PreemptConfig {
        quantum: Duration::from_millis(1),
        ..PreemptConfig::default()
    });
    assert!(short_phase_beside_a_long_one(preempt).await);
    assert!(!short_phase_beside_a_long_one(None).await);
}
