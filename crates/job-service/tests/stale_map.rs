//! Scatter data under a stale partition map (section 4.2), with real workers in one process.
//!
//! Three [`Worker`]s run `lr` with the real job engine, wired together by an in-memory
//! [`Transport`] that hands each message to the addressed worker's [`Worker::deliver`] and
//! records it. Their maps disagree about the one partition of the weights (`global_weight`),
//! which the gradients' gather writes: the controller moved it from worker A to C (version 2)
//! and back to A (version 3). A knows version 3 and holds it; B knows version 2, so it sends its
//! gradient pieces to C; C still has version 1 (A's).
//!
//! - Hold: C gets pieces routed by a newer entry than its own for a partition it does not hold,
//!   so it keeps them. A's gather cannot run without them, and the job waits.
//! - Forward: once the version 3 update reaches C, C sends what it held to A, and from then on
//!   forwards B's pieces (routed by version 2, older than its own) as they come. A stale update
//!   (version 2) that arrives after it changes nothing.
//!
//! Every piece must be used exactly once: the job finishes on all three workers and its weights
//! are the sequential reference's.

use async_trait::async_trait;
use mote_job_service::{JobCode, JobThreads, Transport, TransportError, Worker, WorkerEnv};
use mote_jobs::message::{Envelope, JobSpec, Report, WorkerMessage};
use mote_jobs::{Entry, GroupId, PartitionKey, PartitionMap, WorkerId};
use mote_objects::{Objects, ObjectsConfig};
use mote_runtime::{JobContext, JobCores, JobEngine, JobShare};
use mote_types::Limits;
use parking_lot::{Condvar, Mutex};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

// The sequential reference and the generators of the end-to-end tests.
#[allow(dead_code)]
#[path = "../../../tests/e2e/jobs/reference.rs"]
mod reference;

/// The longest anything that should happen may take on a loaded 2-core machine.
const DEADLINE: Duration = Duration::from_secs(30);

const A: WorkerId = WorkerId(0);
const B: WorkerId = WorkerId(1);
const C: WorkerId = WorkerId(2);
const URLS: [&str; 3] = ["mem://a", "mem://b", "mem://c"];

/// Workers of one job in this process, and everything said between them.
#[derive(Default)]
struct Wire {
    workers: Mutex<HashMap<String, Arc<Worker>>>,
    /// Every worker message, with the URL it went to, in the order sent.
    sent: Mutex<Vec<(String, WorkerMessage)>>,
    reports: Mutex<Vec<Report>>,
    reported: Condvar,
}

impl Wire {
    fn worker(&self, url: &str) -> Option<Arc<Worker>> {
        self.workers.lock().get(url).cloned()
    }

    fn sent(&self) -> Vec<(String, WorkerMessage)> {
        self.sent.lock().clone()
    }

    /// Waits until every worker reported that it is done; panics on a failure.
    fn wait_done(&self, workers: usize) {
        let started = Instant::now();
        let mut reports = self.reports.lock();
        loop {
            let mut done = BTreeSet::new();
            for r in reports.iter() {
                match r {
                    Report::Done(p) => {
                        done.insert(p.worker);
                    }
                    Report::Failed { error, .. } => panic!("a worker failed: {error}"),
                    _ => {}
                }
            }
            if done.len() == workers {
                return;
            }
            let left = DEADLINE
                .checked_sub(started.elapsed())
                .unwrap_or_else(|| panic!("only {done:?} finished within {DEADLINE:?}"));
            self.reported.wait_for(&mut reports, left);
        }
    }
}

#[async_trait]
impl Transport for Wire {
    async fn start(&self, url: &str, _: &JobSpec) -> Result<(), TransportError> {
        Err(TransportError {
            url: url.to_owned(),
            detail: "the test starts its workers itself".into(),
            refused: true,
        })
    }

    async fn run(&self, url: &str, _: &str) -> Result<(), TransportError> {
        Err(TransportError {
            url: url.to_owned(),
            detail: "the test runs its workers itself".into(),
            refused: true,
        })
    }

    async fn stop(&self, _: &str, _: &str) -> Result<(), TransportError> {
        Ok(())
    }

    async fn message(&self, url: &str, _: &str, m: &Envelope) -> Result<(), TransportError> {
        let Some(worker) = self.worker(url) else {
            return Err(TransportError {
                url: url.to_owned(),
                detail: "no such worker".into(),
                refused: true,
            });
        };
        self.sent.lock().push((url.to_owned(), m.message.clone()));
        worker.deliver(m.clone()).map_err(|e| TransportError {
            url: url.to_owned(),
            detail: e.to_string(),
            refused: true,
        })
    }

    async fn report(&self, _: &str, _: &str, r: &Report) -> Result<(), TransportError> {
        self.reports.lock().push(r.clone());
        self.reported.notify_all();
        Ok(())
    }
}

/// The pieces for `group` that went to `url`: (source partition, version).
fn pieces_to(sent: &[(String, WorkerMessage)], url: &str, group: GroupId) -> Vec<(u32, u32)> {
    sent.iter()
        .filter(|(to, _)| to == url)
        .filter_map(|(_, m)| match m {
            WorkerMessage::Pieces {
                group: g, pieces, ..
            } if *g == group => Some(pieces),
            _ => None,
        })
        .flatten()
        .map(|p| {
            assert_eq!(p.index, 0, "the weights have one partition");
            assert!(p.data.is_some(), "every partition sends its gradient");
            (p.source, p.version)
        })
        .collect()
}

#[test]
fn pieces_under_a_stale_map_are_held_then_forwarded_and_each_is_used_once() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _runtime = runtime.enter();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("out")).unwrap();
    let objects = Arc::new(Objects::new(ObjectsConfig::Directory(dir.path().to_owned())).unwrap());

    let (points, seed, iterations) = (120, 4, 4);
    let args: Vec<(String, String)> = [
        ("generate", points.to_string()),
        ("seed", seed.to_string()),
        ("iterations", iterations.to_string()),
        ("output", "out/lr".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let partitions = 6;
    // Three workers of one core each share the engine, as three nodes' would not.
    let cores = Arc::new(JobCores::new(3, JobShare::default()));
    let engine = Arc::new(JobEngine::new(cores).unwrap());
    let module = engine.module("lr", mote_guests::LR.wasm).unwrap();
    let ctx = JobContext {
        function: Arc::from("lr"),
        args: Arc::from(args.clone()),
        partitions,
        limits: Limits::default(),
        stopped: Arc::default(),
        datasets: Arc::default(),
    };
    let program = Arc::new(engine.program(&module, &ctx).unwrap());
    let ctx = JobContext {
        datasets: program.dataset_names(),
        ..ctx
    };
    let group = |name: &str| {
        let d = program
            .datasets
            .iter()
            .position(|d| d.name == name)
            .unwrap_or_else(|| panic!("lr declares no dataset {name}"));
        program.groups.of(mote_jobs::DatasetId(d as u32))
    };
    let (training, global) = (group("training_data"), group("global_weight"));
    assert_eq!(program.groups.size(training), partitions);
    assert_eq!(program.groups.size(global), 1);

    // One core each: the training data's partitions 0-1 on A, 2-3 on B, 4-5 on C; the weights
    // on A.
    let initial = PartitionMap::assign(program.groups.sizes(), &[1, 1, 1]);
    let weights = PartitionKey {
        group: global,
        index: 0,
    };
    assert_eq!(
        initial.entry(weights),
        Entry {
            worker: A,
            version: 1
        }
    );
    let from_b: Vec<u32> = initial.held_by(B, training).collect();
    let from_c: Vec<u32> = initial.held_by(C, training).collect();
    assert_eq!((from_b.len(), from_c.len()), (2, 2));
    let at = |worker, version| Entry { worker, version };
    let mut map_a = initial.clone();
    assert!(map_a.apply(weights, at(A, 3)));
    let mut map_b = initial.clone();
    assert!(map_b.apply(weights, at(C, 2)));
    let map_c = initial.clone();

    let wire = Arc::new(Wire::default());
    let relay = Arc::new(mote_confine::Relay::start("test-relay").unwrap());
    let env = WorkerEnv {
        engine: engine.clone(),
        threads: JobThreads {
            cores: 1,
            ..JobThreads::default()
        },
        transport: wire.clone(),
        objects: Some(objects),
        guests: Arc::new(
            mote_confine::ConfinedPool::start("test-guests", 1, None, relay.clone()).unwrap(),
        ),
        relay,
    };
    let mut workers = Vec::new();
    for (me, map) in [(A, map_a), (B, map_b), (C, map_c)] {
        let spec = JobSpec {
            id: "stale".into(),
            function: "lr".into(),
            sha256: "lr".into(),
            args: args.clone(),
            partitions,
            workers: URLS.map(str::to_owned).to_vec(),
            me,
            map,
            controller: "mem://controller".into(),
            generation: 0,
            live: vec![true; 3],
            snapshots: None,
        };
        let code = JobCode {
            program: program.clone(),
            module: module.clone(),
            // Each worker stops on its own.
            ctx: JobContext {
                stopped: Arc::default(),
                ..ctx.clone()
            },
            log: None,
        };
        let (worker, io) = Worker::prepare(spec, code, &env).unwrap();
        worker.start_io(io, &env);
        let url = URLS[me.0 as usize].to_owned();
        wire.workers.lock().insert(url, worker.clone());
        workers.push(worker);
    }
    for worker in &workers {
        worker.run().unwrap();
    }
    let (a, c) = (&workers[0], &workers[2]);

    // Hold: B's gradients of the first iteration go to C by version 2, and C keeps them.
    let started = Instant::now();
    while pieces_to(&wire.sent(), URLS[2], global).len() < from_b.len() {
        assert!(
            started.elapsed() < DEADLINE,
            "B sent no gradients to C: {:?}",
            wire.sent()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(300));
    let sent = wire.sent();
    let to_c = pieces_to(&sent, URLS[2], global);
    let sources: BTreeSet<u32> = to_c.iter().map(|(s, _)| *s).collect();
    assert_eq!(sources, from_b.iter().copied().collect(), "{to_c:?}");
    assert!(to_c.iter().all(|(_, v)| *v == 2), "{to_c:?}");
    assert_eq!(to_c.len(), from_b.len(), "{to_c:?}");
    let to_a = pieces_to(&sent, URLS[0], global);
    assert!(
        to_a.iter().all(|(s, v)| from_c.contains(s) && *v == 1),
        "only C's own gradients reached A, by version 1: {to_a:?}"
    );
    assert!(pieces_to(&sent, URLS[1], global).is_empty());
    assert_eq!(
        a.progress().iterations,
        1,
        "A's first gather waits for B's pieces"
    );
    assert!(!a.ended());

    // Forward: the version 3 update reaches C, then the stale version 2 one (to A as well).
    let update = |entry| Envelope {
        generation: 0,
        message: WorkerMessage::MapUpdate {
            entries: vec![(weights, entry)],
        },
    };
    c.deliver(update(at(A, 3))).unwrap();
    c.deliver(update(at(C, 2))).unwrap();
    a.deliver(update(at(C, 2))).unwrap();
    wire.wait_done(3);

    let sent = wire.sent();
    let iterations = iterations as usize;
    let to_c = pieces_to(&sent, URLS[2], global);
    assert_eq!(to_c.len(), iterations * from_b.len(), "{to_c:?}");
    assert!(
        to_c.iter().all(|(s, v)| from_b.contains(s) && *v == 2),
        "{to_c:?}"
    );
    // Every piece A took from B came through C, which forwards by its own entry (version 3);
    // C's own went by its entry too, version 1 until the update and 3 after it.
    let to_a = pieces_to(&sent, URLS[0], global);
    let from = |sources: &[u32]| -> Vec<u32> {
        to_a.iter()
            .filter(|(s, _)| sources.contains(s))
            .map(|(_, v)| *v)
            .collect()
    };
    let (via_c, own) = (from(&from_b), from(&from_c));
    assert_eq!(via_c, vec![3; iterations * from_b.len()], "{to_a:?}");
    assert_eq!(own.len(), iterations * from_c.len(), "{to_a:?}");
    assert!(own.iter().all(|v| *v == 1 || *v == 3), "{to_a:?}");
    assert_eq!(to_a.len(), via_c.len() + own.len(), "{to_a:?}");
    assert!(pieces_to(&sent, URLS[1], global).is_empty());
    assert_eq!(a.progress().iterations, iterations as u64);

    // No controller commits here: the output is where the worker staged it.
    let staged = mote_job_service::output::staged_key("lr", "stale", 0);
    let text = std::fs::read_to_string(dir.path().join("out").join(staged)).unwrap();
    let got: Vec<f64> = text.lines().map(|l| l.parse().unwrap()).collect();
    let points = reference::generate_labelled_points(points, seed);
    let want = reference::logistic_regression(&points, iterations as u32, 1.0);
    assert_eq!(got.len(), want.len(), "{text}");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-9 * g.abs().max(w.abs()),
            "weight {i}: the job found {g:e}, the reference {w:e}"
        );
    }
    for w in &workers {
        w.stop();
    }
}
