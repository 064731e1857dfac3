//! Jobs that outlive slow and dead workers (`docs/jobs.md`, "Load balance and failures"), on
//! nodes of one cluster on this machine: a worker slowed by other processes on its core gives
//! partitions away; a worker killed with SIGKILL is replaced by a rollback to the last
//! snapshot, and takes partitions again once restarted; a job that cannot recover says why,
//! and a job's snapshots are gone once it ends.

use super::nodes::Cluster;
use super::{
    DEADLINE, assert_all_close, job, output, parse_weights, put_objects, reference, request, start,
    wait_ended,
};
use crate::platform::Platform;
use mote_api::{JobState, JobStatus, RunRequest, SnapshotState, WorkerChoice};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// Polls job `id` until `done` says so, failing if the job ends first.
fn wait_status(
    p: &Platform,
    id: &str,
    what: &str,
    mut done: impl FnMut(&JobStatus) -> bool,
) -> JobStatus {
    let started = Instant::now();
    loop {
        let s = job(p, id);
        if done(&s) {
            return s;
        }
        assert_eq!(
            s.state,
            JobState::Running,
            "the job ended before {what}: {s:?}"
        );
        assert!(
            started.elapsed() < DEADLINE,
            "waited {DEADLINE:?} for {what}: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The snapshot objects left under `snapshots/jobs/ID` in the cluster's object directory.
fn snapshot_objects(cluster: &Cluster, id: &str) -> Vec<String> {
    let dir = cluster.objects.join("snapshots").join("jobs").join(id);
    let mut found = Vec::new();
    let mut stack = vec![dir];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries {
            let path = e.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                found.push(path.display().to_string());
            }
        }
    }
    found
}

/// `lr` on `points` generated points for `iterations`, on `workers`, writing `results/lr`.
fn lr_request(points: u64, iterations: u64, workers: usize) -> RunRequest {
    request(
        "lr",
        Some(WorkerChoice::Count(workers)),
        2,
        &[
            ("generate", &points.to_string()),
            ("seed", "7"),
            ("iterations", &iterations.to_string()),
            ("output", "results/lr"),
        ],
    )
}

/// Asserts `lr`'s output in `results/lr` is the reference's weights for its generated points.
fn assert_lr_output(cluster: &Cluster, points: u64, iterations: u64, what: &str) {
    let weights = parse_weights(&output(&cluster.objects, "results", "lr"));
    let want = reference::logistic_regression(
        &reference::generate_labelled_points(points, 7),
        iterations as u32,
        1.0,
    );
    assert_all_close(what, &weights, &want);
}

fn complete_snapshots(s: &JobStatus) -> usize {
    s.snapshots
        .iter()
        .filter(|x| x.state == SnapshotState::Complete)
        .count()
}

/// Starts `lr` over `points` for `iterations` on `cluster`'s three nodes from its first, with a
/// snapshot every 10 iterations and no rebalancing; answers the job's id.
fn start_snapshotted_lr(cluster: &Cluster, points: u64, iterations: u64) -> String {
    cluster.deploy("lr", mote_guests::LR.wasm);
    put_objects(&cluster.objects, "results", "", &[]);
    put_objects(&cluster.objects, "snapshots", "", &[]);
    let request = RunRequest {
        snapshot_every: Some(10),
        snapshot_to: Some("snapshots/jobs".to_owned()),
        rebalance: Some(false),
        ..lr_request(points, iterations, 3)
    };
    start(&cluster.nodes[0], &request).id
}

#[test]
fn a_killed_worker_is_replaced_from_the_snapshot_and_rejoins_once_restarted() {
    let mut cluster = Cluster::start(3);
    let (points, iterations) = (600, 2500);
    let id = start_snapshotted_lr(&cluster, points, iterations);
    let s = wait_status(&cluster.nodes[0], &id, "a complete snapshot", |s| {
        complete_snapshots(s) > 0 && s.iteration >= 30
    });
    let killed_at = s.iteration;

    // SIGKILL the third worker: the others roll back to the last snapshot without it.
    cluster.kill(3);
    let s = wait_status(&cluster.nodes[0], &id, "the restore", |s| {
        s.restores.first().is_some_and(|r| r.ms.is_some())
    });
    let restore = &s.restores[0];
    let reason = &restore.reason;
    assert!(
        reason.contains("n3")
            && [
                "could not be reached",
                "has not reported",
                "left the cluster"
            ]
            .iter()
            .any(|why| reason.contains(why)),
        "{s:?}"
    );
    assert!(restore.iteration <= killed_at + 10, "{s:?}");
    assert!(!s.workers[2].live, "{s:?}");
    assert_eq!(
        s.workers[2].partitions, 0,
        "n3's partitions went to the others: {s:?}"
    );
    let held: usize = s.workers[..2].iter().map(|w| w.partitions).sum();
    assert_eq!(held, 6 + 1, "every partition is held: {s:?}");

    // Restarted, on a new port, it takes partitions again at the next snapshot.
    cluster.restart(3);
    let s = wait_status(&cluster.nodes[0], &id, "n3 to rejoin", |s| {
        s.restores.len() >= 2 && s.workers[2].live
    });
    assert!(s.restores[1].reason.contains("n3 is back"), "{s:?}");
    assert_eq!(s.workers[2].url, cluster.nodes[2].url, "{s:?}");
    assert!(s.workers[2].partitions > 0, "{s:?}");

    let s = wait_ended(&cluster.nodes[0], &id);
    assert_eq!(s.state, JobState::Succeeded, "{s:?}");
    assert!(
        s.workers[2].tasks > 0,
        "n3 ran tasks after it rejoined: {s:?}"
    );
    assert_lr_output(
        &cluster,
        points,
        iterations,
        "weights after a kill and a rejoin",
    );
    assert_eq!(
        snapshot_objects(&cluster, &id),
        Vec::<String>::new(),
        "{s:?}"
    );
    assert!(
        !cluster.objects.join("snapshots/jobs").exists(),
        "the snapshots' directories are gone too"
    );
    assert_eq!(s.snapshots_left, None, "{s:?}");
}

#[test]
fn a_killed_controller_is_taken_over_and_the_job_ends_as_an_undisturbed_one() {
    let mut cluster = Cluster::start(3);
    let (points, iterations) = (600, 2500);
    let id = start_snapshotted_lr(&cluster, points, iterations);
    wait_status(&cluster.nodes[0], &id, "a complete snapshot", |s| {
        complete_snapshots(s) > 0 && s.iteration >= 30
    });
    // Every node lists the job and shows it, from its record in the store.
    let shown = wait_status(&cluster.nodes[2], &id, "n3 to show the job", |s| {
        s.controller == "n1" && s.iteration > 0
    });
    assert_eq!(shown.function, "lr", "{shown:?}");
    // A node's list is of the records as it last looked at them, once a second.
    crate::cluster::wait_until("n2 to list the job", || {
        let listed = crate::platform::wait(cluster.nodes[1].api().jobs());
        listed.iter().any(|j| j.id == id)
    });

    // SIGKILL the controller's node: n2, the first live worker by name, takes the job over
    // from its record and the last complete snapshot.
    let killed = Instant::now();
    cluster.kill(1);
    let s = wait_status(&cluster.nodes[0], &id, "the takeover", |s| {
        s.controller == "n2" && s.restores.first().is_some_and(|r| r.ms.is_some())
    });
    eprintln!(
        "from the kill to running again under n2: {:.1} s",
        killed.elapsed().as_secs_f64()
    );
    assert!(
        s.restores[0]
            .reason
            .contains("the controller's node n1 left the cluster"),
        "{s:?}"
    );
    assert!(!s.workers[0].live, "n1 is gone: {s:?}");
    let s = wait_ended(&cluster.nodes[0], &id);
    assert_eq!(s.state, JobState::Succeeded, "{s:?}");
    assert_lr_output(
        &cluster,
        points,
        iterations,
        "weights after the controller's loss",
    );
    assert!(
        cluster.objects.join("results/lr/_SUCCESS").is_file(),
        "the new controller committed the output"
    );
    // And the other node sees it ended, from the record.
    let s = wait_status(&cluster.nodes[1], &id, "n3 to see the end", |s| {
        s.state != JobState::Running
    });
    assert_eq!(s.state, JobState::Succeeded, "{s:?}");
}

#[test]
fn a_job_whose_controller_restarted_without_snapshots_fails_saying_so() {
    let mut cluster = Cluster::start(1);
    cluster.deploy("busy", mote_guests::BUSY.wasm);
    let id = start(
        &cluster.nodes[0],
        &request("busy", None, 1, &[("stages", "100000000")]),
    )
    .id;
    wait_status(&cluster.nodes[0], &id, "a recorded task", |s| s.tasks > 0);
    // Long enough for the record to show the tasks: it is written once a second.
    std::thread::sleep(Duration::from_millis(1500));
    cluster.kill(1);
    cluster.restart(1);
    let s = wait_ended(&cluster.nodes[0], &id);
    assert_eq!(s.state, JobState::Failed, "{s:?}");
    let error = s.error.as_deref().unwrap_or_default();
    assert!(
        error.contains("the controller's node n1 restarted")
            && error.contains("no snapshots to fall back to"),
        "{s:?}"
    );
}

/// Processes that keep one core busy, killed when dropped.
struct Burners(Vec<Child>);

impl Burners {
    fn on_core(core: u32, n: usize) -> Self {
        Burners(
            (0..n)
                .map(|_| {
                    Command::new("taskset")
                        .args(["-c", &core.to_string(), "sh", "-c", "while :; do :; done"])
                        .spawn()
                        .expect("taskset (util-linux) starts a busy loop")
                })
                .collect(),
        )
    }
}

impl Drop for Burners {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Pins every thread of process `pid` (and the threads it starts later) to `core`.
fn pin(pid: u32, core: u32) {
    let status = Command::new("taskset")
        .args(["-a", "-p", "-c", &core.to_string(), &pid.to_string()])
        .stdout(std::process::Stdio::null())
        .status()
        .expect("taskset (util-linux) runs");
    assert!(status.success(), "pinning {pid} to core {core}");
}

/// Iterations per second between two status samples (ms since start, iteration).
fn rate(a: (f64, f64), b: (f64, f64)) -> f64 {
    (b.1 - a.1) / ((b.0 - a.0) / 1000.0)
}

/// `scripts/test` runs this test alone, after the others: beside other tests' processes, which
/// the kernel moves off the core the busy loops hold, it would measure them rather than n2.
#[test]
fn a_slowed_worker_gives_partitions_to_the_other_and_iterations_get_faster() {
    // At normal priority, so that n2's worker is slowed, not starved: in `SCHED_IDLE` (the
    // default) the busy loops would leave it next to nothing, and its partitions could leave
    // only after it ran the tasks it had declared (tens of seconds; docs/jobs.md).
    let cluster = Cluster::start_with(2, &["--job-idle", "off"]);
    cluster.deploy("lr", mote_guests::LR.wasm);
    put_objects(&cluster.objects, "results", "", &[]);
    // n1 alone on core 0; n2 on core 1 with three busy loops, so it runs at about a quarter
    // of n1's speed.
    pin(cluster.nodes[0].pid(), 0);
    pin(cluster.nodes[1].pid(), 1);
    let _burners = Burners::on_core(1, 3);
    let (points, iterations) = (200_000, 800);
    let request = RunRequest {
        partitions_per_core: Some(4),
        ..lr_request(points, iterations, 2)
    };
    let id = start(&cluster.nodes[0], &request).id;
    // (ms since the job ran, iteration), sampled until it ends.
    let mut samples: Vec<(f64, f64)> = Vec::new();
    let s = loop {
        let s = job(&cluster.nodes[0], &id);
        samples.push((s.elapsed_ms as f64, s.iteration as f64));
        if s.state != JobState::Running {
            break s;
        }
        assert!(samples.len() < 60_000, "the job never ends: {s:?}");
        std::thread::sleep(Duration::from_millis(25));
    };
    assert_eq!(s.state, JobState::Succeeded, "{s:?}");
    let migrations = &s.migrations;
    assert!(!migrations.is_empty(), "no partition moved: {s:?}");
    for m in migrations {
        assert!(m.ms.is_some(), "every move finished: {s:?}");
    }
    // Other tests' processes may load core 0 for a while too, so the controller may also move
    // an index back for a window; what must hold is that it moved indices off n2 because n2
    // was slower, and that n1 ends with the larger share.
    assert!(
        migrations.iter().any(|m| {
            (m.from.as_str(), m.to.as_str()) == ("n2", "n1") && m.reason.contains("worker n2 took")
        }),
        "no move from the slowed n2 to n1: {s:?}"
    );
    let (p1, p2) = (s.workers[0].partitions, s.workers[1].partitions);
    assert!(p1 > p2, "n1 holds more of the 8 indices than n2: {s:?}");

    // Iteration rates before the first move started and after the first move off the slowed
    // n2 ended. Later moves may go either way, as n2's speed beside the busy loops swings from
    // window to window; each is a decision on the speeds then measured (`PartitionMap`'s tests).
    let first = migrations[0].at_ms as f64;
    let off_n2 = migrations
        .iter()
        .find(|m| m.from == "n2")
        .map(|m| (m.at_ms + m.ms.expect("every move finished")) as f64)
        .expect("a move off n2, asserted above");
    let before: Vec<_> = samples
        .iter()
        .copied()
        .filter(|x| x.0 <= first && x.1 > 0.0)
        .collect();
    let after: Vec<_> = samples
        .iter()
        .copied()
        .filter(|x| x.0 >= off_n2 && x.1 < iterations as f64)
        .collect();
    // The iteration count moves in steps (workers report four times a second): each rate
    // spans at least a second.
    let span = |v: &[(f64, f64)]| v.last().map_or(0.0, |z| z.0 - v[0].0);
    assert!(
        span(&before) >= 1000.0 && span(&after) >= 1000.0,
        "less than a second before the moves or after the first off n2 ({first}..{off_n2} ms): {migrations:?} {samples:?}"
    );
    let (slow, fast) = (
        rate(before[0], *before.last().unwrap()),
        rate(after[0], *after.last().unwrap()),
    );
    assert!(
        fast > slow,
        "iterations/s before the moves {slow:.1}, after {fast:.1}: {samples:?}"
    );

    assert_lr_output(&cluster, points, iterations, "weights after moves");
}

/// A job whose driver loops `times` times over one compute stage on a partitioned dataset;
/// each task spins for about 100 µs, counts its calls in its instance and traps at call
/// `trap_at` on partition 0.
fn counting_job(times: u32, trap_at: u32) -> Vec<u8> {
    crate::fixtures::wasm(&format!(
        r#"(module
            (import "mote_job" "dataset" (func $dataset (param i32 i32 i32) (result i32)))
            (import "mote_job" "compute" (func $compute (param i32 i32 i32 i32 i32)))
            (import "mote_job" "repeat" (func $repeat (param i32)))
            (import "mote_job" "end" (func $end))
            (memory (export "memory") 1)
            (data (i32.const 0) "blocks")
            (func (export "mote_job_driver")
              (i32.store (i32.const 64) (call $dataset (i32.const 0) (i32.const 6) (i32.const 1)))
              (call $repeat (i32.const {times}))
              (call $compute (i32.const 1) (i32.const 64) (i32.const 1) (i32.const 64) (i32.const 1))
              (call $end))
            (func (export "mote_job_task") (param $func i32) (param $index i32) (result i32)
              (local $spin i32)
              (local.set $spin (i32.const 100000))
              (loop $l
                (local.set $spin (i32.sub (local.get $spin) (i32.const 1)))
                (br_if $l (local.get $spin)))
              (i32.store (i32.const 128) (i32.add (i32.load (i32.const 128)) (i32.const 1)))
              (if (i32.and (i32.eqz (local.get $index))
                           (i32.eq (i32.load (i32.const 128)) (i32.const {trap_at})))
                (then unreachable))
              i32.const 0))"#
    ))
}

#[test]
fn a_job_that_cannot_recover_says_why_and_an_ended_job_leaves_no_snapshots() {
    let mut cluster = Cluster::start(2);
    cluster.deploy("lr", mote_guests::LR.wasm);
    cluster.deploy("count", &counting_job(1_000_000, 400));
    put_objects(&cluster.objects, "results", "", &[]);
    put_objects(&cluster.objects, "snapshots", "", &[]);

    // Without snapshots, a lost worker fails the job, and the error says what to do.
    let id = start(&cluster.nodes[0], &lr_request(600, 1_000_000, 2)).id;
    wait_status(&cluster.nodes[0], &id, "a few iterations", |s| {
        s.iteration >= 10
    });
    cluster.kill(2);
    let s = wait_ended(&cluster.nodes[0], &id);
    assert_eq!(s.state, JobState::Failed, "{s:?}");
    let error = s
        .error
        .as_deref()
        .unwrap_or_else(|| panic!("a failed job says why: {s:?}"));
    assert!(
        error.contains("n2")
            && error.contains("no snapshots to fall back to")
            && error.contains("--snapshot-every"),
        "{error}"
    );

    // A job that fails after some snapshots were taken deletes them as it ends.
    let request = RunRequest {
        snapshot_every: Some(50),
        snapshot_to: Some("snapshots/jobs".to_owned()),
        ..super::request("count", Some(WorkerChoice::Count(1)), 2, &[])
    };
    let id = start(&cluster.nodes[0], &request).id;
    let s = wait_ended(&cluster.nodes[0], &id);
    assert_eq!(s.state, JobState::Failed, "{s:?}");
    assert!(
        s.error
            .as_deref()
            .is_some_and(|e| e.contains("unreachable")),
        "{s:?}"
    );
    let snapshots = &s.snapshots;
    assert!(
        !snapshots.is_empty(),
        "snapshots at 50, 100, ..., 350: {s:?}"
    );
    assert!(
        snapshots
            .iter()
            .all(|x| matches!(x.state, SnapshotState::Deleted | SnapshotState::Incomplete)),
        "{s:?}"
    );
    assert_eq!(s.snapshots_left, None, "{s:?}");
    assert_eq!(snapshot_objects(&cluster, &id), Vec::<String>::new());

    // Snapshots that cannot be written are refused before the job starts: sent raw, for the
    // status and the message on the wire.
    let bad = RunRequest {
        snapshot_to: Some("no-such-bucket/x".to_owned()),
        ..request.clone()
    };
    let r = cluster.nodes[0].post_json("/v1/jobs", &bad);
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        r.text()
            .contains("--snapshot-to no-such-bucket/x: cannot write there"),
        "{}",
        r.text()
    );
    let bad = RunRequest {
        snapshot_to: None,
        ..request
    };
    let r = cluster.nodes[0].post_json("/v1/jobs", &bad);
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        r.text().contains("--snapshot-every needs --snapshot-to"),
        "{}",
        r.text()
    );
}
