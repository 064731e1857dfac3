//! The node's side of a worker never waits for its lock: what it posts while an executor holds
//! the lock is applied when the lock is let go, and nothing posted is left behind however posts
//! and lock holders interleave. A real worker (`lr` on the job engine), not run, so that the
//! test holds the lock where an executor would.

use super::Worker;
use crate::{JobCode, JobThreads, Transport, TransportError, WorkerEnv};
use async_trait::async_trait;
use mote_jobs::message::{Envelope, JobSpec, Report, WorkerMessage};
use mote_jobs::{Entry, PartitionKey, PartitionMap, WorkerId};
use mote_runtime::{JobContext, JobCores, JobEngine, JobShare};
use mote_types::Limits;
use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

/// Long enough that only a thread waiting for the lock misses it.
const PROMPT: Duration = Duration::from_secs(10);

#[derive(Default)]
struct Reports(Mutex<Vec<Report>>);

#[async_trait]
impl Transport for Reports {
    async fn start(&self, url: &str, _: &JobSpec) -> Result<(), TransportError> {
        Err(refused(url))
    }

    async fn run(&self, url: &str, _: &str) -> Result<(), TransportError> {
        Err(refused(url))
    }

    async fn stop(&self, _: &str, _: &str) -> Result<(), TransportError> {
        Ok(())
    }

    async fn message(&self, url: &str, _: &str, _: &Envelope) -> Result<(), TransportError> {
        Err(refused(url))
    }

    async fn report(&self, _: &str, _: &str, r: &Report) -> Result<(), TransportError> {
        self.0.lock().push(r.clone());
        Ok(())
    }
}

fn refused(url: &str) -> TransportError {
    TransportError {
        url: url.to_owned(),
        detail: "this test has one worker".into(),
        refused: true,
    }
}

/// Worker 0 of two of an `lr` job over 4 partitions, prepared on `runtime`.
fn worker(runtime: &tokio::runtime::Runtime) -> Arc<Worker> {
    let _entered = runtime.enter();
    let cores = Arc::new(JobCores::new(1, JobShare::default()));
    let engine = Arc::new(JobEngine::new(cores).unwrap());
    let module = engine.module("lr", mote_guests::LR.wasm).unwrap();
    let args: Vec<(String, String)> = [("generate", "40"), ("iterations", "2")]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let ctx = JobContext {
        function: Arc::from("lr"),
        args: Arc::from(args.clone()),
        partitions: 4,
        limits: Limits::default(),
        stopped: Arc::default(),
        datasets: Arc::default(),
    };
    let program = Arc::new(engine.program(&module, &ctx).unwrap());
    let ctx = JobContext {
        datasets: program.dataset_names(),
        ..ctx
    };
    let spec = JobSpec {
        id: "inbox".into(),
        function: "lr".into(),
        sha256: "lr".into(),
        args,
        partitions: 4,
        workers: vec!["mem://a".into(), "mem://b".into()],
        me: WorkerId(0),
        map: PartitionMap::assign(program.groups.sizes(), &[1, 1]),
        controller: "mem://controller".into(),
        generation: 0,
        live: vec![true; 2],
        snapshots: None,
    };
    let relay = Arc::new(mote_confine::Relay::start("test-relay").unwrap());
    let env = WorkerEnv {
        engine,
        threads: JobThreads {
            cores: 1,
            ..JobThreads::default()
        },
        transport: Arc::new(Reports::default()),
        objects: None,
        guests: Arc::new(
            mote_confine::ConfinedPool::start("test-guests", 1, None, relay.clone()).unwrap(),
        ),
        relay,
    };
    let code = JobCode {
        program,
        module,
        ctx,
        log: None,
    };
    let (worker, io) = Worker::prepare(spec, code, &env).unwrap();
    worker.start_io(io, &env);
    worker
}

/// A partition worker 1 holds, and the entry that moves it to worker 0.
fn moved(worker: &Worker) -> (PartitionKey, Entry) {
    let local = worker.local.lock();
    let key = (0..worker.program.groups.sizes().len())
        .flat_map(|g| {
            let group = mote_jobs::GroupId(g as u16);
            let size = worker.program.groups.size(group);
            (0..size).map(move |index| PartitionKey { group, index })
        })
        .find(|&key| local.exchange.route(key).worker == WorkerId(1))
        .expect("worker 1 holds a partition");
    let entry = Entry {
        worker: WorkerId(0),
        version: local.exchange.route(key).version + 1,
    };
    (key, entry)
}

#[test]
fn what_the_node_posts_while_an_executor_holds_the_lock_waits_for_it_not_the_node() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let worker = worker(&runtime);
    let (key, entry) = moved(&worker);

    // An executor holds the lock and is not let run (preempted, in `SCHED_IDLE`).
    let mut held = worker.lock();
    held.outstanding = 1;
    let (done, finished) = mpsc::channel();
    let node = worker.clone();
    let handle = runtime.handle().clone();
    std::thread::spawn(move || {
        let _entered = handle.enter();
        let update = Envelope {
            generation: 0,
            message: WorkerMessage::MapUpdate {
                entries: vec![(key, entry)],
            },
        };
        node.deliver(update).unwrap();
        node.acknowledged(0);
        let progress = node.progress();
        let ended = node.ended();
        node.unreachable(0, WorkerId(1), "refused".into());
        done.send((progress, ended)).unwrap();
    });
    let (progress, ended) = finished
        .recv_timeout(PROMPT)
        .expect("the node's thread waited for the worker's lock");
    assert_eq!(progress.worker, WorkerId(0));
    assert!(!ended);
    // Nothing applied yet: the holder applies it as it lets go.
    assert_eq!(held.outstanding, 1);
    assert_ne!(held.exchange.route(key), entry);
    drop(held);
    assert!(worker.inbox.is_empty());
    let local = worker.local.lock();
    assert_eq!(local.outstanding, 0);
    assert_eq!(local.exchange.route(key), entry);
}

#[test]
fn a_post_that_finds_the_lock_free_is_applied_at_once() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let worker = worker(&runtime);
    let (key, entry) = moved(&worker);
    let update = Envelope {
        generation: 0,
        message: WorkerMessage::MapUpdate {
            entries: vec![(key, entry)],
        },
    };
    worker.deliver(update).unwrap();
    assert!(worker.inbox.is_empty());
    assert_eq!(worker.local.lock().exchange.route(key), entry);
    // A message of a later generation waits for the restore that begins it.
    let later = Envelope {
        generation: 1,
        message: WorkerMessage::Signal {
            signal: 0,
            value: true,
        },
    };
    worker.deliver(later).unwrap();
    assert_eq!(worker.local.lock().later.len(), 1);
}

#[test]
fn no_post_is_left_behind_however_posts_and_holders_interleave() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let worker = worker(&runtime);
    let (posters, posts) = (3, 20_000);
    worker.local.lock().outstanding = posters * posts;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    std::thread::scope(|s| {
        // Executors taking and letting go of the lock as fast as they can.
        for _ in 0..2 {
            let (worker, stop) = (&worker, &stop);
            s.spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let held = worker.lock();
                    std::hint::black_box(held.outstanding);
                }
            });
        }
        let node: Vec<_> = (0..posters)
            .map(|_| {
                let worker = &worker;
                s.spawn(move || {
                    for _ in 0..posts {
                        worker.acknowledged(0);
                    }
                })
            })
            .collect();
        for poster in node {
            poster.join().unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    // Nobody takes the lock after the last post: whoever posted or held last applied it.
    assert!(worker.inbox.is_empty());
    assert_eq!(worker.local.lock().outstanding, 0);
}
