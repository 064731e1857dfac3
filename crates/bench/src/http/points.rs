//! What the benchmark measured, point by point: a [`Round`] is one measured window of one
//! system at one concurrency, a [`Point`] the median of its rounds, and a [`Comparison`] mote
//! against `wasmtime serve` at one concurrency, ratio by ratio, against the floor.

use super::load::Measured;
use serde::Serialize;

/// The floor on mote's requests/s over `wasmtime serve`'s given mote's pooling options, at every
/// concurrency (with a lower p99 as well).
pub const FLOOR_RPS_RATIO: f64 = 2.0;

/// The floor on the own-ABI echo's requests/s over the node's native handler's.
pub const NATIVE_ECHO_FLOOR: f64 = 0.8;
/// The ceiling on the echo's p99 over the native handler's.
pub const NATIVE_ECHO_P99_CEILING: f64 = 1.5;
/// The floor on the component's requests/s over the native handler's.
pub const NATIVE_HELLO_FLOOR: f64 = 0.5;

/// Cores busy with other work during a window past which it is measured again, and the report
/// calls the run noisy.
pub(super) const NOISE_CORES: f64 = 0.2;

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
    /// mote's native handler, `GET /healthz`: what the node's HTTP path costs with no guest.
    MoteNative,
}

impl System {
    /// Its name in the tables.
    pub fn label(self) -> &'static str {
        match self {
            Self::Mote => "mote",
            Self::WasmtimeServe => "wasmtime serve",
            Self::MoteEcho => "mote, own-ABI echo (reference)",
            Self::MoteNative => "mote, native handler (reference)",
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
    pub(super) fn from_measured(m: &Measured) -> Self {
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
    pub(super) fn new(system: System, concurrency: usize, rounds: Vec<Round>) -> Self {
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

/// `of`'s figure `f` over `to`'s, round by round.
fn round_ratios(of: &Point, to: &Point, f: fn(&Round) -> f64) -> Vec<f64> {
    of.rounds
        .iter()
        .zip(&to.rounds)
        .map(|(o, t)| f(o) / f(t))
        .collect()
}

/// The median of some ratios; NaN if there are none.
fn median(ratios: &[f64]) -> f64 {
    crate::stats::median(ratios).unwrap_or(f64::NAN)
}

impl Comparison {
    /// `mote` against `wasmtime` at the same concurrency, round by round.
    pub fn new(mote: &Point, wasmtime: &Point) -> Self {
        let requests_per_s_ratio_rounds = round_ratios(mote, wasmtime, |r| r.requests_per_s);
        let p99_ratio_rounds = round_ratios(mote, wasmtime, |r| r.p99_us);
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

/// mote's guests against its own native handler at the reference concurrency, ratio by ratio
/// within each round (the native handler, the echo and the component are measured in the same
/// round; the native handler and the echo back to back).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AgainstNative {
    /// Connections.
    pub concurrency: usize,
    /// The echo's requests/s over the native handler's, median of the rounds.
    pub echo_ratio: f64,
    /// Every round's.
    pub echo_ratio_rounds: Vec<f64>,
    /// The echo's p99 over the native handler's, median of the rounds.
    pub echo_p99_ratio: f64,
    /// Every round's.
    pub echo_p99_ratio_rounds: Vec<f64>,
    /// The component's requests/s over the native handler's, median of the rounds, if the
    /// component was measured at this concurrency.
    pub hello_ratio: Option<f64>,
    /// Every round's.
    pub hello_ratio_rounds: Vec<f64>,
    /// Whether the echo reaches [`NATIVE_ECHO_FLOOR`] within [`NATIVE_ECHO_P99_CEILING`].
    pub echo_meets_floor: bool,
    /// Whether the component reaches [`NATIVE_HELLO_FLOOR`].
    pub hello_meets_floor: Option<bool>,
}

impl AgainstNative {
    /// `echo` and, if measured at the same concurrency, `hello` against `native`.
    pub fn new(native: &Point, echo: &Point, hello: Option<&Point>) -> Self {
        let echo_ratio_rounds = round_ratios(echo, native, |r| r.requests_per_s);
        let echo_p99_ratio_rounds = round_ratios(echo, native, |r| r.p99_us);
        let hello_ratio_rounds =
            hello.map_or_else(Vec::new, |h| round_ratios(h, native, |r| r.requests_per_s));
        let (echo_ratio, echo_p99_ratio) =
            (median(&echo_ratio_rounds), median(&echo_p99_ratio_rounds));
        let hello_ratio = hello.map(|_| median(&hello_ratio_rounds));
        Self {
            concurrency: native.concurrency,
            echo_ratio,
            echo_ratio_rounds,
            echo_p99_ratio,
            echo_p99_ratio_rounds,
            hello_ratio,
            hello_ratio_rounds,
            echo_meets_floor: echo_ratio >= NATIVE_ECHO_FLOOR
                && echo_p99_ratio <= NATIVE_ECHO_P99_CEILING,
            hello_meets_floor: hello_ratio.map(|r| r >= NATIVE_HELLO_FLOOR),
        }
    }
}
