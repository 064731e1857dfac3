//! `mote bench http`: the same `wasi:http/proxy` component (`http-hello`, whose `/` answers
//! `Hello from a wasi:http component`) served by `mote up` and by `wasmtime serve` (wasmtime-cli
//! 48.0.8 with its pooling allocator, installed by `scripts/wasmtime-cli`), both real processes
//! on loopback, both giving every request a fresh instance, driven by the same load generator at
//! the same concurrencies, side by side in one run: requests/s and p50/p99/p99.9 latency.
//!
//! - [`HttpBenchConfig`]: what to run; [`run`] runs it and hands back an [`HttpReport`], whose
//!   [`HttpReport::table`] is the Markdown report and [`HttpReport::check`] fails the run if any
//!   request failed.
//! - [`drive`]: the load generator. `C` connections (HTTP/1.1, keep-alive, hyper's client), each
//!   sending one request after another (closed loop) for a warm-up and then a measured window,
//!   on a Tokio runtime of its own; each response completed in the window is counted and its
//!   latency recorded in a histogram, and any response other than 200, any error and any
//!   timeout is a failure, counted whenever it happens.
//!
//! Fairness: both servers run the identical component bytes and are measured by the same
//! generator, point by point in alternation (which system goes first flips from one point to the
//! next and from one round to the next), each after its own warm-up; the report gives each
//! point's median over the rounds, and each ratio as the median of the rounds' ratios (two
//! windows measured back to back). The generator shares the machine with the server under test:
//! with `pin`, the generator's threads run on one CPU and each server on another (`taskset`), so
//! both servers get exactly one core and the generator never competes with them; without it,
//! all three share every core and the kernel decides.
//! The servers' CPU time during each window (from `/proc`) is reported per request, and so is
//! what the rest of the machine did meanwhile: a window during which other processes kept more
//! than a fifth of a core busy is measured again (up to `noise_retries` times), since on a
//! shared machine it would penalise whichever system happened to run then.
//!
//! mote's own-ABI `echo` (`POST /v1/invoke/echo`, 64 bytes) is measured at one concurrency as a
//! reference line: what the same gateway does for a plain mote function.

use crate::results::{cpu_model, load_average};
use anyhow::{Context, bail};
use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use mote_testbed::KilledOnDrop;
use serde::Serialize;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write as _};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// The floor on mote's requests/s over `wasmtime serve`'s, at every concurrency (with a
/// lower p99 as well).
pub const FLOOR_RPS_RATIO: f64 = 3.0;

/// Cores busy with other work during a window past which it is measured again, and the report
/// calls the run noisy.
const NOISE_CORES: f64 = 0.2;

/// The wasmtime-cli version the benchmark is written for (`scripts/wasmtime-cli`).
pub const WASMTIME_VERSION: &str = "48.0.8";

/// What `http-hello` answers on `/`: the readiness check of both servers.
const HELLO_BODY: &str = "Hello from a wasi:http component\n";

/// The route `http-hello` is deployed on in mote, as `mote up --examples` does.
const ROUTE: &str = "/hello-http/...";

/// The path measured on mote: the route's root, what a site would use.
const MOTE_PATH: &str = "/hello-http/";

/// The body of the reference line's echo calls.
const ECHO_BODY: [u8; 64] = [b'x'; 64];

/// The longest a request may take before it counts as failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest a server may take to answer its first 200.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How the benchmark runs.
#[derive(Clone, Debug)]
pub struct HttpBenchConfig {
    /// The `mote` binary whose `mote up` is measured.
    pub mote: PathBuf,
    /// The `wasmtime` binary (48.0.8) whose `wasmtime serve` is the baseline; `None` measures
    /// mote alone.
    pub wasmtime: Option<PathBuf>,
    /// `wasmtime serve`'s `-O` options.
    pub wasmtime_optimize: String,
    /// Connections, one point per value and system.
    pub concurrencies: Vec<usize>,
    /// The measured window of each point.
    pub duration: Duration,
    /// Requests sent before each window, not measured.
    pub warmup: Duration,
    /// Repetitions of every point; the report gives their median.
    pub rounds: usize,
    /// The connections of mote's own-ABI echo reference line; `None` skips it.
    pub reference: Option<usize>,
    /// Run the generator on one CPU and each server on another, instead of all sharing all.
    pub pin: Option<Pinning>,
    /// How many times a window during which other processes kept more than a fifth of a core
    /// busy is measured again (the last is kept either way).
    pub noise_retries: usize,
    /// A smoke run: its figures are not the benchmark's.
    pub smoke: bool,
    /// The command line, for the report.
    pub command: String,
}

/// Which CPU the load generator and the server under test run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Pinning {
    /// The generator's threads.
    pub generator_cpu: usize,
    /// Every thread of the server under test.
    pub server_cpu: usize,
}

impl Pinning {
    /// The generator on CPU 0, the servers on CPU 1.
    pub const SPLIT: Self = Self {
        generator_cpu: 0,
        server_cpu: 1,
    };
}

impl HttpBenchConfig {
    /// The full benchmark: 1, 8, 32 and 64 connections, 5 s windows after 1 s of warm-up, five
    /// rounds, the echo reference at 32 connections.
    pub fn full(mote: PathBuf, wasmtime: Option<PathBuf>, command: String) -> Self {
        Self {
            mote,
            wasmtime,
            wasmtime_optimize: WASMTIME_OPTIMIZE.to_owned(),
            concurrencies: vec![1, 8, 32, 64],
            duration: Duration::from_secs(5),
            warmup: Duration::from_secs(1),
            rounds: 5,
            reference: Some(32),
            pin: None,
            noise_retries: 3,
            smoke: false,
            command,
        }
    }

    /// A short run of every part, mote only: 1 and 8 connections, 1 s windows, one round.
    pub fn smoke(mote: PathBuf, command: String) -> Self {
        Self {
            concurrencies: vec![1, 8],
            duration: Duration::from_secs(1),
            warmup: Duration::from_millis(250),
            rounds: 1,
            reference: Some(8),
            noise_retries: 0,
            smoke: true,
            ..Self::full(mote, None, command)
        }
    }
}

/// Why a list of concurrencies was refused.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConcurrencyListError {
    /// Nothing in the list.
    #[error("no concurrency given")]
    Empty,
    /// An item that is not a whole number above 0.
    #[error("`{0}` is not a number of connections (a whole number above 0)")]
    Invalid(String),
}

/// Parses `1,8,32,64` (spaces allowed, repeats dropped, order kept).
pub fn parse_concurrencies(list: &str) -> Result<Vec<usize>, ConcurrencyListError> {
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        match item.parse::<usize>() {
            Ok(0) | Err(_) => return Err(ConcurrencyListError::Invalid(item.to_owned())),
            Ok(n) if !out.contains(&n) => out.push(n),
            Ok(_) => {}
        }
    }
    match out.is_empty() {
        true => Err(ConcurrencyListError::Empty),
        false => Ok(out),
    }
}

// ---------------------------------------------------------------------------------------------
// The load generator.

/// What every request of a load run is.
#[derive(Clone, Debug)]
pub struct Target {
    /// Where to connect.
    pub addr: SocketAddr,
    /// The `host` header.
    pub authority: String,
    /// The method.
    pub method: Method,
    /// The path and query, as sent.
    pub path: String,
    /// The body of every request.
    pub body: Bytes,
}

impl Target {
    /// A request to `url` (`http://IP:PORT/path`; the host must be an IP address).
    pub fn new(method: Method, url: &str, body: Bytes) -> anyhow::Result<Self> {
        let uri: Uri = url.parse().with_context(|| format!("the URL {url}"))?;
        let authority = uri.authority().context("a URL without a host")?.clone();
        let addr: SocketAddr = authority
            .as_str()
            .parse()
            .with_context(|| format!("{url}: the host must be IP:PORT"))?;
        let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
        Ok(Self {
            addr,
            authority: authority.to_string(),
            method,
            path,
            body,
        })
    }

    fn request(&self) -> Request<Full<Bytes>> {
        Request::builder()
            .method(self.method.clone())
            .uri(self.path.as_str())
            .header(hyper::header::HOST, self.authority.as_str())
            .body(Full::new(self.body.clone()))
            .expect("a request built from a parsed URL")
    }
}

/// How long and how hard a load run drives its target.
#[derive(Clone, Copy, Debug)]
pub struct Load {
    /// Connections, each with one request in flight at a time.
    pub connections: usize,
    /// Requests sent before the window, not counted.
    pub warmup: Duration,
    /// The window whose responses are counted.
    pub duration: Duration,
}

/// What one load run measured.
#[derive(Clone, Debug)]
pub struct Measured {
    /// 200 responses completed in the window.
    pub ok: u64,
    /// The window's length, s.
    pub seconds: f64,
    /// Latencies of those responses, ns.
    pub latency_ns: Histogram<u64>,
    /// Responses with any other status, in the warm-up or the window.
    pub non_200: u64,
    /// Requests that failed or timed out, in the warm-up or the window.
    pub errors: u64,
    /// Connections the server closed that had to be opened again.
    pub reconnects: u64,
    /// What the first failure was.
    pub first_failure: Option<String>,
    /// CPU time the server process used during the window, s (if its pid was given).
    pub server_cpu_s: Option<f64>,
    /// CPU time this process (the generator) used during the window, s.
    pub generator_cpu_s: Option<f64>,
    /// CPU time the whole machine was busy during the window (every core, steal included), s.
    pub machine_busy_s: Option<f64>,
}

impl Measured {
    fn new() -> Self {
        Self {
            ok: 0,
            seconds: 0.0,
            latency_ns: latency_histogram(),
            non_200: 0,
            errors: 0,
            reconnects: 0,
            first_failure: None,
            server_cpu_s: None,
            generator_cpu_s: None,
            machine_busy_s: None,
        }
    }

    /// Failed requests: other statuses, errors and timeouts.
    pub fn failed(&self) -> u64 {
        self.non_200 + self.errors
    }

    fn fail(&mut self, what: String) {
        self.first_failure.get_or_insert(what);
    }

    fn merge(&mut self, other: Self) {
        self.ok += other.ok;
        self.non_200 += other.non_200;
        self.errors += other.errors;
        self.reconnects += other.reconnects;
        if self.first_failure.is_none() {
            self.first_failure = other.first_failure;
        }
        self.latency_ns
            .add(&other.latency_ns)
            .expect("histograms of the same bounds");
    }

    /// The latency at `quantile`, µs.
    pub fn quantile_us(&self, quantile: f64) -> f64 {
        match self.latency_ns.is_empty() {
            true => f64::NAN,
            false => self.latency_ns.value_at_quantile(quantile) as f64 / 1e3,
        }
    }
}

fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid histogram bounds")
}

/// A Tokio runtime for [`drive`]: `threads` worker threads, each pinned to `cpu` if given.
pub fn generator_runtime(
    threads: usize,
    cpu: Option<usize>,
) -> anyhow::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder
        .worker_threads(threads.max(1))
        .thread_name("mote-bench-http")
        .enable_all();
    if let Some(cpu) = cpu {
        builder.on_thread_start(move || {
            if let Err(e) = pin_current_thread(cpu) {
                eprintln!("mote bench http: cannot pin the load generator to CPU {cpu}: {e}");
            }
        });
    }
    Ok(builder.build()?)
}

/// Runs `load` against `target` on `rt`. `server` is the server process's id, whose CPU time
/// during the window is read from `/proc`.
pub fn drive(
    rt: &tokio::runtime::Runtime,
    target: &Target,
    load: Load,
    server: Option<u32>,
) -> Measured {
    let target = Arc::new(target.clone());
    let begin = Instant::now();
    let start = begin + load.warmup;
    let end = start + load.duration;
    rt.block_on(async move {
        let mut connections = tokio::task::JoinSet::new();
        for _ in 0..load.connections.max(1) {
            connections.spawn(connection(target.clone(), start, end));
        }
        // CPU times at the window's edges, read while the connections run.
        tokio::time::sleep_until(start.into()).await;
        let (server_before, self_before) = (server.and_then(cpu_seconds), cpu_seconds_self());
        let machine_before = machine_busy_seconds();
        tokio::time::sleep_until(end.into()).await;
        let (server_after, self_after) = (server.and_then(cpu_seconds), cpu_seconds_self());
        let machine_after = machine_busy_seconds();
        let mut total = Measured::new();
        while let Some(measured) = connections.join_next().await {
            match measured {
                Ok(m) => total.merge(m),
                Err(e) => {
                    total.errors += 1;
                    total.fail(format!("a connection's task failed: {e}"));
                }
            }
        }
        total.seconds = (end - start).as_secs_f64();
        total.server_cpu_s = server_before
            .zip(server_after)
            .map(|(before, after)| after - before);
        total.generator_cpu_s = self_before
            .zip(self_after)
            .map(|(before, after)| after - before);
        total.machine_busy_s = machine_before
            .zip(machine_after)
            .map(|(before, after)| after - before);
        total
    })
}

/// One connection's closed loop until `end`; responses completed in `start..end` are counted.
async fn connection(target: Arc<Target>, start: Instant, end: Instant) -> Measured {
    let mut m = Measured::new();
    let mut sender: Option<SendRequest<Full<Bytes>>> = None;
    let mut opened = 0u64;
    while Instant::now() < end {
        let mut live = match sender.take() {
            Some(s) if !s.is_closed() => s,
            _ => match connect(&target).await {
                Ok(s) => {
                    opened += 1;
                    s
                }
                Err(e) => {
                    m.errors += 1;
                    m.fail(format!("connecting to {}: {e:#}", target.addr));
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        // Closed by the server while idle: opened again next time round, and not a failure, as
        // no request was sent on it.
        if live.ready().await.is_err() {
            continue;
        }
        let request = target.request();
        let sent = Instant::now();
        let answer = tokio::time::timeout(REQUEST_TIMEOUT, async {
            let response = live.send_request(request).await?;
            let status = response.status();
            response.into_body().collect().await?;
            Ok::<_, hyper::Error>(status)
        })
        .await;
        let done = Instant::now();
        match answer {
            Ok(Ok(status)) => {
                if status != StatusCode::OK {
                    m.non_200 += 1;
                    m.fail(format!(
                        "{} {} answered {status}",
                        target.method, target.path
                    ));
                } else if done >= start && done < end {
                    m.ok += 1;
                    let ns = u64::try_from((done - sent).as_nanos()).unwrap_or(u64::MAX);
                    m.latency_ns.saturating_record(ns.max(1));
                }
                sender = Some(live);
            }
            // The connection is dropped with the failed request; the next one opens another.
            Ok(Err(e)) => {
                m.errors += 1;
                m.fail(format!("{} {}: {e}", target.method, target.path));
            }
            Err(_) => {
                m.errors += 1;
                m.fail(format!(
                    "{} {}: no answer in {REQUEST_TIMEOUT:?}",
                    target.method, target.path
                ));
            }
        }
    }
    m.reconnects = opened.saturating_sub(1);
    m
}

/// Opens an HTTP/1.1 connection to `target` (no Nagle, as both servers set on their side).
async fn connect(target: &Target) -> anyhow::Result<SendRequest<Full<Bytes>>> {
    let stream = tokio::net::TcpStream::connect(target.addr).await?;
    stream.set_nodelay(true)?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    // Ends when the sender is dropped or the server closes the connection.
    tokio::spawn(connection);
    Ok(sender)
}

/// Pins the calling thread to `cpu`.
fn pin_current_thread(cpu: usize) -> std::io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(std::io::Error::other(format!("no CPU {cpu}")));
    }
    // SAFETY: `cpu_set_t` is a plain bit array for which all zeroes is the empty set; `CPU_SET`
    // writes one bit inside it (the index is checked against CPU_SETSIZE above), and
    // `sched_setaffinity` only reads the set, of exactly the size passed, for this thread (0).
    let result = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    match result {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// User plus system CPU time of process `pid` so far, s.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(cpu_ticks(&stat)? as f64 / clock_ticks_per_second())
}

/// The same for this process.
fn cpu_seconds_self() -> Option<f64> {
    cpu_seconds(std::process::id())
}

/// utime + stime from the text of `/proc/PID/stat` (fields 14 and 15, counted after the command
/// name, which may itself hold spaces and parentheses).
fn cpu_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // `after_name` starts at field 3 (the state), so fields 14 and 15 are its 11th and 12th.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// CPU time every core of the machine has been busy so far, s.
fn machine_busy_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    Some(busy_ticks(&stat)? as f64 / clock_ticks_per_second())
}

/// The busy ticks of `/proc/stat`'s first line (`cpu  user nice system idle iowait irq softirq
/// steal ...`): everything but idle and iowait. Steal counts as busy: on a shared virtual
/// machine it is time another tenant took from us.
fn busy_ticks(stat: &str) -> Option<u64> {
    let line = stat.lines().next()?;
    let mut fields = line.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let ticks: Vec<u64> = fields
        .take(8)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    let [user, nice, system, _idle, _iowait, irq, softirq, steal] = ticks[..] else {
        return None;
    };
    Some(user + nice + system + irq + softirq + steal)
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf takes a constant and reads no memory of ours.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

// ---------------------------------------------------------------------------------------------
// The servers under test.

/// A server process, killed when dropped, and where it serves.
struct Server {
    process: KilledOnDrop,
    /// `http://IP:PORT`.
    base: String,
    /// Where its log goes.
    log: PathBuf,
}

impl Server {
    fn pid(&self) -> u32 {
        self.process.id()
    }

    /// The last lines of its log, for an error message.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(5)..].join(" | ")
    }

    /// Waits until `path` answers 200 with `body`.
    fn wait_ready(&mut self, path: &str, body: &str) -> anyhow::Result<()> {
        let agent = agent();
        let url = format!("{}{path}", self.base);
        let started = Instant::now();
        let mut last = String::new();
        while started.elapsed() < START_TIMEOUT {
            if let Some(status) = self.process.try_wait()? {
                bail!("the server exited ({status}): {}", self.log_tail());
            }
            match agent.get(&url).call() {
                Ok(mut response) => {
                    let status = response.status();
                    let text = response.body_mut().read_to_string().unwrap_or_default();
                    if status == 200 && text == body {
                        return Ok(());
                    }
                    last = format!("{status}: {text:?}");
                }
                Err(e) => last = e.to_string(),
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!("GET {url} did not answer 200 {body:?} in {START_TIMEOUT:?}; last: {last}")
    }
}

/// Which of a process's outputs carries the line saying where it serves.
#[derive(Clone, Copy)]
enum Announces {
    Stdout,
    Stderr,
}

/// Starts `program args` (under `taskset -c CPU` if `cpu` is given), waits for the line that
/// holds `prefix` followed by its address, and keeps the rest of its output in `log`.
fn start(
    program: &Path,
    args: &[&str],
    cpu: Option<usize>,
    announces: Announces,
    prefix: &str,
    log: PathBuf,
) -> anyhow::Result<Server> {
    let mut command = match cpu {
        // `taskset` execs the program, so the pid is the server's, and every thread it starts
        // inherits the CPU (tokio and wasmtime size their pools from it).
        Some(cpu) => {
            let mut c = Command::new("taskset");
            c.args(["-c", &cpu.to_string()]).arg(program);
            c
        }
        None => Command::new(program),
    };
    command.args(args).stdin(Stdio::null());
    let log_file = std::fs::File::create(&log)?;
    match announces {
        Announces::Stdout => command.stdout(Stdio::piped()).stderr(log_file),
        Announces::Stderr => command.stderr(Stdio::piped()).stdout(log_file),
    };
    let mut child = command
        .spawn()
        .with_context(|| format!("starting {command:?}"))?;
    let output: Box<dyn Read + Send> = match announces {
        Announces::Stdout => Box::new(child.stdout.take().expect("piped")),
        Announces::Stderr => Box::new(child.stderr.take().expect("piped")),
    };
    let process = KilledOnDrop::new(child);
    let mut lines = BufReader::new(output).lines();
    let mut seen = Vec::new();
    let base = loop {
        let Some(line) = lines.next() else {
            bail!(
                "{command:?} exited before it served: {} {}",
                seen.join(" | "),
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        };
        let line = line?;
        if let Some(rest) = line.split(prefix).nth(1) {
            let address = rest.split([' ', ',', '/']).next().unwrap_or_default();
            break format!("http://{address}");
        }
        seen.push(line);
    };
    // The rest of that output goes to the log, so the process never blocks on a full pipe.
    let mut log_file = std::fs::OpenOptions::new().append(true).open(&log)?;
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            let _ = writeln!(log_file, "{line}");
        }
    });
    Ok(Server { process, base, log })
}

/// `mote up --cores CORES` on loopback with its own embedded store, data in `dir`,
/// `http-hello` deployed on its route and `echo` deployed.
fn start_mote(mote: &Path, dir: &Path, cores: usize, cpu: Option<usize>) -> anyhow::Result<Server> {
    let data = dir.join("mote.data");
    let data = data
        .to_str()
        .context("a temporary directory that is not UTF-8")?;
    let cores = cores.to_string();
    let args = [
        "up",
        "--listen",
        "127.0.0.1:0",
        "--store-listen",
        "127.0.0.1:0",
        "--cores",
        &cores,
        "--log",
        "warn",
        "--data",
        data,
    ];
    let mut server = start(
        mote,
        &args,
        cpu,
        Announces::Stdout,
        "mote is up on http://",
        dir.join("mote.log"),
    )?;
    let agent = agent();
    let deploy = |name: &str, query: &str, wasm: &'static [u8]| -> anyhow::Result<()> {
        let url = format!("{}/v1/functions/{name}{query}", server.base);
        let mut response = agent.put(&url).send(wasm)?;
        if !response.status().is_success() {
            bail!(
                "PUT {url} answered {}: {}",
                response.status(),
                response.body_mut().read_to_string().unwrap_or_default()
            );
        }
        Ok(())
    };
    let route = format!("?route={ROUTE}");
    deploy(
        mote_guests::HTTP_HELLO.name,
        &route,
        mote_guests::HTTP_HELLO.wasm,
    )?;
    deploy(mote_guests::ECHO.name, "", mote_guests::ECHO.wasm)?;
    server.wait_ready(MOTE_PATH, HELLO_BODY)?;
    Ok(server)
}

/// `wasmtime serve`'s `-O` options by default: the pooling allocator, asked for explicitly (48
/// turns it on by itself only where the address space allows), and nothing else. 48's defaults
/// already give every request of a WASIp2 component a fresh instance
/// (`--max-instance-reuse-count` 1), as mote does.
pub const WASMTIME_OPTIMIZE: &str = "pooling-allocator";

/// The arguments of `wasmtime serve` before `--addr` and the component.
pub fn wasmtime_serve_flags(optimize: &str) -> Vec<String> {
    ["serve", "-O", optimize].map(str::to_owned).to_vec()
}

/// `wasmtime serve -O OPTIMIZE` on loopback, serving `http-hello` from a file in `dir`.
fn start_wasmtime(
    wasmtime: &Path,
    optimize: &str,
    dir: &Path,
    cpu: Option<usize>,
) -> anyhow::Result<Server> {
    let component = dir.join("http-hello.wasm");
    std::fs::write(&component, mote_guests::HTTP_HELLO.wasm)?;
    let component = component
        .to_str()
        .context("a temporary directory that is not UTF-8")?;
    let flags = wasmtime_serve_flags(optimize);
    let mut args: Vec<&str> = flags.iter().map(String::as_str).collect();
    args.extend(["--addr", "127.0.0.1:0", component]);
    let mut server = start(
        wasmtime,
        &args,
        cpu,
        Announces::Stderr,
        "Serving HTTP on http://",
        dir.join("wasmtime.log"),
    )?;
    server.wait_ready("/", HELLO_BODY)?;
    Ok(server)
}

/// `wasmtime --version`'s output, checked to be the version the benchmark is written for.
fn wasmtime_version(wasmtime: &Path) -> anyhow::Result<String> {
    let output = Command::new(wasmtime)
        .arg("--version")
        .output()
        .with_context(|| format!("running {} --version", wasmtime.display()))?;
    let version = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if !version.starts_with(&format!("wasmtime {WASMTIME_VERSION}")) {
        bail!(
            "{} is `{version}`, not wasmtime {WASMTIME_VERSION} (scripts/wasmtime-cli installs it)",
            wasmtime.display()
        );
    }
    Ok(version)
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

// ---------------------------------------------------------------------------------------------
// The run and its report.

/// What serves the requests of a point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum System {
    /// `http-hello` under `mote up`, on its route.
    Mote,
    /// `http-hello` under `wasmtime serve`.
    WasmtimeServe,
    /// mote's own-ABI `echo`, `POST /v1/invoke/echo` with 64 bytes: the reference line.
    MoteEcho,
}

impl System {
    /// Its name in the tables.
    pub fn label(self) -> &'static str {
        match self {
            Self::Mote => "mote",
            Self::WasmtimeServe => "wasmtime serve",
            Self::MoteEcho => "mote, own-ABI echo (reference)",
        }
    }
}

/// One round of one point.
#[derive(Clone, Debug, Serialize)]
pub struct Round {
    /// 200 responses in the window.
    pub ok: u64,
    /// Those per second.
    pub requests_per_s: f64,
    /// Latency percentiles, µs.
    pub p50_us: f64,
    /// 99th.
    pub p99_us: f64,
    /// 99.9th.
    pub p999_us: f64,
    /// The slowest, µs.
    pub max_us: f64,
    /// Responses other than 200.
    pub non_200: u64,
    /// Failed requests (errors, timeouts).
    pub errors: u64,
    /// Connections the server closed that were opened again.
    pub reconnects: u64,
    /// The first failure, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_failure: Option<String>,
    /// The server's CPU time per 200 response in the window, µs.
    pub server_cpu_us_per_request: Option<f64>,
    /// The generator's (this process's), µs.
    pub generator_cpu_us_per_request: Option<f64>,
    /// Cores kept busy by everything else on the machine during the window (other processes,
    /// steal): noise the comparison did not choose.
    pub other_cores: Option<f64>,
    /// Windows of this point measured before this one and discarded because other processes
    /// were busy during them.
    pub noisy_windows_discarded: usize,
}

impl Round {
    fn from_measured(m: &Measured) -> Self {
        let per_request = |s: Option<f64>| s.map(|s| s * 1e6 / m.ok.max(1) as f64);
        Self {
            ok: m.ok,
            requests_per_s: m.ok as f64 / m.seconds.max(1e-9),
            p50_us: m.quantile_us(0.5),
            p99_us: m.quantile_us(0.99),
            p999_us: m.quantile_us(0.999),
            max_us: m.quantile_us(1.0),
            non_200: m.non_200,
            errors: m.errors,
            reconnects: m.reconnects,
            first_failure: m.first_failure.clone(),
            server_cpu_us_per_request: per_request(m.server_cpu_s),
            generator_cpu_us_per_request: per_request(m.generator_cpu_s),
            other_cores: match (m.machine_busy_s, m.server_cpu_s, m.generator_cpu_s) {
                (Some(all), Some(server), Some(generator)) => {
                    Some(((all - server - generator) / m.seconds.max(1e-9)).max(0.0))
                }
                _ => None,
            },
            noisy_windows_discarded: 0,
        }
    }
}

/// One system at one concurrency: the medians of its rounds.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    /// What served it.
    pub system: System,
    /// Connections.
    pub concurrency: usize,
    /// Requests per second, median over the rounds.
    pub requests_per_s: f64,
    /// Median latency, µs (median over the rounds).
    pub p50_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// 99.9th percentile, µs.
    pub p999_us: f64,
    /// The server's CPU time per request, µs.
    pub server_cpu_us_per_request: Option<f64>,
    /// The generator's, µs.
    pub generator_cpu_us_per_request: Option<f64>,
    /// Cores busy with anything else, the most of any round.
    pub other_cores: Option<f64>,
    /// Failed requests over every round.
    pub failed: u64,
    /// Every round.
    pub rounds: Vec<Round>,
}

impl Point {
    fn new(system: System, concurrency: usize, rounds: Vec<Round>) -> Self {
        let median = |f: fn(&Round) -> f64| {
            crate::stats::median(&rounds.iter().map(f).collect::<Vec<_>>()).unwrap_or(f64::NAN)
        };
        let median_opt = |f: fn(&Round) -> Option<f64>| {
            crate::stats::median(&rounds.iter().filter_map(f).collect::<Vec<_>>())
        };
        Self {
            system,
            concurrency,
            requests_per_s: median(|r| r.requests_per_s),
            p50_us: median(|r| r.p50_us),
            p99_us: median(|r| r.p99_us),
            p999_us: median(|r| r.p999_us),
            server_cpu_us_per_request: median_opt(|r| r.server_cpu_us_per_request),
            generator_cpu_us_per_request: median_opt(|r| r.generator_cpu_us_per_request),
            other_cores: rounds
                .iter()
                .filter_map(|r| r.other_cores)
                .max_by(f64::total_cmp),
            failed: rounds.iter().map(|r| r.non_200 + r.errors).sum(),
            rounds,
        }
    }
}

/// mote against `wasmtime serve` at one concurrency. The ratios are taken round by round, each
/// between two windows measured back to back, and the median of those is the comparison's: a
/// shared machine's speed drifts between rounds (the generator's own CPU time per request, the
/// same code for both, shows it), and a ratio of medians would mix rounds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    /// Connections.
    pub concurrency: usize,
    /// mote's requests/s over wasmtime serve's, median of the rounds.
    pub requests_per_s_ratio: f64,
    /// Every round's.
    pub requests_per_s_ratio_rounds: Vec<f64>,
    /// mote's p99 over wasmtime serve's (below 1: mote's is lower), median of the rounds.
    pub p99_ratio: f64,
    /// Every round's.
    pub p99_ratio_rounds: Vec<f64>,
    /// Whether the ratio reaches [`FLOOR_RPS_RATIO`] with a lower p99.
    pub meets_floor: bool,
}

impl Comparison {
    /// `mote` against `wasmtime` at the same concurrency, round by round.
    pub fn new(mote: &Point, wasmtime: &Point) -> Self {
        let rounds = || mote.rounds.iter().zip(&wasmtime.rounds);
        let requests_per_s_ratio_rounds: Vec<f64> = rounds()
            .map(|(m, w)| m.requests_per_s / w.requests_per_s)
            .collect();
        let p99_ratio_rounds: Vec<f64> = rounds().map(|(m, w)| m.p99_us / w.p99_us).collect();
        let median = |v: &[f64]| crate::stats::median(v).unwrap_or(f64::NAN);
        let requests_per_s_ratio = median(&requests_per_s_ratio_rounds);
        let p99_ratio = median(&p99_ratio_rounds);
        Self {
            concurrency: mote.concurrency,
            requests_per_s_ratio,
            requests_per_s_ratio_rounds,
            p99_ratio,
            p99_ratio_rounds,
            meets_floor: requests_per_s_ratio >= FLOOR_RPS_RATIO && p99_ratio < 1.0,
        }
    }
}

/// The machine and the moment.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// Cores this process may run on.
    pub nproc: usize,
    /// The CPU's model name.
    pub cpu: String,
    /// The kernel's release.
    pub kernel: String,
    /// `/proc/loadavg`'s 1, 5 and 15 minute load when the run started.
    pub load_at_start: String,
    /// And when it ended.
    pub load_at_end: String,
}

/// What the benchmark measured.
#[derive(Clone, Debug, Serialize)]
pub struct HttpReport {
    /// The command line.
    pub command: String,
    /// When it started (UTC).
    pub date: String,
    /// The machine.
    pub machine: Machine,
    /// A smoke run.
    pub smoke: bool,
    /// `wasmtime --version`, if wasmtime serve was measured.
    pub wasmtime_version: Option<String>,
    /// The arguments wasmtime serve ran with (the address and the file left out).
    pub wasmtime_flags: Option<Vec<String>>,
    /// mote's executor cores (`mote up --cores`).
    pub mote_cores: usize,
    /// Where the generator and the servers ran, if pinned.
    pub pin: Option<Pinning>,
    /// The generator's threads.
    pub generator_threads: usize,
    /// The measured window of each point, s.
    pub seconds: f64,
    /// The warm-up before it, s.
    pub warmup_s: f64,
    /// Rounds of every point.
    pub rounds: usize,
    /// What each system was sent (Markdown).
    pub requests: Vec<(System, String)>,
    /// Every point, in the order of the concurrencies, mote first.
    pub points: Vec<Point>,
    /// mote's echo at one concurrency.
    pub reference: Option<Point>,
    /// mote over wasmtime serve per concurrency.
    pub comparisons: Vec<Comparison>,
    /// Whether the floor holds at every concurrency; `None` without wasmtime serve.
    pub meets_floor: Option<bool>,
    /// Failed requests in the whole run.
    pub failed: u64,
    /// Wall time of the whole benchmark, s.
    pub bench_s: f64,
}

/// Runs the benchmark, writes `results.json` and `report.md` to `out`, and returns the report.
pub fn run(
    config: &HttpBenchConfig,
    out: &Path,
    progress: &mut dyn FnMut(&str),
) -> anyhow::Result<HttpReport> {
    let started = Instant::now();
    let date = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let load_at_start = load_average();
    let nproc = std::thread::available_parallelism().map_or(1, |n| n.get());
    if config.concurrencies.is_empty() {
        bail!("no concurrency to measure");
    }
    if let Some(pin) = config.pin
        && (pin.generator_cpu.max(pin.server_cpu) >= nproc || pin.generator_cpu == pin.server_cpu)
    {
        bail!("pinning needs two distinct CPUs below {nproc}: {pin:?}; run without --pin here");
    }
    let wasmtime_version = config
        .wasmtime
        .as_deref()
        .map(wasmtime_version)
        .transpose()?;
    let generator_threads = match config.pin {
        Some(_) => 1,
        None => nproc,
    };
    let server_cpu = config.pin.map(|p| p.server_cpu);
    // Pinned, mote gets the one core the server runs on; otherwise every core, as by default.
    let mote_cores = match config.pin {
        Some(_) => 1,
        None => nproc,
    };
    progress(&format!(
        "mote bench http: {nproc} cores, load {load_at_start}; {}",
        match &wasmtime_version {
            Some(v) => format!("mote and {v} serve"),
            None => "mote only".into(),
        }
    ));
    let dir = tempfile::tempdir()?;
    let mote =
        start_mote(&config.mote, dir.path(), mote_cores, server_cpu).context("starting mote")?;
    let wasmtime = match &config.wasmtime {
        Some(path) => Some(
            start_wasmtime(path, &config.wasmtime_optimize, dir.path(), server_cpu)
                .context("starting wasmtime serve")?,
        ),
        None => None,
    };
    let mut contenders = vec![Contender {
        system: System::Mote,
        target: Target::new(
            Method::GET,
            &format!("{}{MOTE_PATH}", mote.base),
            Bytes::new(),
        )?,
        server: &mote,
    }];
    if let Some(server) = &wasmtime {
        contenders.push(Contender {
            system: System::WasmtimeServe,
            target: Target::new(Method::GET, &format!("{}/", server.base), Bytes::new())?,
            server,
        });
    }
    let reference = Contender {
        system: System::MoteEcho,
        target: Target::new(
            Method::POST,
            &format!("{}/v1/invoke/echo", mote.base),
            Bytes::from_static(&ECHO_BODY),
        )?,
        server: &mote,
    };
    let rt = generator_runtime(generator_threads, config.pin.map(|p| p.generator_cpu))?;
    let rounds = config.rounds.max(1);
    let measured = measure(config, &rt, &contenders, &reference, progress);
    drop((contenders, reference));
    drop((mote, wasmtime));

    let mut points = measured;
    let reference = points
        .iter()
        .position(|p| p.system == System::MoteEcho)
        .map(|i| points.remove(i));
    points.sort_by_key(|p| (p.concurrency, p.system != System::Mote));
    let comparisons: Vec<Comparison> = config
        .concurrencies
        .iter()
        .filter_map(|&c| {
            let find = |s: System| points.iter().find(|p| p.system == s && p.concurrency == c);
            Some(Comparison::new(
                find(System::Mote)?,
                find(System::WasmtimeServe)?,
            ))
        })
        .collect();
    let meets_floor = (!comparisons.is_empty()).then(|| comparisons.iter().all(|c| c.meets_floor));
    let failed = points.iter().chain(&reference).map(|p| p.failed).sum();
    let mut requests = vec![(
        System::Mote,
        format!("`GET {MOTE_PATH}` (the route `{ROUTE}`)"),
    )];
    if config.wasmtime.is_some() {
        requests.push((System::WasmtimeServe, "`GET /`".to_owned()));
    }
    if config.reference.is_some() {
        requests.push((
            System::MoteEcho,
            "`POST /v1/invoke/echo`, a 64-byte body".to_owned(),
        ));
    }
    let report = HttpReport {
        command: config.command.clone(),
        date,
        machine: Machine {
            nproc,
            cpu: cpu_model(),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|k| k.trim().to_owned())
                .unwrap_or_default(),
            load_at_start,
            load_at_end: load_average(),
        },
        smoke: config.smoke,
        wasmtime_version,
        wasmtime_flags: config
            .wasmtime
            .as_ref()
            .map(|_| wasmtime_serve_flags(&config.wasmtime_optimize)),
        mote_cores,
        pin: config.pin,
        generator_threads,
        seconds: config.duration.as_secs_f64(),
        warmup_s: config.warmup.as_secs_f64(),
        rounds,
        requests,
        points,
        reference,
        comparisons,
        meets_floor,
        failed,
        bench_s: started.elapsed().as_secs_f64(),
    };
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(&report)? + "\n",
    )?;
    std::fs::write(out.join("report.md"), report.table())?;
    Ok(report)
}

/// A system under test: what it is sent, and its process.
struct Contender<'a> {
    system: System,
    target: Target,
    server: &'a Server,
}

/// Every round of every point: at each concurrency each contender in turn (which goes first
/// alternates from one point to the next and one round to the next, so neither always follows
/// the other), and at the end of each round the reference line.
fn measure(
    config: &HttpBenchConfig,
    rt: &tokio::runtime::Runtime,
    contenders: &[Contender<'_>],
    reference: &Contender<'_>,
    progress: &mut dyn FnMut(&str),
) -> Vec<Point> {
    let rounds = config.rounds.max(1);
    let mut measured: Vec<(System, usize, Vec<Round>)> = Vec::new();
    let mut one = |round: usize, contender: &Contender<'_>, connections: usize| {
        let load = Load {
            connections,
            warmup: config.warmup,
            duration: config.duration,
        };
        let mut noisy = 0;
        let r = loop {
            let m = drive(rt, &contender.target, load, Some(contender.server.pid()));
            let mut r = Round::from_measured(&m);
            r.noisy_windows_discarded = noisy;
            let disturbed = r.other_cores.is_some_and(|c| c > NOISE_CORES);
            // A failed request is never discarded, disturbed or not.
            if !disturbed || noisy >= config.noise_retries || r.non_200 + r.errors > 0 {
                break r;
            }
            noisy += 1;
            progress(&format!(
                "  {} at {connections} connections: other processes kept {:.2} cores busy; \
                 measuring again",
                contender.system.label(),
                r.other_cores.unwrap_or_default()
            ));
            std::thread::sleep(Duration::from_secs(2));
        };
        progress(&point_line(
            round,
            rounds,
            contender.system,
            connections,
            &r,
        ));
        if let Some(failure) = &r.first_failure {
            progress(&format!(
                "  first failure: {failure}; server log: {}",
                contender.server.log_tail()
            ));
        }
        let key = (contender.system, connections);
        match measured.iter_mut().find(|(s, c, _)| (*s, *c) == key) {
            Some((_, _, rounds)) => rounds.push(r),
            None => measured.push((key.0, key.1, vec![r])),
        }
    };
    for round in 0..rounds {
        for (i, &c) in config.concurrencies.iter().enumerate() {
            let order: Vec<&Contender<'_>> = match (round + i) % 2 {
                0 => contenders.iter().collect(),
                _ => contenders.iter().rev().collect(),
            };
            for contender in order {
                one(round, contender, c);
            }
        }
        if let Some(c) = config.reference {
            one(round, reference, c);
        }
    }
    measured
        .into_iter()
        .map(|(system, c, rounds)| Point::new(system, c, rounds))
        .collect()
}

fn point_line(round: usize, rounds: usize, system: System, c: usize, r: &Round) -> String {
    format!(
        "round {}/{rounds}, {c} connections, {}: {:.0} req/s, p50 {}, p99 {}, {} failed",
        round + 1,
        system.label(),
        r.requests_per_s,
        latency(r.p50_us),
        latency(r.p99_us),
        r.non_200 + r.errors
    )
}

/// A latency given in µs, as `87 µs`, `1.23 ms` or `45.6 ms`; `–` if there is none.
pub fn latency(us: f64) -> String {
    match us {
        us if !us.is_finite() => "–".into(),
        us if us < 1000.0 => format!("{us:.0} µs"),
        us if us < 10_000.0 => format!("{:.2} ms", us / 1e3),
        us => format!("{:.1} ms", us / 1e3),
    }
}

/// A ratio as `3.41x`; `–` if there is none.
pub fn ratio(r: f64) -> String {
    match r.is_finite() {
        true => format!("{r:.2}x"),
        false => "–".into(),
    }
}

fn met(ok: bool) -> &'static str {
    if ok { "met" } else { "NOT met" }
}

impl HttpReport {
    /// The report in Markdown: the set-up, every point, and mote against wasmtime serve.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let m = &self.machine;
        let _ = writeln!(
            s,
            "`{}` on {} ({} cores, Linux {}), {}; load average {} at start, {} at end; {:.0} s{}\n",
            self.command,
            m.cpu,
            m.nproc,
            m.kernel,
            self.date,
            m.load_at_start,
            m.load_at_end,
            self.bench_s,
            if self.smoke {
                "; a smoke run, not the benchmark's figures"
            } else {
                ""
            }
        );
        let servers = match (&self.wasmtime_version, &self.wasmtime_flags) {
            (Some(version), Some(flags)) => format!(
                "`mote up --cores {}` and `{version}` (`wasmtime {} --addr 127.0.0.1:0 http-hello.wasm`)",
                self.mote_cores,
                flags.join(" ")
            ),
            _ => format!(
                "`mote up --cores {}` alone: wasmtime serve was not measured (no --wasmtime)",
                self.mote_cores
            ),
        };
        let placement = match self.pin {
            Some(p) => format!(
                "the generator pinned to CPU {}, each server to CPU {} (taskset)",
                p.generator_cpu, p.server_cpu
            ),
            None => "the generator and the server sharing every core".into(),
        };
        let _ = writeln!(
            s,
            "Servers: {servers}. Load: hyper HTTP/1.1 keep-alive, one request in flight per \
             connection, {} generator thread(s), {placement}; {} s windows after {} s of warm-up, \
             {} round(s), median of the rounds; the systems alternate point by point.\n",
            self.generator_threads, self.seconds, self.warmup_s, self.rounds
        );
        for (system, request) in &self.requests {
            let _ = writeln!(s, "- {}: {request}", system.label());
        }
        s.push_str(
            "\n| system | connections | req/s | p50 | p99 | p99.9 | server CPU/req | generator CPU/req | other load | failed |\n\
             |---|---|---|---|---|---|---|---|---|---|\n",
        );
        let cpu = |us: Option<f64>| us.map_or("–".into(), |us| format!("{us:.0} µs"));
        for p in self.points.iter().chain(&self.reference) {
            let _ = writeln!(
                s,
                "| {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} |",
                p.system.label(),
                p.concurrency,
                p.requests_per_s,
                latency(p.p50_us),
                latency(p.p99_us),
                latency(p.p999_us),
                cpu(p.server_cpu_us_per_request),
                cpu(p.generator_cpu_us_per_request),
                p.other_cores
                    .map_or("–".into(), |c| format!("{c:.2} cores")),
                p.failed
            );
        }
        if !self.comparisons.is_empty() {
            let _ = writeln!(
                s,
                "\n**mote / wasmtime serve** (floor: at least {FLOOR_RPS_RATIO}x the requests/s, \
                 with a lower p99):\n\n\
                 | connections | req/s mote / wasmtime | each round | p99 mote / wasmtime | each round | floor |\n\
                 |---|---|---|---|---|---|"
            );
            let rounds = |v: &[f64]| v.iter().map(|r| ratio(*r)).collect::<Vec<_>>().join(", ");
            for c in &self.comparisons {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} | {} |",
                    c.concurrency,
                    ratio(c.requests_per_s_ratio),
                    rounds(&c.requests_per_s_ratio_rounds),
                    ratio(c.p99_ratio),
                    rounds(&c.p99_ratio_rounds),
                    met(c.meets_floor)
                );
            }
        }
        match self.meets_floor {
            Some(ok) => {
                let _ = writeln!(s, "\nFloor at every concurrency: {}", met(ok));
                if let Some(c) = self.comparisons.iter().find(|c| c.concurrency == 32) {
                    let _ = writeln!(
                        s,
                        "At 32 connections (the issue's wrk set-up): {}, {} the requests/s, {} the p99",
                        met(c.meets_floor),
                        ratio(c.requests_per_s_ratio),
                        ratio(c.p99_ratio)
                    );
                }
            }
            None => {
                let _ = writeln!(s, "\nNo comparison: wasmtime serve was not measured.");
            }
        }
        let noisy = self
            .points
            .iter()
            .chain(&self.reference)
            .filter_map(|p| p.other_cores)
            .fold(0.0, f64::max);
        if noisy > NOISE_CORES {
            let _ = writeln!(
                s,
                "\n**Noisy run:** other processes kept up to {noisy:.2} cores busy during a \
                 window (`other load`); compare the points where they did not."
            );
        }
        if self.failed > 0 {
            let _ = writeln!(
                s,
                "\n**{} request(s) failed** (see results.json).",
                self.failed
            );
        }
        s
    }

    /// An error if any request failed: the figures of such a run do not stand.
    pub fn check(&self) -> Result<(), crate::results::RunFailed> {
        let failures: Vec<String> = self
            .points
            .iter()
            .chain(&self.reference)
            .flat_map(|p| {
                p.rounds.iter().filter_map(move |r| {
                    r.first_failure.as_ref().map(|f| {
                        format!(
                            "{} at {} connections: {} failed, first: {f}",
                            p.system.label(),
                            p.concurrency,
                            r.non_200 + r.errors
                        )
                    })
                })
            })
            .collect();
        match failures.is_empty() && self.failed == 0 {
            true => Ok(()),
            false => Err(crate::results::RunFailed(format!(
                "{} request(s) failed: {}",
                self.failed,
                failures.join("; ")
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_concurrency_list_keeps_its_order_and_drops_repeats() {
        assert_eq!(parse_concurrencies("1,8,32,64"), Ok(vec![1, 8, 32, 64]));
        assert_eq!(parse_concurrencies(" 8, 1 ,8,"), Ok(vec![8, 1]));
        assert_eq!(parse_concurrencies(""), Err(ConcurrencyListError::Empty));
        assert_eq!(parse_concurrencies(",,"), Err(ConcurrencyListError::Empty));
        assert_eq!(
            parse_concurrencies("1,0"),
            Err(ConcurrencyListError::Invalid("0".into()))
        );
        assert_eq!(
            parse_concurrencies("1,x"),
            Err(ConcurrencyListError::Invalid("x".into()))
        );
        assert_eq!(
            parse_concurrencies("-1"),
            Err(ConcurrencyListError::Invalid("-1".into()))
        );
    }

    #[test]
    fn the_machine_is_busy_for_all_but_its_idle_and_iowait_ticks() {
        let stat = "cpu  100 5 50 1000 20 3 2 7 0 0\ncpu0 50 2 25 500 10 1 1 3 0 0\n";
        assert_eq!(busy_ticks(stat), Some(100 + 5 + 50 + 3 + 2 + 7));
        assert_eq!(busy_ticks("cpu0 1 2 3 4 5 6 7 8"), None);
        assert_eq!(busy_ticks("cpu  1 2 3"), None);
        let own = std::fs::read_to_string("/proc/stat").unwrap();
        assert!(busy_ticks(&own).is_some(), "{own}");
    }

    #[test]
    fn latencies_and_ratios_read_at_a_glance() {
        assert_eq!(latency(87.4), "87 µs");
        assert_eq!(latency(1234.0), "1.23 ms");
        assert_eq!(latency(45_678.0), "45.7 ms");
        assert_eq!(latency(f64::NAN), "–");
        assert_eq!(ratio(3.414), "3.41x");
        assert_eq!(ratio(f64::INFINITY), "–");
    }

    #[test]
    fn cpu_time_is_read_past_a_command_name_with_spaces_and_parentheses() {
        let stat = "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 \
                    250 50 0 0 20 0 9 0 12345 1000000 500";
        assert_eq!(cpu_ticks(stat), Some(300));
        assert_eq!(cpu_ticks("4242 (short"), None);
        assert_eq!(cpu_ticks("garbage"), None);
        let own = std::fs::read_to_string("/proc/self/stat").unwrap();
        assert!(cpu_ticks(&own).is_some(), "{own}");
    }

    fn point(system: System, rps: f64, p99: f64) -> Point {
        let round = Round {
            ok: rps as u64,
            requests_per_s: rps,
            p50_us: p99 / 4.0,
            p99_us: p99,
            p999_us: p99 * 2.0,
            max_us: p99 * 3.0,
            non_200: 0,
            errors: 0,
            reconnects: 0,
            first_failure: None,
            server_cpu_us_per_request: Some(10.0),
            generator_cpu_us_per_request: None,
            other_cores: Some(0.05),
            noisy_windows_discarded: 0,
        };
        Point::new(system, 32, vec![round])
    }

    #[test]
    fn the_floor_needs_three_times_the_rate_and_a_lower_p99() {
        let wasmtime = point(System::WasmtimeServe, 4000.0, 9000.0);
        let c = Comparison::new(&point(System::Mote, 12_000.0, 2000.0), &wasmtime);
        assert_eq!(c.requests_per_s_ratio, 3.0);
        assert!((c.p99_ratio - 2.0 / 9.0).abs() < 1e-12);
        assert!(c.meets_floor);
        let slower = Comparison::new(&point(System::Mote, 11_000.0, 2000.0), &wasmtime);
        assert!(!slower.meets_floor);
        let worse_tail = Comparison::new(&point(System::Mote, 40_000.0, 9000.0), &wasmtime);
        assert!(!worse_tail.meets_floor);
    }

    #[test]
    fn ratios_are_paired_round_by_round() {
        let with_rounds = |system, rates: [f64; 3], p99s: [f64; 3]| {
            let template = point(system, 1.0, 1.0).rounds[0].clone();
            let rounds = rates
                .iter()
                .zip(p99s)
                .map(|(&requests_per_s, p99_us)| Round {
                    requests_per_s,
                    p99_us,
                    ..template.clone()
                })
                .collect();
            Point::new(system, 32, rounds)
        };
        // The machine is faster in the second round, for both.
        let mote = with_rounds(System::Mote, [30.0, 60.0, 33.0], [2.0, 1.0, 2.0]);
        let wasmtime = with_rounds(System::WasmtimeServe, [10.0, 15.0, 10.0], [4.0, 4.0, 4.0]);
        let c = Comparison::new(&mote, &wasmtime);
        assert_eq!(c.requests_per_s_ratio_rounds, vec![3.0, 4.0, 3.3]);
        assert_eq!(c.requests_per_s_ratio, 3.3);
        assert_eq!(c.p99_ratio, 0.5);
        assert!(c.meets_floor);
    }

    #[test]
    fn a_point_takes_the_median_of_its_rounds_and_sums_its_failures() {
        let mut rounds = point(System::Mote, 1.0, 1.0).rounds;
        let make = |rps: f64, failed: u64| Round {
            requests_per_s: rps,
            non_200: failed,
            ..rounds[0].clone()
        };
        rounds = vec![make(100.0, 0), make(300.0, 2), make(200.0, 1)];
        let p = Point::new(System::Mote, 8, rounds);
        assert_eq!(p.requests_per_s, 200.0);
        assert_eq!(p.failed, 3);
        assert_eq!(p.server_cpu_us_per_request, Some(10.0));
        assert_eq!(p.generator_cpu_us_per_request, None);
    }

    fn report(points: Vec<Point>, comparisons: Vec<Comparison>) -> HttpReport {
        HttpReport {
            command: "mote bench http".into(),
            date: "2026-11-26T00:00:00Z".into(),
            machine: Machine {
                nproc: 2,
                cpu: "a CPU".into(),
                kernel: "6.18".into(),
                load_at_start: "0 0 0".into(),
                load_at_end: "1 1 1".into(),
            },
            smoke: false,
            wasmtime_version: Some("wasmtime 48.0.8".into()),
            wasmtime_flags: Some(wasmtime_serve_flags(WASMTIME_OPTIMIZE)),
            mote_cores: 2,
            pin: None,
            generator_threads: 2,
            seconds: 5.0,
            warmup_s: 1.0,
            rounds: 1,
            requests: vec![(System::Mote, "GET /hello-http/".into())],
            meets_floor: Some(comparisons.iter().all(|c| c.meets_floor)),
            failed: points.iter().map(|p| p.failed).sum(),
            points,
            reference: None,
            comparisons,
            bench_s: 60.0,
        }
    }

    #[test]
    fn the_table_shows_every_point_the_ratios_and_the_floor() {
        let mote = point(System::Mote, 12_000.0, 2000.0);
        let wasmtime = point(System::WasmtimeServe, 4000.0, 9000.0);
        let c = Comparison::new(&mote, &wasmtime);
        let r = report(vec![mote, wasmtime], vec![c]);
        let table = r.table();
        assert!(
            table.contains(
                "| mote | 32 | 12000 | 500 µs | 2.00 ms | 4.00 ms | 10 µs | – | 0.05 cores | 0 |"
            ),
            "{table}"
        );
        assert!(table.contains("| wasmtime serve | 32 | 4000 |"), "{table}");
        assert!(
            table.contains("| 32 | 3.00x | 3.00x | 0.22x | 0.22x | met |"),
            "{table}"
        );
        assert!(table.contains("At 32 connections (the issue's wrk set-up): met"));
        assert!(table.contains("Floor at every concurrency: met"), "{table}");
        assert!(!table.contains("Noisy run"), "{table}");
        assert!(r.check().is_ok());
    }

    #[test]
    fn a_run_with_a_failed_request_fails_its_check() {
        let mut mote = point(System::Mote, 12_000.0, 2000.0);
        mote.rounds[0].non_200 = 1;
        mote.rounds[0].first_failure = Some("GET /hello-http/ answered 500".into());
        mote.failed = 1;
        let r = report(vec![mote], vec![]);
        let err = r.check().unwrap_err().to_string();
        assert!(err.contains("answered 500"), "{err}");
        assert!(r.table().contains("**1 request(s) failed**"));
    }
}
