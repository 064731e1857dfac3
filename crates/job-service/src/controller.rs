//! A job's controller (section 3.3), on the node `mote job run` talked to. It chose the workers
//! and computed the partition map before the job started; afterwards it only listens: progress
//! reports four times a second from each worker, and the end. It schedules no task.

use crate::transport::Transport;
use mote_jobs::PartitionMap;
use mote_jobs::message::{Progress, Report};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A worker silent for this long is taken for dead, and the job fails.
const SILENCE: Duration = Duration::from_secs(10);

/// Where a job is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Its workers are running it.
    Running,
    /// Every worker ran the whole program.
    Succeeded,
    /// A task failed or a worker was lost.
    Failed,
    /// A user cancelled it.
    Cancelled,
}

/// One worker as the controller sees it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorkerStatus {
    /// The node's name.
    pub name: String,
    /// Its URL.
    pub url: String,
    /// Its cores.
    pub cores: u32,
    /// Partitions it holds, of every group.
    pub partitions: usize,
    /// Tasks it ran.
    pub tasks: u64,
    /// Share of its executors' busy time spent outside guest code.
    pub scheduling_share: f64,
    /// Whether it ran the whole program.
    pub done: bool,
}

/// A job's status, as `GET /v1/jobs/{id}` shows it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JobStatus {
    /// Its id.
    pub id: String,
    /// The job function.
    pub function: String,
    /// Where it is.
    pub state: JobState,
    /// Why it failed, naming the stage, the partition and the cause.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The job's partition count.
    pub partitions: u32,
    /// Iterations of the program's top-level loops every worker has reached.
    pub iteration: u64,
    /// Tasks run so far, on every worker.
    pub tasks: u64,
    /// Tasks per second over the last second (over the whole run once it ended).
    pub tasks_per_s: f64,
    /// Time from when every worker ran until it ended, in ms.
    pub elapsed_ms: u64,
    /// When it started, in ms since the Unix epoch.
    pub started_ms: u64,
    /// Time the executors spent in guest tasks, in µs, on every worker.
    pub task_us: u64,
    /// Time the executors spent scheduling (declaring, spawning, settling), in µs.
    pub scheduling_us: u64,
    /// The workers, by worker id.
    pub workers: Vec<WorkerStatus>,
}

/// One job's controller.
pub struct Controller {
    id: String,
    status: Mutex<Inner>,
    transport: Arc<dyn Transport>,
}

struct Inner {
    status: JobStatus,
    progress: Vec<Progress>,
    heard: Vec<Instant>,
    started: Instant,
    ended: Option<Instant>,
    /// (when, tasks) a second or so ago, for the rate.
    sample: (Instant, u64),
}

impl Controller {
    /// The controller of a job about to start on `workers` (name, URL, cores) with `map`.
    pub fn new(
        id: String,
        function: String,
        partitions: u32,
        workers: &[(String, String, u32)],
        map: &PartitionMap,
        transport: Arc<dyn Transport>,
    ) -> Arc<Self> {
        let counts = map.counts(workers.len());
        let now = Instant::now();
        let started_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        Arc::new(Self {
            id: id.clone(),
            status: Mutex::new(Inner {
                status: JobStatus {
                    id,
                    function,
                    state: JobState::Running,
                    error: None,
                    partitions,
                    iteration: 0,
                    tasks: 0,
                    tasks_per_s: 0.0,
                    elapsed_ms: 0,
                    started_ms,
                    task_us: 0,
                    scheduling_us: 0,
                    workers: workers
                        .iter()
                        .zip(counts)
                        .map(|((name, url, cores), partitions)| WorkerStatus {
                            name: name.clone(),
                            url: url.clone(),
                            cores: *cores,
                            partitions,
                            tasks: 0,
                            scheduling_share: 0.0,
                            done: false,
                        })
                        .collect(),
                },
                progress: vec![Progress::default(); workers.len()],
                heard: vec![now; workers.len()],
                started: now,
                ended: None,
                sample: (now, 0),
            }),
            transport,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.status
            .lock()
            .expect("a controller's lock is never poisoned")
    }

    /// The job's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The job's status now.
    pub fn status(&self) -> JobStatus {
        let mut inner = self.lock();
        let now = Instant::now();
        let end = inner.ended.unwrap_or(now);
        inner.status.elapsed_ms = (end - inner.started).as_millis() as u64;
        let tasks = inner.status.tasks;
        if inner.ended.is_some() {
            let secs = (end - inner.started).as_secs_f64().max(1e-6);
            inner.status.tasks_per_s = tasks as f64 / secs;
        } else if now - inner.sample.0 >= Duration::from_millis(900) {
            let secs = (now - inner.sample.0).as_secs_f64();
            inner.status.tasks_per_s = (tasks - inner.sample.1) as f64 / secs;
            inner.sample = (now, tasks);
        }
        inner.status.clone()
    }

    /// Every worker runs: the job's clock starts now, after each compiled the module and
    /// instantiated its partitions.
    pub fn running(&self) {
        let mut inner = self.lock();
        let now = Instant::now();
        inner.started = now;
        inner.sample = (now, 0);
        inner.heard.iter_mut().for_each(|h| *h = now);
    }

    /// Whether it ended.
    pub fn ended(&self) -> bool {
        self.lock().status.state != JobState::Running
    }

    /// A worker's report.
    pub async fn report(&self, report: Report) {
        let (progress, done, error) = match report {
            Report::Progress(p) => (p, false, None),
            Report::Done(p) => (p, true, None),
            Report::Failed { progress, error } => (progress, false, Some(error)),
        };
        let finished = {
            let mut inner = self.lock();
            let w = progress.worker.0 as usize;
            if w >= inner.progress.len() || inner.status.state != JobState::Running {
                return;
            }
            inner.heard[w] = Instant::now();
            inner.progress[w] = progress;
            let worker = &mut inner.status.workers[w];
            worker.tasks = progress.tasks;
            let busy = progress.task_us + progress.scheduling_us;
            worker.scheduling_share = progress.scheduling_us as f64 / busy.max(1) as f64;
            worker.done |= done;
            let sum = |all: &[Progress], f: fn(&Progress) -> u64| all.iter().map(f).sum::<u64>();
            inner.status.tasks = sum(&inner.progress, |p| p.tasks);
            inner.status.task_us = sum(&inner.progress, |p| p.task_us);
            inner.status.scheduling_us = sum(&inner.progress, |p| p.scheduling_us);
            inner.status.iteration = inner
                .progress
                .iter()
                .map(|p| p.iterations)
                .min()
                .unwrap_or(0);
            match error {
                Some(error) => {
                    let name = inner.status.workers[w].name.clone();
                    Some((JobState::Failed, Some(format!("on worker {name}: {error}"))))
                }
                None if inner.status.workers.iter().all(|w| w.done) => {
                    Some((JobState::Succeeded, None))
                }
                None => None,
            }
        };
        if let Some((state, error)) = finished {
            self.end(state, error).await;
        }
    }

    /// Ends the job in `state` and stops every worker. Only the first end counts.
    pub async fn end(&self, state: JobState, error: Option<String>) {
        let urls: Vec<String> = {
            let mut inner = self.lock();
            if inner.status.state != JobState::Running {
                return;
            }
            inner.status.state = state;
            inner.status.error = error;
            inner.ended = Some(Instant::now());
            inner.status.workers.iter().map(|w| w.url.clone()).collect()
        };
        for url in urls {
            if let Err(e) = self.transport.stop(&url, &self.id).await {
                tracing::debug!(job = self.id, error = %e, "a worker could not be told to stop");
            }
        }
    }

    /// Fails the job when a worker falls silent; runs until the job ends.
    pub fn watch(self: &Arc<Self>) {
        let controller = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                let silent = {
                    let inner = controller.lock();
                    if inner.status.state != JobState::Running {
                        return;
                    }
                    inner
                        .heard
                        .iter()
                        .position(|h| h.elapsed() > SILENCE)
                        .map(|w| {
                            let s = &inner.status.workers[w];
                            format!(
                                "worker {} ({}) has not reported for {} s: its node is down or cut off",
                                s.name,
                                s.url,
                                SILENCE.as_secs()
                            )
                        })
                };
                if let Some(error) = silent {
                    controller.end(JobState::Failed, Some(error)).await;
                    return;
                }
            }
        });
    }
}
