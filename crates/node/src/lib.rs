//! A mote node: takes calls for deployed functions and runs each on one of its executor cores.
//!
//! The call path is `Node::invoke` → [`Registry`] lookup (lock-free) → [`Executors::submit`] (the
//! policy queue) → an executor thread → [`mote_runtime::Runtime::call`] → reply over a oneshot
//! channel. The control path is `Node::deploy`/`Node::remove` → compile → persist (module blob,
//! then record) → publish to the registry.
//!
//! - [`Executors`]: one thread per core, at most one running call each (no oversubscription),
//!   fed from one [`mote_sched::CallQueue`].
//! - [`Registry`]: deployed functions, resident and ready to instantiate, backed by a
//!   [`mote_state::StateStore`] so they survive restarts.
//! - [`NodeMetrics`]: Prometheus metrics of both.
//! - [`confine`]: the seccomp allow-list executor threads run under.

pub mod confine;
mod error;
mod executor;
mod metrics;
mod registry;

pub use error::{DeployError, InvokeError};
pub use executor::{Executors, ExecutorsConfig, FunctionSchedule, Reply, ScheduleSnapshot};
pub use metrics::{NodeMetrics, Outcome};
pub use registry::{Deployed, Registry};

use bytes::Bytes;
use mote_runtime::{Runtime, RuntimeConfig};
use mote_state::{EmbeddedStore, ModuleBlobs, StateError, StateStore};
use mote_types::{FunctionName, FunctionRecord, Limits};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot::error::TryRecvError;

/// One node: a registry of functions and the executors that run their calls.
pub struct Node {
    registry: Registry,
    executors: Executors,
    metrics: Arc<NodeMetrics>,
}

impl Node {
    /// Starts the executors and loads every function recorded in `store`.
    pub async fn start(
        runtime: Arc<Runtime>,
        store: Arc<dyn StateStore>,
        blobs: ModuleBlobs,
        config: ExecutorsConfig,
    ) -> Result<Self, DeployError> {
        let metrics = Arc::new(NodeMetrics::new());
        let registry = Registry::new(runtime.clone(), store, blobs, metrics.clone());
        registry.load_all().await?;
        let executors = Executors::start(runtime, metrics.clone(), config)?;
        Ok(Self {
            registry,
            executors,
            metrics,
        })
    }

    /// Starts a single-machine node whose state (records, module blobs, compiled artefacts) lives
    /// under `data`, in the embedded store.
    pub async fn start_embedded(data: &Path, config: ExecutorsConfig) -> Result<Self, DeployError> {
        std::fs::create_dir_all(data).map_err(|source| StateError::Blob {
            path: data.display().to_string(),
            source,
        })?;
        let threads = Executors::threads_for(&config);
        let runtime = Runtime::new(RuntimeConfig::new(data.join("artifacts"), threads))?;
        let store = EmbeddedStore::open(&data.join("state.redb"))?;
        let blobs = ModuleBlobs::open(&data.join("modules"))?;
        Self::start(Arc::new(runtime), Arc::new(store), blobs, config).await
    }

    /// Runs `name` with `input` as the request body and returns the response body.
    pub async fn invoke(&self, name: &str, input: Bytes) -> Result<Vec<u8>, InvokeError> {
        self.invoke_traced(name, input).await?.result
    }

    /// Like [`Node::invoke`], and also says how long the call waited and ran.
    pub async fn invoke_traced(&self, name: &str, input: Bytes) -> Result<Reply, InvokeError> {
        let function = self
            .registry
            .get(name)
            .ok_or_else(|| InvokeError::NotFound(name.to_owned()))?;
        let reply = self.executors.submit(function, input)?;
        reply.await.map_err(|_| dropped())
    }

    /// Runs a call for a synchronous caller that owns a core (a benchmark, a dispatcher thread):
    /// waits for the reply by polling for up to `spin`, then blocks. Polling saves the futex
    /// wake-up that dominates a microsecond call; async callers use [`Node::invoke`].
    pub fn invoke_blocking(
        &self,
        name: &str,
        input: Bytes,
        spin: Duration,
    ) -> Result<Vec<u8>, InvokeError> {
        let function = self
            .registry
            .get(name)
            .ok_or_else(|| InvokeError::NotFound(name.to_owned()))?;
        let mut reply = self.executors.submit(function, input)?;
        let until = Instant::now() + spin;
        loop {
            match reply.try_recv() {
                Ok(reply) => return reply.result,
                Err(TryRecvError::Closed) => return Err(dropped()),
                Err(TryRecvError::Empty) if Instant::now() < until => std::hint::spin_loop(),
                Err(TryRecvError::Empty) => break,
            }
        }
        reply.blocking_recv().map_err(|_| dropped())?.result
    }

    /// Deploys (or replaces) `name` with the module `wasm`.
    pub async fn deploy(
        &self,
        name: FunctionName,
        wasm: Bytes,
        limits: Limits,
    ) -> Result<FunctionRecord, DeployError> {
        let (record, replaced) = self.registry.deploy(name, wasm, limits).await?;
        if let Some(old) = replaced {
            self.executors.forget(&old);
        }
        Ok(record)
    }

    /// Removes `name`; calls already queued for it still run.
    pub async fn remove(&self, name: &str) -> Result<FunctionRecord, DeployError> {
        let removed = self.registry.remove(name).await?;
        self.executors.forget(&removed);
        Ok(removed.record().clone())
    }

    /// Lets calls of a quarantined function in again; says whether it was quarantined.
    pub fn release(&self, name: &str) -> Result<bool, DeployError> {
        let function = self
            .registry
            .get(name)
            .ok_or_else(|| DeployError::NotFound(name.to_owned()))?;
        let released = self.executors.release(&function);
        if released {
            tracing::info!(function = name, "released from quarantine");
        }
        Ok(released)
    }

    /// Whether `name` is quarantined, and after how many budget kills in a row.
    pub fn quarantined(&self, name: &str) -> Option<u32> {
        self.registry.get(name)?.quarantined()
    }

    /// The record of `name`, if deployed.
    pub fn get(&self, name: &str) -> Option<FunctionRecord> {
        self.registry.get(name).map(|f| f.record().clone())
    }

    /// Every deployed function, by name.
    pub fn list(&self) -> Vec<FunctionRecord> {
        self.registry.list()
    }

    /// The scheduling state: policy, queue, and each function's expected time.
    pub fn schedule(&self) -> ScheduleSnapshot {
        self.executors.snapshot(&self.registry.functions())
    }

    /// The node's metrics, for the gateway to expose.
    pub fn metrics(&self) -> &NodeMetrics {
        &self.metrics
    }

    /// How many executor cores the node runs calls on.
    pub fn cores(&self) -> usize {
        self.executors.cores()
    }
}

fn dropped() -> InvokeError {
    InvokeError::Internal("the executor dropped the call".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mote_state::EmbeddedStore;

    /// Busy-loops long enough to keep an executor occupied while the test queues more calls.
    const SLOW: &str = r#"(module (memory (export "memory") 1)
        (func (export "mote_alloc") (param i32) (result i32) i32.const 0)
        (func (export "mote_handle") (param i32 i32) (result i64) (local $i i32)
          (local.set $i (i32.const 300000000))
          (loop $l (local.set $i (i32.sub (local.get $i) (i32.const 1))) (br_if $l (local.get $i)))
          i64.const 0))"#;

    async fn node(dir: &std::path::Path, config: ExecutorsConfig) -> Node {
        let node = Node::start_embedded(dir, config).await.unwrap();
        let wasm = Bytes::from(wat::parse_str(SLOW).unwrap());
        node.deploy(FunctionName::new("slow").unwrap(), wasm, Limits::default())
            .await
            .unwrap();
        node
    }

    fn wait_until_busy(node: &Node) {
        while node.metrics.busy_executors.get() == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_full_queue_refuses_calls_with_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let config = ExecutorsConfig {
            max_queue: 2,
            ..ExecutorsConfig::new(1)
        };
        let node = node(dir.path(), config).await;
        let slow = node.registry.get("slow").unwrap();
        let running = node.executors.submit(slow.clone(), Bytes::new()).unwrap();
        wait_until_busy(&node);
        let queued: Vec<_> = (0..2)
            .map(|_| node.executors.submit(slow.clone(), Bytes::new()).unwrap())
            .collect();
        let err = node.executors.submit(slow, Bytes::new()).unwrap_err();
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
        running.await.unwrap().result.unwrap();
        for reply in queued {
            reply.await.unwrap().result.unwrap();
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn calls_whose_caller_left_are_not_run() {
        let dir = tempfile::tempdir().unwrap();
        let node = node(dir.path(), ExecutorsConfig::new(1)).await;
        let slow = node.registry.get("slow").unwrap();
        let running = node.executors.submit(slow.clone(), Bytes::new()).unwrap();
        wait_until_busy(&node);
        drop(node.executors.submit(slow.clone(), Bytes::new()).unwrap());
        running.await.unwrap().result.unwrap();
        // The abandoned call is dropped as soon as the executor reaches it.
        let finished = node.executors.submit(slow, Bytes::new()).unwrap();
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
        let node = node(dir.path(), ExecutorsConfig::new(1)).await;
        let slow = node.registry.get("slow").unwrap();
        let running = node.executors.submit(slow.clone(), Bytes::new()).unwrap();
        wait_until_busy(&node);
        let queued = node.executors.submit(slow, Bytes::new()).unwrap();
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
            policy: mote_sched::Policy::Sept,
            ..ExecutorsConfig::new(1)
        };
        let node = node(dir.path(), config).await;
        let fast = Bytes::from(wat::parse_str(FAST).unwrap());
        node.deploy(FunctionName::new("fast").unwrap(), fast, Limits::default())
            .await
            .unwrap();
        // Teach the node both functions' processing times.
        node.invoke("slow", Bytes::new()).await.unwrap();
        node.invoke("fast", Bytes::new()).await.unwrap();
        let (slow, fast) = (
            node.registry.get("slow").unwrap(),
            node.registry.get("fast").unwrap(),
        );

        let running = node.executors.submit(slow.clone(), Bytes::new()).unwrap();
        wait_until_busy(&node);
        let queued_slow = node.executors.submit(slow, Bytes::new()).unwrap();
        let queued_fast = node.executors.submit(fast, Bytes::new()).unwrap();
        running.await.unwrap().result.unwrap();
        queued_fast.await.unwrap().result.unwrap();
        // The fast call finished while the second slow call still waited or ran.
        assert!(!queued_slow.is_terminated(), "the long call ran first");
        queued_slow.await.unwrap().result.unwrap();

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
}
