//! The scheduling paper's burst (its section V, as `mote bench burst` sends it) sent to one node
//! of a two-node cluster, against the same burst sent to one node alone; per policy, with every
//! node `--cores 1`. Both set-ups share one `mote store`; the burst's schedule (the suite's calls
//! at times drawn over the window, each sent at its time whether or not earlier ones returned)
//! is the same for both, and the idle response times (the stretch denominators) are measured once,
//! over HTTP, on the lone node.
//!
//! The two nodes run twice: as `mote up` runs them, and with late correction off
//! (`--pull-every-us 0`), so the calls an idle node pulls are measured against none.
//!
//! On this machine the two nodes, the store and the load generator share two cores, so the
//! second node cannot double the capacity; the comparison shows what placement does with the
//! second node's core, not a cluster's scale (the simulation does that).

use super::{agent, node, store};
use crate::burst::{Distribution, PaperLoad, load_scale, schedule};
use crate::node_api::NodeApi;
use crate::stats::median;
use anyhow::{Context, bail};
use mote_api::DeployParams;
use mote_sched::Policy;
use mote_testbed::Served;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What to run.
#[derive(Clone, Debug)]
pub struct ClusterBurstConfig {
    /// The `mote` binary.
    pub mote: PathBuf,
    /// Policies to compare.
    pub policies: Vec<Policy>,
    /// The paper's intensity.
    pub intensity: u32,
    /// The burst's window.
    pub window: Duration,
    /// Seed of the call sequence.
    pub seed: u64,
    /// Which of the paper's loads an intensity stands for.
    pub load: PaperLoad,
}

/// One set-up's outcome under one policy.
#[derive(Clone, Debug, Serialize)]
pub struct SetupFigures {
    /// Calls sent.
    pub calls: usize,
    /// Calls that failed.
    pub failed: usize,
    /// Response time, ms.
    pub response_ms: Distribution,
    /// Stretch.
    pub stretch: Distribution,
    /// Calls each node ran, by the `mote-node` of their responses.
    pub ran_on: BTreeMap<String, usize>,
    /// Calls the node the burst was sent to handed to its peer that pulled them.
    pub handed_over: u64,
}

/// One policy's comparison.
#[derive(Clone, Debug, Serialize)]
pub struct PolicyFigures {
    /// The policy.
    pub policy: &'static str,
    /// The burst on one node.
    pub one_node: SetupFigures,
    /// The burst sent to n1 of a two-node cluster.
    pub two_nodes: SetupFigures,
    /// The same, with late correction off.
    pub two_nodes_no_pull: SetupFigures,
}

/// What the benchmark measured.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterBurstReport {
    /// Intensity.
    pub intensity: u32,
    /// Window, seconds.
    pub window_s: f64,
    /// Seed.
    pub seed: u64,
    /// Each function's idle response time over HTTP, ms.
    pub idle_ms: BTreeMap<&'static str, f64>,
    /// Per policy.
    pub policies: Vec<PolicyFigures>,
}

impl ClusterBurstReport {
    /// The report as a table.
    pub fn table(&self) -> String {
        let mut out = format!(
            "intensity {}, window {} s, seed {}: response times in ms\n\n\
             | policy | one node: avg | p99 | stretch avg | two nodes: avg | p99 | stretch avg | avg ratio | stretch ratio | ran on n1 / n2 | moved | without pulls: avg | p99 | stretch avg | pulls / none: avg | stretch |\n\
             |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
            self.intensity, self.window_s, self.seed
        );
        for p in &self.policies {
            let (one, two, none) = (&p.one_node, &p.two_nodes, &p.two_nodes_no_pull);
            let on = |n: &str| two.ran_on.get(n).copied().unwrap_or(0);
            out.push_str(&format!(
                "| {} | {:.0} | {:.0} | {:.2} | {:.0} | {:.0} | {:.2} | {:.2} | {:.2} | {} / {} | {} | {:.0} | {:.0} | {:.2} | {:.2} | {:.2} |\n",
                p.policy,
                one.response_ms.avg,
                one.response_ms.p99,
                one.stretch.avg,
                two.response_ms.avg,
                two.response_ms.p99,
                two.stretch.avg,
                two.response_ms.avg / one.response_ms.avg,
                two.stretch.avg / one.stretch.avg,
                on("n1"),
                on("n2"),
                two.handed_over,
                none.response_ms.avg,
                none.response_ms.p99,
                none.stretch.avg,
                two.response_ms.avg / none.response_ms.avg,
                two.stretch.avg / none.stretch.avg,
            ));
        }
        out
    }
}

/// The suite functions' names, modules and inputs.
fn suite() -> Vec<(&'static str, &'static [u8], &'static [u8])> {
    mote_guests::SUITE
        .iter()
        .map(|f| (f.name, f.wasm, f.default_input))
        .collect()
}

/// Deploys the suite on `node` with limits no call reaches, as the burst experiment does.
fn deploy(node: &Served) -> anyhow::Result<()> {
    let api = NodeApi::new(node.url())?;
    let params = DeployParams {
        timeout_ms: Some(mote_types::Limits::MAX_TIMEOUT_MS),
        memory_mb: Some(512),
        ..DeployParams::default()
    };
    for (name, wasm, _) in suite() {
        api.deploy(name, wasm, &params)
            .with_context(|| format!("deploying {name}"))?;
    }
    Ok(())
}

/// Calls `name` on `url` once; the time it took and the node that ran it. The burst's calls
/// and the idle times they are divided by are measured with this client.
fn call(
    agent: &ureq::Agent,
    url: &str,
    name: &str,
    input: &[u8],
) -> anyhow::Result<(Duration, Option<String>)> {
    let sent = Instant::now();
    let mut reply = agent.post(format!("{url}/v1/invoke/{name}")).send(input)?;
    let _ = reply.body_mut().read_to_vec()?;
    let took = sent.elapsed();
    if reply.status() != 200 {
        bail!("{name} answered {}", reply.status());
    }
    let node = reply
        .headers()
        .get("mote-node")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    Ok((took, node))
}

/// Waits until `node` runs every suite function, calling each until it answers (the first
/// call adopts it).
fn ready(agent: &ureq::Agent, node: &Served) -> anyhow::Result<()> {
    let start = Instant::now();
    for (name, _, input) in suite() {
        while call(agent, node.url(), name, input).is_err() {
            if start.elapsed() > Duration::from_secs(60) {
                bail!("{} did not get {name} within 60 s", node.url());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    Ok(())
}

/// Each function's median response time over three sequential calls on the idle `node`.
fn idle_times(agent: &ureq::Agent, node: &Served) -> anyhow::Result<BTreeMap<&'static str, f64>> {
    let mut idle = BTreeMap::new();
    for (name, _, input) in suite() {
        let mut times = Vec::new();
        for _ in 0..3 {
            times.push(call(agent, node.url(), name, input)?.0.as_secs_f64() * 1e3);
        }
        idle.insert(name, median(&times).context("no idle time")?);
    }
    Ok(idle)
}

/// Sends the burst `plan` to `url` and measures each call.
fn send(
    url: &str,
    plan: &[(Duration, usize)],
    idle_ms: &BTreeMap<&'static str, f64>,
) -> anyhow::Result<SetupFigures> {
    let suite = suite();
    let agent = agent(Duration::from_secs(600));
    let start = Instant::now();
    let results: Vec<anyhow::Result<(&'static str, Duration, Option<String>)>> =
        std::thread::scope(|s| {
            let handles: Vec<_> = plan
                .iter()
                .map(|&(offset, f)| {
                    if let Some(wait) = offset.checked_sub(start.elapsed()) {
                        std::thread::sleep(wait);
                    }
                    let (name, _, input) = suite[f];
                    let agent = agent.clone();
                    s.spawn(move || {
                        call(&agent, url, name, input).map(|(took, node)| (name, took, node))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a sender panicked"))
                .collect()
        });
    let (mut response, mut stretch, mut ran_on, mut failed) =
        (Vec::new(), Vec::new(), BTreeMap::new(), 0);
    for result in results {
        match result {
            Ok((name, took, node)) => {
                let ms = took.as_secs_f64() * 1e3;
                response.push(ms);
                stretch.push(ms / idle_ms[name].max(1e-3));
                *ran_on.entry(node.unwrap_or_default()).or_insert(0) += 1;
            }
            Err(_) => failed += 1,
        }
    }
    Ok(SetupFigures {
        calls: plan.len(),
        failed,
        response_ms: Distribution::of(&response),
        stretch: Distribution::of(&stretch),
        ran_on,
        handed_over: handed_over(&agent, url)?,
    })
}

/// The calls the node at `url` handed to peers that pulled them
/// (`mote_handed_over_calls_total`).
fn handed_over(agent: &ureq::Agent, url: &str) -> anyhow::Result<u64> {
    let metrics = agent
        .get(format!("{url}/metrics"))
        .call()?
        .body_mut()
        .read_to_string()?;
    let line = metrics
        .lines()
        .find_map(|l| l.strip_prefix("mote_handed_over_calls_total "))
        .context("no mote_handed_over_calls_total in /metrics")?;
    Ok(line.trim().parse::<f64>()? as u64)
}

/// Starts `nodes` nodes under `policy` sharing a fresh store in `dir`, pulling calls as
/// `pull` says, deploys the suite on the first and waits until every node runs it.
fn cluster(
    config: &ClusterBurstConfig,
    dir: &Path,
    policy: Policy,
    nodes: usize,
    pull: bool,
) -> anyhow::Result<(Served, Vec<Served>)> {
    let store = store(&config.mote)?;
    let policy = policy.as_str();
    // Pulling is `mote up`'s default; off, a node never asks.
    let args: &[&str] = match pull {
        true => &["--policy", policy],
        false => &["--policy", policy, "--pull-every-us", "0"],
    };
    let started = (1..=nodes)
        .map(|i| {
            let name = format!("n{i}");
            let data = dir.join(format!("{policy}-{nodes}-{pull}"));
            node(&config.mote, &data, &name, store.url(), args)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    deploy(&started[0])?;
    let agent = agent(Duration::from_secs(60));
    for node in &started {
        ready(&agent, node)?;
    }
    Ok((store, started))
}

/// Runs the comparison for every policy.
pub fn run(config: &ClusterBurstConfig) -> anyhow::Result<ClusterBurstReport> {
    let dir = tempfile::tempdir()?;
    let mut idle_ms = None;
    let mut policies = Vec::new();
    for &policy in &config.policies {
        let mut figures = Vec::new();
        for (nodes, pull) in [(1, true), (2, true), (2, false)] {
            let (_store, started) = cluster(config, dir.path(), policy, nodes, pull)?;
            let idle = match &idle_ms {
                Some(idle) => idle,
                None => idle_ms.insert(idle_times(&agent(Duration::from_secs(60)), &started[0])?),
            };
            let scale = load_scale(idle) * config.load.factor();
            let weights = vec![1; suite().len()];
            let plan = schedule(
                &weights,
                scale,
                1,
                config.intensity,
                config.window,
                config.seed,
            );
            figures.push(send(started[0].url(), &plan, idle)?);
        }
        let two_nodes_no_pull = figures.pop().expect("three set-ups");
        let two_nodes = figures.pop().expect("three set-ups");
        let one_node = figures.pop().expect("three set-ups");
        policies.push(PolicyFigures {
            policy: policy.as_str(),
            one_node,
            two_nodes,
            two_nodes_no_pull,
        });
    }
    Ok(ClusterBurstReport {
        intensity: config.intensity,
        window_s: config.window.as_secs_f64(),
        seed: config.seed,
        idle_ms: idle_ms.unwrap_or_default(),
        policies,
    })
}
