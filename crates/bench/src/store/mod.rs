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
//! Its modules: `parse` reads what `benchmark` prints ([`BenchSummary`]); `cluster` starts,
//! checks and stops a cluster of either system; `machine` reads CPU time and load from `/proc`
//! and describes the machine ([`Machine`]); `report` turns the measurements into tables, floors
//! and the figure ([`StoreReport`]). This file holds what to run ([`StoreBenchConfig`]), the
//! experiment's loop and the files it writes ([`run`]).

mod cluster;
mod machine;
mod parse;
mod report;

pub use machine::Machine;
pub use parse::{BenchSummary, ParseError};
pub use report::{Aggregate, Floor, StoreReport};

use crate::results::Outcome;
use crate::results::load_average;
use anyhow::Context;
use cluster::{Cluster, last_lines};
use machine::{children_cpu_ticks, load_one, machine_busy_ticks, ticks_to_s};
use mote_testbed::KilledOnDrop;
use serde::Serialize;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The key the range benchmark reads; it is written (with a value of the put's size) through
/// every member before the range run, so every read finds it.
pub const RANGE_KEY: &str = "mote-bench-range";

/// The store under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum System {
    /// mote store replicas (`mote store`).
    Mote,
    /// etcd members.
    Etcd,
}

impl System {
    /// Its name in tables and legends.
    pub fn name(self) -> &'static str {
        match self {
            System::Mote => "mote store",
            System::Etcd => "etcd",
        }
    }
}

/// The request `benchmark` sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Operation {
    /// `benchmark put`.
    Put,
    /// `benchmark range KEY --consistency s`.
    Range,
}

impl Operation {
    /// Both, in the order they run on a cluster.
    pub const ALL: [Operation; 2] = [Operation::Put, Operation::Range];

    /// Its name in tables and legends.
    pub fn name(self) -> &'static str {
        match self {
            Operation::Put => "put",
            Operation::Range => "range (serializable)",
        }
    }

    pub(super) fn short(self) -> &'static str {
        match self {
            Operation::Put => "put",
            Operation::Range => "range",
        }
    }
}

/// What to run.
#[derive(Clone, Debug, Serialize)]
pub struct StoreBenchConfig {
    /// The `mote` binary whose `mote store` is measured.
    pub mote: PathBuf,
    /// The directory holding etcd's `etcd`, `etcdctl` and `benchmark`.
    pub etcd_tools: PathBuf,
    /// Cluster sizes, in the order they run.
    pub sizes: Vec<usize>,
    /// Repetitions of the whole sequence.
    pub runs: usize,
    /// Requests of each `benchmark` run (`--total`), for put and range alike.
    pub total: u64,
    /// gRPC connections of the benchmark client (`--conns`).
    pub conns: u32,
    /// Concurrent clients of the benchmark client (`--clients`).
    pub clients: u32,
    /// `put --key-size`.
    pub key_size: u32,
    /// `put --val-size` (and the size of the value the range reads).
    pub val_size: u32,
    /// `put --key-space-size`: with `--sequential-keys`, put `i` writes key `i % this`; the
    /// tool's default, 1, has every put overwrite the same key (as in etcd's documented
    /// benchmark command and the issue's).
    pub key_space_size: u64,
    /// Where the clusters' temporary data directories go.
    pub work_dir: PathBuf,
    /// How long a cluster may take to answer after it is started.
    pub start_timeout: Duration,
    /// How long one `benchmark` run may take before it is stopped and counted as failed.
    pub bench_timeout: Duration,
}

impl StoreBenchConfig {
    /// The full experiment: 1, 3 and 5 nodes, 3 repetitions of 50,000 requests, 100 clients on
    /// 100 connections (3 to 4 minutes on two cores).
    pub fn full(mote: PathBuf, etcd_tools: PathBuf) -> Self {
        Self {
            mote,
            etcd_tools,
            sizes: vec![1, 3, 5],
            runs: 3,
            total: 50_000,
            conns: 100,
            clients: 100,
            key_size: 8,
            val_size: 256,
            key_space_size: 1,
            work_dir: std::env::temp_dir(),
            start_timeout: Duration::from_secs(30),
            bench_timeout: Duration::from_secs(300),
        }
    }

    /// A short run of every part (the test command): 1 and 3 nodes, one repetition of 1,000
    /// requests. Its figures are not the benchmark's.
    pub fn smoke(mote: PathBuf, etcd_tools: PathBuf) -> Self {
        Self {
            sizes: vec![1, 3],
            runs: 1,
            total: 1_000,
            bench_timeout: Duration::from_secs(60),
            ..Self::full(mote, etcd_tools)
        }
    }

    /// Where `scripts/etcd-tools` installs the tools: `${ETCD_TOOLS_DIR:-target/etcd-v3.6.8}/bin`.
    pub fn default_etcd_tools() -> PathBuf {
        let dir = std::env::var_os("ETCD_TOOLS_DIR")
            .map_or_else(|| PathBuf::from("target/etcd-v3.6.8"), PathBuf::from);
        dir.join("bin")
    }

    pub(super) fn tool(&self, name: &str) -> PathBuf {
        self.etcd_tools.join(name)
    }

    /// The arguments of `benchmark` for `op` against `endpoints` (comma-separated).
    pub fn benchmark_args(&self, endpoints: &str, op: Operation) -> Vec<String> {
        let mut args: Vec<String> = vec![
            "--endpoints".into(),
            endpoints.into(),
            "--conns".into(),
            self.conns.to_string(),
            "--clients".into(),
            self.clients.to_string(),
            // Full precision: without it latencies are printed to 0.1 ms.
            "--precise".into(),
        ];
        match op {
            Operation::Put => {
                args.extend(
                    [
                        "put",
                        "--total",
                        &self.total.to_string(),
                        "--key-size",
                        &self.key_size.to_string(),
                        "--val-size",
                        &self.val_size.to_string(),
                        "--sequential-keys",
                    ]
                    .map(String::from),
                );
                if self.key_space_size != 1 {
                    args.extend(["--key-space-size".into(), self.key_space_size.to_string()]);
                }
            }
            Operation::Range => args.extend(
                [
                    "range",
                    RANGE_KEY,
                    "--consistency",
                    "s",
                    "--total",
                    &self.total.to_string(),
                ]
                .map(String::from),
            ),
        }
        args
    }
}

/// One `benchmark` run of one system at one size.
#[derive(Clone, Debug, Serialize)]
pub struct Measurement {
    /// The repetition, from 0.
    pub run: usize,
    /// Whether this system ran first (0) or second (1) at this size in this repetition.
    pub position: usize,
    /// The store.
    pub system: System,
    /// Its members.
    pub size: usize,
    /// The request.
    pub operation: Operation,
    /// What `benchmark` reported; `None` if the run (or the cluster) failed.
    pub summary: Option<BenchSummary>,
    /// Why it failed.
    pub error: Option<String>,
    /// CPU seconds the cluster's processes used during the run.
    pub server_cpu_s: f64,
    /// CPU seconds the `benchmark` process used.
    pub client_cpu_s: f64,
    /// CPU seconds every other process on the machine used meanwhile (other engineers' builds
    /// and tests on a shared machine): all busy CPU time minus the two above.
    pub other_cpu_s: f64,
    /// The machine's one-minute load average just before the run.
    pub load_before: f64,
}

impl Measurement {
    pub(super) fn throughput(&self) -> Option<f64> {
        self.summary.as_ref().map(|s| s.requests_per_s)
    }

    pub(super) fn median_ms(&self) -> Option<f64> {
        self.summary.as_ref()?.percentile_ms(50.0)
    }
}

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
            let server_before = cluster.cpu_ticks();
            let client_before = children_cpu_ticks();
            let machine_before = machine_busy_ticks();
            let summary = run_benchmark(config, &cluster, op)?;
            let server = cluster.cpu_ticks().saturating_sub(server_before);
            let client = children_cpu_ticks().saturating_sub(client_before);
            let machine = machine_busy_ticks().saturating_sub(machine_before);
            let other = machine.saturating_sub(server + client);
            anyhow::Ok((summary, [server, client, other].map(ticks_to_s)))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn benchmark_arguments_follow_the_issue() {
        let config = StoreBenchConfig::full("mote".into(), "tools".into());
        assert_eq!(
            config.benchmark_args("a:1,b:2", Operation::Put).join(" "),
            "--endpoints a:1,b:2 --conns 100 --clients 100 --precise put --total 50000 --key-size 8 --val-size 256 --sequential-keys"
        );
        assert_eq!(
            config.benchmark_args("a:1", Operation::Range)[7..].join(" "),
            "range mote-bench-range --consistency s --total 50000"
        );
        let distinct = StoreBenchConfig {
            key_space_size: 20_000,
            ..config
        };
        assert!(
            distinct
                .benchmark_args("a:1", Operation::Put)
                .ends_with(&["--key-space-size".into(), "20000".into()])
        );
    }
}
