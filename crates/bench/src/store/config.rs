//! What the experiment runs ([`StoreBenchConfig`]): the systems ([`System`]), the requests
//! ([`Operation`]) and the arguments of etcd's `benchmark` tool for each.

use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

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
