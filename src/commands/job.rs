//! `mote job`: run a Canary job and watch it, list jobs, show one, cancel one. Each is an HTTP
//! request to the node that controls the job (`docs/jobs.md`). A job's error may quote what its
//! guest wrote, so it is shown escaped ([`Escaped`]).

use super::client::{Server, block_on};
use super::output::outln;
use super::progress::Progress;
use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use mote_api::{ApiClient, JobState, JobStatus, RunRequest, WorkerChoice};
use mote_types::Escaped;
use std::time::Duration;

/// `mote job ...`.
#[derive(Subcommand)]
pub enum JobCommand {
    /// Run a deployed job and wait for it to end, showing its progress on a terminal.
    Run(RunArgs),
    /// List the jobs the server started.
    Ls(ServerOnly),
    /// Show one job: its state, progress and workers.
    Status(IdArgs),
    /// Cancel a running job on every worker.
    Cancel(IdArgs),
}

/// Options of `mote job run`.
#[derive(Args)]
pub struct RunArgs {
    /// The deployed job function (`mote deploy NAME FILE`; `mote up --examples` deploys `lr`,
    /// `kmeans`, `pagerank`, `wordcount` and `sales`).
    job: String,
    /// The workers: a number (the first N nodes, this one first) or a comma-separated list of
    /// node names or URLs [default: every node of the cluster].
    #[arg(long)]
    workers: Option<String>,
    /// Partitions per worker core.
    #[arg(long, default_value_t = 10)]
    partitions_per_core: u32,
    /// An argument for the job, `K=V` (repeatable), such as `input=BUCKET/PREFIX`.
    #[arg(long = "arg", value_name = "K=V")]
    args: Vec<String>,
    /// Snapshot the partitions every N iterations of the job's loop, so that it survives a
    /// lost worker (needs --snapshot-to).
    #[arg(long, value_name = "N")]
    snapshot_every: Option<u64>,
    /// Where snapshots go: BUCKET/PREFIX in the nodes' object storage, which every worker must
    /// share (one --s3-endpoint, or one --objects-dir).
    #[arg(long, value_name = "BUCKET/PREFIX")]
    snapshot_to: Option<String>,
    /// Keep every partition where it started, even on a worker that runs markedly slower.
    #[arg(long)]
    no_rebalance: bool,
    /// Start the job and print its id without waiting for it.
    #[arg(long)]
    detach: bool,
    #[command(flatten)]
    server: Server,
}

/// Options of `mote job ls`.
#[derive(Args)]
pub struct ServerOnly {
    #[command(flatten)]
    server: Server,
}

/// Options of `mote job status` and `cancel`.
#[derive(Args)]
pub struct IdArgs {
    /// The job's id, as `mote job run` or `mote job ls` printed it.
    id: String,
    #[command(flatten)]
    server: Server,
}

/// Runs a `mote job` command.
pub fn run(command: JobCommand) -> anyhow::Result<()> {
    match command {
        JobCommand::Run(args) => run_job(args),
        JobCommand::Ls(args) => ls(args),
        JobCommand::Status(args) => {
            let api = args.server.api()?;
            let status = args.server.answer(api.job(&args.id))?;
            print_status(&status)
        }
        JobCommand::Cancel(args) => {
            let api = args.server.api()?;
            let status = args.server.answer(api.cancel_job(&args.id))?;
            outln!("job {} is {}", status.id, state_name(status.state));
            Ok(())
        }
    }
}

fn parse_workers(workers: Option<String>) -> Option<WorkerChoice> {
    let workers = workers?;
    Some(match workers.parse::<usize>() {
        Ok(n) => WorkerChoice::Count(n),
        Err(_) => WorkerChoice::List(workers.split(',').map(|s| s.trim().to_owned()).collect()),
    })
}

fn run_job(args: RunArgs) -> anyhow::Result<()> {
    let mut pairs = Vec::new();
    for a in &args.args {
        let Some((k, v)) = a.split_once('=') else {
            bail!("--arg {a}: write arguments as K=V");
        };
        pairs.push((k.to_owned(), v.to_owned()));
    }
    let request_body = RunRequest {
        function: args.job.clone(),
        workers: parse_workers(args.workers),
        partitions_per_core: Some(args.partitions_per_core),
        args: pairs,
        snapshot_every: args.snapshot_every,
        snapshot_to: args.snapshot_to,
        rebalance: Some(!args.no_rebalance),
    };
    let api = args.server.api()?;
    block_on(follow(&args.server, &api, &request_body, args.detach))?
}

/// Starts the job `request` asks for and, unless `detach`, follows it to its end.
async fn follow(
    server: &Server,
    api: &ApiClient,
    request: &RunRequest,
    detach: bool,
) -> anyhow::Result<()> {
    let mut status = api.run_job(request).await.map_err(|e| server.failed(e))?;
    if detach {
        outln!("{}", status.id);
        return Ok(());
    }
    eprintln!(
        "job {} started: {} partitions on {} workers",
        status.id,
        status.partitions,
        status.workers.len()
    );
    let progress = Progress::spinner(&format!("job {}: starting", status.id));
    while status.state == JobState::Running {
        tokio::time::sleep(Duration::from_millis(200)).await;
        status = api
            .job(&status.id)
            .await
            .map_err(|e| server.failed(e))
            .with_context(|| {
                format!(
                    "job {id} goes on, but this client cannot follow it; \
                 ask again with `mote job status {id}`",
                    id = status.id
                )
            })?;
        progress.set(&format!(
            "job {}: iteration {}  tasks {}  {:.0} tasks/s",
            status.id, status.iteration, status.tasks, status.tasks_per_s
        ));
    }
    drop(progress);
    match status.state {
        JobState::Succeeded => {
            outln!(
                "job {} succeeded: {} tasks in {:.3} s ({:.0} tasks/s), {} iterations",
                status.id,
                status.tasks,
                status.elapsed_ms as f64 / 1000.0,
                status.tasks_per_s,
                status.iteration
            );
            Ok(())
        }
        state => bail!(
            "job {} {}: {}",
            status.id,
            state_name(state),
            Escaped(&status.error.unwrap_or_default())
        ),
    }
}

fn ls(args: ServerOnly) -> anyhow::Result<()> {
    let api = args.server.api()?;
    let jobs = args.server.answer(api.jobs())?;
    if jobs.is_empty() {
        outln!("no jobs; start one with `mote job run JOB`");
        return Ok(());
    }
    outln!(
        "{:<16} {:<14} {:<10} {:>9} {:>10} {:>9} {:>8}",
        "ID",
        "JOB",
        "STATE",
        "WORKERS",
        "TASKS",
        "TASKS/S",
        "SECONDS"
    );
    for j in jobs {
        outln!(
            "{:<16} {:<14} {:<10} {:>9} {:>10} {:>9.0} {:>8.1}",
            j.id,
            j.function,
            state_name(j.state),
            j.workers.len(),
            j.tasks,
            j.tasks_per_s,
            j.elapsed_ms as f64 / 1000.0
        );
    }
    Ok(())
}

fn state_name(state: JobState) -> &'static str {
    match state {
        JobState::Running => "running",
        JobState::Succeeded => "succeeded",
        JobState::Failed => "failed",
        JobState::Cancelled => "cancelled",
    }
}

fn older(n: usize) -> String {
    match n {
        0 => String::new(),
        n => format!(", the latest; {n} older not listed"),
    }
}

fn print_status(s: &JobStatus) -> anyhow::Result<()> {
    outln!("job {} ({}): {}", s.id, s.function, state_name(s.state));
    if !s.controller.is_empty() {
        outln!("controller: {}", Escaped(&s.controller));
    }
    if let Some(e) = &s.error {
        outln!("error: {}", Escaped(e));
    }
    outln!(
        "{} partitions, iteration {}, {} tasks, {:.0} tasks/s, {:.1} s; scheduling {:.1}% of busy time",
        s.partitions,
        s.iteration,
        s.tasks,
        s.tasks_per_s,
        s.elapsed_ms as f64 / 1000.0,
        100.0 * s.scheduling_us as f64 / (s.task_us + s.scheduling_us).max(1) as f64
    );
    if s.generation > 0 {
        outln!(
            "restored {} times (generation {})",
            s.restores.len(),
            s.generation
        );
    }
    outln!(
        "{:<16} {:<26} {:>5} {:>6} {:>10} {:>10} {:>6} {:>6}  HOLDS",
        "WORKER",
        "URL",
        "CORES",
        "LIVE",
        "TASKS",
        "TASKS/S",
        "IDLE",
        "DONE"
    );
    for w in &s.workers {
        outln!(
            "{:<16} {:<26} {:>5} {:>6} {:>10} {:>10} {:>6} {:>6}  {} ({})",
            w.name,
            w.url,
            w.cores,
            if w.live { "yes" } else { "gone" },
            w.tasks,
            w.tasks_per_s.map_or("-".into(), |r| format!("{r:.0}")),
            w.idle_share
                .map_or("-".into(), |s| format!("{:.0}%", 100.0 * s)),
            w.done,
            w.partitions,
            if w.holds.is_empty() { "none" } else { &w.holds }
        );
    }
    if !s.migrations.is_empty() {
        outln!(
            "migrations (rebalance {}):",
            if s.rebalance { "on" } else { "off" }
        );
        for m in &s.migrations {
            let took = m.ms.map_or("moving".to_owned(), |ms| format!("{ms} ms"));
            outln!(
                "  at {:.1} s: {} partitions {} -> {}, {} KiB, {took}: {}",
                m.at_ms as f64 / 1000.0,
                m.partitions,
                m.from,
                m.to,
                m.bytes / 1024,
                m.reason
            );
        }
    }
    match (&s.snapshot_to, s.snapshot_every) {
        (Some(to), Some(every)) => {
            outln!(
                "snapshots every {every} iterations to {to}{}:",
                older(s.older_snapshots)
            );
            for snap in &s.snapshots {
                outln!(
                    "  iteration {}: {:?}, {}/{} partitions, {} KiB, stored in {:.1} ms{}",
                    snap.iteration,
                    snap.state,
                    snap.stored,
                    snap.of,
                    snap.bytes / 1024,
                    snap.write_ms,
                    snap.error
                        .as_ref()
                        .map_or(String::new(), |e| format!(" ({})", Escaped(e)))
                );
            }
        }
        _ => outln!("snapshots off (--snapshot-every N --snapshot-to BUCKET/PREFIX)"),
    }
    for r in &s.restores {
        let took = r.ms.map_or("restoring".to_owned(), |ms| {
            format!("running again after {ms} ms")
        });
        outln!(
            "restore at {:.1} s to iteration {}: {}; {took}",
            r.at_ms as f64 / 1000.0,
            r.iteration,
            r.reason
        );
    }
    if let Some(left) = &s.snapshots_left {
        outln!("{left}");
    }
    Ok(())
}
