//! The call-path benchmark: how long one call takes through the node (dispatch → queue →
//! executor → fresh instance → call → reply) against the runtime alone (fresh instance → call on
//! the caller's thread), and how many calls per second the node sustains per executor core.

use crate::Fixture;
use bytes::Bytes;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What to run.
#[derive(Clone, Debug)]
pub struct CallPathConfig {
    /// Executor cores.
    pub cores: usize,
    /// Calls measured in each latency run.
    pub calls: u64,
    /// Concurrent callers in the throughput run.
    pub concurrency: usize,
    /// Request body size.
    pub body_bytes: usize,
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
    fn of(h: &Histogram<u64>) -> Self {
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
    /// Executor cores.
    pub cores: usize,
    /// Request body size.
    pub body_bytes: usize,
    /// One caller, one call at a time, through the node.
    pub node: Latency,
    /// The same calls on the runtime alone (the baseline).
    pub runtime_only: Latency,
    /// `node.p50 / runtime_only.p50`: what dispatch costs on top of the call.
    pub dispatch_overhead_ratio_p50: f64,
    /// Calls per second through the node with `concurrency` callers.
    pub node_calls_per_s: f64,
    /// `node_calls_per_s / cores`.
    pub node_calls_per_s_per_core: f64,
    /// Calls per second of the runtime alone on one thread (the baseline).
    pub runtime_only_calls_per_s: f64,
    /// Concurrent callers in the throughput run.
    pub concurrency: usize,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram bounds")
}

/// Runs the benchmark.
pub fn run(config: &CallPathConfig) -> anyhow::Result<CallPathReport> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let fixture = Arc::new(Fixture::start(&rt, config.cores)?);
    let body = Bytes::from(vec![b'x'; config.body_bytes]);
    let warmup = (config.calls / 10).max(100);

    for _ in 0..warmup {
        fixture.call_runtime(&body)?;
    }
    let mut runtime_only = histogram();
    let started = Instant::now();
    for _ in 0..config.calls {
        let t = Instant::now();
        let out = fixture.call_runtime(&body)?;
        runtime_only.saturating_record(t.elapsed().as_nanos() as u64);
        anyhow::ensure!(out.len() == body.len(), "echo returned {} bytes", out.len());
    }
    let runtime_only_calls_per_s = config.calls as f64 / started.elapsed().as_secs_f64();

    let node = rt.block_on({
        let fixture = fixture.clone();
        let body = body.clone();
        let calls = config.calls;
        async move {
            for _ in 0..warmup {
                fixture.call_node(body.clone()).await?;
            }
            let mut h = histogram();
            for _ in 0..calls {
                let t = Instant::now();
                let out = fixture.call_node(body.clone()).await?;
                h.saturating_record(t.elapsed().as_nanos() as u64);
                anyhow::ensure!(out.len() == body.len(), "echo returned {} bytes", out.len());
            }
            anyhow::Ok(h)
        }
    })?;

    let node_calls_per_s = rt.block_on(throughput(fixture.clone(), body, config))?;
    let node = Latency::of(&node);
    let runtime_only = Latency::of(&runtime_only);
    Ok(CallPathReport {
        cores: config.cores,
        body_bytes: config.body_bytes,
        dispatch_overhead_ratio_p50: node.p50_us / runtime_only.p50_us,
        node,
        runtime_only,
        node_calls_per_s,
        node_calls_per_s_per_core: node_calls_per_s / config.cores as f64,
        runtime_only_calls_per_s,
        concurrency: config.concurrency,
    })
}

/// Closed loop: `concurrency` callers share `calls` calls; returns calls per second.
async fn throughput(
    fixture: Arc<Fixture>,
    body: Bytes,
    config: &CallPathConfig,
) -> anyhow::Result<f64> {
    let per_caller = config.calls / config.concurrency as u64;
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
                "{name:<34} {:>9.2} {:>9.2} {:>9.2} {:>9.2}\n",
                l.p50_us, l.p99_us, l.p999_us, l.mean_us
            )
        };
        let mut s = format!(
            "call path, echo with a {} byte body, {} executor cores\n{:<34} {:>9} {:>9} {:>9} {:>9}\n",
            self.body_bytes, self.cores, "latency (µs)", "p50", "p99", "p99.9", "mean"
        );
        s += &row("node: dispatch..reply", &self.node);
        s += &row("baseline: runtime only", &self.runtime_only);
        s += &format!(
            "dispatch overhead (p50 ratio)      {:>9.2}x\n",
            self.dispatch_overhead_ratio_p50
        );
        s += &format!(
            "throughput: node, {} callers        {:>9.0} calls/s ({:.0} per core)\n",
            self.concurrency, self.node_calls_per_s, self.node_calls_per_s_per_core
        );
        s += &format!(
            "baseline: runtime only, 1 thread   {:>9.0} calls/s\n",
            self.runtime_only_calls_per_s
        );
        s
    }
}
