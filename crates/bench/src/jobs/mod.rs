//! `mote bench jobs`: Canary jobs (docs/benchmarks/jobs.md), on real `mote up` processes on
//! loopback, each in a temporary data directory, killed when the benchmark ends.
//!
//! 1. The paper's Figure 4 on one core (`--cores 1`, 10 partitions): `busy` with many stages at
//!    several task lengths (`work`). A run's wall time per task is measured by differencing a
//!    short and a long run (so start-up and the end's report drop out). The cost of scheduling a
//!    task is the wall time per task of empty tasks (`work=0`), which counts entering and leaving
//!    the guest as scheduling, an upper bound; the paper's figure, the task rate one core sustains
//!    while the scheduler takes at most 10% of it, is `0.1e9 / that`. It is checked directly by
//!    running tasks 9 times that long. The executors' own counters (`scheduling_us`, `task_us`
//!    of the job's status) are reported beside it.
//! 2. Beside Ray, Dask and Spark (`scripts/bench-jobs-peers`, on the same machine and the same
//!    points file): the 2-core task rate of empty tasks, and one logistic-regression iteration.
//! 3. The LR iteration time: runs of 1 and 1 + K iterations, differenced, median of the
//!    repetitions; the input read from the node's object storage.
//! 4. The paper's Figure 8: LR iteration time and task rate against partitions per core.
//! 5. Two 1-core workers sharing a store against one: LR iteration time and `busy` task rate.
//!
//! `--recovery` runs [`recovery`] instead: slow and lost workers; `--sharing` runs [`sharing`]:
//! calls and a job on one node's cores; `--wordcount` runs [`wordcount`]: word count over Zipf
//! text, the SDK's typed operators against a hand-written shuffle and against the peers.
//!
//! Its modules: `figures` holds what is measured and the floors, `nodes` the `mote up` processes
//! and the jobs sent to them, `points` the LR input, `text` word count's, `report` the tables
//! and plots; this file holds what to run ([`JobsBenchConfig`]) and the experiments ([`run`]).

mod figures;
mod nodes;
pub mod points;
pub mod recovery;
mod report;
pub mod sharing;
mod text;
pub mod wordcount;

pub use figures::{
    CEILING_WORDCOUNT_OVER_SHUFFLE, Digest, FLOOR_OVER_PEERS, FLOOR_SPARK_LR,
    FLOOR_TASKS_PER_S_PER_CORE, FLOOR_WORDCOUNT_OVER_PEERS, JobsReport, LrPoint, Machine,
    PeerWordcount, ScaleOut, Validation, WordcountReport, WordcountRun, WorkPoint,
};

use crate::node_api::NodeApi;
use crate::results::load_average;
use anyhow::{Context, bail};
use mote_api::{JobStatus, RunRequest};
use nodes::{job, run_job, up};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

/// How the benchmark runs.
#[derive(Clone, Debug)]
pub struct JobsBenchConfig {
    /// The `mote` binary whose `mote up` is measured.
    pub mote: PathBuf,
    /// LR training points.
    pub points: u64,
    /// `scripts/bench-jobs-peers`, or `None` to skip the peers.
    pub peers: Option<PathBuf>,
    /// Repetitions of each measurement (the median is reported).
    pub reps: usize,
    /// LR iterations differenced (runs of 1 and 1 + this many).
    pub iterations: u64,
    /// `busy`'s `work` values of Figure 4.
    pub works: Vec<u64>,
    /// Partitions per core of Figure 8.
    pub partitions_per_core: Vec<u32>,
    /// How long the long run of a `busy` measurement lasts.
    pub busy_long: Duration,
    /// The peers' task-rate target (`--tasks`).
    pub peer_tasks: u64,
    /// A smoke run: small sizes, one repetition.
    pub smoke: bool,
    /// The command line, for the report.
    pub command: String,
}

impl JobsBenchConfig {
    /// The full benchmark.
    pub fn full(mote: PathBuf, peers: Option<PathBuf>, command: String) -> Self {
        Self {
            mote,
            points: 400_000,
            peers,
            reps: 3,
            // Runs of 1 and 11 iterations differed by as little as nothing and as much as 480
            // ms on this 2-core VM (one run's start-up against another's): 50 iterations put
            // about a second between them.
            iterations: 50,
            works: vec![0, 250, 500, 1000, 2000, 4000, 8000, 32_000, 128_000],
            partitions_per_core: vec![1, 2, 4, 8, 16],
            busy_long: Duration::from_millis(1500),
            peer_tasks: 20_000,
            smoke: false,
            command,
        }
    }

    /// A short run of every part.
    pub fn smoke(mote: PathBuf, peers: Option<PathBuf>, command: String) -> Self {
        Self {
            points: 20_000,
            reps: 1,
            iterations: 3,
            works: vec![0, 2000],
            partitions_per_core: vec![1, 4],
            busy_long: Duration::from_millis(200),
            peer_tasks: 2000,
            smoke: true,
            ..Self::full(mote, peers, command)
        }
    }
}

/// The median of `values`; NaN if there are none.
fn median(values: &[f64]) -> f64 {
    crate::stats::median(values).unwrap_or(f64::NAN)
}

/// Steady-state wall time per task of `job` (whose `stages` argument is appended), by
/// differencing a short and a long run, `reps` times; and the long runs' statuses.
fn per_task(
    api: &NodeApi,
    job: &RunRequest,
    long: Duration,
    reps: usize,
) -> anyhow::Result<(Vec<f64>, Vec<JobStatus>)> {
    let with_stages = |stages: u64| RunRequest {
        args: job
            .args
            .iter()
            .cloned()
            .chain([("stages".into(), stages.to_string())])
            .collect(),
        ..job.clone()
    };
    // A probe sizes the runs; its start-up makes it overestimate, so the runs come out shorter.
    let probe = run_job(api, &with_stages(200))?;
    let per_stage_ms = probe.elapsed_ms.max(1) as f64 / 200.0;
    let long_stages = ((long.as_secs_f64() * 1e3 / per_stage_ms) as u64).max(1000);
    let short_stages = long_stages / 5;
    let (mut ns, mut statuses) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        let short = run_job(api, &with_stages(short_stages))?;
        let long = run_job(api, &with_stages(long_stages))?;
        let tasks = long.tasks.saturating_sub(short.tasks).max(1) as f64;
        let ms = long.elapsed_ms.saturating_sub(short.elapsed_ms) as f64;
        ns.push(ms * 1e6 / tasks);
        statuses.push(long);
    }
    Ok((ns, statuses))
}

fn busy(workers: Option<usize>, work: u64) -> RunRequest {
    job("busy", workers, 10, vec![("work".into(), work.to_string())])
}

/// LR iterations: runs of 1 and `1 + iterations` iterations, differenced, `reps` times.
fn lr(
    api: &NodeApi,
    workers: Option<usize>,
    partitions_per_core: u32,
    data: &[(&str, String)],
    iterations: u64,
    reps: usize,
) -> anyhow::Result<LrPoint> {
    let request = |k: u64| {
        let args = data
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .chain([("iterations".into(), k.to_string())])
            .collect();
        job("lr", workers, partitions_per_core, args)
    };
    let (mut times, mut rates, mut per_iteration, mut partitions) = (vec![], vec![], 0.0, 0);
    for _ in 0..reps {
        let short = run_job(api, &request(1))?;
        let long = run_job(api, &request(1 + iterations))?;
        let ms = long.elapsed_ms.saturating_sub(short.elapsed_ms) as f64;
        let tasks = long.tasks.saturating_sub(short.tasks) as f64;
        times.push(ms / iterations as f64);
        rates.push(tasks / (ms.max(1.0) / 1e3));
        per_iteration = tasks / iterations as f64;
        partitions = long.partitions;
    }
    Ok(LrPoint {
        partitions_per_core,
        partitions,
        iteration_ms: median(&times),
        iteration_ms_runs: times,
        tasks_per_s: median(&rates),
        tasks_per_s_runs: rates,
        tasks_per_iteration: per_iteration,
    })
}

/// Runs the benchmark, writes `results.json`, `report.md` and the plots to `out`, and returns
/// the report.
pub fn run(
    config: &JobsBenchConfig,
    out: &std::path::Path,
    progress: &mut dyn FnMut(&str),
) -> anyhow::Result<JobsReport> {
    let started = Instant::now();
    let date = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let load_at_start = load_average();
    let nproc = std::thread::available_parallelism().map_or(1, |n| n.get());
    progress(&format!(
        "mote bench jobs: {nproc} cores, load {load_at_start}, {} points",
        config.points
    ));
    let dir = tempfile::tempdir()?;
    let points_file = dir.path().join("points.csv");
    points::write(&points_file, config.points, 1)?;
    let reps = config.reps.max(1);

    // 1. Figure 4 on one core.
    let node = up(&config.mote, dir.path(), "one", 1, None)?;
    let mut runs: Vec<(u64, Vec<f64>, Vec<JobStatus>)> = Vec::new();
    for &work in &config.works {
        let (ns, long) = per_task(node.api(), &busy(None, work), config.busy_long, reps)
            .with_context(|| format!("busy work={work}: {}", node.log_tail()))?;
        progress(&format!(
            "figure 4: work={work}: {:.0} ns per task ({:?})",
            median(&ns),
            ns.iter().map(|n| n.round()).collect::<Vec<_>>()
        ));
        runs.push((work, ns, long));
    }
    let Some((0, empty, _)) = runs.first() else {
        bail!("Figure 4 needs work=0 first");
    };
    let empty_ns = median(empty);
    let counters = |s: &JobStatus| {
        let t = s.tasks.max(1) as f64;
        (s.task_us as f64 * 1e3 / t, s.scheduling_us as f64 * 1e3 / t)
    };
    let figure4: Vec<WorkPoint> = runs
        .iter()
        .map(|(work, ns, long)| {
            let ns_per_task = median(ns);
            let (task, sched): (Vec<f64>, Vec<f64>) = long.iter().map(counters).unzip();
            let (task, sched) = (median(&task), median(&sched));
            WorkPoint {
                work: *work,
                ns_per_task,
                ns_per_task_runs: ns.clone(),
                tasks_per_s: 1e9 / ns_per_task,
                task_us: (ns_per_task - empty_ns) / 1e3,
                scheduler_share: empty_ns / ns_per_task,
                counter_task_ns: task,
                counter_scheduling_ns: sched,
                counter_scheduler_share: sched / (task + sched),
            }
        })
        .collect();
    let all_sched: Vec<f64> = runs
        .iter()
        .flat_map(|(_, _, long)| long.iter().map(|s| counters(s).1))
        .collect();
    let longest = figure4.last().expect("work=0 at least");
    let step_ns = match longest.work {
        0 => 1.7, // no longer point: about what a step takes on a current core
        w => (longest.ns_per_task - empty_ns) / w as f64,
    };
    let validation_work = ((9.0 * empty_ns / step_ns.max(1e-3)).round() as u64).max(1);
    let (ns, long) = per_task(
        node.api(),
        &busy(None, validation_work),
        config.busy_long,
        reps,
    )?;
    let ns_per_task = median(&ns);
    let counter_shares: Vec<f64> = long
        .iter()
        .map(|s| {
            let (t, s) = counters(s);
            s / (t + s)
        })
        .collect();
    let validation = Validation {
        work: validation_work,
        ns_per_task,
        tasks_per_s: 1e9 / ns_per_task,
        task_us: (ns_per_task - empty_ns) / 1e3,
        scheduler_share: empty_ns / ns_per_task,
        counter_scheduler_share: median(&counter_shares),
    };
    progress(&format!(
        "validation: work={validation_work}: {:.0} tasks/s, tasks of {:.2} µs",
        validation.tasks_per_s, validation.task_us
    ));
    drop(node);

    // 2-4. The 2-core node: the comparison's task rate, LR from the file, Figure 8.
    let node = up(&config.mote, dir.path(), "two", 2, None)?;
    let bucket = node.data.join("objects/bench/lr");
    std::fs::create_dir_all(&bucket)?;
    std::fs::copy(&points_file, bucket.join("points.csv"))?;
    let (ns, _) = per_task(node.api(), &busy(None, 0), config.busy_long, reps)
        .with_context(|| format!("busy on 2 cores: {}", node.log_tail()))?;
    let tasks_per_s_2core = 1e9 / median(&ns);
    progress(&format!("2 cores: {tasks_per_s_2core:.0} empty tasks/s"));
    let from_file = [("input", "bench/lr".to_owned())];
    let lr_file = lr(node.api(), None, 10, &from_file, config.iterations, reps)
        .with_context(|| format!("lr from the file: {}", node.log_tail()))?;
    progress(&format!(
        "lr from the file: {:.2} ms per iteration, {:.0} tasks/s",
        lr_file.iteration_ms, lr_file.tasks_per_s
    ));
    let generated = [
        ("generate", config.points.to_string()),
        ("seed", "1".to_owned()),
    ];
    let mut figure8 = Vec::new();
    for &ppc in &config.partitions_per_core {
        let point = lr(node.api(), None, ppc, &generated, config.iterations, reps)
            .with_context(|| format!("lr at {ppc} partitions per core: {}", node.log_tail()))?;
        progress(&format!(
            "figure 8: {ppc} partitions per core: {:.2} ms per iteration, {:.0} tasks/s",
            point.iteration_ms, point.tasks_per_s
        ));
        figure8.push(point);
    }
    drop(node);

    // 5. Two 1-core workers sharing a store, against one.
    let store = crate::cluster::store(&config.mote)?;
    let n1 = up(&config.mote, dir.path(), "n1", 1, Some(store.url()))?;
    let n2 = up(&config.mote, dir.path(), "n2", 1, Some(store.url()))?;
    n1.wait_for_nodes(2)?;
    let scale = |workers: usize| -> anyhow::Result<(LrPoint, f64, f64)> {
        let lr = lr(
            n1.api(),
            Some(workers),
            10,
            &generated,
            config.iterations,
            reps,
        )?;
        let (empty, _) = per_task(n1.api(), &busy(Some(workers), 0), config.busy_long, reps)?;
        let (work, _) = per_task(
            n1.api(),
            &busy(Some(workers), validation_work),
            config.busy_long,
            reps,
        )?;
        Ok((lr, 1e9 / median(&empty), 1e9 / median(&work)))
    };
    let (lr_one, busy_one, work_one) =
        scale(1).with_context(|| format!("one worker: {} | {}", n1.log_tail(), n2.log_tail()))?;
    let (lr_two, busy_two, work_two) =
        scale(2).with_context(|| format!("two workers: {} | {}", n1.log_tail(), n2.log_tail()))?;
    let scale_out = ScaleOut {
        lr_speedup: lr_one.iteration_ms / lr_two.iteration_ms,
        lr_one,
        lr_two,
        busy_one_tasks_per_s: busy_one,
        busy_two_tasks_per_s: busy_two,
        busy_speedup: busy_two / busy_one,
        busy_work_one_tasks_per_s: work_one,
        busy_work_two_tasks_per_s: work_two,
        busy_work: validation_work,
    };
    progress(&format!(
        "two workers: lr {:.2} vs {:.2} ms, busy {busy_two:.0} vs {busy_one:.0} tasks/s",
        scale_out.lr_two.iteration_ms, scale_out.lr_one.iteration_ms
    ));
    drop((n1, n2, store));

    // The peers, last, with mote stopped.
    let peers = match &config.peers {
        None => None,
        Some(script) => {
            progress(&format!("peers: {} (minutes)", script.display()));
            Some(run_peers(script, &points_file, config).unwrap_or_else(|e| {
                progress(&format!("peers failed: {e:#}"));
                serde_json::json!({ "error": format!("{e:#}") })
            }))
        }
    };
    let peer = |key: &str| peers.as_ref().and_then(|p| p[key].as_f64());
    let (ray, dask, spark) = (
        peer("ray_tasks_per_s"),
        peer("dask_tasks_per_s"),
        peer("spark_tasks_per_s"),
    );
    let best = [("ray", ray), ("dask", dask), ("spark", spark)]
        .into_iter()
        .filter_map(|(n, r)| Some((n, r?)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let spark_lr = peer("spark_lr_iteration_ms");
    let scheduling_ns_per_task = empty_ns;
    let tasks_per_s_per_core = 0.1e9 / scheduling_ns_per_task;
    let report = JobsReport {
        command: config.command.clone(),
        date,
        machine: Machine::at_end(nproc, load_at_start),
        smoke: config.smoke,
        points: config.points,
        reps,
        iterations: config.iterations,
        tasks_per_s_per_core,
        scheduling_ns_per_task,
        scheduling_ns_per_task_counters: median(&all_sched),
        meets_floor_tasks_per_s_per_core: tasks_per_s_per_core >= FLOOR_TASKS_PER_S_PER_CORE,
        figure4,
        validation,
        tasks_per_s_2core,
        lr_iteration_ms: lr_file.iteration_ms,
        lr_tasks_per_s: lr_file.tasks_per_s,
        lr: lr_file.clone(),
        figure8,
        scale_out,
        ray_tasks_per_s: ray,
        dask_tasks_per_s: dask,
        spark_tasks_per_s: spark,
        spark_lr_iteration_ms: spark_lr,
        ray_lr_iteration_ms: peer("ray_lr_iteration_ms"),
        dask_lr_iteration_ms: peer("dask_lr_iteration_ms"),
        best_peer: best.map(|(n, _)| n.to_owned()),
        tasks_over_best_peer: best.map(|(_, r)| tasks_per_s_2core / r),
        spark_lr_over_mote: spark_lr.map(|s| s / lr_file.iteration_ms),
        peers,
        bench_s: started.elapsed().as_secs_f64(),
    };
    report::write(&report, out)?;
    Ok(report)
}

/// Runs the peers script on the points file and returns the JSON object it printed.
fn run_peers(
    script: &std::path::Path,
    points: &std::path::Path,
    config: &JobsBenchConfig,
) -> anyhow::Result<serde_json::Value> {
    let mut args: Vec<std::ffi::OsString> = vec!["--points".into(), points.into()];
    args.extend(
        [
            "--partitions".into(),
            "20".into(),
            "--iterations".into(),
            config.iterations.to_string(),
            "--tasks".into(),
            config.peer_tasks.to_string(),
        ]
        .map(std::ffi::OsString::from),
    );
    run_script(script, &args)
}

/// Runs the peers script with `args` and returns the JSON object it printed last.
fn run_script(
    script: &std::path::Path,
    args: &[std::ffi::OsString],
) -> anyhow::Result<serde_json::Value> {
    let output = std::process::Command::new(script)
        .args(args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .with_context(|| format!("{} printed no JSON ({})", script.display(), output.status))?;
    let value: serde_json::Value = serde_json::from_str(line)?;
    if !output.status.success() {
        bail!("{} exited with {}: {line}", script.display(), output.status);
    }
    Ok(value)
}

/// `scripts/bench-jobs-peers` of the repository: from the current directory, else from where
/// this crate was built.
pub fn find_peers_script() -> anyhow::Result<PathBuf> {
    let relative = "scripts/bench-jobs-peers";
    let candidates = [
        PathBuf::from(relative),
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(relative),
    ];
    candidates
        .into_iter()
        .find(|p| p.is_file())
        .with_context(|| {
            format!("{relative} not found: run `mote bench jobs` from the repository's root, or pass --no-peers")
        })
}
