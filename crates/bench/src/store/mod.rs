//! mote store against etcd, measured with etcd's own `benchmark` tool: the eventual-consistency
//! paper's Figure 2 (median latency with p10/p90 whiskers, and throughput, for clusters of 1, 3
//! and 5 nodes), with etcd 3.6.8 run side by side in the same run.
//!
//! This module owns the whole experiment: starting a cluster of either system on free loopback
//! ports with fresh data directories, waiting until every member answers, running
//! `benchmark put` and `benchmark range --consistency s` with every member as an endpoint,
//! parsing the tool's summary ([`BenchSummary::parse`]), stopping the cluster and checking that
//! its processes are gone, and turning the measurements into a table, the floors of the issue
//! and a figure ([`StoreReport`]).
//!
//! - Systems alternate: each cluster size runs etcd and mote store back to back, and which goes
//!   first alternates with the size and the repetition, so drift in the shared machine's speed
//!   hits both alike. Ratios (mote / etcd) are taken within a repetition, between the two
//!   back-to-back measurements, and then summarised over repetitions by their median.
//! - Both systems keep their data on disk with fsync (mote store's group commit, etcd's WAL), in
//!   temporary directories under [`StoreBenchConfig::work_dir`], removed after each cluster.
//! - The CPU time of the servers and of the benchmark client is read from `/proc` around each
//!   `benchmark` run, so the report shows where the machine's cores went.
//! - A cluster that fails to start, or a `benchmark` that fails, is recorded with its error and
//!   the experiment goes on; the caller decides what a failure means.
//!
//! Its modules: `config` says what to run ([`StoreBenchConfig`]); `parse` reads what
//! `benchmark` prints ([`BenchSummary`]); `cluster` starts, checks and stops a cluster of either
//! system; `machine` reads the load and describes the machine ([`Machine`]); `report` holds the
//! measurements ([`Measurement`]) and turns them into tables, floors and the figure
//! ([`StoreReport`]). This file holds the experiment's loop, with the CPU time of each run read
//! through `mote_testbed::cpu_time`, and the files it writes ([`run`]).

mod cluster;
mod config;
mod machine;
mod parse;
mod report;

pub use config::{Operation, RANGE_KEY, StoreBenchConfig, System};
pub use machine::Machine;
pub use parse::{BenchSummary, ParseError};
pub use report::{Aggregate, Floor, Measurement, StoreReport};

use crate::results::Outcome;
use crate::results::load_average;
use anyhow::Context;
use cluster::Cluster;
use machine::load_one;
use mote_testbed::cpu_time::{machine_busy, reaped_children_cpu};
use mote_testbed::{KilledOnDrop, last_lines};
use std::fs::File;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs the experiment as `command` and writes its results to `out`: the report (`report.md`,
/// which it returns), every measurement (`results.json`) and the figure (`figure2.png`; a
/// figure that cannot be drawn is reported to `progress` and left out). `progress` gets a line
/// as the experiment starts and one per measurement. Fails only if the tools are missing or a
/// directory is unusable; the outcome fails if a cluster or a run failed.
pub fn run(
    config: &StoreBenchConfig,
    out: &Path,
    command: String,
    mut progress: impl FnMut(&str),
) -> anyhow::Result<Outcome> {
    progress(&format!(
        "store: {} run(s) of sizes {:?}, {} requests each, etcd tools from {}; results in {}",
        config.runs,
        config.sizes,
        config.total,
        config.etcd_tools.display(),
        out.display()
    ));
    let report = measure(config, command, |m| progress(&report::progress_line(m)))?;
    let plot = "figure2.png";
    let plotted = match report.write_plot(&out.join(plot)) {
        Ok(()) => Some(plot),
        Err(e) => {
            progress(&format!("no figure: {e}"));
            None
        }
    };
    let markdown = report.markdown(plotted);
    std::fs::write(out.join("report.md"), &markdown).context("writing report.md")?;
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(&report)?,
    )
    .context("writing results.json")?;
    let failures = report.failures();
    let failure = match failures.is_empty() {
        true => None,
        false => Some(format!(
            "{} measurement(s) failed:\n{}",
            failures.len(),
            failures.join("\n")
        )),
    };
    Ok(Outcome {
        report: markdown,
        failure,
    })
}

/// Runs the experiment and reports each measurement to `progress` as it completes. Fails only
/// if the tools are missing or the work directory is unusable; failed clusters and runs are
/// recorded in the report.
fn measure(
    config: &StoreBenchConfig,
    command: String,
    mut progress: impl FnMut(&Measurement),
) -> anyhow::Result<StoreReport> {
    for tool in ["etcd", "etcdctl", "benchmark"] {
        anyhow::ensure!(
            config.tool(tool).is_file(),
            "no `{tool}` in {}: run scripts/etcd-tools, or pass --etcd-tools DIR",
            config.etcd_tools.display()
        );
    }
    anyhow::ensure!(
        config.mote.is_file(),
        "no mote binary at {}",
        config.mote.display()
    );
    anyhow::ensure!(config.runs > 0, "there must be at least one run");
    anyhow::ensure!(
        config.sizes.iter().all(|&n| n > 0),
        "cluster sizes must be positive"
    );
    std::fs::create_dir_all(&config.work_dir)?;
    let started = Instant::now();
    let mut machine = Machine::now(config);
    let mut measurements = Vec::new();
    for run in 0..config.runs {
        for (i, &size) in config.sizes.iter().enumerate() {
            let order = match (run + i) % 2 {
                0 => [System::Etcd, System::Mote],
                _ => [System::Mote, System::Etcd],
            };
            for (position, system) in order.into_iter().enumerate() {
                for m in measure_cluster(config, system, size, run, position) {
                    progress(&m);
                    measurements.push(m);
                }
            }
        }
    }
    machine.load_at_end = load_average();
    Ok(StoreReport {
        command,
        config: config.clone(),
        machine,
        elapsed_s: started.elapsed().as_secs_f64(),
        measurements,
    })
}

/// Starts `system` with `size` members, runs both operations, stops it: one measurement per
/// operation, failed ones included.
fn measure_cluster(
    config: &StoreBenchConfig,
    system: System,
    size: usize,
    run: usize,
    position: usize,
) -> Vec<Measurement> {
    let blank = |operation, error: String| Measurement {
        run,
        position,
        system,
        size,
        operation,
        summary: None,
        error: Some(error),
        server_cpu_s: 0.0,
        client_cpu_s: 0.0,
        other_cpu_s: 0.0,
        load_before: load_one(),
    };
    let cluster = match Cluster::start(config, system, size) {
        Ok(c) => c,
        Err(e) => {
            return Operation::ALL
                .iter()
                .map(|&op| blank(op, format!("{e:#}")))
                .collect();
        }
    };
    let mut out = Vec::new();
    for op in Operation::ALL {
        let load_before = load_one();
        let result = (|| {
            if op == Operation::Range {
                cluster.write_range_key(config)?;
            }
            let server_before = cluster.cpu_time();
            let client_before = reaped_children_cpu().unwrap_or_default();
            let machine_before = machine_busy().unwrap_or_default();
            let summary = run_benchmark(config, &cluster, op)?;
            let server = cluster.cpu_time().saturating_sub(server_before);
            let client = reaped_children_cpu()
                .unwrap_or_default()
                .saturating_sub(client_before);
            let machine = machine_busy()
                .unwrap_or_default()
                .saturating_sub(machine_before);
            let other = machine.saturating_sub(server + client);
            anyhow::Ok((summary, [server, client, other].map(|t| t.as_secs_f64())))
        })();
        out.push(match result {
            Ok((summary, [server_cpu_s, client_cpu_s, other_cpu_s])) => Measurement {
                run,
                position,
                system,
                size,
                operation: op,
                summary: Some(summary),
                error: None,
                server_cpu_s,
                client_cpu_s,
                other_cpu_s,
                load_before,
            },
            Err(e) => blank(op, format!("{e:#}")),
        });
    }
    if let Err(e) = cluster.stop() {
        for m in &mut out {
            let error = m.error.take().map_or(String::new(), |e| format!("{e}; "));
            m.error = Some(format!("{error}stopping the cluster: {e:#}"));
        }
    }
    out
}

/// Runs `benchmark` for `op` against every member and parses what it prints.
fn run_benchmark(
    config: &StoreBenchConfig,
    cluster: &Cluster,
    op: Operation,
) -> anyhow::Result<BenchSummary> {
    let name = format!("benchmark-{}", op.short());
    let stdout_path = cluster.dir().join(format!("{name}.out"));
    let stderr_path = cluster.dir().join(format!("{name}.err"));
    // The tool's output goes to files: its gRPC logging is thousands of lines, and a pipe
    // nobody reads while we wait would stall it.
    let child = Command::new(config.tool("benchmark"))
        .args(config.benchmark_args(&cluster.endpoints(), op))
        .stdin(Stdio::null())
        .stdout(File::create(&stdout_path)?)
        .stderr(File::create(&stderr_path)?)
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot start {}: {e}", config.tool("benchmark").display()))?;
    let mut child = KilledOnDrop::new(child);
    let deadline = Instant::now() + config.bench_timeout;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill_and_reap();
            anyhow::bail!(
                "benchmark {} took more than {:?}; stopped",
                op.short(),
                config.bench_timeout
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = std::fs::read_to_string(&stdout_path)?;
    if !status.success() {
        anyhow::bail!(
            "benchmark {} failed ({status}): {}",
            op.short(),
            last_lines(&stderr_path, 5)
        );
    }
    Ok(BenchSummary::parse(&stdout)?)
}
