//! Benchmarks of the cluster, on real processes on loopback (`mote store` and `mote up`
//! nodes started from the `mote` binary): `forward`, what forwarding a call costs against
//! sending it to its node; `burst`, the scheduling paper's burst sent to one node of a two-node
//! cluster against the same burst on one node.
//!
//! Both set their nodes up through `crate::node_api` (deploys); the calls they measure, and
//! the calls that wait for a node to run a function, go through `agent`.

mod burst;
mod forward;

pub use burst::{ClusterBurstConfig, ClusterBurstReport, run as run_burst};
pub use forward::{ClusterBenchConfig, ClusterReport, PathFigures, run};

use mote_testbed::{Launch, Served};
use std::path::Path;
use std::time::Duration;

/// A `mote store` on loopback, in memory.
pub(crate) fn store(mote: &Path) -> anyhow::Result<Served> {
    Ok(Launch::mote_store(mote, "bench").start()?)
}

/// A `mote up` node called `name` with `--cores 1`, its data in `data/name`, its records in
/// `store`, and `args`.
pub(crate) fn node(
    mote: &Path,
    data: &Path,
    name: &str,
    store: &str,
    args: &[&str],
) -> anyhow::Result<Served> {
    let node = Launch::mote_up(mote, &data.join(name))
        .args(["--node", name, "--store", store, "--cores", "1"])
        .args(args);
    Ok(node.start()?)
}

/// An HTTP client that keeps connections alive and waits up to `timeout` for an answer: the
/// client of the calls both benchmarks measure, kept as it was so that their results stay
/// comparable with earlier runs.
pub(crate) fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(timeout))
        .build()
        .into()
}
