//! A worker's start on a node: its partitions' instances, its outbox over the node's transport
//! and its I/O task ([`Worker::prepare`]), then its executor threads once every worker of the
//! job is prepared ([`Worker::run`]).

use super::inbox::Doorbell;
use super::io::serve_io;
use super::tally::Tally;
use super::{JobCode, Local, Outbox, Worker, WorkerError};
use crate::env::WorkerEnv;
use crate::transport::{Outgoing, Transport, drain_outbox, report_progress};
use crossbeam_queue::SegQueue;
use mote_jobs::message::{Envelope, JobSpec, Report};
use mote_jobs::{Cursor, GroupId, PartitionKey, TaskGraph, WorkerId};
use mote_runtime::JobInstance;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use tokio::sync::mpsc;

/// A worker's [`Outbox`] on a node: a queue that [`drain_outbox`] empties over `transport`.
struct Mail {
    queue: mpsc::UnboundedSender<Outgoing>,
    transport: Arc<dyn Transport>,
}

impl Outbox for Mail {
    fn to_worker(&self, to: String, peer: WorkerId, envelope: Envelope) {
        let _ = self.queue.send(Outgoing::Worker { to, peer, envelope });
    }

    fn to_controller(&self, spec: &JobSpec, report: Report) {
        let _ = self.queue.send(Outgoing::report(spec, report));
    }

    fn report_progress(&self, worker: Weak<Worker>) {
        report_progress(worker, self.transport.clone());
    }
}

/// A prepared worker's queues, whose tasks [`Worker::start_io`] starts.
pub struct WorkerIo {
    outbox: mpsc::UnboundedReceiver<Outgoing>,
    io: mpsc::UnboundedReceiver<super::IoRequest>,
}

impl Worker {
    /// Instantiates the partitions `spec` gives this worker (running guest code: on a confined
    /// thread); it takes messages once its I/O is started ([`Worker::start_io`]), and runs
    /// tasks after [`Worker::run`].
    pub fn prepare(
        spec: JobSpec,
        code: JobCode,
        env: &WorkerEnv,
    ) -> Result<(Arc<Self>, WorkerIo), WorkerError> {
        let JobCode {
            program,
            module,
            ctx,
            log,
        } = code;
        let engine = env.engine.clone();
        let me = spec.me;
        let graph = TaskGraph::new(&program, &spec.map, me);
        let mut instances = Vec::with_capacity(program.groups.sizes().len());
        for (g, &size) in program.groups.sizes().iter().enumerate() {
            let mut row: Vec<Option<JobInstance>> = (0..size).map(|_| None).collect();
            for &index in graph.held(GroupId(g as u16)) {
                let key = PartitionKey {
                    group: GroupId(g as u16),
                    index,
                };
                let instance =
                    engine
                        .instance(&module, &ctx)
                        .map_err(|source| WorkerError::Instance {
                            worker: me,
                            key,
                            source,
                        })?;
                row[index as usize] = Some(instance);
            }
            instances.push(row);
        }
        let mut cursor = Cursor::new();
        cursor.resume(spec.snapshots.as_ref().map(|s| s.every));
        let (outbox, outbox_rx) = mpsc::unbounded_channel();
        let (io, io_rx) = mpsc::unbounded_channel();
        let executors = env.threads.cores.max(1);
        let tally = Tally::new(spec.generation, executors, program.groups.sizes(), &graph);
        let worker = Arc::new(Self {
            spec: spec.clone(),
            program,
            engine,
            module,
            ctx,
            log,
            local: Mutex::new(Local::new(
                &spec,
                spec.generation,
                cursor,
                graph,
                spec.map.clone(),
                instances,
            )),
            inbox: SegQueue::new(),
            bell: Doorbell::new(executors),
            tally,
            stopped: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            running: AtomicBool::new(false),
            ready: AtomicUsize::new(0),
            threads: env.threads.clone(),
            outbox: Box::new(Mail {
                queue: outbox,
                transport: env.transport.clone(),
            }),
            io,
            storing: AtomicUsize::new(0),
        });
        let io = WorkerIo {
            outbox: outbox_rx,
            io: io_rx,
        };
        Ok((worker, io))
    }

    /// Starts the tasks that send the worker's outbox and serve its loads and stores, on the
    /// current Tokio runtime (the node's I/O runtime), relayed: the executor threads that feed
    /// them are confined.
    pub fn start_io(self: &Arc<Self>, io: WorkerIo, env: &WorkerEnv) {
        let outbox = env.relay.clone();
        drain_outbox(
            Arc::downgrade(self),
            io.outbox,
            env.transport.clone(),
            &outbox,
        );
        serve_io(Arc::downgrade(self), io.io, env.objects.clone(), &env.relay);
    }

    /// Starts the executor threads, once every worker of the job is prepared: a worker that
    /// ran before the others were would send them pieces they could not take yet.
    pub fn run(self: &Arc<Self>) -> Result<(), WorkerError> {
        if self.running.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        self.tally.run();
        self.outbox.report_progress(Arc::downgrade(self));
        for n in 0..self.threads.cores.max(1) {
            let w = self.clone();
            let (confine, idle) = (self.threads.confine.clone(), self.threads.idle);
            std::thread::Builder::new()
                .name(format!("mote-job-{n}"))
                .spawn(move || {
                    // Before the confinement, which does not allow it.
                    if idle && let Err(e) = mote_node::priority::run_this_thread_idle() {
                        tracing::warn!(error = %e, "a job thread could not go to SCHED_IDLE");
                    }
                    let confined = match confine {
                        Some(filter) => filter.confine_this_thread(),
                        None => {
                            mote_confine::waive(mote_confine::Role::Guest);
                            Ok(())
                        }
                    };
                    if let Err(e) = confined {
                        w.fail(WorkerError::Confine(e));
                        return;
                    }
                    w.execute(n);
                })
                .map_err(WorkerError::Threads)?;
        }
        Ok(())
    }
}
