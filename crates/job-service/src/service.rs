//! [`JobService`]: this node's jobs, as the gateway reaches them. It starts a job with this
//! node as its controller (the request's checks, the driver run once to learn the program, the
//! workers started and run), answers for the jobs it controls, and keeps this node's workers of
//! any job (prepared, run, given messages and restores, stopped).

use crate::controller::{Controller, ControllerSetup, JobStatus};
use crate::env::WorkerEnv;
use crate::error::{CodeError, JobServiceError, RunError};
use crate::input;
use crate::output::{self, Output};
use crate::record::JobRecords;
use crate::request::{ClusterNodes, NodeInfo, snapshot_plan};
use crate::threads::JobThreads;
use crate::transport::HttpTransport;
use crate::worker::{JobCode, Worker, WorkerError};
use mote_api::{RunRequest, WorkerChoice};
use mote_confine::ConfinedPool;
use mote_jobs::message::{Envelope, JobSpec, Report, SnapshotPlan, WorkerMessage};
use mote_jobs::{Op, PartitionKey, PartitionMap, Program, StageKind, WorkerId};
use mote_node::Node;
use mote_objects::Objects;
use mote_runtime::{JobContext, JobEngine, JobModule};
use mote_types::{FunctionRecord, GuestKind};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Ended jobs kept for `mote job ls` and `status`.
const KEEP_ENDED: usize = 100;

/// The longest a stopping worker waits for its snapshot images and output to be written.
const STORE_DRAIN: std::time::Duration = std::time::Duration::from_secs(30);

/// The largest partition image a restore reads.
const MAX_IMAGE_BYTES: u64 = 8 << 30;

/// This node's jobs: the controllers it runs and its workers of any job.
pub struct JobService {
    node: Arc<Node>,
    pub(crate) env: WorkerEnv,
    pub(crate) cluster: Arc<dyn ClusterNodes>,
    workers: Mutex<HashMap<String, Arc<Worker>>>,
    pub(crate) jobs: Mutex<Vec<Arc<Controller>>>,
    /// The cluster's job records, when the node has a store.
    pub(crate) records: Option<JobRecords>,
    /// The statuses the records showed at the last look, for jobs controlled elsewhere.
    pub(crate) recorded: Mutex<Vec<JobStatus>>,
    next: AtomicU64,
}

impl JobService {
    /// The job side of `node`, whose workers run on `threads`, read and write `objects`, and
    /// reach the other workers with `access`; jobs are recorded in `records` when given, which
    /// makes them visible to every node and lets another take one over
    /// ([`JobService::watch_records`]).
    pub fn new(
        node: Arc<Node>,
        objects: Option<Arc<Objects>>,
        cluster: Arc<dyn ClusterNodes>,
        threads: JobThreads,
        access: &mote_tls::PeerAccess,
        records: Option<JobRecords>,
    ) -> Result<Arc<Self>, JobServiceError> {
        let engine = Arc::new(JobEngine::new(node.job_cores().clone())?);
        let relay = node.relay().clone();
        let guests = ConfinedPool::start(
            "mote-driver",
            threads.cores.max(1),
            threads.confine.clone(),
            relay.clone(),
        )?;
        Ok(Arc::new(Self {
            node,
            env: WorkerEnv {
                engine,
                threads,
                transport: Arc::new(HttpTransport::new(access)),
                objects,
                guests: Arc::new(guests),
                relay,
            },
            cluster,
            workers: Mutex::new(HashMap::new()),
            jobs: Mutex::new(Vec::new()),
            records,
            recorded: Mutex::new(Vec::new()),
            next: AtomicU64::new(1),
        }))
    }

    fn record(&self, function: &str) -> Result<FunctionRecord, CodeError> {
        let record = self
            .node
            .get(function)
            .ok_or_else(|| CodeError::NotDeployed {
                function: function.to_owned(),
            })?;
        if record.kind != GuestKind::Job {
            return Err(CodeError::NotAJob {
                function: function.to_owned(),
                kind: record.kind,
            });
        }
        Ok(record)
    }

    /// The module's bytes: this node's copy, or fetched and checked from where the node
    /// fetches modules for cold loads (its peers, then object storage).
    async fn module_bytes(&self, sha256: &str) -> Result<Vec<u8>, CodeError> {
        let (node, sha256) = (self.node.clone(), sha256.to_owned());
        tokio::task::spawn_blocking(move || node.module_or_fetch(&sha256))
            .await
            .map_err(|source| CodeError::Panicked {
                doing: "fetching the module",
                source: Box::new(source),
            })?
            .map_err(CodeError::Fetch)
    }

    async fn compile(
        &self,
        record: &FunctionRecord,
        wasm: Vec<u8>,
        args: Vec<(String, String)>,
        partitions: u32,
    ) -> Result<(Arc<JobModule>, JobContext, Program), CodeError> {
        let engine = self.env.engine.clone();
        let ctx = JobContext {
            function: Arc::from(record.name.as_str()),
            args: Arc::from(args),
            partitions,
            limits: record.limits,
            stopped: Arc::default(),
            datasets: Arc::default(),
        };
        let sha256 = record.sha256.clone();
        // Compiling runs no guest code (and compiles on threads of its own, which a confined
        // thread may not start); the driver is guest code, and runs confined.
        let compiler = engine.clone();
        let module = tokio::task::spawn_blocking(move || compiler.module(&sha256, &wasm))
            .await
            .map_err(|source| CodeError::Panicked {
                doing: "compiling the job",
                source: Box::new(source),
            })?
            .map_err(CodeError::Compile)?;
        self.env
            .guests
            .run(move || {
                let program = engine.program(&module, &ctx).map_err(CodeError::Driver)?;
                let ctx = JobContext {
                    datasets: program.dataset_names(),
                    ..ctx
                };
                Ok((module, ctx, program))
            })
            .await
            .map_err(|source| CodeError::Panicked {
                doing: "the driver's thread",
                source: Box::new(source),
            })?
    }

    fn choose(&self, choice: Option<&WorkerChoice>) -> Result<Vec<NodeInfo>, RunError> {
        let nodes = self.cluster.nodes();
        let live = || nodes.iter().map(|n| n.name.clone()).collect();
        match choice {
            None => Ok(nodes),
            Some(WorkerChoice::Count(0)) => Err(RunError::NoWorkers),
            Some(WorkerChoice::Count(n)) if *n > nodes.len() => Err(RunError::TooFewNodes {
                asked: *n,
                live: live(),
            }),
            Some(WorkerChoice::Count(n)) => Ok(nodes.into_iter().take(*n).collect()),
            Some(WorkerChoice::List(names)) => names
                .iter()
                .map(|want| {
                    nodes
                        .iter()
                        .find(|n| {
                            n.name == *want
                                || n.url.trim_end_matches('/') == want.trim_end_matches('/')
                        })
                        .cloned()
                        .ok_or_else(|| RunError::UnknownWorker {
                            name: want.clone(),
                            live: live(),
                        })
                })
                .collect(),
        }
    }

    /// Checks the arguments the program's loads and stores name: each is given, names
    /// `BUCKET/PREFIX`, an input holds objects and an output holds no committed ones. Answers
    /// the outputs, which the controller commits when the job succeeds.
    async fn check_io(
        &self,
        program: &Program,
        args: &[(String, String)],
    ) -> Result<Vec<Output>, RunError> {
        let mut outputs = Vec::new();
        for stage in &program.stages {
            let (arg, output) = match &stage.kind {
                StageKind::Load { arg } => (arg, false),
                StageKind::Store { arg } => (arg, true),
                _ => continue,
            };
            let Some(value) = mote_jobs::arg(args, arg) else {
                return Err(match output {
                    true => RunError::OutputMissing { arg: arg.clone() },
                    false => RunError::InputMissing { arg: arg.clone() },
                });
            };
            let Some((bucket, prefix)) = input::bucket_and_prefix(value) else {
                return Err(RunError::NotBucketPrefix {
                    arg: arg.clone(),
                    value: value.to_owned(),
                });
            };
            let Some(objects) = &self.env.objects else {
                return Err(RunError::NoObjectStorage);
            };
            let listed = match output {
                true => output::committed(objects, bucket, prefix).await,
                false => input::list_input(objects, bucket, prefix).await,
            };
            let found = listed.map_err(|source| RunError::List {
                arg: arg.clone(),
                value: value.to_owned(),
                source: Box::new(source),
            })?;
            match (output, found.first()) {
                (true, Some((first, _))) => {
                    return Err(RunError::OutputNotEmpty {
                        arg: arg.clone(),
                        value: value.to_owned(),
                        count: found.len(),
                        bucket: bucket.to_owned(),
                        first: first.clone(),
                    });
                }
                (false, None) => {
                    return Err(RunError::InputEmpty {
                        arg: arg.clone(),
                        value: value.to_owned(),
                    });
                }
                (true, None) => outputs.push(Output {
                    arg: arg.clone(),
                    bucket: bucket.to_owned(),
                    prefix: prefix.to_owned(),
                }),
                (false, Some(_)) => {}
            }
        }
        Ok(outputs)
    }

    /// The snapshot plan `--snapshot-every` and `--snapshot-to` ask for, once it is known to
    /// work: the program has a top-level loop to snapshot at, and the place can be written.
    async fn check_snapshots(
        &self,
        program: &Program,
        request: &RunRequest,
    ) -> Result<Option<SnapshotPlan>, RunError> {
        let (every, to) = match (request.snapshot_every, &request.snapshot_to) {
            (None, None) => return Ok(None),
            (Some(0), _) => return Err(RunError::SnapshotEveryZero),
            (Some(every), Some(to)) => (every, to),
            (Some(_), None) => return Err(RunError::SnapshotsNowhere),
            (None, Some(_)) => return Err(RunError::SnapshotsNever),
        };
        let top_level_loop = program.ops.iter().enumerate().any(|(n, op)| {
            matches!(op, Op::Repeat { .. } | Op::While { .. }) && program.depth[n] == 0
        });
        if !top_level_loop {
            return Err(RunError::SnapshotsNeedLoop {
                every,
                function: request.function.clone(),
            });
        }
        let Some(plan) = snapshot_plan(every, to) else {
            return Err(RunError::SnapshotsNotBucketPrefix { to: to.clone() });
        };
        let Some(objects) = &self.env.objects else {
            return Err(RunError::NoSnapshotStorage);
        };
        let probe = format!("{}.mote-probe", plan.prefix);
        let written = objects
            .put(&plan.bucket, &probe, bytes::Bytes::from_static(b"probe"))
            .await;
        if let Err(source) = written {
            return Err(RunError::SnapshotsNotWritable {
                to: to.clone(),
                source: Box::new(source),
            });
        }
        let _ = objects.delete(&plan.bucket, &probe).await;
        Ok(Some(plan))
    }

    /// Starts a job with this node as its controller.
    pub async fn run(&self, request: RunRequest) -> Result<JobStatus, JobServiceError> {
        let record = self.record(&request.function)?;
        let ppc = request.partitions_per_core.unwrap_or(10);
        if !(1..=1000).contains(&ppc) {
            return Err(RunError::PartitionsPerCore(ppc).into());
        }
        let nodes = self.choose(request.workers.as_ref())?;
        let cores: Vec<u32> = nodes.iter().map(|n| n.cores.max(1)).collect();
        let partitions = ppc.saturating_mul(cores.iter().sum());
        let me = self.me();
        let peers: Vec<String> = nodes.iter().map(|n| n.url.clone()).collect();
        let wasm = self.module_bytes(&record.sha256).await?;
        let (_, _, program) = self
            .compile(&record, wasm, request.args.clone(), partitions)
            .await?;
        let outputs = self.check_io(&program, &request.args).await?;
        let snapshots = self.check_snapshots(&program, &request).await?;
        let map = PartitionMap::assign(program.groups.sizes(), &cores);
        let id = format!(
            "{}-{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64 % 1_000_000_000),
            self.next.fetch_add(1, Ordering::Relaxed)
        );
        let workers: Vec<(String, String, u32)> = nodes
            .iter()
            .map(|n| (n.name.clone(), n.url.clone(), n.cores))
            .collect();
        let template = JobSpec {
            id: id.clone(),
            function: record.name.to_string(),
            sha256: record.sha256.clone(),
            args: request.args.clone(),
            partitions,
            workers: peers.clone(),
            me: WorkerId(0),
            map: map.clone(),
            controller: me.url.clone(),
            generation: 0,
            live: vec![true; nodes.len()],
            snapshots,
        };
        let controller = Controller::new(
            partitions,
            &workers,
            self.env.transport.clone(),
            ControllerSetup {
                spec: template.clone(),
                rebalance: request.rebalance.unwrap_or(true),
                objects: self.env.objects.clone(),
                outputs,
                cluster: self.cluster.clone(),
                records: self.records.clone(),
                me: me.name,
            },
        )
        .map_err(RunError::Supervision)?;
        self.keep(controller.clone());
        controller.save().await;
        let starts = nodes.iter().enumerate().map(|(w, node)| {
            let spec = JobSpec {
                me: WorkerId(w as u16),
                ..template.clone()
            };
            let transport = self.env.transport.clone();
            let url = node.url.clone();
            let name = node.name.clone();
            async move {
                transport
                    .start(&url, &spec)
                    .await
                    .map_err(|source| RunError::WorkerStart {
                        worker: name,
                        source,
                    })
            }
        });
        // Each node compiles the module and instantiates its partitions as it starts: start
        // them all at once rather than add their start times up.
        let started = futures_util::future::join_all(starts).await;
        if let Some(error) = started.into_iter().find_map(Result::err) {
            controller.fail(error.to_string()).await;
            return Err(error.into());
        }
        controller.running();
        let runs = nodes.iter().map(|node| {
            let transport = self.env.transport.clone();
            let (url, name, id) = (node.url.clone(), node.name.clone(), id.clone());
            async move {
                transport
                    .run(&url, &id)
                    .await
                    .map_err(|source| RunError::WorkerRun {
                        worker: name,
                        source,
                    })
            }
        });
        let ran = futures_util::future::join_all(runs).await;
        // A worker that ran first may already have failed the job, which stops the others
        // before their `run` arrives: the job's own status then says what happened.
        if let Some(error) = ran.into_iter().find_map(Result::err)
            && !controller.ending()
        {
            controller.fail(error.to_string()).await;
            return Err(error.into());
        }
        controller.watch();
        Ok(controller.status())
    }

    /// Keeps a controller of this node's, and the latest [`KEEP_ENDED`] that ended.
    pub(crate) fn keep(&self, controller: Arc<Controller>) {
        let mut jobs = self.jobs.lock();
        jobs.push(controller);
        let ended = jobs.iter().filter(|j| j.ended()).count();
        if ended > KEEP_ENDED
            && let Some(oldest) = jobs.iter().position(|j| j.ended())
        {
            jobs.remove(oldest);
        }
    }

    /// This node, as the cluster knows it.
    pub(crate) fn me(&self) -> NodeInfo {
        self.cluster.nodes().into_iter().next().unwrap_or(NodeInfo {
            name: String::new(),
            url: String::new(),
            cores: 0,
        })
    }

    /// This node's controller of job `id`, unless it stood down for another node's.
    pub(crate) fn controller(&self, id: &str) -> Result<Arc<Controller>, JobServiceError> {
        self.jobs
            .lock()
            .iter()
            .find(|j| j.id() == id && !j.stood_down())
            .cloned()
            .ok_or_else(|| JobServiceError::NoSuchJob { id: id.to_owned() })
    }

    /// A controller's report from one of its workers.
    pub async fn report(&self, id: &str, report: Report) -> Result<(), JobServiceError> {
        self.controller(id)?.report(report).await;
        Ok(())
    }

    /// Prepares this node's worker of a job, at its controller's request: its copy of the
    /// program and the instances of its partitions.
    pub async fn start_worker(&self, spec: JobSpec) -> Result<(), JobServiceError> {
        // Workers that stopped themselves (their controller vanished) leave now.
        self.workers.lock().retain(|_, w| !w.stopped());
        if self.workers.lock().contains_key(&spec.id) {
            return Err(WorkerError::AlreadyRunning { job: spec.id }.into());
        }
        let record = self.record(&spec.function)?;
        if record.sha256 != spec.sha256 {
            return Err(WorkerError::Redeployed {
                function: spec.function,
                here: record.sha256,
                controller: spec.sha256,
            }
            .into());
        }
        let wasm = self.module_bytes(&spec.sha256).await?;
        let (module, ctx, program) = self
            .compile(&record, wasm, spec.args.clone(), spec.partitions)
            .await?;
        if program.groups.sizes().len() != spec.map.groups() {
            return Err(WorkerError::GroupsDiffer {
                here: program.groups.sizes().len(),
                controller: spec.map.groups(),
            }
            .into());
        }
        let env = self.env.clone();
        let id = spec.id.clone();
        let code = JobCode {
            program: Arc::new(program),
            module,
            ctx,
            log: self.node.logs().get(&spec.function),
        };
        let (worker, io) = self
            .env
            .guests
            .run(move || Worker::prepare(spec, code, &env))
            .await
            .map_err(|source| WorkerError::Panicked {
                doing: "the worker's start",
                source: Box::new(source),
            })??;
        worker.start_io(io, &self.env);
        self.workers.lock().insert(id, worker);
        Ok(())
    }

    /// Runs this node's prepared worker of `id`, once every worker of the job is prepared.
    pub fn run_worker(&self, id: &str) -> Result<(), JobServiceError> {
        let worker = self.workers.lock().get(id).cloned();
        match worker {
            Some(w) => Ok(w.run()?),
            None => Err(WorkerError::NoWorker { job: id.to_owned() }.into()),
        }
    }

    /// A message for this node's worker of `id`, from another worker or the controller. A
    /// restore loads this worker's partitions from the snapshot first; messages that make
    /// instances run off the async threads.
    pub async fn deliver(&self, id: &str, envelope: Envelope) -> Result<(), JobServiceError> {
        let worker = self
            .workers
            .lock()
            .get(id)
            .cloned()
            .ok_or_else(|| WorkerError::NoWorker { job: id.to_owned() })?;
        match envelope.message {
            WorkerMessage::Restore(restore) => {
                let images = self.snapshot_images(&worker, &restore).await?;
                self.env
                    .guests
                    .run(move || worker.restore(restore, images))
                    .await
                    .map_err(|source| WorkerError::Panicked {
                        doing: "the restore",
                        source: Box::new(source),
                    })??;
            }
            WorkerMessage::Arrive { .. } | WorkerMessage::Transfer(_) => {
                self.env
                    .guests
                    .run(move || worker.deliver(envelope))
                    .await
                    .map_err(|source| WorkerError::Panicked {
                        doing: "the move",
                        source: Box::new(source),
                    })??;
            }
            _ => worker.deliver(envelope)?,
        }
        Ok(())
    }

    /// The images of the partitions `restore` gives this node's worker, from the snapshot.
    async fn snapshot_images(
        &self,
        worker: &Worker,
        restore: &mote_jobs::message::Restore,
    ) -> Result<Vec<(PartitionKey, Vec<u8>)>, WorkerError> {
        let spec = worker.spec();
        let (Some(plan), Some(objects)) = (&spec.snapshots, &self.env.objects) else {
            return Err(WorkerError::RestoreWithoutSnapshots);
        };
        let mut keys = Vec::new();
        for g in 0..restore.map.groups() {
            let group = mote_jobs::GroupId(g as u16);
            keys.extend(
                restore
                    .map
                    .held_by(spec.me, group)
                    .map(|index| PartitionKey { group, index }),
            );
        }
        let reads = keys.into_iter().map(|key| {
            let object = plan.object(&spec.id, restore.iteration, key);
            async move {
                objects
                    .get(&plan.bucket, &object, MAX_IMAGE_BYTES)
                    .await
                    .map(|b| (key, b.to_vec()))
                    .map_err(|source| WorkerError::SnapshotRead {
                        key,
                        bucket: plan.bucket.clone(),
                        object,
                        source: Box::new(source),
                    })
            }
        });
        futures_util::future::join_all(reads)
            .await
            .into_iter()
            .collect()
    }

    /// Stops this node's worker of `id` (the job ended); its partitions are dropped.
    /// It answers once the snapshot images and output the worker was writing are written, so
    /// that the controller, which deletes the job's snapshots or output next, finds them all.
    pub async fn stop_worker(&self, id: &str) -> Result<(), JobServiceError> {
        let worker = self.workers.lock().remove(id);
        match worker {
            Some(w) => {
                w.stop();
                let deadline = std::time::Instant::now() + STORE_DRAIN;
                while w.storing() && std::time::Instant::now() < deadline {
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
                Ok(())
            }
            None => Err(WorkerError::NoWorker { job: id.to_owned() }.into()),
        }
    }

    /// Workers running on this node.
    pub fn running_workers(&self) -> usize {
        self.workers.lock().len()
    }
}
