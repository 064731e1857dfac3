//! The processes the benchmark runs its jobs on (`mote up` nodes started from the `mote` binary,
//! on loopback, each in a data directory of its own) and the HTTP calls it makes to them: deploy
//! `busy`, run a job and wait for it to end.

use anyhow::{Context, bail};
use mote_testbed::{Launch, Served};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The longest a job may run before the benchmark gives up on it.
const JOB_TIMEOUT: Duration = Duration::from_secs(600);

/// A `mote up` node, killed when dropped.
pub(super) struct Up {
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
    let node = Up {
        served: launch.start()?,
        data: dir,
    };
    let deployed = agent()
        .put(format!("{}/v1/functions/busy", node.url()))
        .send(mote_guests::BUSY.wasm)?;
    if !deployed.status().is_success() {
        bail!("deploying busy on {name} answered {}", deployed.status());
    }
    Ok(node)
}

impl Up {
    /// Where its API serves.
    pub fn url(&self) -> &str {
        self.served.url()
    }

    /// The last lines of its log, for an error message.
    pub fn log_tail(&self) -> String {
        self.served.log_tail(5)
    }

    /// Waits until this node sees `nodes` nodes up in its cluster.
    pub fn wait_for_nodes(&self, nodes: usize) -> anyhow::Result<()> {
        let started = Instant::now();
        loop {
            let mut response = agent().get(format!("{}/v1/cluster", self.url())).call()?;
            let view: serde_json::Value =
                serde_json::from_slice(&response.body_mut().read_to_vec()?)?;
            let up = view["nodes"]
                .as_array()
                .map_or(0, |n| n.iter().filter(|n| n["state"] == "up").count());
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

/// An HTTP client that keeps connections alive.
pub(super) fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

/// What the benchmark reads of `GET /v1/jobs/{id}` (the job service's `JobStatus`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Status {
    /// The job's id.
    pub id: String,
    /// `running`, `succeeded`, `failed` or `cancelled`.
    pub state: String,
    /// Why it failed.
    #[serde(default)]
    pub error: Option<String>,
    /// Its partition count.
    pub partitions: u32,
    /// Signals resolved.
    pub iteration: u64,
    /// Tasks run, on every worker.
    pub tasks: u64,
    /// From its start until it ended, ms.
    pub elapsed_ms: u64,
    /// Time executors spent in guest tasks, µs.
    pub task_us: u64,
    /// Executor busy time outside guest code, µs.
    pub scheduling_us: u64,
    /// The workers.
    pub workers: Vec<serde_json::Value>,
}

/// A job to run: the function, its workers (a count, or every node), partitions per core, and
/// its arguments.
pub(super) struct JobSpec<'a> {
    pub function: &'a str,
    pub workers: Option<usize>,
    pub partitions_per_core: u32,
    pub args: Vec<(String, String)>,
}

/// Runs `job` with `url` as its controller and waits for it to end; an error unless it
/// succeeded.
pub(super) fn run_job(url: &str, job: &JobSpec<'_>) -> anyhow::Result<Status> {
    let agent = agent();
    let mut body = serde_json::json!({
        "function": job.function,
        "partitions_per_core": job.partitions_per_core,
        "args": job.args,
    });
    if let Some(workers) = job.workers {
        body["workers"] = workers.into();
    }
    let mut response = agent
        .post(format!("{url}/v1/jobs"))
        .header("content-type", "application/json")
        .send(serde_json::to_vec(&body)?)?;
    let bytes = response.body_mut().read_to_vec()?;
    if response.status() != 201 {
        bail!(
            "starting {body} answered {}: {}",
            response.status(),
            String::from_utf8_lossy(&bytes)
        );
    }
    let mut status: Status = serde_json::from_slice(&bytes).context("the job's status")?;
    let started = Instant::now();
    while status.state == "running" {
        if started.elapsed() > JOB_TIMEOUT {
            bail!("job {} ({body}) still ran after {JOB_TIMEOUT:?}", status.id);
        }
        std::thread::sleep(Duration::from_millis(10));
        let mut response = agent.get(format!("{url}/v1/jobs/{}", status.id)).call()?;
        status = serde_json::from_slice(&response.body_mut().read_to_vec()?)
            .context("the job's status")?;
    }
    if status.state != "succeeded" {
        bail!(
            "job {} ({body}) {}: {}",
            status.id,
            status.state,
            status.error.as_deref().unwrap_or("no error given")
        );
    }
    Ok(status)
}
