//! `mote bench cluster`: what a call costs when the node a client sends it to forwards it to the
//! node that runs it, against the same call sent straight to that node, side by side in one
//! run. Real processes on loopback: a `mote store`, and two `mote up` nodes (`--cores 1`,
//! `--homes 1`) sharing it. The function's one home is `n2` (chosen by the placement's own
//! rendezvous ranking), so a call sent to `n1` while `n2` is free is forwarded, and one sent to
//! `n2` runs there; every response's `mote-node` is checked to be `n2`.
//!
//! One client sends calls one after another (closed loop, keep-alive), alternating rounds of
//! direct and forwarded calls so that both see the same machine state. A node places a call
//! from its peers' last reports, so a few calls may run elsewhere than the path intends; they
//! are counted in the report and left out of the latencies.

use super::{agent, node, store};
use crate::node_api::NodeApi;
use anyhow::{Context, bail};
use hdrhistogram::Histogram;
use mote_api::DeployParams;
use mote_cluster::{Event, Load, Membership, Placement, PlacementConfig, Report};
use serde::Serialize;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How the benchmark runs.
#[derive(Clone, Debug)]
pub struct ClusterBenchConfig {
    /// The `mote` binary to start the store and nodes from.
    pub mote: PathBuf,
    /// Calls per round and path.
    pub calls: usize,
    /// Rounds; each runs both paths, direct first on even rounds.
    pub rounds: usize,
}

/// Latency and rate of one path.
#[derive(Clone, Debug, Serialize)]
pub struct PathFigures {
    /// Median latency, µs.
    pub p50_us: f64,
    /// 99th percentile latency, µs.
    pub p99_us: f64,
    /// Calls per second of one client: one over the mean latency.
    pub calls_per_s: f64,
    /// Calls measured: those that ran on `n2`.
    pub measured: usize,
    /// Calls sent on this path that ran on `n1` instead, not measured.
    pub ran_elsewhere: usize,
}

/// What the benchmark measured.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterReport {
    /// Calls sent to the node that runs them.
    pub direct: PathFigures,
    /// Calls sent to a node that forwards them.
    pub forwarded: PathFigures,
    /// Calls sent per path.
    pub calls: usize,
}

impl ClusterReport {
    /// The report as a table, with the forwarding's cost.
    pub fn table(&self) -> String {
        let row = |name: &str, f: &PathFigures| {
            format!(
                "| {name} | {:.1} | {:.1} | {:.0} | {} | {} |\n",
                f.p50_us, f.p99_us, f.calls_per_s, f.measured, f.ran_elsewhere
            )
        };
        let (d, f) = (&self.direct, &self.forwarded);
        format!(
            "| path | p50 µs | p99 µs | calls/s (one client) | measured | ran on n1 |\n\
             |---|---|---|---|---|---|\n{}{}\n\
             forwarding adds {:.1} µs at p50 ({:.2}x) and {:.1} µs at p99 ({:.2}x); \
             calls/s {:.2}x ({} calls sent per path)\n",
            row("direct (client → n2, runs there)", d),
            row("forwarded (client → n1 → n2)", f),
            f.p50_us - d.p50_us,
            f.p50_us / d.p50_us,
            f.p99_us - d.p99_us,
            f.p99_us / d.p99_us,
            f.calls_per_s / d.calls_per_s,
            self.calls,
        )
    }
}

/// A function name whose one home, between `n1` and `n2`, is `n2`.
fn name_homed_on_n2() -> String {
    let idle = |name: &str| Report {
        name: name.into(),
        url: String::new(),
        load: Load {
            cores: 1,
            ..Load::default()
        },
        draining: false,
    };
    let mut view = Membership::new(idle("n1"), Duration::ZERO);
    view.apply(Event::Seen {
        report: idle("n2"),
        at: Duration::ZERO,
    });
    let placement = Placement::new(
        view,
        PlacementConfig {
            homes: 1,
            ..PlacementConfig::default()
        },
    );
    (0..)
        .map(|i| format!("echo{i}"))
        .find(|name| placement.homes(name)[0].as_str() == "n2")
        .expect("some name is homed on n2")
}

/// One path's calls: the latency of those that ran on `n2`, and how many ran elsewhere.
struct Sample {
    latency: Histogram<u64>,
    elsewhere: usize,
}

impl Sample {
    fn new() -> anyhow::Result<Self> {
        Ok(Self {
            latency: Histogram::new(3)?,
            elsewhere: 0,
        })
    }

    fn figures(&self) -> PathFigures {
        let l = &self.latency;
        PathFigures {
            p50_us: l.value_at_quantile(0.5) as f64 / 1e3,
            p99_us: l.value_at_quantile(0.99) as f64 / 1e3,
            calls_per_s: 1e9 / l.mean(),
            measured: l.len() as usize,
            ran_elsewhere: self.elsewhere,
        }
    }
}

/// Sends `calls` calls of `function` to `url`, one after another, and records the latency of
/// those that ran on `n2`. The node a call reaches places it from its peers' last reports, so
/// a few may run on `n1` (placement counts a core that was busy when it reported); they are
/// counted, not measured.
fn measure(
    agent: &ureq::Agent,
    url: &str,
    function: &str,
    calls: usize,
    sample: &mut Sample,
) -> anyhow::Result<()> {
    let target = format!("{url}/v1/invoke/{function}");
    for _ in 0..calls {
        let sent = Instant::now();
        let mut response = agent.post(&target).send(&b"ping"[..])?;
        let body = response.body_mut().read_to_vec()?;
        let took = sent.elapsed();
        if response.status() != 200 || body != b"ping" {
            bail!(
                "a call to {target} answered {}: {}",
                response.status(),
                String::from_utf8_lossy(&body)
            );
        }
        match response.headers().get("mote-node").map(|v| v.as_bytes()) {
            Some(b"n2") => sample.latency.record(took.as_nanos() as u64)?,
            _ => sample.elsewhere += 1,
        }
    }
    Ok(())
}

/// Runs the benchmark.
pub fn run(config: &ClusterBenchConfig) -> anyhow::Result<ClusterReport> {
    let dir = tempfile::tempdir()?;
    let store = store(&config.mote)?;
    let homes = ["--homes", "1"];
    let n1 = node(&config.mote, dir.path(), "n1", store.url(), &homes)?;
    let n2 = node(&config.mote, dir.path(), "n2", store.url(), &homes)?;
    let agent = agent(Duration::from_secs(30));
    let function = name_homed_on_n2();
    let echo = mote_guests::ALL
        .iter()
        .find(|g| g.name == "echo")
        .context("the echo example")?;
    NodeApi::new(n2.url())?
        .deploy(&function, echo.wasm, &DeployParams::default())
        .with_context(|| format!("deploying {function} on n2"))?;
    // Until n1 knows both the function and n2, its calls run on n1.
    let ready = Instant::now();
    loop {
        let mut probe = Sample::new()?;
        measure(&agent, n1.url(), &function, 1, &mut probe)?;
        if probe.elsewhere == 0 {
            break;
        }
        if ready.elapsed() > Duration::from_secs(30) {
            bail!("n1 did not forward {function} to n2 within 30 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut warm = Sample::new()?;
    measure(&agent, n2.url(), &function, 500, &mut warm)?;
    measure(&agent, n1.url(), &function, 500, &mut warm)?;
    let (mut direct, mut forwarded) = (Sample::new()?, Sample::new()?);
    for round in 0..config.rounds {
        // Alternate which path goes first, so neither always runs on a machine the other
        // just warmed.
        for forward in [round % 2 == 1, round % 2 == 0] {
            let (url, sample) = match forward {
                false => (n2.url(), &mut direct),
                true => (n1.url(), &mut forwarded),
            };
            measure(&agent, url, &function, config.calls, sample)?;
        }
    }
    let calls = config.calls * config.rounds;
    Ok(ClusterReport {
        direct: direct.figures(),
        forwarded: forwarded.figures(),
        calls,
    })
}
