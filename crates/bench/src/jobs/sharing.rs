//! `mote bench jobs --sharing`: calls and a job on one node's cores (docs/benchmarks/jobs.md,
//! "Calls beside a job"). One `mote up --cores 2` node per build measured (this binary, and
//! `--against` another, alternated round by round), each round:
//!
//! 1. Calls alone: `hello` from one client thread at a steady rate, latency measured at the
//!    client; the node's and the client's CPU time over the window, which is the share of the
//!    machine the calls take (the client shares the node's cores, as the job does).
//! 2. The job alone: `lr` on the node, its iterations per second over a window.
//! 3. Both: the same calls while the same job runs: the calls' latency and the job's rate.
//!
//! The floors: the calls' p99 with the job within 3x their p99 alone, and the job's rate with
//! the calls at least its rate alone less the share the calls take (and a margin for this
//! machine's swing, [`RATE_MARGIN`]). The nodes inherit the environment, so
//! `MOTE_JOB_IDLE=off mote bench jobs --sharing` measures nodes whose job threads run at
//! normal priority, and `MOTE_JOB_SHARE=50` nodes that keep half their cores for jobs.

use crate::node_api::NodeApi;
use crate::results::cpu_model;
use anyhow::{Context, bail};
use mote_api::{JobState, RunRequest, WorkerChoice};
use mote_testbed::Launch;
use mote_testbed::cpu_time::{ProcessTicks, clock_ticks_per_second, process_cpu};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// The calls' p99 beside a job may be at most this many times their p99 alone.
pub const FLOOR_P99_RATIO: f64 = 3.0;

/// What the job's rate may lose beyond the calls' share, for this machine's swing.
pub const RATE_MARGIN: f64 = 0.05;

/// How the benchmark runs.
#[derive(Clone, Debug)]
pub struct SharingConfig {
    /// The builds measured: a name and its `mote` binary; the first is the one under test.
    pub builds: Vec<(String, PathBuf)>,
    /// Calls per second the client sends.
    pub rate: u32,
    /// Length of each window.
    pub window: Duration,
    /// LR training points.
    pub points: u64,
    /// Rounds, each build once per round.
    pub rounds: usize,
    /// The command line, for the report.
    pub command: String,
}

/// One build's figures in one round.
#[derive(Clone, Debug, Serialize)]
pub struct SharingRound {
    /// The build.
    pub build: String,
    /// The round.
    pub round: usize,
    /// Calls' p50 and p99 alone, in µs.
    pub alone_p50_us: f64,
    /// The p99 alone.
    pub alone_p99_us: f64,
    /// Calls' p50 beside the job, in µs.
    pub with_job_p50_us: f64,
    /// The p99 beside the job.
    pub with_job_p99_us: f64,
    /// Calls sent in each window.
    pub calls: usize,
    /// The share of the machine's cores the calls took alone (node and client CPU).
    pub calls_share: f64,
    /// The job's iterations per second alone.
    pub job_alone_per_s: f64,
    /// The job's iterations per second beside the calls.
    pub job_with_calls_per_s: f64,
}

impl SharingRound {
    /// The calls' p99 beside the job over their p99 alone.
    pub fn p99_ratio(&self) -> f64 {
        self.with_job_p99_us / self.alone_p99_us
    }

    /// The job's rate beside the calls over its rate alone.
    pub fn job_ratio(&self) -> f64 {
        self.job_with_calls_per_s / self.job_alone_per_s
    }
}

/// What the benchmark measured.
#[derive(Clone, Debug, Serialize)]
pub struct SharingReport {
    /// The command.
    pub command: String,
    /// When, in seconds since the Unix epoch.
    pub unix_s: u64,
    /// The CPU.
    pub cpu: String,
    /// Calls per second, window length in seconds, LR points.
    pub rate: u32,
    /// Window length, in seconds.
    pub window_s: f64,
    /// LR points.
    pub points: u64,
    /// Every round of every build, in the order run.
    pub rounds: Vec<SharingRound>,
}

/// Runs the benchmark, the nodes' data and logs under `out`.
pub fn run(
    config: &SharingConfig,
    out: &Path,
    progress: &mut dyn FnMut(&str),
) -> anyhow::Result<SharingReport> {
    let mut rounds = Vec::new();
    for round in 0..config.rounds {
        // Alternate the order, so that whatever the second run of a round pays falls on both.
        let mut order: Vec<&(String, PathBuf)> = config.builds.iter().collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for (name, mote) in order {
            progress(&format!("sharing: round {round}, {name}"));
            let dir = out.join(format!("{name}-{round}"));
            rounds.push(measure(config, name, mote, round, &dir)?);
        }
    }
    Ok(SharingReport {
        command: config.command.clone(),
        unix_s: SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        cpu: cpu_model(),
        rate: config.rate,
        window_s: config.window.as_secs_f64(),
        points: config.points,
        rounds,
    })
}

fn measure(
    config: &SharingConfig,
    build: &str,
    mote: &Path,
    round: usize,
    dir: &Path,
) -> anyhow::Result<SharingRound> {
    std::fs::create_dir_all(dir)?;
    let served = Launch::mote_up(mote, dir)
        .args(["--node", "n1", "--examples", "--cores", "2"])
        .log(dir.join("node.log"))
        .start()?;
    let api = NodeApi::new(served.url())?;
    let invoke = format!("{}/v1/invoke/hello", served.url());
    let agent = crate::cluster::agent(Duration::from_secs(30));
    // Warm the function and the connection.
    for _ in 0..200 {
        call(&agent, &invoke)?;
    }
    let cpu = || -> anyhow::Result<Duration> {
        let node = process_cpu(served.pid()).context("the node's CPU time")?;
        let own = ProcessTicks::own().context("the client's CPU time")?;
        let tick = clock_ticks_per_second().context("the clock tick")?;
        Ok(node + Duration::from_secs_f64((own.utime + own.stime) as f64 / tick as f64))
    };
    let before = cpu()?;
    let begun = Instant::now();
    let alone = paced_calls(&agent, &invoke, config.rate, config.window)?;
    let spent = cpu()? - before;
    let calls_share = spent.as_secs_f64() / (begun.elapsed().as_secs_f64() * 2.0);

    let request = lr(config.points);
    let job = api
        .answer(|api| api.run_job(&request))
        .context("starting lr")?;
    let iteration = |api: &NodeApi| -> anyhow::Result<(Instant, u64)> {
        let s = api.answer(|a| a.job(&job.id))?;
        if s.state != JobState::Running {
            bail!("lr ended before the windows did: {:?}", s.error);
        }
        Ok((Instant::now(), s.iteration))
    };
    // Past its load stage and first iterations.
    std::thread::sleep(config.window / 2);
    let a = iteration(&api)?;
    std::thread::sleep(config.window);
    let b = iteration(&api)?;
    let with_job = paced_calls(&agent, &invoke, config.rate, config.window)?;
    let c = iteration(&api)?;
    api.answer(|a| a.cancel_job(&job.id))?;
    let per_s = |from: (Instant, u64), to: (Instant, u64)| {
        (to.1 - from.1) as f64 / (to.0 - from.0).as_secs_f64()
    };
    Ok(SharingRound {
        build: build.to_owned(),
        round,
        alone_p50_us: quantile(&alone, 0.5),
        alone_p99_us: quantile(&alone, 0.99),
        with_job_p50_us: quantile(&with_job, 0.5),
        with_job_p99_us: quantile(&with_job, 0.99),
        calls: alone.len(),
        calls_share,
        job_alone_per_s: per_s(a, b),
        job_with_calls_per_s: per_s(b, c),
    })
}

/// An `lr` job on the node's two cores that outlasts the windows.
fn lr(points: u64) -> RunRequest {
    let args = [("generate", points), ("seed", 1), ("iterations", 1_000_000)]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.to_string()))
        .collect();
    RunRequest {
        workers: Some(WorkerChoice::Count(1)),
        ..RunRequest::new("lr", args)
    }
}

fn call(agent: &ureq::Agent, url: &str) -> anyhow::Result<()> {
    let mut response = agent.post(url).send(&b"bench"[..])?;
    let body = response.body_mut().read_to_vec()?;
    if response.status() != 200 {
        bail!(
            "a call to {url} answered {}: {}",
            response.status(),
            String::from_utf8_lossy(&body)
        );
    }
    Ok(())
}

/// Calls `url` at `rate` per second for `window`, one at a time; each one's latency in µs.
fn paced_calls(
    agent: &ureq::Agent,
    url: &str,
    rate: u32,
    window: Duration,
) -> anyhow::Result<Vec<f64>> {
    let gap = Duration::from_secs(1) / rate.max(1);
    let start = Instant::now();
    let mut latencies = Vec::new();
    let mut next = start;
    while start.elapsed() < window {
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        }
        let sent = Instant::now();
        call(agent, url)?;
        latencies.push(sent.elapsed().as_secs_f64() * 1e6);
        next += gap;
    }
    Ok(latencies)
}

/// The `q` quantile of `values` (nearest rank).
fn quantile(values: &[f64], q: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        n => sorted[((q * n as f64).ceil() as usize).clamp(1, n) - 1],
    }
}

impl SharingReport {
    /// The report as tables: every round, then each build's medians and the floors.
    pub fn table(&self) -> String {
        let mut out = format!(
            "calls beside a job: hello at {}/s from one client, lr over {} points, {:.0} s windows, one 2-core node\n{}\n",
            self.rate, self.points, self.window_s, self.command
        );
        out.push_str(
            "build        round  alone p50/p99 µs   with job p50/p99 µs  p99 ratio  calls' share  lr it/s alone  with calls  ratio\n",
        );
        for r in &self.rounds {
            out.push_str(&format!(
                "{:<12} {:>5}  {:>8.0} {:>8.0}   {:>8.0} {:>9.0}  {:>9.2}  {:>11.1}%  {:>13.2}  {:>10.2}  {:>5.2}\n",
                r.build,
                r.round,
                r.alone_p50_us,
                r.alone_p99_us,
                r.with_job_p50_us,
                r.with_job_p99_us,
                r.p99_ratio(),
                r.calls_share * 100.0,
                r.job_alone_per_s,
                r.job_with_calls_per_s,
                r.job_ratio(),
            ));
        }
        let mut builds: Vec<&str> = self.rounds.iter().map(|r| r.build.as_str()).collect();
        builds.sort_unstable();
        builds.dedup();
        for build in builds {
            let of = |f: fn(&SharingRound) -> f64| {
                let v: Vec<f64> = self
                    .rounds
                    .iter()
                    .filter(|r| r.build == build)
                    .map(f)
                    .collect();
                crate::stats::median(&v).unwrap_or(f64::NAN)
            };
            let (p99, job, share) = (
                of(SharingRound::p99_ratio),
                of(SharingRound::job_ratio),
                of(|r| r.calls_share),
            );
            let holds = |ok: bool| if ok { "holds" } else { "MISSED" };
            out.push_str(&format!(
                "{build}: median p99 ratio {p99:.2} (floor <= {FLOOR_P99_RATIO}: {}), job rate ratio {job:.2} against 1 - calls' share {:.2} - {RATE_MARGIN} ({})\n",
                holds(p99 <= FLOOR_P99_RATIO),
                1.0 - share,
                holds(job >= 1.0 - share - RATE_MARGIN),
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_by_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), 50.0);
        assert_eq!(quantile(&v, 0.99), 99.0);
        assert_eq!(quantile(&[7.0], 0.99), 7.0);
        assert!(quantile(&[], 0.5).is_nan());
    }
}
