//! The report of a run ([`HttpReport`]): the machine and the set-up, every point, the
//! comparisons and the floor, as JSON and as Markdown ([`HttpReport::table`]); and the check that
//! fails a run in which a request failed ([`HttpReport::check`]).

use super::config::Pinning;
use super::points::{
    AgainstNative, Comparison, FLOOR_RPS_RATIO, NATIVE_ECHO_FLOOR, NATIVE_ECHO_P99_CEILING,
    NATIVE_HELLO_FLOOR, NOISE_CORES, Point, Round, System,
};
use crate::results::RunFailed;
use serde::Serialize;
use std::fmt::Write as _;

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
    /// mote's native handler at the same concurrency.
    pub native: Option<Point>,
    /// The echo and the component against the native handler.
    pub against_native: Option<AgainstNative>,
    /// mote over wasmtime serve per concurrency.
    pub comparisons: Vec<Comparison>,
    /// Whether the floor holds at every concurrency; `None` without wasmtime serve.
    pub meets_floor: Option<bool>,
    /// Failed requests in the whole run.
    pub failed: u64,
    /// Wall time of the whole benchmark, s.
    pub bench_s: f64,
}

/// One round of one point, as a progress line.
pub(super) fn point_line(
    round: usize,
    rounds: usize,
    system: System,
    c: usize,
    r: &Round,
) -> String {
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
                "the generator pinned to CPU {}, each server to CPU {} (CPU affinity)",
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
        for p in self
            .points
            .iter()
            .chain(&self.native)
            .chain(&self.reference)
        {
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
        if let Some(a) = &self.against_native {
            let rounds = |v: &[f64]| v.iter().map(|r| ratio(*r)).collect::<Vec<_>>().join(", ");
            let _ = writeln!(
                s,
                "\n**mote's guests / its native handler** at {} connections (floors: the echo at \
                 least {NATIVE_ECHO_FLOOR}x the requests/s with at most {NATIVE_ECHO_P99_CEILING}x \
                 the p99; the component at least {NATIVE_HELLO_FLOOR}x the requests/s):\n\n\
                 | ratio | median | each round | floor |\n|---|---|---|---|\n\
                 | echo req/s / native | {} | {} | {} |\n\
                 | echo p99 / native | {} | {} | |",
                a.concurrency,
                ratio(a.echo_ratio),
                rounds(&a.echo_ratio_rounds),
                met(a.echo_meets_floor),
                ratio(a.echo_p99_ratio),
                rounds(&a.echo_p99_ratio_rounds),
            );
            if let (Some(r), Some(ok)) = (a.hello_ratio, a.hello_meets_floor) {
                let _ = writeln!(
                    s,
                    "| component req/s / native | {} | {} | {} |",
                    ratio(r),
                    rounds(&a.hello_ratio_rounds),
                    met(ok)
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
            .chain(&self.native)
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
    pub fn check(&self) -> Result<(), RunFailed> {
        let failures: Vec<String> = self
            .points
            .iter()
            .chain(&self.native)
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
            false => Err(RunFailed(format!(
                "{} request(s) failed: {}",
                self.failed,
                failures.join("; ")
            ))),
        }
    }
}
