//! The processes the benchmark runs its jobs on (`mote up` nodes started from the `mote` binary,
//! on loopback, each in a data directory of its own) and what it asks them through their API:
//! deploy `busy`, run a job and wait for it to end.

use crate::node_api::NodeApi;
use anyhow::{Context, bail};
use mote_api::{DeployParams, JobState, JobStatus, MemberState, RunRequest, WorkerChoice};
use mote_testbed::{Launch, Served};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The longest a job may run before the benchmark gives up on it.
const JOB_TIMEOUT: Duration = Duration::from_secs(600);

/// A `mote up` node, killed when dropped, and a client of its API.
pub(super) struct Up {
    api: NodeApi,
    served: Served,
    /// Its data directory; objects are under `objects/`.
    pub data: PathBuf,
}

/// Starts `mote up` as node `name` with `cores` executor cores in `data/name`, its function
/// records in `store` (else in its own embedded store), the examples (`lr`, ...) and `busy`
/// deployed; its output goes to `data/name.log`.
pub(super) fn up(
    mote: &Path,
    data: &Path,
    name: &str,
    cores: usize,
    store: Option<&str>,
) -> anyhow::Result<Up> {
    let dir = data.join(name);
    std::fs::create_dir_all(&dir)?;
    let mut launch = Launch::mote_up(mote, &dir)
        .args(["--node", name, "--examples", "--cores", &cores.to_string()])
        .log(data.join(format!("{name}.log")));
    if let Some(store) = store {
        launch = launch.args(["--store", store]);
    }
    let served = launch.start()?;
    let api = NodeApi::new(served.url())?;
    api.deploy("busy", mote_guests::BUSY.wasm, &DeployParams::default())
        .with_context(|| format!("deploying busy on {name}"))?;
    Ok(Up {
        api,
        served,
        data: dir,
    })
}

impl Up {
    /// Where its API serves.
    pub fn url(&self) -> &str {
        self.served.url()
    }

    /// A client of its API.
    pub fn api(&self) -> &NodeApi {
        &self.api
    }

    /// The last lines of its log, for an error message.
    pub fn log_tail(&self) -> String {
        self.served.log_tail(5)
    }

    /// Waits until this node sees `nodes` nodes up in its cluster.
    pub fn wait_for_nodes(&self, nodes: usize) -> anyhow::Result<()> {
        let started = Instant::now();
        loop {
            let view = self.api.answer(|api| api.cluster())?;
            let up = view
                .nodes
                .iter()
                .filter(|n| n.state == MemberState::Up)
                .count();
            if up >= nodes {
                return Ok(());
            }
            if started.elapsed() > Duration::from_secs(30) {
                bail!("{} saw {up} of {nodes} nodes up after 30 s", self.url());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A job of `function` on `workers` (a count, or every node if none), `partitions_per_core`
/// partitions per core, with `args`.
pub(super) fn job(
    function: &str,
    workers: Option<usize>,
    partitions_per_core: u32,
    args: Vec<(String, String)>,
) -> RunRequest {
    RunRequest {
        workers: workers.map(WorkerChoice::Count),
        partitions_per_core: Some(partitions_per_core),
        ..RunRequest::new(function, args)
    }
}

/// Runs `request` with `api`'s node as its controller and waits for it to end; an error unless
/// it succeeded.
pub(super) fn run_job(api: &NodeApi, request: &RunRequest) -> anyhow::Result<JobStatus> {
    let job = || format!("{} with {:?}", request.function, request.args);
    let mut status = api
        .answer(|api| api.run_job(request))
        .with_context(|| format!("starting {}", job()))?;
    let started = Instant::now();
    while status.state == JobState::Running {
        if started.elapsed() > JOB_TIMEOUT {
            bail!(
                "job {} ({}) still ran after {JOB_TIMEOUT:?}",
                status.id,
                job()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
        status = api
            .answer(|api| api.job(&status.id))
            .with_context(|| format!("job {} ({})", status.id, job()))?;
    }
    if status.state != JobState::Succeeded {
        bail!(
            "job {} ({}) {:?}: {}",
            status.id,
            job(),
            status.state,
            status.error.as_deref().unwrap_or("no error given")
        );
    }
    Ok(status)
}
