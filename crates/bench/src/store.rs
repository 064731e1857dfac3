//! mote store against etcd, measured with etcd's own `benchmark` tool: the eventual-consistency
//! paper's Figure 2 (median latency with p10/p90 whiskers, and throughput, for clusters of 1, 3
//! and 5 nodes), with etcd 3.6.8 run side by side in the same run.
//!
//! This module owns the whole experiment: starting a cluster of either system on free loopback
//! ports with fresh data directories ([`Cluster`]), waiting until every member answers, running
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

use crate::plot::{ErrorBar, Line, Panel, PlotError, error_bar_png};
use crate::stats::median;
use serde::Serialize;
use std::fmt::Write as _;
use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

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

    fn short(self) -> &'static str {
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

    fn tool(&self, name: &str) -> PathBuf {
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

/// What `benchmark` printed at the end of a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BenchSummary {
    /// Successful requests per second over the run (`Requests/sec`).
    pub requests_per_s: f64,
    /// The run's length in seconds (`Total`).
    pub total_s: f64,
    /// Latencies in milliseconds.
    pub fastest_ms: f64,
    /// The slowest request, ms.
    pub slowest_ms: f64,
    /// The mean, ms.
    pub average_ms: f64,
    /// The standard deviation, ms.
    pub stddev_ms: f64,
    /// The latency distribution: (percentile, ms), as printed (10, 25, 50, 75, 90, 95, 99,
    /// 99.9).
    pub percentiles: Vec<(f64, f64)>,
    /// Failed requests (the `Error distribution` section), with their messages.
    pub errors: u64,
    /// The distinct error messages.
    pub error_messages: Vec<String>,
}

/// Why `benchmark`'s output could not be read.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ParseError {
    /// The output has no `Requests/sec` line: every request failed, or the tool did not run.
    #[error("benchmark printed no summary (no `Requests/sec` line){}", errors_suffix(.0))]
    NoSummary(Vec<String>),
    /// A number could not be read.
    #[error("cannot read the number in benchmark's line `{0}`")]
    BadNumber(String),
}

fn errors_suffix(errors: &[String]) -> String {
    match errors.is_empty() {
        true => String::new(),
        false => format!("; its errors: {}", errors.join("; ")),
    }
}

impl BenchSummary {
    /// Reads the summary `benchmark` prints on stdout: the `Summary:` block (times in seconds),
    /// the `Latency distribution:` block (`10% in 0.0118 secs.`, or `in 11.8 ms.` in newer
    /// versions) and the `Error distribution:` block (`[count]<TAB>message`), ignoring the
    /// histogram and anything else.
    pub fn parse(output: &str) -> Result<Self, ParseError> {
        let mut summary = BenchSummary::default();
        let mut have_rate = false;
        let mut in_errors = false;
        for line in output.lines() {
            let line = line.trim();
            if line.is_empty() {
                in_errors = false;
                continue;
            }
            if line == "Error distribution:" {
                in_errors = true;
                continue;
            }
            if in_errors {
                if let Some((count, message)) =
                    line.strip_prefix('[').and_then(|rest| rest.split_once(']'))
                {
                    let count: u64 = count
                        .parse()
                        .map_err(|_| ParseError::BadNumber(line.into()))?;
                    summary.errors += count;
                    summary
                        .error_messages
                        .push(format!("{count} x {}", message.trim()));
                }
                continue;
            }
            if let Some((key, value)) = line.split_once(':') {
                let seconds = || seconds(value).ok_or_else(|| ParseError::BadNumber(line.into()));
                match key {
                    "Total" => summary.total_s = seconds()?,
                    "Slowest" => summary.slowest_ms = seconds()? * 1e3,
                    "Fastest" => summary.fastest_ms = seconds()? * 1e3,
                    "Average" => summary.average_ms = seconds()? * 1e3,
                    "Stddev" => summary.stddev_ms = seconds()? * 1e3,
                    "Requests/sec" => {
                        summary.requests_per_s = value
                            .trim()
                            .parse()
                            .map_err(|_| ParseError::BadNumber(line.into()))?;
                        have_rate = true;
                    }
                    _ => {}
                }
                continue;
            }
            if let Some((pct, latency)) = line.split_once("% in ") {
                let (Ok(pct), Some(ms)) = (pct.parse::<f64>(), latency_ms(latency)) else {
                    return Err(ParseError::BadNumber(line.into()));
                };
                summary.percentiles.push((pct, ms));
            }
        }
        if !have_rate {
            return Err(ParseError::NoSummary(summary.error_messages));
        }
        Ok(summary)
    }

    /// The latency at `pct` percent, in ms, if it was printed (the tool omits zeros).
    pub fn percentile_ms(&self, pct: f64) -> Option<f64> {
        self.percentiles
            .iter()
            .find(|(p, _)| (p - pct).abs() < 1e-9)
            .map(|&(_, ms)| ms)
    }
}

/// `0.0118 secs.` → 0.0118.
fn seconds(text: &str) -> Option<f64> {
    text.trim().strip_suffix("secs.")?.trim().parse().ok()
}

/// `0.0118 secs.` or `11.8 ms.` → milliseconds.
fn latency_ms(text: &str) -> Option<f64> {
    let text = text.trim().trim_end_matches('.');
    if let Some(ms) = text.strip_suffix("ms") {
        ms.trim().parse().ok()
    } else {
        Some(text.strip_suffix("secs")?.trim().parse::<f64>().ok()? * 1e3)
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
    fn throughput(&self) -> Option<f64> {
        self.summary.as_ref().map(|s| s.requests_per_s)
    }

    fn median_ms(&self) -> Option<f64> {
        self.summary.as_ref()?.percentile_ms(50.0)
    }
}

/// The machine and the moment, for the report.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// The CPU's model name.
    pub cpu: String,
    /// Cores this process may run on.
    pub cores: usize,
    /// `uname -r`.
    pub kernel: String,
    /// Total memory, GiB.
    pub memory_gib: f64,
    /// The first line of `etcd --version`.
    pub etcd_version: String,
    /// When the experiment started (UTC).
    pub started: String,
    /// The load average (1, 5, 15 minutes) when it started.
    pub load_at_start: String,
    /// The load average when it ended.
    pub load_at_end: String,
}

/// Everything measured, and what it says.
#[derive(Clone, Debug, Serialize)]
pub struct StoreReport {
    /// The command that produced it.
    pub command: String,
    /// What ran.
    pub config: StoreBenchConfig,
    /// Where and when.
    pub machine: Machine,
    /// Wall-clock seconds of the whole experiment.
    pub elapsed_s: f64,
    /// Every run, in the order they ran.
    pub measurements: Vec<Measurement>,
}

/// Runs the experiment and reports each measurement to `progress` as it completes. Fails only
/// if the tools are missing or the work directory is unusable; failed clusters and runs are
/// recorded in the report.
pub fn run(
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
    let stdout_path = cluster.dir.path().join(format!("{name}.out"));
    let stderr_path = cluster.dir.path().join(format!("{name}.err"));
    // The tool's output goes to files: its gRPC logging is thousands of lines, and a pipe
    // nobody reads while we wait would stall it.
    let mut child = Command::new(config.tool("benchmark"))
        .args(config.benchmark_args(&cluster.endpoints(), op))
        .stdin(Stdio::null())
        .stdout(File::create(&stdout_path)?)
        .stderr(File::create(&stderr_path)?)
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot start {}: {e}", config.tool("benchmark").display()))?;
    let deadline = Instant::now() + config.bench_timeout;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
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

/// One member of a cluster.
struct Member {
    child: Child,
    client: SocketAddr,
    stdout: PathBuf,
    stderr: PathBuf,
}

/// A running cluster of one system; dropping it kills whatever is still running.
struct Cluster {
    system: System,
    members: Vec<Member>,
    /// The members' data directories and logs; removed when the cluster is dropped.
    dir: tempfile::TempDir,
}

impl Cluster {
    /// How many times a cluster is started on fresh ports before giving up: another process
    /// may take a port between our probe and the member's bind.
    const ATTEMPTS: usize = 3;

    /// Starts `size` members of `system` and waits until each answers a health check.
    fn start(config: &StoreBenchConfig, system: System, size: usize) -> anyhow::Result<Self> {
        let mut last = None;
        for _ in 0..Self::ATTEMPTS {
            match Self::start_once(config, system, size) {
                Ok(cluster) => return Ok(cluster),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("at least one attempt").context(format!(
            "cannot start {} with {size} members",
            system.name()
        )))
    }

    fn start_once(config: &StoreBenchConfig, system: System, size: usize) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix(&format!(
                "mote-bench-store-{}-{size}-",
                system.name().replace(' ', "-")
            ))
            .tempdir_in(&config.work_dir)?;
        let ports = free_ports(2 * size)?;
        let (clients, peers) = ports.split_at(size);
        let name = |i: usize| match system {
            System::Mote => format!("m{i}"),
            System::Etcd => format!("e{i}"),
        };
        let peer_url = |i: usize| format!("http://127.0.0.1:{}", peers[i]);
        let mut cluster = Cluster {
            system,
            members: Vec::new(),
            dir,
        };
        for i in 0..size {
            let data = cluster.dir.path().join(name(i));
            let client = SocketAddr::from(([127, 0, 0, 1], clients[i]));
            let mut command = match system {
                System::Mote => {
                    let mut c = Command::new(&config.mote);
                    let others: Vec<String> = (0..size)
                        .filter(|&j| j != i)
                        .map(|j| format!("{}={}", name(j), peer_url(j)))
                        .collect();
                    c.arg("store")
                        .args(["--name", &name(i)])
                        .args(["--listen", &client.to_string()])
                        .args(["--peer-listen", &format!("127.0.0.1:{}", peers[i])])
                        .arg("--data")
                        .arg(&data);
                    if !others.is_empty() {
                        c.args(["--peers", &others.join(",")]);
                    }
                    c
                }
                System::Etcd => {
                    let mut c = Command::new(config.tool("etcd"));
                    let initial: Vec<String> = (0..size)
                        .map(|j| format!("{}={}", name(j), peer_url(j)))
                        .collect();
                    let client_url = format!("http://{client}");
                    c.args(["--name", &name(i)])
                        .arg("--data-dir")
                        .arg(&data)
                        .args(["--listen-client-urls", &client_url])
                        .args(["--advertise-client-urls", &client_url])
                        .args(["--listen-peer-urls", &peer_url(i)])
                        .args(["--initial-advertise-peer-urls", &peer_url(i)])
                        .args(["--initial-cluster", &initial.join(",")])
                        .args(["--initial-cluster-state", "new"])
                        .args([
                            "--initial-cluster-token",
                            &format!("mote-bench-{}", ports[0]),
                        ]);
                    c
                }
            };
            let stdout = cluster.dir.path().join(format!("{}.out", name(i)));
            let stderr = cluster.dir.path().join(format!("{}.log", name(i)));
            let child = command
                .stdin(Stdio::null())
                .stdout(File::create(&stdout)?)
                .stderr(File::create(&stderr)?)
                .spawn()
                .map_err(|e| anyhow::anyhow!("cannot start {}: {e}", system.name()))?;
            cluster.members.push(Member {
                child,
                client,
                stdout,
                stderr,
            });
        }
        cluster.wait_ready(config)?;
        Ok(cluster)
    }

    /// Waits until every member is up (mote store prints a line when it listens) and
    /// `etcdctl endpoint health` succeeds against all of them.
    fn wait_ready(&mut self, config: &StoreBenchConfig) -> anyhow::Result<()> {
        let deadline = Instant::now() + config.start_timeout;
        loop {
            for (i, m) in self.members.iter_mut().enumerate() {
                if let Some(status) = m.child.try_wait()? {
                    anyhow::bail!(
                        "member {i} exited ({status}) while starting: {}",
                        last_lines(&m.stderr, 5)
                    );
                }
            }
            let listening = self.system == System::Etcd
                || self.members.iter().all(|m| {
                    std::fs::read_to_string(&m.stdout).is_ok_and(|s| s.contains(" is up: "))
                });
            if listening && self.healthy(config) {
                return Ok(());
            }
            if Instant::now() > deadline {
                anyhow::bail!(
                    "not healthy after {:?}; last log lines of member 0: {}",
                    config.start_timeout,
                    last_lines(&self.members[0].stderr, 5)
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn healthy(&self, config: &StoreBenchConfig) -> bool {
        Command::new(config.tool("etcdctl"))
            .args(["--endpoints", &self.endpoints()])
            .args(["--command-timeout", "2s", "--dial-timeout", "1s"])
            .args(["endpoint", "health"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Every member's client address, comma-separated, as `--endpoints` takes them.
    fn endpoints(&self) -> String {
        let all: Vec<String> = self.members.iter().map(|m| m.client.to_string()).collect();
        all.join(",")
    }

    /// Writes [`RANGE_KEY`] through every member (on mote store a write reaches the other
    /// replicas only some milliseconds later; on etcd the extra writes are harmless).
    fn write_range_key(&self, config: &StoreBenchConfig) -> anyhow::Result<()> {
        let value = "v".repeat(config.val_size as usize);
        for m in &self.members {
            let output = Command::new(config.tool("etcdctl"))
                .args(["--endpoints", &m.client.to_string()])
                .args(["put", RANGE_KEY, &value])
                .stdin(Stdio::null())
                .output()?;
            anyhow::ensure!(
                output.status.success(),
                "etcdctl put {RANGE_KEY} on {} failed: {}",
                m.client,
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(())
    }

    /// CPU time (user + system) the members have used so far, in clock ticks.
    fn cpu_ticks(&self) -> u64 {
        self.members
            .iter()
            .filter_map(|m| proc_stat_fields(&format!("/proc/{}/stat", m.child.id())))
            .map(|f| f.utime + f.stime)
            .sum()
    }

    /// Kills every member, reaps it and checks that no process of it is left.
    fn stop(mut self) -> anyhow::Result<()> {
        self.kill_all();
        for m in &self.members {
            let pid = m.child.id();
            if let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) {
                // The pid may have been reused already; only our own command line counts.
                let ours = match self.system {
                    System::Mote => has_arg(&cmdline, "store"),
                    System::Etcd => has_arg(&cmdline, "--initial-cluster"),
                };
                anyhow::ensure!(!ours, "member process {pid} is still running after kill");
            }
        }
        Ok(())
    }

    /// SIGKILL and reap every member not reaped yet. A benchmark's clusters hold nothing worth a
    /// graceful shutdown: their data directories are thrown away.
    fn kill_all(&mut self) {
        for m in &mut self.members {
            if let Ok(None) = m.child.try_wait() {
                let _ = m.child.kill();
            }
            let _ = m.child.wait();
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// Whether a NUL-separated command line contains `arg`.
fn has_arg(cmdline: &[u8], arg: &str) -> bool {
    cmdline.split(|&b| b == 0).any(|a| a == arg.as_bytes())
}

/// `n` distinct loopback ports that were free a moment ago (all held open at once while they
/// are picked, so they differ).
fn free_ports(n: usize) -> std::io::Result<Vec<u16>> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect()
}

/// The last `n` non-empty lines of a log file, joined, for error messages.
fn last_lines(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(n)..].join(" | ");
    if tail.is_empty() {
        format!("(nothing in {})", path.display())
    } else {
        tail
    }
}

/// The CPU-time fields of `/proc/PID/stat`, in clock ticks.
#[derive(Debug, PartialEq)]
struct ProcTimes {
    utime: u64,
    stime: u64,
    cutime: u64,
    cstime: u64,
}

fn proc_stat_fields(path: &str) -> Option<ProcTimes> {
    parse_proc_stat(&std::fs::read_to_string(path).ok()?)
}

/// Fields 14-17 of a `/proc/PID/stat` line; the command name (field 2) may hold spaces and
/// parentheses, so the fields are counted from its last `)`.
fn parse_proc_stat(line: &str) -> Option<ProcTimes> {
    let rest = &line[line.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (the state).
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some(ProcTimes {
        utime: field(14)?,
        stime: field(15)?,
        cutime: field(16)?,
        cstime: field(17)?,
    })
}

/// CPU time of this process's reaped children so far (the `benchmark` runs among them).
fn children_cpu_ticks() -> u64 {
    proc_stat_fields("/proc/self/stat").map_or(0, |f| f.cutime + f.cstime)
}

/// CPU time every core of the machine spent busy so far (everything in `/proc/stat`'s first
/// line but idle and I/O wait), in clock ticks.
fn machine_busy_ticks() -> u64 {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| parse_machine_busy(s.lines().next()?))
        .unwrap_or(0)
}

/// `cpu  user nice system idle iowait irq softirq steal ...` → all but idle and iowait (guest
/// time is already counted in user).
fn parse_machine_busy(line: &str) -> Option<u64> {
    let ticks: Vec<u64> = line
        .strip_prefix("cpu ")?
        .split_whitespace()
        .map(|t| t.parse().ok())
        .collect::<Option<_>>()?;
    let busy: u64 = ticks.iter().take(8).sum::<u64>() - ticks.get(3)? - ticks.get(4)?;
    Some(busy)
}

/// Linux reports `/proc` times in USER_HZ ticks, 100 per second on every architecture mote
/// runs on.
fn ticks_to_s(ticks: u64) -> f64 {
    ticks as f64 / 100.0
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn load_one() -> f64 {
    load_average()
        .split_whitespace()
        .next()
        .and_then(|l| l.parse().ok())
        .unwrap_or(f64::NAN)
}

impl Machine {
    fn now(config: &StoreBenchConfig) -> Self {
        let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
        let cpuinfo = read("/proc/cpuinfo");
        let cpu = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .map_or("unknown CPU".into(), |m| m.trim().to_owned());
        let memory_gib = read("/proc/meminfo")
            .lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
            .map_or(f64::NAN, |kib| kib / (1024.0 * 1024.0));
        let etcd_version = Command::new(config.tool("etcd"))
            .arg("--version")
            .output()
            .ok()
            .and_then(|o| {
                let text = String::from_utf8_lossy(&o.stdout).into_owned();
                text.lines().next().map(str::to_owned)
            })
            .unwrap_or_else(|| "unknown".into());
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Self {
            cpu,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            kernel: read("/proc/sys/kernel/osrelease").trim().to_owned(),
            memory_gib,
            etcd_version,
            started: utc_time(now),
            load_at_start: load_average(),
            load_at_end: String::new(),
        }
    }
}

/// `secs` since the Unix epoch as `YYYY-MM-DD HH:MM UTC`.
fn utc_time(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let (hour, minute) = ((secs % 86_400) / 3_600, (secs % 3_600) / 60);
    // Days to a civil date in the proleptic Gregorian calendar: shift the year to start in
    // March, so the leap day is the last day of the year, and count 400-year eras.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let march_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * march_month + 2) / 5 + 1;
    let month = if march_month < 10 {
        march_month + 3
    } else {
        march_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {hour:02}:{minute:02} UTC")
}

/// One system, size and operation summarised over the repetitions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Aggregate {
    /// Median requests per second.
    pub throughput: f64,
    /// Lowest and highest requests per second over the repetitions.
    pub throughput_range: (f64, f64),
    /// Median of the runs' p10, p50 and p90 latencies, ms.
    pub p10_ms: f64,
    /// The median latency, ms.
    pub p50_ms: f64,
    /// The 90th percentile, ms.
    pub p90_ms: f64,
    /// Repetitions that succeeded.
    pub runs: usize,
}

/// A floor of the issue, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Floor {
    /// What it asks.
    pub name: &'static str,
    /// The measured value, in words.
    pub measured: String,
    /// `None` if it could not be checked (a size or run missing).
    pub met: Option<bool>,
}

impl StoreReport {
    fn successful(
        &self,
        system: System,
        size: usize,
        op: Operation,
    ) -> impl Iterator<Item = &Measurement> {
        self.measurements.iter().filter(move |m| {
            m.system == system && m.size == size && m.operation == op && m.summary.is_some()
        })
    }

    /// The median over repetitions of `system` at `size` doing `op`.
    pub fn aggregate(&self, system: System, size: usize, op: Operation) -> Option<Aggregate> {
        let runs: Vec<&BenchSummary> = self
            .successful(system, size, op)
            .filter_map(|m| m.summary.as_ref())
            .collect();
        let of = |f: &dyn Fn(&BenchSummary) -> Option<f64>| {
            median(&runs.iter().filter_map(|s| f(s)).collect::<Vec<_>>())
        };
        let rates: Vec<f64> = runs.iter().map(|s| s.requests_per_s).collect();
        Some(Aggregate {
            throughput: of(&|s| Some(s.requests_per_s))?,
            throughput_range: (
                rates.iter().copied().fold(f64::INFINITY, f64::min),
                rates.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            ),
            p10_ms: of(&|s| s.percentile_ms(10.0)).unwrap_or(f64::NAN),
            p50_ms: of(&|s| s.percentile_ms(50.0))?,
            p90_ms: of(&|s| s.percentile_ms(90.0)).unwrap_or(f64::NAN),
            runs: runs.len(),
        })
    }

    /// Per repetition in which both succeeded, `f(mote) / f(etcd)` at `size` for `op`.
    fn ratios(&self, size: usize, op: Operation, f: fn(&Measurement) -> Option<f64>) -> Vec<f64> {
        (0..self.config.runs)
            .filter_map(|run| {
                let get = |system| {
                    self.successful(system, size, op)
                        .find(|m| m.run == run)
                        .and_then(f)
                };
                Some(get(System::Mote)? / get(System::Etcd)?)
            })
            .collect()
    }

    /// Per repetition, mote's put throughput at `to` nodes over that at `from` nodes.
    fn scaling(&self, system: System, op: Operation, from: usize, to: usize) -> Vec<f64> {
        (0..self.config.runs)
            .filter_map(|run| {
                let get = |size| {
                    self.successful(system, size, op)
                        .find(|m| m.run == run)
                        .and_then(Measurement::throughput)
                };
                Some(get(to)? / get(from)?)
            })
            .collect()
    }

    /// The floors of the issue, each judged on the median over repetitions of a ratio taken
    /// within each repetition.
    pub fn floors(&self) -> Vec<Floor> {
        let judge = |name, ratios: Vec<f64>, what: &str, ok: fn(f64) -> bool| {
            let met_in = ratios.iter().filter(|&&r| ok(r)).count();
            let each: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
            match median(&ratios) {
                None => Floor {
                    name,
                    measured: "not measured".into(),
                    met: None,
                },
                Some(m) => Floor {
                    name,
                    measured: format!(
                        "{what} {m:.2} ({}: {}; met in {met_in})",
                        runs(ratios.len()),
                        each.join(", ")
                    ),
                    met: Some(ok(m)),
                },
            }
        };
        vec![
            judge(
                "put throughput of 3 mote replicas >= 3x that of 3 etcd members",
                self.ratios(3, Operation::Put, Measurement::throughput),
                "mote / etcd put throughput at 3 nodes:",
                |r| r >= 3.0,
            ),
            judge(
                "mote's put throughput does not fall from 1 to 3 replicas",
                self.scaling(System::Mote, Operation::Put, 1, 3),
                "mote put throughput, 3 replicas / 1 replica:",
                |r| r >= 1.0,
            ),
            judge(
                "median put latency of 3 mote replicas <= 1/3 of etcd's",
                self.ratios(3, Operation::Put, Measurement::median_ms),
                "mote / etcd median put latency at 3 nodes:",
                |r| r <= 1.0 / 3.0,
            ),
        ]
    }

    /// The failed measurements, as `system size op: error` lines.
    pub fn failures(&self) -> Vec<String> {
        self.measurements
            .iter()
            .filter_map(|m| {
                let e = m.error.as_ref()?;
                Some(format!(
                    "run {} {} x{} {}: {e}",
                    m.run + 1,
                    m.system.name(),
                    m.size,
                    m.operation.short()
                ))
            })
            .collect()
    }

    /// The results table: per system, size and operation the medians over repetitions, and on
    /// mote's rows the mote / etcd ratios (medians of the per-repetition ratios).
    pub fn table(&self) -> String {
        let mut s = String::from(
            "| operation | nodes | system | throughput (req/s) | median latency (ms) | p10 (ms) | p90 (ms) | mote / etcd throughput | mote / etcd median latency |\n\
             |---|---|---|---|---|---|---|---|---|\n",
        );
        for op in Operation::ALL {
            for &size in &self.config.sizes {
                for system in [System::Etcd, System::Mote] {
                    let (tput_ratio, lat_ratio) = match system {
                        System::Etcd => (String::new(), String::new()),
                        System::Mote => (
                            ratio_cell(self.ratios(size, op, Measurement::throughput)),
                            ratio_cell(self.ratios(size, op, Measurement::median_ms)),
                        ),
                    };
                    let row = match self.aggregate(system, size, op) {
                        Some(a) => format!(
                            "{} | {:.2} | {:.2} | {:.2}",
                            thousands(a.throughput),
                            a.p50_ms,
                            a.p10_ms,
                            a.p90_ms
                        ),
                        None => "failed | | |".into(),
                    };
                    let _ = writeln!(
                        s,
                        "| {} | {size} | {} | {row} | {tput_ratio} | {lat_ratio} |",
                        op.name(),
                        system.name()
                    );
                }
            }
        }
        s
    }

    /// Every measurement, in the order they ran.
    pub fn runs_table(&self) -> String {
        let mut s = String::from(
            "| run | order | system | nodes | operation | req/s | p10 | p50 | p90 | p99 (ms) | failed requests | server CPU (s) | client CPU (s) | others' CPU (s) | load |\n\
             |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        );
        for m in &self.measurements {
            let cells = match &m.summary {
                Some(b) => {
                    let p = |pct| {
                        b.percentile_ms(pct)
                            .map_or("-".into(), |v| format!("{v:.2}"))
                    };
                    format!(
                        "{} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.2}",
                        thousands(b.requests_per_s),
                        p(10.0),
                        p(50.0),
                        p(90.0),
                        p(99.0),
                        b.errors,
                        m.server_cpu_s,
                        m.client_cpu_s,
                        m.other_cpu_s
                    )
                }
                None => format!(
                    "failed: {} | | | | | | | |",
                    m.error.as_deref().unwrap_or("?").replace('|', "/")
                ),
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {cells} | {:.1} |",
                m.run + 1,
                if m.position == 0 { "first" } else { "second" },
                m.system.name(),
                m.size,
                m.operation.short(),
                m.load_before
            );
        }
        s
    }

    /// The whole report in Markdown: what ran, where, the table, the floors and every run.
    pub fn markdown(&self, plot: Option<&str>) -> String {
        let c = &self.config;
        let m = &self.machine;
        let mut s =
            String::from("# mote store against etcd: `benchmark` put and serializable range\n\n");
        let _ = writeln!(s, "Command: `{}`\n", self.command);
        let _ = writeln!(
            s,
            "Machine: {}, {} cores, {:.0} GiB, Linux {}; {}; started {}, load average (1/5/15 min) {} at the start and {} at the end; {:.0} s in all.\n",
            m.cpu,
            m.cores,
            m.memory_gib,
            m.kernel,
            m.etcd_version,
            m.started,
            m.load_at_start,
            m.load_at_end,
            self.elapsed_s
        );
        let _ = writeln!(
            s,
            "Each cluster size runs etcd and mote store back to back (which goes first alternates), in {}; each starts the cluster afresh on loopback with its data on disk, then runs, with every member as an endpoint:\n",
            runs(c.runs)
        );
        for op in Operation::ALL {
            let _ = writeln!(
                s,
                "    benchmark {}",
                c.benchmark_args("<every member>", op).join(" ")
            );
        }
        let _ = writeln!(
            s,
            "\nFigures are medians over the runs; ratios are taken within a run (the two systems back to back) and their median is shown. Server and client share the machine's cores.\n"
        );
        s += "## Results\n\n";
        s += &self.table();
        s += "\n## Floors\n\n";
        for f in self.floors() {
            let verdict = match f.met {
                Some(true) => "**met**",
                Some(false) => "**not met**",
                None => "**not checked**",
            };
            let _ = writeln!(s, "- {}: {verdict}; {}", f.name, f.measured);
        }
        if let Some(plot) = plot {
            let _ = writeln!(
                s,
                "\n## Figure\n\n![median latency (p10-p90) and throughput by cluster size]({plot})"
            );
        }
        let failures = self.failures();
        if !failures.is_empty() {
            s += "\n## Failures\n\n";
            for f in failures {
                let _ = writeln!(s, "- {f}");
            }
        }
        s += "\n## Every run\n\nLatencies in ms; CPU is user + system time during the `benchmark` run, of all the cluster's processes, of the `benchmark` client, and of every other process on the machine (busy time in `/proc/stat` minus the two); load is the one-minute load average before the run.\n\n";
        s += &self.runs_table();
        s
    }

    /// Draws the paper's Figure 2 for both systems: (a) median latency with p10-p90 whiskers,
    /// (b) throughput with whiskers from the lowest to the highest run, against cluster size.
    pub fn write_plot(&self, path: &Path) -> Result<(), PlotError> {
        let sizes = &self.config.sizes;
        let categories: Vec<String> = sizes.iter().map(usize::to_string).collect();
        let categories: Vec<&str> = categories.iter().map(String::as_str).collect();
        let keys: Vec<(System, Operation)> = Operation::ALL
            .iter()
            .flat_map(|&op| [System::Mote, System::Etcd].map(|s| (s, op)))
            .collect();
        let labels: Vec<String> = keys
            .iter()
            .map(|(s, op)| format!("{} {}", s.name(), op.name()))
            .collect();
        let points = |f: &dyn Fn(Aggregate) -> ErrorBar| -> Vec<Vec<Option<ErrorBar>>> {
            keys.iter()
                .map(|&(s, op)| {
                    sizes
                        .iter()
                        .map(|&n| self.aggregate(s, n, op).map(f))
                        .collect()
                })
                .collect()
        };
        let latency = points(&|a| ErrorBar {
            value: a.p50_ms,
            low: a.p10_ms,
            high: a.p90_ms,
        });
        let throughput = points(&|a| ErrorBar {
            value: a.throughput,
            low: a.throughput_range.0,
            high: a.throughput_range.1,
        });
        let (latency, throughput) = (lines(&labels, &latency), lines(&labels, &throughput));
        let runs = self.config.runs;
        let throughput_title = match runs {
            1 => "(b) throughput".to_owned(),
            _ => format!("(b) median throughput, bars: lowest-highest of {runs} runs"),
        };
        let panels = [
            Panel {
                title: "(a) median latency, bars at p10 and p90",
                y_label: "latency (ms)",
                lines: &latency,
                log_scale: true,
            },
            Panel {
                title: &throughput_title,
                y_label: "requests / s",
                lines: &throughput,
                log_scale: false,
            },
        ];
        error_bar_png(
            path,
            "cluster size (nodes)",
            &categories,
            &panels,
            (1400, 560),
        )
    }
}

/// The lines of one panel: a label and its points each.
fn lines<'a>(labels: &'a [String], points: &'a [Vec<Option<ErrorBar>>]) -> Vec<Line<'a>> {
    labels
        .iter()
        .zip(points)
        .map(|(label, points)| Line { label, points })
        .collect()
}

/// `1 run`, `3 runs`.
fn runs(n: usize) -> String {
    match n {
        1 => "1 run".into(),
        _ => format!("{n} runs"),
    }
}

fn ratio_cell(ratios: Vec<f64>) -> String {
    median(&ratios).map_or(String::new(), |r| format!("{r:.2}x"))
}

/// 12345.6 → `12,346`.
fn thousands(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What etcd 3.6.8's `benchmark --precise put` prints on stdout (histogram shortened).
    const PUT_OUTPUT: &str = "
Summary:
  Total:\t1.9391 secs.
  Slowest:\t0.1908 secs.
  Fastest:\t2.3e-03 secs.
  Average:\t0.0374 secs.
  Stddev:\t0.0338 secs.
  Requests/sec:\t2578.4574

Response time histogram:
  0.0023 [1]\t|
  0.0212 [1990]\t|∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎

Latency distribution:
  10% in 0.0118 secs.
  25% in 0.0167 secs.
  50% in 0.0242 secs.
  75% in 0.0420 secs.
  90% in 0.0872 secs.
  95% in 0.1074 secs.
  99% in 0.1747 secs.
  99.9% in 0.1907 secs.
";

    #[test]
    fn parses_benchmarks_summary() {
        let s = BenchSummary::parse(PUT_OUTPUT).unwrap();
        assert_eq!(s.requests_per_s, 2578.4574);
        assert_eq!(s.total_s, 1.9391);
        assert!((s.fastest_ms - 2.3).abs() < 1e-9);
        assert!((s.slowest_ms - 190.8).abs() < 1e-9);
        assert_eq!(s.percentiles.len(), 8);
        assert!((s.percentile_ms(10.0).unwrap() - 11.8).abs() < 1e-9);
        assert!((s.percentile_ms(50.0).unwrap() - 24.2).abs() < 1e-9);
        assert!((s.percentile_ms(99.9).unwrap() - 190.7).abs() < 1e-9);
        assert_eq!(s.percentile_ms(42.0), None);
        assert_eq!(s.errors, 0);
    }

    #[test]
    fn parses_millisecond_latencies_and_errors() {
        let output = "bench with serializable range\n\nSummary:\n  Total:\t2 secs.\n  Requests/sec:\t450\n\nLatency distribution:\n  50% in 1.250 ms.\n\nError distribution:\n  [100]\trpc error: code = Unavailable desc = connection refused\n  [2]\tcontext deadline exceeded\n";
        let s = BenchSummary::parse(output).unwrap();
        assert_eq!(s.requests_per_s, 450.0);
        assert_eq!(s.percentile_ms(50.0), Some(1.25));
        assert_eq!(s.errors, 102);
        assert_eq!(s.error_messages[1], "2 x context deadline exceeded");
    }

    #[test]
    fn a_run_where_everything_failed_has_no_summary() {
        let output = "\nError distribution:\n  [5]\tetcdserver: too many requests\n";
        let err = BenchSummary::parse(output).unwrap_err();
        assert_eq!(
            err,
            ParseError::NoSummary(vec!["5 x etcdserver: too many requests".into()])
        );
        assert!(err.to_string().contains("too many requests"), "{err}");
        assert!(matches!(
            BenchSummary::parse("Summary:\n  Requests/sec:\tlots\n"),
            Err(ParseError::BadNumber(_))
        ));
        assert!(matches!(
            BenchSummary::parse(""),
            Err(ParseError::NoSummary(_))
        ));
    }

    #[test]
    fn reads_cpu_times_from_proc_stat() {
        let line = "1234 (a (weird) name) S 1 2 3 4 5 6 7 8 9 10 150 25 7 3 20 0 1 0";
        assert_eq!(
            parse_proc_stat(line),
            Some(ProcTimes {
                utime: 150,
                stime: 25,
                cutime: 7,
                cstime: 3
            })
        );
        assert!(proc_stat_fields("/proc/self/stat").is_some());
        assert_eq!(
            parse_machine_busy("cpu  100 5 50 1000 20 3 2 1 0 0"),
            Some(161)
        );
        assert_eq!(parse_machine_busy("intr 1 2"), None);
        assert!(machine_busy_ticks() > 0);
    }

    #[test]
    fn formats_utc_dates() {
        assert_eq!(utc_time(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc_time(951_782_400), "2000-02-29 00:00 UTC");
        assert_eq!(utc_time(1_795_382_100), "2026-11-22 21:15 UTC");
    }

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

    fn measurement(run: usize, system: System, size: usize, rate: f64, p50: f64) -> Measurement {
        Measurement {
            run,
            position: 0,
            system,
            size,
            operation: Operation::Put,
            summary: Some(BenchSummary {
                requests_per_s: rate,
                percentiles: vec![(10.0, p50 / 2.0), (50.0, p50), (90.0, p50 * 2.0)],
                ..BenchSummary::default()
            }),
            error: None,
            server_cpu_s: 1.0,
            client_cpu_s: 1.0,
            other_cpu_s: 0.5,
            load_before: 2.0,
        }
    }

    fn report(measurements: Vec<Measurement>, runs: usize) -> StoreReport {
        let config = StoreBenchConfig {
            runs,
            ..StoreBenchConfig::full("mote".into(), "tools".into())
        };
        StoreReport {
            command: "mote bench store".into(),
            machine: Machine {
                cpu: "cpu".into(),
                cores: 2,
                kernel: "6.18".into(),
                memory_gib: 24.0,
                etcd_version: "etcd Version: 3.6.8".into(),
                started: utc_time(0),
                load_at_start: "1 1 1".into(),
                load_at_end: "1 1 1".into(),
            },
            config,
            elapsed_s: 1.0,
            measurements,
        }
    }

    #[test]
    fn floors_use_ratios_within_each_run() {
        use System::{Etcd, Mote};
        let r = report(
            vec![
                measurement(0, Etcd, 1, 8_000.0, 10.0),
                measurement(0, Mote, 1, 10_000.0, 4.0),
                measurement(0, Etcd, 3, 5_000.0, 18.0),
                measurement(0, Mote, 3, 16_000.0, 5.0),
                // A slower second run: the ratio within it is what counts.
                measurement(1, Etcd, 1, 4_000.0, 20.0),
                measurement(1, Mote, 1, 5_000.0, 8.0),
                measurement(1, Etcd, 3, 2_000.0, 36.0),
                measurement(1, Mote, 3, 7_000.0, 10.0),
            ],
            2,
        );
        let floors = r.floors();
        // 16/5 = 3.2 and 7/2 = 3.5: met.
        assert_eq!(floors[0].met, Some(true), "{floors:?}");
        assert!(
            floors[0].measured.contains("3.35"),
            "{}",
            floors[0].measured
        );
        // 16/10 and 7/5: grows.
        assert_eq!(floors[1].met, Some(true));
        // 5/18 and 10/36 < 1/3.
        assert_eq!(floors[2].met, Some(true));
        let a = r.aggregate(Mote, 3, Operation::Put).unwrap();
        assert_eq!(a.throughput, 11_500.0);
        assert_eq!(a.throughput_range, (7_000.0, 16_000.0));
        assert_eq!(a.p50_ms, 7.5);

        let table = r.table();
        assert!(
            table.contains("| put | 3 | mote store | 11,500 | 7.50 |"),
            "{table}"
        );
        assert!(table.contains("3.35x"), "{table}");
        let md = r.markdown(Some("figure2.png"));
        assert!(
            md.contains("**met**") && !md.contains("**not met**"),
            "{md}"
        );

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("figure2.png");
        r.write_plot(&path).unwrap();
        assert!(std::fs::read(&path).unwrap().starts_with(b"\x89PNG"));
    }

    #[test]
    fn floors_not_met_or_not_measured_are_said_so() {
        use System::{Etcd, Mote};
        let r = report(
            vec![
                measurement(0, Etcd, 3, 5_000.0, 18.0),
                measurement(0, Mote, 3, 9_000.0, 9.0),
            ],
            1,
        );
        let floors = r.floors();
        assert_eq!(floors[0].met, Some(false));
        assert_eq!(floors[1].met, None, "no 1-replica run");
        assert_eq!(floors[2].met, Some(false));
        assert!(r.markdown(None).contains("**not checked**"));
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(1_234_567.4), "1,234,567");
        assert_eq!(thousands(999.6), "1,000");
        assert_eq!(thousands(12.0), "12");
    }
}
