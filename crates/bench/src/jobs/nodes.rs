//! The processes the benchmark runs its jobs on (`mote up` nodes started from the `mote` binary,
//! on loopback, each in a data directory of its own) and the HTTP calls it makes to them: deploy
//! `busy`, run a job and wait for it to end.

use anyhow::{Context, bail};
use mote_testbed::KilledOnDrop;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The longest a job may run before the benchmark gives up on it.
const JOB_TIMEOUT: Duration = Duration::from_secs(600);

/// A `mote up` node, killed when dropped.
pub(super) struct Up {
    _process: KilledOnDrop,
    /// Where its API serves.
    pub url: String,
    /// Its data directory; objects are under `objects/`.
    pub data: PathBuf,
    /// Where its stderr goes.
    log: PathBuf,
}

/// Starts `mote up` as node `name` with `cores` executor cores in `data/name`, its function
/// records in `store` (else in its own embedded store), the examples (`lr`, ...) and `busy`
/// deployed.
pub(super) fn up(
    mote: &Path,
    data: &Path,
    name: &str,
    cores: usize,
    store: Option<&str>,
) -> anyhow::Result<Up> {
    let dir = data.join(name);
    std::fs::create_dir_all(&dir)?;
    let log = data.join(format!("{name}.log"));
    let mut command = Command::new(mote);
    command
        .args(["up", "--node", name, "--examples", "--cores"])
        .arg(cores.to_string())
        .args(["--listen", "127.0.0.1:0", "--store-listen", "127.0.0.1:0"])
        .args(["--log", "warn", "--data"])
        .arg(&dir);
    if let Some(store) = store {
        command.args(["--store", store]);
    }
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log)?)
        .spawn()
        .with_context(|| format!("starting {command:?}"))?;
    let stdout = child.stdout.take().expect("piped");
    let process = KilledOnDrop::new(child);
    let mut lines = BufReader::new(stdout).lines();
    let line = loop {
        let Some(line) = lines.next() else {
            bail!("`mote up` ({name}) exited before it served: {}", tail(&log));
        };
        let line = line?;
        if line.contains("mote is up on http://") {
            break line;
        }
    };
    std::thread::spawn(move || for _ in lines {});
    let after = |prefix: &str| {
        line.split(prefix).nth(1).map(|rest| {
            let address = rest.split([' ', ',']).next().unwrap_or_default();
            format!("http://{address}")
        })
    };
    let url = after("mote is up on http://").context("the node's address")?;
    let node = Up {
        _process: process,
        url,
        data: dir,
        log,
    };
    let deployed = agent()
        .put(format!("{}/v1/functions/busy", node.url))
        .send(mote_guests::BUSY.wasm)?;
    if !deployed.status().is_success() {
        bail!("deploying busy on {name} answered {}", deployed.status());
    }
    Ok(node)
}

impl Up {
    /// The last lines of its log, for an error message.
    pub fn log_tail(&self) -> String {
        tail(&self.log)
    }

    /// Waits until this node sees `nodes` nodes up in its cluster.
    pub fn wait_for_nodes(&self, nodes: usize) -> anyhow::Result<()> {
        let started = Instant::now();
        loop {
            let mut response = agent().get(format!("{}/v1/cluster", self.url)).call()?;
            let view: serde_json::Value =
                serde_json::from_slice(&response.body_mut().read_to_vec()?)?;
            let up = view["nodes"]
                .as_array()
                .map_or(0, |n| n.iter().filter(|n| n["state"] == "up").count());
            if up >= nodes {
                return Ok(());
            }
            if started.elapsed() > Duration::from_secs(30) {
                bail!("{} saw {up} of {nodes} nodes up after 30 s", self.url);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(5)..].join(" | ")
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
