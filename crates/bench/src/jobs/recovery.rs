//! `mote bench jobs --recovery`: Canary jobs on slow and lost workers (docs/benchmarks/jobs.md,
//! "Slow and lost workers"), on `mote store` and 1-core `mote up` processes on loopback that
//! share one object directory.
//!
//! 1. Slowdown: `lr` on two nodes, each pinned to its own core (CPU affinity); half-way, three busy
//!    loops start on the second node's core. The iteration time over the run, sampled from the
//!    job's status, with rebalancing on and off (the runs alternate).
//! 2. Recovery: `lr` on three nodes with a snapshot every 10 iterations; the third node is
//!    killed (SIGKILL), or the first, the job's controller (the second takes the job over from
//!    its record). From the kill to the (new) controller's restore decision (detection), the
//!    restore itself (every worker loading its partitions), and from the kill until the
//!    iteration count passes the snapshot's again (running again).
//! 3. Snapshot cost: `lr` on two nodes with a snapshot every iteration against none, runs of 2
//!    and 2 + K iterations differenced: the added time per iteration over the bytes a snapshot
//!    stores, and the workers' own barrier-to-stored time over those bytes.

use crate::cluster::{node, store};
use crate::node_api::NodeApi;
use crate::plot::{ErrorBar, Line, Panel, error_bar_png};
use crate::results::{cpu_model, load_average};
use anyhow::{Context, bail};
use mote_api::{JobState, JobStatus, MigrationStatus, RunRequest, SnapshotState, WorkerChoice};
use mote_testbed::cpu::{pin_command, pin_process};
use mote_testbed::{KilledOnDrop, Served};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

/// Width of the bins of the slowdown's time series: four of the workers' progress reports,
/// whose iteration counts the status gives.
const BIN: Duration = Duration::from_secs(1);

/// How the benchmark runs.
#[derive(Clone, Debug)]
pub struct RecoveryConfig {
    /// The `mote` binary whose nodes are measured.
    pub mote: PathBuf,
    /// LR points of the slowdown runs.
    pub slowdown_points: u64,
    /// Length of a slowdown run; the slowdown starts half-way.
    pub slowdown_run: Duration,
    /// LR points of the recovery runs.
    pub recovery_points: u64,
    /// LR points of the snapshot-cost runs.
    pub snapshot_points: u64,
    /// Iterations differenced in the snapshot-cost runs.
    pub snapshot_iterations: u64,
    /// Repetitions of each measurement.
    pub reps: usize,
    /// A smoke run: small sizes, one repetition.
    pub smoke: bool,
    /// The command line, for the report.
    pub command: String,
}

impl RecoveryConfig {
    /// The full benchmark.
    pub fn full(mote: PathBuf, command: String) -> Self {
        Self {
            mote,
            slowdown_points: 200_000,
            slowdown_run: Duration::from_secs(16),
            recovery_points: 100_000,
            snapshot_points: 1_000_000,
            snapshot_iterations: 10,
            reps: 3,
            smoke: false,
            command,
        }
    }

    /// A short run of every part.
    pub fn smoke(mote: PathBuf, command: String) -> Self {
        Self {
            slowdown_points: 50_000,
            slowdown_run: Duration::from_secs(6),
            recovery_points: 20_000,
            snapshot_points: 20_000,
            snapshot_iterations: 3,
            reps: 1,
            smoke: true,
            ..Self::full(mote, command)
        }
    }
}

/// One slowdown run.
#[derive(Clone, Debug, Serialize)]
pub struct SlowdownRun {
    /// Whether the controller moved partitions.
    pub rebalance: bool,
    /// When the busy loops started, s since the job ran.
    pub slowed_at_s: f64,
    /// Mean iteration time over bins of [`BIN`], ms, by bin start (s since the job ran); `None`
    /// for a bin with no iteration finished.
    pub series: Vec<(f64, Option<f64>)>,
    /// Iteration time before the slowdown (the bins from 1 s until it), ms.
    pub before_ms: f64,
    /// Iteration time over the run's last quarter, ms.
    pub after_ms: f64,
    /// The controller's moves, as its status lists them.
    pub migrations: Vec<MigrationStatus>,
}

/// One kill of a worker, or of the controller's node.
#[derive(Clone, Debug, Serialize)]
pub struct RecoveryRun {
    /// What was killed: `worker n3`, or `controller n1` (then n2 takes the job over).
    pub killed: String,
    /// From the kill to the (new) controller's decision to restore, ms.
    pub detect_ms: f64,
    /// The restore: every remaining worker loading its partitions from the snapshot, ms.
    pub restore_ms: f64,
    /// From the kill until the iteration count passed the snapshot's again, ms.
    pub running_again_ms: f64,
    /// Iterations done when the worker was killed, and the snapshot's.
    pub killed_at_iteration: u64,
    /// The iteration rolled back to.
    pub restored_iteration: u64,
    /// How the controller found out.
    pub reason: String,
}

/// What a snapshot costs.
#[derive(Clone, Debug, Serialize)]
pub struct SnapshotCost {
    /// Bytes one snapshot stores (every partition's image).
    pub bytes: u64,
    /// Per iteration without snapshots, ms (median over the repetitions).
    pub iteration_ms_without: f64,
    /// Per iteration with a snapshot every iteration, ms.
    pub iteration_ms_with: f64,
    /// The added time per iteration, per GB stored, s.
    pub added_s_per_gb: f64,
    /// The workers' barrier-to-stored time (the longest worker's), median over the snapshots,
    /// ms.
    pub write_ms: f64,
    /// That per GB, s.
    pub write_s_per_gb: f64,
    /// Every repetition's (without, with) iteration times, ms.
    pub runs: Vec<(f64, f64)>,
}

/// The whole report.
#[derive(Clone, Debug, Serialize)]
pub struct RecoveryReport {
    /// The command that produced it.
    pub command: String,
    /// When it ran (UTC, RFC 3339).
    pub date: String,
    /// Cores, CPU model and load.
    pub cpu: String,
    /// Load at the start and the end.
    pub load: (String, String),
    /// Whether it was a smoke run.
    pub smoke: bool,
    /// Slowdown runs, alternating rebalancing on and off.
    pub slowdown: Vec<SlowdownRun>,
    /// Kills.
    pub recovery: Vec<RecoveryRun>,
    /// Snapshot cost.
    pub snapshot: SnapshotCost,
}

/// A store and 1-core nodes `n1`... sharing an object directory with the bucket `snapshots`,
/// and a client of `n1`'s API, the controller of every job.
struct Nodes {
    api: NodeApi,
    /// A client of `n2`'s API, once `n1` is gone.
    second: Option<NodeApi>,
    nodes: Vec<Option<Served>>,
    _store: Served,
    _dir: tempfile::TempDir,
}

impl Nodes {
    fn start(mote: &Path, n: usize) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let objects = dir.path().join("objects");
        std::fs::create_dir_all(objects.join("snapshots"))?;
        let store = store(mote)?;
        let objects = objects
            .to_str()
            .context("a UTF-8 temporary path")?
            .to_owned();
        let nodes = (1..=n)
            .map(|i| {
                let args = ["--examples", "--objects-dir", &objects];
                node(mote, dir.path(), &format!("n{i}"), store.url(), &args).map(Some)
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let started = Instant::now();
        let api = NodeApi::new(nodes[0].as_ref().expect("started").url())?;
        loop {
            let view = api.answer(|api| api.cluster())?;
            if view.nodes.len() >= n {
                break;
            }
            if started.elapsed() > Duration::from_secs(30) {
                let seen: Vec<String> = view
                    .nodes
                    .iter()
                    .map(|m| format!("{} ({})", m.name, m.state))
                    .collect();
                bail!(
                    "{} saw fewer than {n} nodes after 30 s: {}",
                    view.node,
                    seen.join(", ")
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Self {
            api,
            second: None,
            nodes,
            _store: store,
            _dir: dir,
        })
    }
}

fn start_job(api: &NodeApi, request: &RunRequest) -> anyhow::Result<String> {
    let status = api
        .answer(|api| api.run_job(request))
        .with_context(|| format!("starting {} with {:?}", request.function, request.args))?;
    Ok(status.id)
}

fn cancel(api: &NodeApi, id: &str) -> anyhow::Result<()> {
    api.answer(|api| api.cancel_job(id))?;
    Ok(())
}

/// `lr` on `workers` workers, 4 partitions per core, over `points` generated points for
/// `iterations` iterations; rebalancing and snapshots as the server has them by default.
fn lr_job(points: u64, iterations: u64, workers: usize) -> RunRequest {
    let args = vec![
        ("generate".into(), points.to_string()),
        ("seed".into(), "1".into()),
        ("iterations".into(), iterations.to_string()),
    ];
    RunRequest {
        workers: Some(WorkerChoice::Count(workers)),
        partitions_per_core: Some(4),
        ..RunRequest::new("lr", args)
    }
}

/// A job's state and error, for a message.
fn ended(s: &JobStatus) -> String {
    format!(
        "{:?}: {}",
        s.state,
        s.error.as_deref().unwrap_or("no error given")
    )
}

/// Polls job `id` until `done`; an error if it ended otherwise or took over two minutes.
fn wait(
    api: &NodeApi,
    id: &str,
    what: &str,
    done: impl Fn(&JobStatus) -> bool,
) -> anyhow::Result<JobStatus> {
    let started = Instant::now();
    loop {
        let s = api.answer(|api| api.job(id))?;
        if done(&s) {
            return Ok(s);
        }
        if s.state != JobState::Running {
            bail!("job {id} ended before {what}: {}", ended(&s));
        }
        if started.elapsed() > Duration::from_secs(120) {
            bail!(
                "job {id}: waited 2 minutes for {what}: iteration {}, {} snapshots, {} restores",
                s.iteration,
                s.snapshots.len(),
                s.restores.len()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `n` busy loops on `core`, killed when dropped.
fn busy_loops(core: usize, n: usize) -> anyhow::Result<Vec<KilledOnDrop>> {
    (0..n)
        .map(|_| {
            let mut command = Command::new("sh");
            command.args(["-c", "while :; do :; done"]);
            pin_command(&mut command, core)?;
            let child = command.spawn().context("starting a busy loop")?;
            Ok(KilledOnDrop::new(child))
        })
        .collect()
}

fn slowdown(config: &RecoveryConfig, rebalance: bool) -> anyhow::Result<SlowdownRun> {
    let nodes = Nodes::start(&config.mote, 2)?;
    for (i, served) in nodes.nodes.iter().enumerate() {
        let pid = served.as_ref().expect("started").pid();
        pin_process(pid, i).with_context(|| format!("pinning node {pid} to CPU {i}"))?;
    }
    let job = RunRequest {
        rebalance: Some(rebalance),
        ..lr_job(config.slowdown_points, 100_000_000, 2)
    };
    let id = start_job(&nodes.api, &job)?;
    let run = config.slowdown_run;
    let mut samples: Vec<(f64, f64)> = Vec::new();
    let mut burners = None;
    let mut slowed_at_s = 0.0;
    let status = loop {
        let s = nodes.api.answer(|api| api.job(&id))?;
        if s.state != JobState::Running {
            bail!("the slowdown's job {id} ended: {}", ended(&s));
        }
        let at = s.elapsed_ms as f64 / 1000.0;
        samples.push((at, s.iteration as f64));
        if burners.is_none() && at >= run.as_secs_f64() / 2.0 {
            burners = Some(busy_loops(1, 3)?);
            slowed_at_s = at;
        }
        if at >= run.as_secs_f64() {
            break s;
        }
        std::thread::sleep(Duration::from_millis(25));
    };
    cancel(&nodes.api, &id)?;
    drop(burners);
    let bin = BIN.as_secs_f64();
    let bins = (run.as_secs_f64() / bin).ceil() as usize;
    // The iteration count at `t`: the last sample's at or before it. A bin's rate is the change
    // of that count across the bin, so every bin spans its whole width.
    let count_at = |t: f64| {
        samples
            .iter()
            .take_while(|x| x.0 <= t)
            .last()
            .map_or(0.0, |x| x.1)
    };
    let mut series = Vec::with_capacity(bins);
    for b in 0..bins {
        let (from, to) = (b as f64 * bin, (b + 1) as f64 * bin);
        let (a, z) = (count_at(from), count_at(to));
        let ms = (a > 0.0 && z > a).then(|| (to - from) * 1000.0 / (z - a));
        series.push((from, ms));
    }
    let mean_between = |from: f64, to: f64| {
        let in_range: Vec<(f64, f64)> = samples
            .iter()
            .copied()
            .filter(|x| x.0 >= from && x.0 <= to && x.1 > 0.0)
            .collect();
        match (in_range.first(), in_range.last()) {
            (Some(a), Some(z)) if z.1 > a.1 => (z.0 - a.0) * 1000.0 / (z.1 - a.1),
            _ => f64::NAN,
        }
    };
    let end = samples.last().map_or(0.0, |x| x.0);
    Ok(SlowdownRun {
        rebalance,
        slowed_at_s,
        series,
        before_ms: mean_between(1.0, slowed_at_s),
        after_ms: mean_between(end - (end - slowed_at_s) / 2.0, end),
        migrations: status.migrations,
    })
}

/// Kills the third worker's node, or with `controller` the first's, which controls the job;
/// then the second node, the first live worker by name, takes it over.
fn recovery(config: &RecoveryConfig, controller: bool) -> anyhow::Result<RecoveryRun> {
    let mut nodes = Nodes::start(&config.mote, 3)?;
    let job = RunRequest {
        snapshot_every: Some(10),
        snapshot_to: Some("snapshots/bench".into()),
        rebalance: Some(false),
        ..lr_job(config.recovery_points, 100_000_000, 3)
    };
    let id = start_job(&nodes.api, &job)?;
    let s = wait(&nodes.api, &id, "a complete snapshot", |s| {
        s.snapshots
            .iter()
            .any(|x| x.state == SnapshotState::Complete)
            && s.elapsed_ms > 2000
    })?;
    let sampled = Instant::now();
    let killed_at_iteration = s.iteration;
    let elapsed_at_sample = s.elapsed_ms as f64;
    let killed = Instant::now();
    let (victim, api) = match controller {
        false => {
            nodes.nodes[2] = None;
            ("worker n3", &nodes.api)
        }
        true => {
            nodes.nodes[0] = None;
            nodes.second = Some(NodeApi::new(
                nodes.nodes[1].as_ref().expect("n2 runs").url(),
            )?);
            ("controller n1", nodes.second.as_ref().expect("just made"))
        }
    };
    let kill_ms = elapsed_at_sample + (killed - sampled).as_secs_f64() * 1000.0;
    let s = wait(api, &id, "the restore", |s| {
        s.restores.first().is_some_and(|r| r.ms.is_some()) && (!controller || s.controller == "n2")
    })?;
    let restore = s.restores[0].clone();
    // A job taken over counts its time anew from the takeover, where the restore is decided.
    let detect_ms = match controller {
        false => restore.at_ms as f64 - kill_ms,
        true => {
            let since_takeover = s.elapsed_ms as f64 - restore.at_ms as f64;
            killed.elapsed().as_secs_f64() * 1000.0 - since_takeover
        }
    };
    let restored_iteration = restore.iteration;
    wait(api, &id, "the iterations to pass the snapshot's", |s| {
        s.iteration > restored_iteration
    })?;
    let running_again_ms = killed.elapsed().as_secs_f64() * 1000.0;
    cancel(api, &id)?;
    Ok(RecoveryRun {
        killed: victim.to_owned(),
        detect_ms,
        restore_ms: restore.ms.map_or(f64::NAN, |ms| ms as f64),
        running_again_ms,
        killed_at_iteration,
        restored_iteration,
        reason: restore.reason,
    })
}

/// One run of `iterations` iterations: its time from running to its end, ms, and its status.
fn timed_run(api: &NodeApi, job: &RunRequest) -> anyhow::Result<(f64, JobStatus)> {
    let id = start_job(api, job)?;
    let s = wait(api, &id, "the end", |s| s.state != JobState::Running)?;
    if s.state != JobState::Succeeded {
        bail!("job {id} {}", ended(&s));
    }
    Ok((s.elapsed_ms as f64, s))
}

fn snapshot_cost(config: &RecoveryConfig) -> anyhow::Result<SnapshotCost> {
    let nodes = Nodes::start(&config.mote, 2)?;
    let k = config.snapshot_iterations;
    let job = |iterations: u64, snapshots: bool| RunRequest {
        snapshot_every: snapshots.then_some(1),
        snapshot_to: snapshots.then(|| "snapshots/cost".to_owned()),
        rebalance: Some(false),
        ..lr_job(config.snapshot_points, iterations, 2)
    };
    let mut runs = Vec::new();
    let mut bytes = 0u64;
    let mut writes = Vec::new();
    for _ in 0..config.reps {
        let mut per = [0.0f64; 2];
        for (n, snapshots) in [false, true].into_iter().enumerate() {
            let short = timed_run(&nodes.api, &job(2, snapshots))?.0;
            let (long, s) = timed_run(&nodes.api, &job(2 + k, snapshots))?;
            per[n] = (long - short) / k as f64;
            if snapshots {
                for snap in &s.snapshots {
                    bytes = bytes.max(snap.bytes);
                    writes.push(snap.write_ms);
                }
            }
        }
        runs.push((per[0], per[1]));
    }
    let without_ms = median(runs.iter().map(|r| r.0).collect());
    let with_ms = median(runs.iter().map(|r| r.1).collect());
    let write_ms = median(writes);
    let gb = bytes as f64 / 1e9;
    Ok(SnapshotCost {
        bytes,
        iteration_ms_without: without_ms,
        iteration_ms_with: with_ms,
        added_s_per_gb: (with_ms - without_ms) / 1000.0 / gb,
        write_ms,
        write_s_per_gb: write_ms / 1000.0 / gb,
        runs,
    })
}

/// Runs the benchmark and writes `recovery.json`, `recovery.md` and `slowdown.png` to `out`.
pub fn run(
    config: &RecoveryConfig,
    out: &Path,
    progress: &mut dyn FnMut(&str),
) -> anyhow::Result<RecoveryReport> {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    if cores < 2 {
        bail!("the slowdown runs pin two nodes to cores 0 and 1: this machine has {cores}");
    }
    let load_start = load_average();
    let date = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let mut slow = Vec::new();
    for rep in 0..config.reps {
        // Alternate which goes first, so that a drift in the machine's speed hits both.
        let order = if rep % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for rebalance in order {
            let run = slowdown(config, rebalance)?;
            progress(&format!(
                "slowdown, rebalance {}: {:.1} ms per iteration before, {:.1} ms after ({} moves)",
                if rebalance { "on" } else { "off" },
                run.before_ms,
                run.after_ms,
                run.migrations.len()
            ));
            slow.push(run);
        }
    }
    let mut kills = Vec::new();
    for _ in 0..config.reps {
        for controller in [false, true] {
            let run = recovery(config, controller)?;
            progress(&format!(
                "kill of {}: detected after {:.0} ms, restored in {:.0} ms, running again after {:.0} ms ({})",
                run.killed, run.detect_ms, run.restore_ms, run.running_again_ms, run.reason
            ));
            kills.push(run);
        }
    }
    let snapshot = snapshot_cost(config)?;
    progress(&format!(
        "snapshot of {:.1} MB: +{:.2} ms per iteration ({:.2} s/GB); stored in {:.1} ms ({:.2} s/GB)",
        snapshot.bytes as f64 / 1e6,
        snapshot.iteration_ms_with - snapshot.iteration_ms_without,
        snapshot.added_s_per_gb,
        snapshot.write_ms,
        snapshot.write_s_per_gb
    ));
    let report = RecoveryReport {
        command: config.command.clone(),
        date,
        cpu: format!("{cores} cores, {}", cpu_model()),
        load: (load_start, load_average()),
        smoke: config.smoke,
        slowdown: slow,
        recovery: kills,
        snapshot,
    };
    write(&report, out)?;
    Ok(report)
}

/// The median of the finite `values`, NaN if there is none.
fn median(values: Vec<f64>) -> f64 {
    crate::stats::median(&values).unwrap_or(f64::NAN)
}

impl RecoveryReport {
    /// The tables of `recovery.md`.
    pub fn table(&self) -> String {
        let mut t = String::new();
        let side = |on: bool| -> Vec<&SlowdownRun> {
            self.slowdown.iter().filter(|r| r.rebalance == on).collect()
        };
        t.push_str("| rebalancing | iteration before the slowdown, ms | after, ms | after / before | moves |\n|---|---|---|---|---|\n");
        for on in [true, false] {
            let runs = side(on);
            let before = median(runs.iter().map(|r| r.before_ms).collect());
            let after = median(runs.iter().map(|r| r.after_ms).collect());
            let moves: Vec<String> = runs
                .iter()
                .map(|r| r.migrations.len().to_string())
                .collect();
            t.push_str(&format!(
                "| {} | {before:.1} | {after:.1} | {:.2} | {} |\n",
                if on { "on" } else { "off" },
                after / before,
                moves.join(", ")
            ));
        }
        t.push_str("\n| kill | of | detected after, ms | restore, ms | running again after, ms | killed at iteration | rolled back to | how |\n|---|---|---|---|---|---|---|---|\n");
        for (n, r) in self.recovery.iter().enumerate() {
            t.push_str(&format!(
                "| {} | {} | {:.0} | {:.0} | {:.0} | {} | {} | {} |\n",
                n + 1,
                r.killed,
                r.detect_ms,
                r.restore_ms,
                r.running_again_ms,
                r.killed_at_iteration,
                r.restored_iteration,
                if r.reason.contains("the controller's node") {
                    "its lease expired; n2 took the job over"
                } else if r.reason.contains("left the cluster") {
                    "its lease expired"
                } else if r.reason.contains("has not reported") {
                    "silent for 3 s"
                } else if r.reason.contains("could not be reached") {
                    "a peer could not reach it"
                } else {
                    "other"
                }
            ));
        }
        let s = &self.snapshot;
        t.push_str(&format!(
            "\n| snapshot | bytes | iteration without, ms | with a snapshot every iteration, ms | added, s/GB | stored in, ms | stored, s/GB |\n|---|---|---|---|---|---|---|\n| every iteration | {:.1} MB | {:.2} | {:.2} | {:.2} | {:.1} | {:.2} |\n",
            s.bytes as f64 / 1e6,
            s.iteration_ms_without,
            s.iteration_ms_with,
            s.added_s_per_gb,
            s.write_ms,
            s.write_s_per_gb
        ));
        t
    }
}

fn write(report: &RecoveryReport, out: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(out)?;
    std::fs::write(
        out.join("recovery.json"),
        serde_json::to_string_pretty(report)? + "\n",
    )?;
    let md = format!(
        "# Slow and lost workers: run of {}\n\n`{}`; {}; load {} at the start, {} at the end.\n\n{}",
        report.date,
        report.command,
        report.cpu,
        report.load.0,
        report.load.1,
        report.table()
    );
    std::fs::write(out.join("recovery.md"), md)?;
    // The first run of each kind, as a time series over shared bins.
    let first = |on: bool| report.slowdown.iter().find(|r| r.rebalance == on);
    let (Some(on), Some(off)) = (first(true), first(false)) else {
        return Ok(());
    };
    let bins = on.series.len().min(off.series.len());
    let labels: Vec<String> = on.series[..bins]
        .iter()
        .map(|(s, _)| format!("{s:.1}"))
        .collect();
    let categories: Vec<&str> = labels.iter().map(String::as_str).collect();
    let points = |run: &SlowdownRun| -> Vec<Option<ErrorBar>> {
        run.series[..bins]
            .iter()
            .map(|(_, ms)| {
                ms.map(|value| ErrorBar {
                    value,
                    low: value,
                    high: value,
                })
            })
            .collect()
    };
    let title = format!(
        "LR iteration time; 3 busy loops on the second worker's core from {:.1} s",
        on.slowed_at_s
    );
    error_bar_png(
        &out.join("slowdown.png"),
        "seconds since the job ran",
        &categories,
        &[Panel {
            title: &title,
            y_label: "ms per iteration",
            lines: &[
                Line {
                    label: "rebalancing on",
                    points: &points(on),
                },
                Line {
                    label: "rebalancing off (--no-rebalance)",
                    points: &points(off),
                },
            ],
            log_scale: false,
        }],
        (1300, 520),
    )
    .context("drawing slowdown.png")?;
    Ok(())
}
