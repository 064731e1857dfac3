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
//! with `pin`, the generator's threads run on one CPU and each server on another (CPU affinity), so
//! both servers get exactly one core and the generator never competes with them; without it,
//! all three share every core and the kernel decides.
//! The servers' CPU time during each window (from `/proc`) is reported per request, and so is
//! what the rest of the machine did meanwhile: a window during which other processes kept more
//! than a fifth of a core busy is measured again (up to `noise_retries` times), since on a
//! shared machine it would penalise whichever system happened to run then.
//!
//! mote's own-ABI `echo` (`POST /v1/invoke/echo`, 64 bytes) is measured at one concurrency as a
//!
//! Its modules: `config` (what to run), `load` (the load generator), `servers` (the systems under
//! test), `points` (rounds, points, comparisons), `report` (the report and its check). This file
//! runs the benchmark ([`run`]): it starts the servers, measures every point and writes the
//! report.

mod config;
mod load;
mod points;
mod report;
mod servers;
#[cfg(test)]
mod tests;

pub use config::{ConcurrencyListError, HttpBenchConfig, Pinning, parse_concurrencies};
pub use load::{Load, Measured, Target, drive, generator_runtime};
pub use points::{
    AgainstNative, Comparison, FLOOR_RPS_RATIO, NATIVE_ECHO_FLOOR, NATIVE_ECHO_P99_CEILING,
    NATIVE_HELLO_FLOOR, Point, Round, System,
};
pub use report::{HttpReport, Machine, latency, ratio};
pub(crate) use servers::agent;
pub use servers::{WASMTIME_VERSION, wasmtime_optimize, wasmtime_serve_flags};

use crate::results::{cpu_model, load_average};
use anyhow::{Context, bail};
use bytes::Bytes;
use hyper::Method;
use mote_testbed::Served;
use points::NOISE_CORES;
use report::point_line;
use servers::{MOTE_PATH, ROUTE, start_mote, start_wasmtime, wasmtime_version};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

/// The body of the reference line's echo calls.
const ECHO_BODY: [u8; 64] = [b'x'; 64];

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
            &format!("{}{MOTE_PATH}", mote.url()),
            Bytes::new(),
        )?,
        server: &mote,
    }];
    if let Some(server) = &wasmtime {
        contenders.push(Contender {
            system: System::WasmtimeServe,
            target: Target::new(Method::GET, &format!("{}/", server.url()), Bytes::new())?,
            server,
        });
    }
    let references = [
        Contender {
            system: System::MoteNative,
            target: Target::new(
                Method::GET,
                &format!("{}/healthz", mote.url()),
                Bytes::new(),
            )?,
            server: &mote,
        },
        Contender {
            system: System::MoteEcho,
            target: Target::new(
                Method::POST,
                &format!("{}/v1/invoke/echo", mote.url()),
                Bytes::from_static(&ECHO_BODY),
            )?,
            server: &mote,
        },
    ];
    let rt = generator_runtime(generator_threads, config.pin.map(|p| p.generator_cpu))?;
    let rounds = config.rounds.max(1);
    let measured = measure(config, &rt, &contenders, &references, progress);
    drop((contenders, references));
    drop((mote, wasmtime));

    let mut points = measured;
    let mut take = |system: System| {
        points
            .iter()
            .position(|p| p.system == system)
            .map(|i| points.remove(i))
    };
    let reference = take(System::MoteEcho);
    let native = take(System::MoteNative);
    let against_native = match (&native, &reference) {
        (Some(native), Some(echo)) => Some(AgainstNative::new(
            native,
            echo,
            points
                .iter()
                .find(|p| p.system == System::Mote && p.concurrency == native.concurrency),
        )),
        _ => None,
    };
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
    let failed = points
        .iter()
        .chain(&reference)
        .chain(&native)
        .map(|p| p.failed)
        .sum();
    let mut requests = vec![(
        System::Mote,
        format!("`GET {MOTE_PATH}` (the route `{ROUTE}`)"),
    )];
    if config.wasmtime.is_some() {
        requests.push((System::WasmtimeServe, "`GET /`".to_owned()));
    }
    if config.reference.is_some() {
        requests.push((
            System::MoteNative,
            "`GET /healthz`, answered by the gateway itself".to_owned(),
        ));
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
        native,
        against_native,
        comparisons,
        meets_floor,
        failed,
        bench_s: started.elapsed().as_secs_f64(),
    };
    crate::results::write_report(out, &report, HttpReport::table)?;
    Ok(report)
}

/// A system under test: what it is sent, and its process.
struct Contender<'a> {
    system: System,
    target: Target,
    server: &'a Served,
}

/// Every round of every point: at each concurrency each contender in turn (which goes first
/// alternates from one point to the next and one round to the next, so neither always follows
/// the other), and at the end of each round the reference lines, back to back (their order
/// alternating too).
fn measure(
    config: &HttpBenchConfig,
    rt: &tokio::runtime::Runtime,
    contenders: &[Contender<'_>],
    references: &[Contender<'_>],
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
                contender.server.log_tail(5)
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
            let order: Vec<&Contender<'_>> = match round % 2 {
                0 => references.iter().collect(),
                _ => references.iter().rev().collect(),
            };
            for reference in order {
                one(round, reference, c);
            }
        }
    }
    measured
        .into_iter()
        .map(|(system, c, rounds)| Point::new(system, c, rounds))
        .collect()
}
