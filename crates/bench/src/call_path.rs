//! The call-path benchmark: how long one call takes through the node (dispatch → queue →
//! executor → fresh instance → call → reply) against the runtime alone (fresh instance → call on
//! the caller's thread), and how many calls per second the node sustains per executor core.
//!
//! Latency is measured with one caller and one call at a time, so it is the path's own cost, not
//! queueing. The node's executors run on `latency_cores` cores and the caller on its own core,
//! as a dispatcher would: on a 2-core machine that means one executor.

use crate::Fixture;
use bytes::Bytes;
use hdrhistogram::Histogram;
use mote_runtime::CallError;
use mote_types::Limits;
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a synchronous caller polls for its reply before blocking.
const REPLY_SPIN: Duration = Duration::from_micros(200);

/// What to run.
#[derive(Clone, Debug)]
pub struct CallPathConfig {
    /// Executor cores in the latency runs.
    pub latency_cores: usize,
    /// Executor cores in the throughput run.
    pub throughput_cores: usize,
    /// Calls measured in each run.
    pub calls: u64,
    /// Concurrent callers in the throughput run.
    pub concurrency: usize,
    /// Request body size.
    pub body_bytes: usize,
}

impl CallPathConfig {
    /// `calls` calls of `body_bytes` each, latency measured on `latency_cores` executor cores
    /// and throughput on `throughput_cores` with `concurrency` callers (4 per core unless
    /// given); at least one core and one caller.
    pub fn new(
        calls: u64,
        latency_cores: usize,
        throughput_cores: usize,
        concurrency: Option<usize>,
        body_bytes: usize,
    ) -> Self {
        Self {
            latency_cores: latency_cores.max(1),
            throughput_cores,
            calls,
            concurrency: concurrency.unwrap_or(4 * throughput_cores).max(1),
            body_bytes,
        }
    }
}

/// A latency distribution, in microseconds.
#[derive(Clone, Debug, Serialize)]
pub struct Latency {
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Mean.
    pub mean_us: f64,
    /// Calls measured.
    pub calls: u64,
}

impl Latency {
    pub(crate) fn of(h: &Histogram<u64>) -> Self {
        let us = |ns: u64| ns as f64 / 1000.0;
        Self {
            p50_us: us(h.value_at_quantile(0.5)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            mean_us: h.mean() / 1000.0,
            calls: h.len(),
        }
    }
}

/// The results.
#[derive(Clone, Debug, Serialize)]
pub struct CallPathReport {
    /// Executor cores in the latency runs.
    pub latency_cores: usize,
    /// Executor cores in the throughput run.
    pub throughput_cores: usize,
    /// Request body size.
    pub body_bytes: usize,
    /// Through the node, from a synchronous caller that polls for its reply.
    pub node: Latency,
    /// Through the node, from an async caller on tokio (what the HTTP gateway does).
    pub node_async: Latency,
    /// The same calls on the runtime alone, on the caller's thread (the baseline).
    pub runtime_only: Latency,
    /// `node.p50 / runtime_only.p50`: what dispatch costs on top of the call.
    pub dispatch_overhead_ratio_p50: f64,
    /// Calls per second through the node with `concurrency` async callers.
    pub node_calls_per_s: f64,
    /// `node_calls_per_s / throughput_cores`.
    pub node_calls_per_s_per_core: f64,
    /// Calls per second of the runtime alone on one thread (the baseline).
    pub runtime_only_calls_per_s: f64,
    /// Concurrent callers in the throughput run.
    pub concurrency: usize,
    /// How long past a 10 ms timeout an infinite loop ran before it was stopped.
    pub timeout_overshoot: Latency,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram bounds")
}

/// Times `calls` sequential calls of `call` after a warm-up; returns the distribution and the
/// calls per second.
fn sequential(
    calls: u64,
    mut call: impl FnMut() -> anyhow::Result<Vec<u8>>,
    expect_len: usize,
) -> anyhow::Result<(Histogram<u64>, f64)> {
    for _ in 0..(calls / 10).max(100) {
        call()?;
    }
    let mut h = histogram();
    let started = Instant::now();
    for _ in 0..calls {
        let t = Instant::now();
        let out = call()?;
        h.saturating_record(t.elapsed().as_nanos() as u64);
        anyhow::ensure!(out.len() == expect_len, "echo returned {} bytes", out.len());
    }
    Ok((h, calls as f64 / started.elapsed().as_secs_f64()))
}

/// Runs the benchmark.
pub fn run(config: &CallPathConfig) -> anyhow::Result<CallPathReport> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let body = Bytes::from(vec![b'x'; config.body_bytes]);
    let len = body.len();

    let fixture = Arc::new(Fixture::start(&rt, config.latency_cores)?);
    let (runtime_only, runtime_only_calls_per_s) =
        sequential(config.calls, || fixture.call_runtime(&body), len)?;
    let (node, _) = sequential(
        config.calls,
        || {
            Ok(fixture
                .node
                .invoke_blocking(Fixture::FUNCTION, body.clone(), REPLY_SPIN)?
                .result?)
        },
        len,
    )?;
    let (node_async, _) = sequential(
        config.calls,
        || rt.block_on(fixture.call_node(body.clone())),
        len,
    )?;
    let timeout_overshoot = timeout_overshoot(&fixture, 200)?;
    drop(fixture);

    let fixture = Arc::new(Fixture::start(&rt, config.throughput_cores)?);
    let node_calls_per_s = rt.block_on(throughput(fixture, body, config))?;
    let node = Latency::of(&node);
    let runtime_only = Latency::of(&runtime_only);
    Ok(CallPathReport {
        latency_cores: config.latency_cores,
        throughput_cores: config.throughput_cores,
        body_bytes: config.body_bytes,
        dispatch_overhead_ratio_p50: node.p50_us / runtime_only.p50_us,
        node,
        node_async: Latency::of(&node_async),
        runtime_only,
        node_calls_per_s,
        node_calls_per_s_per_core: node_calls_per_s / config.throughput_cores as f64,
        runtime_only_calls_per_s,
        concurrency: config.concurrency,
        timeout_overshoot: Latency::of(&timeout_overshoot),
    })
}

/// Runs an infinite loop under a 10 ms timeout `runs` times and records how far past the
/// deadline each was stopped.
fn timeout_overshoot(fixture: &Fixture, runs: u32) -> anyhow::Result<Histogram<u64>> {
    const SPIN: &str = r#"(module (memory (export "memory") 1)
        (func (export "mote_alloc") (param i32) (result i32) i32.const 0)
        (func (export "mote_handle") (param i32 i32) (result i64) (loop $l (br $l)) i64.const 0))"#;
    let spin = fixture.runtime.compile(&wat::parse_str(SPIN)?)?;
    let limits = Limits {
        timeout_us: 10_000,
        ..Limits::default()
    };
    let name: Arc<str> = Arc::from("spin");
    let mut h = histogram();
    for _ in 0..runs {
        let t = Instant::now();
        let result = fixture.runtime.call(&spin, &name, limits, b"");
        let elapsed = t.elapsed();
        anyhow::ensure!(
            matches!(result, Err(CallError::Timeout { .. })),
            "the loop was not stopped by its timeout: {result:?}"
        );
        h.saturating_record(elapsed.saturating_sub(Duration::from_millis(10)).as_nanos() as u64);
    }
    Ok(h)
}

/// Closed loop: `concurrency` callers share `calls` calls; returns calls per second.
async fn throughput(
    fixture: Arc<Fixture>,
    body: Bytes,
    config: &CallPathConfig,
) -> anyhow::Result<f64> {
    let per_caller = config.calls / config.concurrency as u64;
    for _ in 0..1000 {
        fixture.call_node(body.clone()).await?;
    }
    let started = Instant::now();
    let callers: Vec<_> = (0..config.concurrency)
        .map(|_| {
            let (fixture, body) = (fixture.clone(), body.clone());
            tokio::spawn(async move {
                for _ in 0..per_caller {
                    fixture.call_node(body.clone()).await?;
                }
                anyhow::Ok(())
            })
        })
        .collect();
    for caller in callers {
        caller.await??;
    }
    let elapsed = started.elapsed().max(Duration::from_nanos(1));
    Ok((per_caller * config.concurrency as u64) as f64 / elapsed.as_secs_f64())
}

impl CallPathReport {
    /// A table for humans.
    pub fn table(&self) -> String {
        let row = |name: &str, l: &Latency| {
            format!(
                "{name:<44} {:>8.2} {:>8.2} {:>8.2} {:>8.2}\n",
                l.p50_us, l.p99_us, l.p999_us, l.mean_us
            )
        };
        let mut s = format!(
            "call path: echo, {} byte body; latency with {} executor core(s) and one caller\n",
            self.body_bytes, self.latency_cores
        );
        s += &format!(
            "{:<44} {:>8} {:>8} {:>8} {:>8}\n",
            "latency (µs)", "p50", "p99", "p99.9", "mean"
        );
        s += &row("node: dispatch..reply, polling caller", &self.node);
        s += &row("node: dispatch..reply, async caller", &self.node_async);
        s += &row(
            "baseline: runtime only (instance + call)",
            &self.runtime_only,
        );
        s += &format!(
            "dispatch overhead, p50 node / runtime only   {:>8.2}x\n",
            self.dispatch_overhead_ratio_p50
        );
        s += &format!(
            "throughput: node, {} cores, {} async callers {:>9.0} calls/s = {:.0} per core\n",
            self.throughput_cores,
            self.concurrency,
            self.node_calls_per_s,
            self.node_calls_per_s_per_core
        );
        s += &format!(
            "baseline: runtime only, one thread          {:>9.0} calls/s\n",
            self.runtime_only_calls_per_s
        );
        s += &row("timeout overshoot past 10 ms (µs)", &self.timeout_overshoot);
        s
    }
}
