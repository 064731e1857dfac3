//! Each decision of the supervisor, stepped with explicit times.

use super::*;
use crate::cursor::Cursor;
use crate::message::{Envelope, Progress, Restore, SnapshotPlan, WorkerMessage};
use std::time::Duration;

/// Partitions of each partitioned group; every job here has two and a single one.
const P: u32 = 6;

pub(super) fn spec(workers: usize, snapshots: bool) -> JobSpec {
    JobSpec {
        id: "j".into(),
        function: "lr".into(),
        sha256: "00".into(),
        args: Vec::new(),
        partitions: P,
        workers: (0..workers).map(url).collect(),
        me: WorkerId(0),
        map: PartitionMap::assign(&[P, P, 1], &vec![1; workers]),
        controller: "http://c".into(),
        generation: 0,
        live: vec![true; workers],
        snapshots: snapshots.then(|| SnapshotPlan {
            every: 10,
            bucket: "b".into(),
            prefix: "s/".into(),
        }),
    }
}

pub(super) fn name(w: usize) -> String {
    format!("n{w}")
}

pub(super) fn url(w: usize) -> String {
    format!("http://n{w}")
}

/// A job on `workers` one-core workers that ran at the instant returned.
pub(super) fn job(workers: usize, snapshots: bool, rebalance: bool) -> (Supervisor, Instant) {
    let t0 = Instant::now();
    let setups = (0..workers)
        .map(|w| WorkerSetup {
            name: name(w),
            url: url(w),
            cores: 1,
        })
        .collect();
    let mut s = Supervisor::new(t0, spec(workers, snapshots), setups, rebalance).unwrap();
    s.running(t0);
    (s, t0)
}

pub(super) fn ms(t0: Instant, ms: u64) -> Instant {
    t0 + Duration::from_millis(ms)
}

pub(super) fn progress(w: usize, generation: u32) -> Progress {
    Progress {
        worker: WorkerId(w as u16),
        generation,
        cores: 1,
        ..Progress::default()
    }
}

/// Every node but those named, alive.
pub(super) fn nodes_but(workers: usize, gone: &[usize]) -> LiveNodes {
    LiveNodes {
        nodes: (0..workers)
            .filter(|w| !gone.contains(w))
            .map(|w| LiveNode {
                name: name(w),
                url: url(w),
            })
            .collect(),
    }
}

/// Progress reports from every live worker.
fn heard_from_all(s: &mut Supervisor, now: Instant) {
    for w in 0..s.workers().len() {
        if s.workers()[w].live {
            let g = s.generation();
            assert!(
                s.on_report(now, Report::Progress(progress(w, g)))
                    .is_empty()
            );
        }
    }
}

pub(super) fn held(s: &Supervisor, w: usize) -> Vec<PartitionKey> {
    keys(s.map())
        .filter(|k| s.map().entry(*k).worker.0 as usize == w)
        .collect()
}

/// Every live worker stores the partitions it holds at `iteration`; the actions of the last.
pub(super) fn snapshot(s: &mut Supervisor, now: Instant, iteration: u64) -> Vec<Action> {
    let mut last = Vec::new();
    for w in 0..s.workers().len() {
        if s.workers()[w].live {
            let report = Report::Snapshotted {
                progress: progress(w, s.generation()),
                iteration,
                keys: held(s, w),
                bytes: 100,
                write_us: 1_000,
                cursor: Cursor::new(),
                error: None,
            };
            last = s.on_report(now, report);
        }
    }
    last
}

pub(super) fn restore_of(action: &Action) -> &Restore {
    match action {
        Action::Restore(RestoreOrder {
            restore:
                Envelope {
                    message: WorkerMessage::Restore(r),
                    ..
                },
            ..
        }) => r,
        other => panic!("not a restore: {other:?}"),
    }
}

fn failure(actions: &[Action]) -> &str {
    match actions {
        [
            Action::End {
                outcome: Outcome::Failed(error),
                ..
            },
        ] => error,
        other => panic!("not a failure: {other:?}"),
    }
}

#[test]
fn a_silent_worker_fails_a_job_without_snapshots_and_the_error_says_what_to_do() {
    let (mut s, t0) = job(2, false, false);
    for t in [1_000, 2_000, 3_000] {
        let p = progress(0, 0);
        assert!(s.on_report(ms(t0, t), Report::Progress(p)).is_empty());
    }
    // Silent for exactly 3 s is not yet too long.
    assert!(s.tick(ms(t0, 3_000), &nodes_but(2, &[])).is_empty());
    let end = s.tick(ms(t0, 3_001), &nodes_but(2, &[]));
    let error = failure(&end);
    assert!(
        error.starts_with("worker n1 (http://n1) has not reported for 3 s"),
        "{error}"
    );
    assert!(error.contains("no snapshots to fall back to"), "{error}");
    assert!(
        error.contains("--snapshot-every N --snapshot-to"),
        "{error}"
    );
    let Action::End { stop, .. } = &end[0] else {
        unreachable!()
    };
    assert_eq!(stop.len(), 2, "every worker is stopped, the gone one too");
    assert!(!s.workers()[1].live);
    // Nothing more, whatever comes.
    assert!(s.tick(ms(t0, 9_000), &nodes_but(2, &[])).is_empty());
    assert!(s.cancel(ms(t0, 9_000)).is_empty());
    assert!(
        s.on_report(ms(t0, 9_000), Report::Done(progress(0, 0)))
            .is_empty()
    );
}

#[test]
fn losing_a_worker_before_the_first_snapshot_completes_fails_saying_so() {
    let (mut s, t0) = job(3, true, false);
    let end = s.tick(ms(t0, 100), &nodes_but(3, &[2]));
    let error = failure(&end);
    assert!(
        error.starts_with("worker n2 (http://n2) left the cluster: its node's lease expired"),
        "{error}"
    );
    assert!(
        error.contains("no snapshot was complete yet (the first comes after iteration 10)"),
        "{error}"
    );
}

#[test]
fn a_node_whose_lease_expired_is_gone_at_once_and_the_job_rolls_back_without_it() {
    let (mut s, t0) = job(3, true, false);
    assert!(snapshot(&mut s, ms(t0, 500), 10).is_empty());
    heard_from_all(&mut s, ms(t0, 600));
    // Long before its silence would count.
    let actions = s.tick(ms(t0, 700), &nodes_but(3, &[1]));
    let [Action::Restore(order)] = actions.as_slice() else {
        panic!("{actions:?}")
    };
    assert_eq!(order.generation, 1);
    assert_eq!(order.stop, [s.target(WorkerId(1))]);
    assert!(order.start.is_empty());
    let to: Vec<_> = order.to.iter().map(|t| t.worker.0).collect();
    assert_eq!(to, [0, 2]);
    let r = restore_of(&actions[0]);
    assert_eq!((r.generation, r.iteration), (1, 10));
    assert_eq!(r.live, [true, false, true]);
    assert!(held(&s, 1).is_empty(), "the gone worker holds nothing");
    assert_eq!(r.map, *s.map());
    assert_eq!(s.generation(), 1);
    let record = &s.history().restores[0];
    assert!(record.reason.contains("n1 (http://n1) left the cluster"));
    assert_eq!(record.took, None);
}

#[test]
fn a_cluster_that_lists_no_node_loses_no_worker() {
    let (mut s, t0) = job(2, false, false);
    assert!(s.tick(ms(t0, 100), &LiveNodes::default()).is_empty());
    assert!(s.workers().iter().all(|w| w.live));
}

#[test]
fn nothing_is_decided_during_a_restore_and_silence_counts_from_its_end() {
    let (mut s, t0) = job(3, true, false);
    snapshot(&mut s, ms(t0, 500), 10);
    let actions = s.tick(ms(t0, 700), &nodes_but(3, &[1]));
    assert!(matches!(actions[..], [Action::Restore(_)]));
    // The restore takes long: no one is taken for gone meanwhile.
    assert!(s.tick(ms(t0, 9_000), &nodes_but(3, &[1, 2])).is_empty());
    // A report of the ended generation is dropped.
    assert!(
        s.on_report(ms(t0, 9_000), Report::Done(progress(0, 0)))
            .is_empty()
    );
    s.on_restored(ms(t0, 10_000), 0);
    assert!(
        s.tick(ms(t0, 10_000), &nodes_but(3, &[1])).is_empty(),
        "not this generation"
    );
    s.on_restored(ms(t0, 10_000), 1);
    assert_eq!(
        s.history().restores[0].took,
        Some(Duration::from_millis(9_300))
    );
    assert!(
        s.on_report(ms(t0, 12_000), Report::Progress(progress(0, 1)))
            .is_empty()
    );
    assert!(s.tick(ms(t0, 13_000), &nodes_but(3, &[1])).is_empty());
    let actions = s.tick(ms(t0, 13_001), &nodes_but(3, &[1]));
    assert!(matches!(actions[..], [Action::Restore(_)]), "{actions:?}");
    let r = restore_of(&actions[0]);
    assert_eq!(r.live, [true, false, false]);
    assert_eq!(r.generation, 2);
}

#[test]
fn a_restore_not_taken_fails_the_job() {
    let (mut s, t0) = job(2, true, false);
    snapshot(&mut s, ms(t0, 500), 10);
    let r = s.on_report(
        ms(t0, 600),
        Report::Unreachable {
            progress: progress(0, 0),
            peer: WorkerId(1),
            error: "connection refused".into(),
        },
    );
    assert_eq!(
        s.history().restores[0].reason,
        "worker n1 could not be reached by worker n0: connection refused"
    );
    assert_eq!(restore_of(&r[0]).live, [true, false]);
    assert!(s.on_restore_failed(ms(t0, 700), 0, "stale").is_empty());
    let end = s.on_restore_failed(ms(t0, 700), 1, "http://n0: timed out");
    assert_eq!(
        failure(&end),
        "the restore from the last snapshot failed: http://n0: timed out"
    );
}

#[test]
fn an_unreachable_gone_peer_or_a_report_of_a_gone_worker_changes_nothing() {
    let (mut s, t0) = job(3, true, false);
    snapshot(&mut s, ms(t0, 500), 10);
    s.tick(ms(t0, 600), &nodes_but(3, &[2]));
    s.on_restored(ms(t0, 700), 1);
    let unreachable = |from: usize, peer: u16| Report::Unreachable {
        progress: progress(from, 1),
        peer: WorkerId(peer),
        error: "refused".into(),
    };
    assert!(s.on_report(ms(t0, 800), unreachable(0, 2)).is_empty());
    assert!(s.on_report(ms(t0, 800), unreachable(2, 0)).is_empty());
    assert!(s.on_report(ms(t0, 800), unreachable(0, 9)).is_empty());
    let failed = Report::Failed {
        progress: progress(2, 1),
        error: "trap".into(),
    };
    assert!(s.on_report(ms(t0, 800), failed).is_empty());
    assert_eq!(s.outcome(), None);
}

#[test]
fn a_failed_task_fails_the_job_naming_the_worker() {
    let (mut s, t0) = job(2, false, false);
    let failed = Report::Failed {
        progress: progress(1, 0),
        error: "compute `gradient` on partition 3 trapped".into(),
    };
    let end = s.on_report(ms(t0, 10), failed);
    assert_eq!(
        failure(&end),
        "on worker n1: compute `gradient` on partition 3 trapped"
    );
    assert_eq!(s.ended_at(), Some(ms(t0, 10)));
}

#[test]
fn the_job_succeeds_when_every_live_worker_is_done_and_a_restore_undoes_done() {
    let (mut s, t0) = job(3, true, false);
    snapshot(&mut s, ms(t0, 100), 10);
    assert!(
        s.on_report(ms(t0, 200), Report::Done(progress(0, 0)))
            .is_empty()
    );
    s.tick(ms(t0, 300), &nodes_but(3, &[2]));
    s.on_restored(ms(t0, 400), 1);
    assert!(!s.workers()[0].done, "it runs again from the snapshot");
    assert!(
        s.on_report(ms(t0, 500), Report::Done(progress(0, 1)))
            .is_empty()
    );
    let end = s.on_report(ms(t0, 600), Report::Done(progress(1, 1)));
    assert!(matches!(
        end[..],
        [Action::End {
            outcome: Outcome::Succeeded,
            ..
        }]
    ));
    assert_eq!(s.outcome(), Some(&Outcome::Succeeded));
}

#[test]
fn a_cancel_ends_the_job_once() {
    let (mut s, t0) = job(2, false, false);
    let end = s.cancel(ms(t0, 5));
    assert!(matches!(
        end[..],
        [Action::End {
            outcome: Outcome::Cancelled,
            ..
        }]
    ));
    assert!(s.cancel(ms(t0, 6)).is_empty());
    assert!(s.fail(ms(t0, 6), "late".into()).is_empty());
    assert_eq!(s.outcome(), Some(&Outcome::Cancelled));
}

#[test]
fn a_newer_complete_snapshot_deletes_the_previous_one_and_the_end_marks_the_rest_deleted() {
    let (mut s, t0) = job(2, true, false);
    assert!(snapshot(&mut s, ms(t0, 100), 10).is_empty());
    assert_eq!(
        snapshot(&mut s, ms(t0, 200), 20),
        [Action::DeleteSnapshot { iteration: 10 }]
    );
    // A partition the job does not have counts for nothing.
    let bogus = Report::Snapshotted {
        progress: progress(0, 0),
        iteration: 30,
        keys: held(&s, 0)
            .into_iter()
            .chain([PartitionKey {
                group: GroupId(7),
                index: 0,
            }])
            .collect(),
        bytes: 1,
        write_us: 1,
        cursor: Cursor::new(),
        error: None,
    };
    assert!(s.on_report(ms(t0, 300), bogus).is_empty());
    assert_eq!(
        s.history().snapshots.iter().nth(2).unwrap().stored,
        held(&s, 0).len()
    );
    s.cancel(ms(t0, 400));
    s.on_snapshots_deleted();
    let states: Vec<_> = s.history().snapshots.iter().map(|r| r.state).collect();
    assert_eq!(states, [SnapshotState::Deleted; 3]);
}

#[test]
fn a_gone_worker_whose_node_is_back_rejoins_at_the_next_complete_snapshot() {
    let (mut s, t0) = job(3, true, false);
    snapshot(&mut s, ms(t0, 100), 10);
    s.tick(ms(t0, 200), &nodes_but(3, &[2]));
    s.on_restored(ms(t0, 300), 1);
    // Its node is back, elsewhere: it waits for the next snapshot.
    let mut back = nodes_but(3, &[]);
    back.nodes[2].url = "http://n2-again".into();
    assert!(s.tick(ms(t0, 400), &back).is_empty());
    assert_eq!(s.workers()[2].url, "http://n2-again");
    assert!(!s.workers()[2].live);
    assert!(held(&s, 2).is_empty());
    let actions = snapshot(&mut s, ms(t0, 500), 20);
    let probe = Target {
        worker: WorkerId(2),
        url: "http://n2-again".into(),
    };
    assert_eq!(
        actions,
        [
            Action::DeleteSnapshot { iteration: 10 },
            Action::Probe(vec![probe.clone()])
        ]
    );
    // Asked again before the answer, it is not asked twice.
    assert!(s.tick(ms(t0, 600), &back).is_empty());
    assert!(
        snapshot(&mut s, ms(t0, 700), 30)
            .iter()
            .all(|a| !matches!(a, Action::Probe(_)))
    );
    let actions = s.on_probed(ms(t0, 800), &[(WorkerId(2), true)]);
    let [Action::Restore(order)] = actions.as_slice() else {
        panic!("{actions:?}")
    };
    let r = restore_of(&actions[0]);
    assert_eq!((r.generation, r.iteration), (2, 30));
    assert_eq!(r.live, [true, true, true]);
    assert_eq!(r.workers[2], "http://n2-again");
    assert!(order.stop.is_empty());
    let [(target, spec)] = order.start.as_slice() else {
        panic!("{order:?}")
    };
    assert_eq!(*target, probe);
    assert_eq!((spec.me, spec.generation), (WorkerId(2), 1));
    assert_eq!(spec.map, r.map);
    assert_eq!(order.to.len(), 3);
    assert!(!held(&s, 2).is_empty(), "it holds partitions again");
    assert_eq!(s.history().restores[1].reason, "worker n2 is back");
    // A late answer to the same probe changes nothing.
    assert!(s.on_probed(ms(t0, 900), &[(WorkerId(2), true)]).is_empty());
}

#[test]
fn a_worker_back_that_does_not_answer_is_asked_again_at_a_later_snapshot() {
    let (mut s, t0) = job(2, true, false);
    snapshot(&mut s, ms(t0, 100), 10);
    s.tick(ms(t0, 200), &nodes_but(2, &[1]));
    s.on_restored(ms(t0, 300), 1);
    s.tick(ms(t0, 400), &nodes_but(2, &[]));
    assert!(matches!(
        snapshot(&mut s, ms(t0, 500), 20)[..],
        [_, Action::Probe(_)]
    ));
    assert!(s.on_probed(ms(t0, 600), &[(WorkerId(1), false)]).is_empty());
    assert!(!s.workers()[1].live);
    s.tick(ms(t0, 700), &nodes_but(2, &[]));
    assert!(matches!(
        snapshot(&mut s, ms(t0, 800), 30)[..],
        [_, Action::Probe(_)]
    ));
}

#[test]
fn workers_back_during_a_restore_wait_for_the_next_snapshot() {
    let (mut s, t0) = job(3, true, false);
    snapshot(&mut s, ms(t0, 100), 10);
    s.tick(ms(t0, 200), &nodes_but(3, &[1]));
    s.on_restored(ms(t0, 300), 1);
    s.tick(ms(t0, 400), &nodes_but(3, &[]));
    snapshot(&mut s, ms(t0, 500), 20);
    // Another worker is lost before the probe's answer.
    s.tick(ms(t0, 600), &nodes_but(3, &[2]));
    assert!(s.on_probed(ms(t0, 700), &[(WorkerId(1), true)]).is_empty());
    s.on_restored(ms(t0, 800), 2);
    let actions = snapshot(&mut s, ms(t0, 900), 30);
    assert_eq!(
        actions.last(),
        Some(&Action::Probe(vec![s.target(WorkerId(1))]))
    );
}

#[test]
fn a_setup_that_does_not_add_up_is_refused() {
    let t0 = Instant::now();
    let one = vec![WorkerSetup {
        name: name(0),
        url: url(0),
        cores: 1,
    }];
    assert_eq!(
        Supervisor::new(t0, spec(2, false), one, false).err(),
        Some(SetupError::Workers { spec: 2, given: 1 })
    );
    assert_eq!(
        Supervisor::new(t0, spec(2, false), Vec::new(), false).err(),
        Some(SetupError::NoWorkers)
    );
    let mut wide = spec(1, false);
    wide.map = PartitionMap::assign(&[P], &[1, 1]);
    let one = vec![WorkerSetup {
        name: name(0),
        url: url(0),
        cores: 1,
    }];
    assert!(matches!(
        Supervisor::new(t0, wide, one, false).err(),
        Some(SetupError::Holder {
            worker: 1,
            workers: 1,
            ..
        })
    ));
}
