//! What `mote bench http` runs ([`HttpBenchConfig`]): the full benchmark or a smoke run, the
//! concurrencies ([`parse_concurrencies`]) and where the generator and the servers run
//! ([`Pinning`]).

use super::servers::wasmtime_optimize;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

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
            wasmtime_optimize: wasmtime_optimize(),
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
}
