//! The load generator: `C` connections (HTTP/1.1, keep-alive, hyper's client), each sending one
//! request after another (closed loop) for a warm-up and then a measured window, on a Tokio
//! runtime of its own ([`generator_runtime`], [`drive`]); each response completed in the window
//! is counted and its latency recorded in a histogram, and any response other than 200, any
//! error and any timeout is a failure, counted whenever it happens. The server's, the
//! generator's and the whole machine's CPU time over the window are read from `/proc`.

use anyhow::Context;
use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use mote_testbed::cpu::pin_current_thread;
use mote_testbed::cpu_time::{machine_busy, process_cpu};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest a request may take before it counts as failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

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

/// User plus system CPU time of process `pid` so far, s.
fn cpu_seconds(pid: u32) -> Option<f64> {
    process_cpu(pid).map(|t| t.as_secs_f64())
}

/// The same for this process.
fn cpu_seconds_self() -> Option<f64> {
    cpu_seconds(std::process::id())
}

/// CPU time every core of the machine has been busy so far, s.
fn machine_busy_seconds() -> Option<f64> {
    machine_busy().map(|t| t.as_secs_f64())
}
