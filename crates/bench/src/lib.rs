//! mote's benchmarks, shared by `mote bench` (distributions and throughput, printed and as JSON)
//! and `cargo bench` (criterion, for regression tracking).
//!
//! Every benchmark runs a baseline side by side in the same process and reports ratios, so the
//! numbers mean something on a noisy shared machine.
//!
//! - [`Fixture`]: a real node (runtime, embedded state, executors) in a temporary directory, with
//!   the `echo` example deployed, plus a second runtime for the no-dispatch baseline.
//! - [`call_path`]: latency of one call through the node versus the runtime alone, and
//!   throughput of the node with several callers.
//! - [`micro`]: the language-isolation paper's Table 1 and Figure 2: warm and cold starts,
//!   throughput per core, budget kills and the cost of preemption, beside a process-isolation
//!   baseline.
//! - [`burst`]: the call-scheduling paper's burst experiment: response time and stretch of a
//!   function suite under each scheduling policy.
//! - [`store`]: the eventual-consistency paper's Figure 2: mote store against etcd 3.6.8 under
//!   etcd's own `benchmark` tool, put and serializable range, on clusters of 1, 3 and 5 nodes.
//! - [`sort`]: the microtask paper's Figure 7: a distributed sort through the platform against
//!   a real S3 server, task-based against microtask-based scheduling.
//! - [`cluster`]: several nodes as real processes: what forwarding a call costs, against the
//!   same call sent to its node; the burst sent to one node of two, against one node alone.
//! - [`jobs`]: the Canary paper's Figures 4 and 8 on `mote up` processes: what scheduling a job's
//!   task costs, LR iterations against partitions per core and workers, beside Ray, Dask and Spark.
//! - [`preempt`]: a call that turns long on the reader that read it, on a one-core `mote up`,
//!   and the response times of short calls beside it, with preemption and without.
//! - [`http`]: the same `wasi:http` component under `mote up` and under `wasmtime serve`, real
//!   processes driven by one keep-alive load generator at several concurrencies: requests/s and
//!   latency percentiles, side by side.
//! - [`stats`]: the median every report takes, `None` where there is no data.
//! - `node_api`: the benchmarks' client of a node's public API for what surrounds a
//!   measurement (deploys, the cluster view, jobs): `mote_api::ApiClient` on a runtime of its
//!   own. The calls a benchmark measures keep their own clients.
//! - [`results`]: the directory a benchmark writes its files to (`--out`, or a fresh one under
//!   the system's temp dir, never the repository), and the outcome it hands back.
//!
//! The processes the benchmarks start (`mote up`, `mote store`, `wasmtime serve`), the CPUs they
//! are pinned to and the CPU time read from `/proc` all go through `mote_testbed`; the cluster
//! simulation is `mote_cluster_sim`'s, whose burst workload `burst` sends to a real node.
//!
//! Each benchmark is run by one function taking its configuration (and, for those that write
//! files, the results directory): the `mote bench` command only turns its arguments into that
//! configuration and prints what comes back.

pub mod burst;
pub mod call_path;
pub mod cluster;
pub mod http;
pub mod jobs;
pub mod micro;
mod node_api;
pub mod plot;
pub mod preempt;
pub mod results;
pub mod sort;
pub mod stats;
pub mod store;

use bytes::Bytes;
use mote_node::{ExecutorsConfig, Node};
use mote_runtime::{Function, Runtime, RuntimeConfig};
use mote_types::{FunctionName, Limits};
use std::sync::Arc;

/// A node with `echo` deployed, and the same function compiled in a separate runtime.
pub struct Fixture {
    /// The node under test.
    pub node: Arc<Node>,
    /// A runtime outside the node, for the baseline that skips dispatch.
    pub runtime: Runtime,
    /// `echo` compiled in `runtime`.
    pub echo: Arc<Function>,
    /// The name the baseline calls run under, built once so the baseline allocates nothing extra.
    name: Arc<str>,
    _dir: tempfile::TempDir,
}

impl Fixture {
    /// The name the benchmarks call.
    pub const FUNCTION: &'static str = "echo";

    /// Starts a node with `cores` executors on `rt`.
    pub fn start(rt: &tokio::runtime::Runtime, cores: usize) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let node = rt.block_on(async {
            // Arrival order: the call path without ranking, as the criterion baselines have it.
            let executors = ExecutorsConfig {
                policy: mote_sched::Policy::Fifo,
                ..ExecutorsConfig::new(cores)
            };
            let node = Node::start_embedded(dir.path(), executors).await?;
            node.deploy(
                FunctionName::new(Self::FUNCTION)?,
                Bytes::from_static(mote_guests::ECHO.wasm),
                Limits::default(),
            )
            .await?;
            anyhow::Ok(Arc::new(node))
        })?;
        let runtime = Runtime::new(RuntimeConfig::new(dir.path().join("baseline"), 1))?;
        let echo = runtime.compile(mote_guests::ECHO.wasm)?;
        Ok(Self {
            node,
            runtime,
            echo,
            name: Arc::from(Self::FUNCTION),
            _dir: dir,
        })
    }

    /// One call through the node: queue, executor, fresh instance, reply.
    pub async fn call_node(&self, body: Bytes) -> anyhow::Result<Vec<u8>> {
        Ok(self.node.invoke(Self::FUNCTION, body).await?)
    }

    /// One call on the current thread, no node: fresh instance and call only.
    pub fn call_runtime(&self, body: &[u8]) -> anyhow::Result<Vec<u8>> {
        Ok(self
            .runtime
            .call(&self.echo, &self.name, Limits::default(), body)?
            .body)
    }
}
