//! Benchmarks of the cluster, on real processes on loopback (`mote store` and `mote up`
//! nodes started from the `mote` binary): `forward`, what forwarding a call costs against
//! sending it to its node; `burst`, the scheduling paper's burst sent to one node of a two-node
//! cluster against the same burst on one node.

mod burst;
mod forward;

pub use burst::{ClusterBurstConfig, ClusterBurstReport, run as run_burst};
pub use forward::{ClusterBenchConfig, ClusterReport, PathFigures, run};

use anyhow::bail;
use mote_testbed::KilledOnDrop;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A process that prints a line saying where it serves once it does.
pub(crate) struct Served {
    _process: KilledOnDrop,
    /// Where it serves.
    pub url: String,
}

impl Served {
    /// The process's id.
    pub fn pid(&self) -> u32 {
        self._process.id()
    }
}

/// Runs `command` and waits for the line with `prefix` followed by the address it serves on.
fn start(mut command: Command, prefix: &str) -> anyhow::Result<Served> {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| anyhow::anyhow!("starting {command:?}: {e}"))?;
    let stdout = child.stdout.take().expect("piped");
    let process = KilledOnDrop::new(child);
    let mut lines = BufReader::new(stdout).lines();
    let url = loop {
        let Some(line) = lines.next() else {
            bail!("{command:?} exited before it served");
        };
        let line = line?;
        if let Some(rest) = line.split(prefix).nth(1) {
            let url = rest.split([' ', ',']).next().unwrap_or_default();
            break format!("http://{url}");
        }
    };
    std::thread::spawn(move || for _ in lines {});
    Ok(Served {
        _process: process,
        url,
    })
}

/// A `mote store` on loopback, in memory.
pub(crate) fn store(mote: &Path) -> anyhow::Result<Served> {
    let mut store = Command::new(mote);
    store
        .args(["store", "--name", "bench", "--log", "warn"])
        .args(["--listen", "127.0.0.1:0", "--peer-listen", "127.0.0.1:0"]);
    start(store, "etcd v3 API on http://")
}

/// A `mote up` node called `name` with `--cores 1`, its records in `store`, and `args`.
pub(crate) fn node(
    mote: &Path,
    data: &Path,
    name: &str,
    store: &str,
    args: &[&str],
) -> anyhow::Result<Served> {
    let mut command = Command::new(mote);
    command
        .args(["up", "--node", name, "--store", store])
        .args(args)
        .args(["--cores", "1", "--listen", "127.0.0.1:0"])
        .args(["--store-listen", "127.0.0.1:0", "--log", "warn", "--data"])
        .arg(data.join(name));
    start(command, "mote is up on http://")
}

/// An HTTP client that keeps connections alive and waits up to `timeout` for an answer.
pub(crate) fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(timeout))
        .build()
        .into()
}
