//! Jobs that fail and job requests that are refused. A failing task fails its job with a message
//! naming the stage, the partition and the cause; a cancel ends a job that would run for hours;
//! and after each the node keeps serving calls and runs the next job.

use super::{job, node, objects_of, put_objects, request, run_failing, run_ok, start, wait_ended};
use crate::fixtures::wasm;
use crate::platform::{Platform, wait};
use mote_api::{DeployParams, JobState, JobStatus, RunRequest, WorkerChoice};
use std::time::{Duration, Instant};

/// A job module whose driver declares one partitioned dataset, `blocks`, and one compute stage
/// (function 1) over it; `task` is the body of `mote_job_task(func, index)`, which answers 0.
pub(crate) fn compute_job(task: &str) -> Vec<u8> {
    wasm(&format!(
        r#"(module
            (import "mote_job" "dataset" (func $dataset (param i32 i32 i32) (result i32)))
            (import "mote_job" "compute" (func $compute (param i32 i32 i32 i32 i32)))
            (memory (export "memory") 1)
            (data (i32.const 0) "blocks")
            (func (export "mote_job_driver")
              (i32.store (i32.const 64) (call $dataset (i32.const 0) (i32.const 6) (i32.const 1)))
              (call $compute (i32.const 1) (i32.const 64) (i32.const 1) (i32.const 64) (i32.const 1)))
            (func (export "mote_job_task") (param $func i32) (param $index i32) (result i32)
              {task}
              i32.const 0))"#
    ))
}

/// A job module whose driver is `driver`, with the `mote_job` imports it may call, and whose
/// task does nothing.
fn driver_job(driver: &str) -> Vec<u8> {
    wasm(&driver_job_wat(driver, ""))
}

/// The text of [`driver_job`]'s module, with `extra` among its functions.
pub(crate) fn driver_job_wat(driver: &str, extra: &str) -> String {
    format!(
        r#"(module
            (import "mote_job" "dataset" (func $dataset (param i32 i32 i32) (result i32)))
            (import "mote_job" "compute" (func $compute (param i32 i32 i32 i32 i32)))
            (import "mote_job" "load" (func $load (param i32 i32 i32 i32)))
            (import "mote_job" "store" (func $store (param i32 i32 i32 i32)))
            (import "mote_job" "end" (func $end))
            (memory (export "memory") 1)
            (data (i32.const 0) "points")
            (data (i32.const 16) "total")
            (data (i32.const 32) "input")
            (data (i32.const 48) "output")
            (func (export "mote_job_driver") {driver})
            {extra}
            (func (export "mote_job_task") (param i32 i32) (result i32) i32.const 0))"#
    )
}

/// Asserts `hello` still answers.
fn assert_serving(p: &Platform, after: &str) {
    let r = p.invoke("hello", after.as_bytes());
    assert_eq!(r.status, 200, "after {after}: {}", r.text());
    assert_eq!(r.text(), format!("Hello, {after}!\n"));
}

fn assert_mentions(error: &str, parts: &[&str]) {
    for part in parts {
        assert!(error.contains(part), "{part:?} is not in: {error}");
    }
}

/// A job module whose driver declares one partitioned dataset, `blocks`, and stores it under
/// the argument `output` (function 1); `task` runs before each partition emits `blocks\n`, and
/// may log `giving up` with `(call $log (i32.const 32) (i32.const 9))`.
fn store_job(task: &str) -> Vec<u8> {
    wasm(&format!(
        r#"(module
            (import "mote_job" "dataset" (func $dataset (param i32 i32 i32) (result i32)))
            (import "mote_job" "store" (func $store (param i32 i32 i32 i32)))
            (import "mote_job" "emit" (func $emit (param i32 i32 i32)))
            (import "mote" "log" (func $log (param i32 i32)))
            (memory (export "memory") 1)
            (data (i32.const 0) "blocks\n")
            (data (i32.const 16) "output")
            (data (i32.const 32) "giving up")
            (func (export "mote_job_driver")
              (i32.store (i32.const 64) (call $dataset (i32.const 0) (i32.const 6) (i32.const 1)))
              (call $store (i32.const 1) (i32.load (i32.const 64)) (i32.const 16) (i32.const 6)))
            (func (export "mote_job_task") (param $func i32) (param $index i32) (result i32)
              (local $i i32)
              {task}
              (call $emit (i32.const 0) (i32.const 0) (i32.const 7))
              i32.const 0))"#
    ))
}

#[test]
fn a_job_commits_its_output_only_when_it_succeeds() {
    let p = node();
    let objects = objects_of(&p);
    put_objects(&objects, "results", "", &[]);
    // Partition 3 of 4 fails after a while, when the others have written their parts.
    let fail_late = "(if (i32.eq (local.get $index) (i32.const 3)) (then
        (loop $l
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br_if $l (i32.lt_u (local.get $i) (i32.const 50000000))))
        (call $log (i32.const 32) (i32.const 9))
        unreachable))";
    p.deploy("fails", &store_job(fail_late), &DeployParams::default());
    let error = run_failing(
        &p,
        &request("fails", None, 2, &[("output", "results/failed")]),
    );
    assert_mentions(
        &error,
        &["store stage", "partition 3 of", "unreachable", "giving up"],
    );
    // The task's line and its failure are in the job function's log, naming the task.
    let mut log = wait(p.api().logs("fails", None, false));
    let mut entries = Vec::new();
    while let Some(entry) = wait(log.next_entry()) {
        entries.push(entry);
    }
    let task = entries
        .iter()
        .find(|e| e.stream == "log")
        .unwrap_or_else(|| panic!("no task's line in the log: {entries:?}"));
    assert_eq!(task.text, "giving up", "{entries:?}");
    assert_mentions(&task.call, &["job ", "store stage 0", "partition 3"]);
    let failed = entries
        .iter()
        .find(|e| e.stream == "outcome")
        .unwrap_or_else(|| panic!("no failure in the log: {entries:?}"));
    assert_eq!(failed.outcome, "trap", "{entries:?}");
    assert_mentions(&failed.text, &["partition 3 of", "unreachable"]);
    let left: Vec<_> = std::fs::read_dir(objects.join("results"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "a failed job left output behind: {left:?}");

    p.deploy("writes", &store_job(""), &DeployParams::default());
    let s = run_ok(&p, &request("writes", None, 2, &[("output", "results/ok")]));
    let mut committed: Vec<String> = std::fs::read_dir(objects.join("results/ok"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    committed.sort();
    assert_eq!(
        committed,
        [
            "_SUCCESS",
            "part-00000",
            "part-00001",
            "part-00002",
            "part-00003"
        ],
        "{s:?}"
    );
    let text = std::fs::read_to_string(objects.join("results/ok/part-00002")).unwrap();
    assert_eq!(text, "blocks\n");
}

/// Deploys `forever`: a job whose tasks would spin for a minute, their budget.
fn deploy_forever(p: &Platform) {
    p.deploy(
        "forever",
        &compute_job("(loop $l (br $l))"),
        &DeployParams {
            timeout_ms: Some(60_000),
            ..Default::default()
        },
    );
}

#[test]
fn a_cancel_stops_running_tasks_at_once() {
    let p = Platform::start(&["--cores", "2", "--job-idle", "on"]);
    deploy_forever(&p);
    let cpu = || mote_testbed::cpu_time::process_cpu(p.pid()).expect("the node's CPU time");
    let busy = |over: Duration| {
        let before = cpu();
        std::thread::sleep(over);
        cpu() - before
    };
    // What the node spends idle (its executors poll for calls), to tell the tasks' use from.
    let idle = busy(Duration::from_secs(1));
    let id = start(&p, &request("forever", None, 1, &[])).id;
    let begun = Instant::now();
    loop {
        let running = busy(Duration::from_millis(500));
        // An executor takes both ready tasks in one batch, so one core spins.
        if running >= idle / 2 + Duration::from_millis(300) {
            break;
        }
        let s = job(&p, &id);
        assert!(
            begun.elapsed() < super::DEADLINE,
            "the tasks never ran: {running:?} of CPU in 0.5 s, {idle:?} idle in 1 s: {s:?}"
        );
    }
    // With --job-idle on the job's threads run in SCHED_IDLE (policy 5).
    let policies: Vec<u64> = job_threads_stat(p.pid())
        .iter()
        .map(|f| field(f, 41))
        .collect();
    assert!(
        !policies.is_empty() && policies.iter().all(|n| *n == 5),
        "the job's threads' scheduling policies: {policies:?}"
    );
    let cancelled = wait(p.api().cancel_job(&id));
    assert_eq!(cancelled.state, JobState::Cancelled, "{cancelled:?}");
    std::thread::sleep(Duration::from_millis(200));
    let after = busy(Duration::from_secs(1));
    assert!(
        after < idle + Duration::from_millis(300),
        "the node spent {after:?} of CPU in the second after the cancel ({idle:?} idle): its tasks still run"
    );
    assert_serving_hello(&p);
}

/// The fields of `/proc/PID/task/TID/stat` from field 3 on (after the command's closing
/// parenthesis) of each of process `pid`'s job executor threads (`mote-job-N`).
fn job_threads_stat(pid: u32) -> Vec<Vec<String>> {
    let mut threads = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let dir = task.unwrap().path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if !comm.starts_with("mote-job-") {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(dir.join("stat")) else {
            continue;
        };
        let fields = stat[stat.rfind(')').unwrap() + 1..].split_whitespace();
        threads.push(fields.map(str::to_owned).collect());
    }
    threads
}

/// Field `n` (counted from 1, as `man proc` does) of a thread's stat fields from field 3 on.
fn field(fields: &[String], n: usize) -> u64 {
    fields[n - 3].parse().unwrap()
}

/// The CPU time process `pid`'s job executor threads have used so far: their user and system
/// time (fields 14 and 15).
fn job_threads_cpu(pid: u32) -> Duration {
    let ticks: u64 = job_threads_stat(pid)
        .iter()
        .map(|f| field(f, 14) + field(f, 15))
        .sum();
    let hz = mote_testbed::cpu_time::clock_ticks_per_second().expect("the clock tick");
    Duration::from_secs_f64(ticks as f64 / hz as f64)
}

#[test]
fn a_call_takes_its_core_from_a_running_job_and_gives_it_back() {
    let p = Platform::start(&["--cores", "1"]);
    deploy_forever(&p);
    // A call that holds the core for its whole 400 ms budget.
    p.deploy(
        "spin",
        &crate::fixtures::spin(),
        &DeployParams {
            timeout_ms: Some(400),
            ..Default::default()
        },
    );
    let id = start(&p, &request("forever", None, 1, &[])).id;
    let begun = Instant::now();
    while job_threads_cpu(p.pid()) < Duration::from_millis(200) {
        assert!(
            begun.elapsed() < super::DEADLINE,
            "the job's tasks never ran"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for _ in 0..3 {
        let before = job_threads_cpu(p.pid());
        let t = Instant::now();
        let r = p.invoke("spin", b"");
        let took = t.elapsed();
        let job = job_threads_cpu(p.pid()) - before;
        assert_eq!(r.status, 504, "{}", r.text());
        // Before the job gave way, its thread ran beside the call: 470-490 ms during a
        // 415 ms call on this 2-CPU machine (the node's one core is not a CPU of its own),
        // and it would get half of a single CPU from the kernel. Now it runs only in the
        // moments before and after the call, which /proc counts in 10 ms ticks.
        assert!(
            job < Duration::from_millis(100),
            "the job's threads ran {job:?} during a {took:?} call on the only core"
        );
    }
    // Between calls the job has the core again: a job left waiting would run nothing (one
    // run here measured exactly 300 ms of the 500).
    let before = job_threads_cpu(p.pid());
    std::thread::sleep(Duration::from_millis(500));
    let alone = job_threads_cpu(p.pid()) - before;
    assert!(
        alone > Duration::from_millis(150),
        "the job ran {alone:?} of 500 ms with no call"
    );
    let cancelled = wait(p.api().cancel_job(&id));
    assert_eq!(cancelled.state, JobState::Cancelled, "{cancelled:?}");
    assert_serving_hello(&p);
}

/// Deploys `hello` and asserts it answers.
fn assert_serving_hello(p: &Platform) {
    p.deploy("hello", mote_guests::HELLO.wasm, &DeployParams::default());
    assert_serving(p, "after");
}

#[test]
fn failing_tasks_fail_their_job_and_the_node_keeps_serving() {
    let p = node();
    p.deploy("hello", mote_guests::HELLO.wasm, &DeployParams::default());
    p.deploy("lr", mote_guests::LR.wasm, &DeployParams::default());

    // A trap on partition 3 of 4.
    p.deploy(
        "trap",
        &compute_job("(if (i32.eq (local.get $index) (i32.const 3)) (then unreachable))"),
        &DeployParams::default(),
    );
    let error = run_failing(&p, &request("trap", None, 2, &[]));
    assert_mentions(
        &error,
        &["compute stage 0", "partition 3 of [blocks", "unreachable"],
    );
    assert_serving(&p, "trap");

    // A task that never returns, under a 100 ms budget.
    p.deploy(
        "spin",
        &compute_job("(if (i32.eq (local.get $index) (i32.const 1)) (then (loop $l (br $l))))"),
        &DeployParams {
            timeout_ms: Some(100),
            ..Default::default()
        },
    );
    let started = Instant::now();
    let error = run_failing(&p, &request("spin", None, 2, &[]));
    assert_mentions(
        &error,
        &[
            "compute stage 0",
            "partition 1 of",
            "exceeded the function's budget of 100 ms",
        ],
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the spinning task was stopped after {:?}",
        started.elapsed()
    );
    assert_serving(&p, "spin");

    // A task that asks for 64 MiB more under a limit of 16 MiB, and traps when it is refused,
    // as a guest whose allocation fails does.
    p.deploy(
        "hog",
        &compute_job(
            "(if (i32.eq (local.get $index) (i32.const 2))
               (then (if (i32.eq (memory.grow (i32.const 1024)) (i32.const -1)) (then unreachable))))",
        ),
        &DeployParams { memory_mb: Some(16), ..Default::default() },
    );
    let error = run_failing(&p, &request("hog", None, 2, &[]));
    assert_mentions(
        &error,
        &[
            "compute stage 0",
            "partition 2 of",
            "memory limit of 16 MiB",
        ],
    );
    assert_serving(&p, "hog");

    // A job of a hundred million stages, cancelled.
    p.deploy("busy", mote_guests::BUSY.wasm, &DeployParams::default());
    let id = start(&p, &request("busy", None, 2, &[("stages", "100000000")])).id;
    let begun = Instant::now();
    loop {
        let status = job(&p, &id);
        assert_eq!(status.state, JobState::Running, "{status:?}");
        if status.tasks > 0 {
            break;
        }
        assert!(
            begun.elapsed() < super::DEADLINE,
            "the busy job ran no task: {status:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let cancelled = wait(p.api().cancel_job(&id));
    assert_eq!(cancelled.state, JobState::Cancelled, "{cancelled:?}");
    let error = cancelled.error.as_deref();
    assert_mentions(
        error.unwrap_or_else(|| panic!("a cancelled job says so: {cancelled:?}")),
        &["cancelled"],
    );
    let status = wait_ended(&p, &id);
    assert_eq!(status.state, JobState::Cancelled, "{status:?}");
    // Cancelling again leaves it as it ended.
    let again = wait(p.api().cancel_job(&id));
    assert_eq!(again.state, JobState::Cancelled, "{again:?}");
    assert_serving(&p, "cancel");

    // And the node still runs jobs.
    let status = run_ok(
        &p,
        &request("lr", None, 1, &[("generate", "100"), ("iterations", "2")]),
    );
    assert_eq!(status.iteration, 2, "{status:?}");
    let states: Vec<JobState> = wait(p.api().jobs()).iter().map(|j| j.state).collect();
    assert_eq!(
        states,
        [
            JobState::Failed,
            JobState::Failed,
            JobState::Failed,
            JobState::Cancelled,
            JobState::Succeeded
        ]
    );
}

#[test]
fn bad_job_requests_are_refused_with_the_reason() {
    let p = node();
    p.deploy("lr", mote_guests::LR.wasm, &DeployParams::default());
    // Sent raw: what is checked is the status and the error on the wire.
    let post = |body: &RunRequest| p.post_json("/v1/jobs", body);

    // A driver that closes a block it never opened.
    p.deploy(
        "unnested",
        &driver_job("(call $end)"),
        &DeployParams::default(),
    );
    let r = post(&request("unnested", None, 1, &[]));
    assert_eq!(r.status, 400, "{}", r.text());
    assert_mentions(&r.error(), &["an `end` with no block open"]);

    // A compute stage over a partitioned and a one-partition dataset.
    p.deploy(
        "mixed",
        &driver_job(
            "(i32.store (i32.const 64) (call $dataset (i32.const 0) (i32.const 6) (i32.const 1)))
             (i32.store (i32.const 68) (call $dataset (i32.const 16) (i32.const 5) (i32.const 0)))
             (call $compute (i32.const 1) (i32.const 64) (i32.const 1) (i32.const 68) (i32.const 1))",
        ),
        &DeployParams::default(),
    );
    let r = post(&request("mixed", None, 1, &[]));
    assert_eq!(r.status, 400, "{}", r.text());
    assert_mentions(
        &r.error(),
        &["`points`", "`total`", "must have the same partitioning"],
    );

    // A load from an argument the job was not given.
    p.deploy(
        "loader",
        &driver_job(
            "(i32.store (i32.const 64) (call $dataset (i32.const 0) (i32.const 6) (i32.const 1)))
             (call $load (i32.const 1) (i32.load (i32.const 64)) (i32.const 32) (i32.const 5))",
        ),
        &DeployParams::default(),
    );
    let r = post(&request("loader", None, 1, &[]));
    assert_eq!(r.status, 400, "{}", r.text());
    assert_mentions(&r.error(), &["`input`", "was not given"]);
    // A store to an argument the job was not given is refused before the job runs, not
    // found at its end.
    p.deploy(
        "storer",
        &driver_job(
            "(i32.store (i32.const 64) (call $dataset (i32.const 0) (i32.const 6) (i32.const 1)))
             (call $store (i32.const 1) (i32.load (i32.const 64)) (i32.const 48) (i32.const 6))",
        ),
        &DeployParams::default(),
    );
    let r = post(&request("storer", None, 1, &[]));
    assert_eq!(r.status, 400, "{}", r.text());
    assert_mentions(&r.error(), &["`output`", "was not given", "--arg output="]);
    // lr without input or generated points says what to give it.
    let r = post(&request("lr", None, 1, &[]));
    assert_eq!(r.status, 400, "{}", r.text());
    assert_mentions(&r.error(), &["input=BUCKET/PREFIX"]);
    // An input prefix with nothing under it.
    put_objects(&objects_of(&p), "data", "", &[]);
    let r = post(&request("lr", None, 1, &[("input", "data/none")]));
    assert_eq!(r.status, 400, "{}", r.text());
    assert_mentions(&r.error(), &["data/none", "no objects"]);

    // No such function, or not a job.
    let r = post(&request("nothing", None, 1, &[]));
    assert_eq!(r.status, 404, "{}", r.text());
    assert_mentions(&r.error(), &["`nothing`"]);
    p.deploy("hello", mote_guests::HELLO.wasm, &DeployParams::default());
    let r = post(&request("hello", None, 1, &[]));
    assert_eq!(r.status, 400, "{}", r.text());
    assert_mentions(&r.error(), &["not a job"]);
    // A job is not invoked.
    let r = p.invoke("lr", b"");
    assert_eq!(r.status, 400, "{}", r.text());
    assert_mentions(&r.error(), &["this function is a job", "mote job run"]);

    // An output prefix that holds objects already, and one in a bucket that does not exist.
    let objects = objects_of(&p);
    put_objects(
        &objects,
        "results",
        "lr",
        &[("part-00000", "0.5\n".to_owned())],
    );
    let generated = [("generate", "50")];
    let r = post(&request(
        "lr",
        None,
        1,
        &[generated[0], ("output", "results/lr")],
    ));
    assert_eq!(r.status, 409, "{}", r.text());
    assert_mentions(&r.error(), &["results/lr", "already holds 1 objects"]);
    assert_eq!(
        std::fs::read_to_string(objects.join("results/lr/part-00000")).unwrap(),
        "0.5\n",
        "the refused job wrote nothing"
    );
    let r = post(&request(
        "lr",
        None,
        1,
        &[generated[0], ("output", "nobucket/lr")],
    ));
    assert_eq!(r.status, 400, "{}", r.text());
    assert_mentions(&r.error(), &["nobucket"]);

    // Workers the cluster does not have, and partition counts out of range.
    let r = post(&request("lr", Some(WorkerChoice::Count(2)), 1, &generated));
    assert_eq!(r.status, 400, "{}", r.text());
    assert_mentions(&r.error(), &["--workers 2"]);
    let r = post(&request(
        "lr",
        Some(WorkerChoice::List(vec!["n9".to_owned()])),
        1,
        &generated,
    ));
    assert_eq!(r.status, 400, "{}", r.text());
    assert_mentions(&r.error(), &["`n9`"]);
    let r = post(&request("lr", None, 0, &generated));
    assert_eq!(r.status, 400, "{}", r.text());
    assert_mentions(&r.error(), &["--partitions-per-core 0"]);
    // A body that is not a job request.
    let r = p.post_json("/v1/jobs", &serde_json::json!({"workers": 1}));
    assert_eq!(r.status, 400, "{}", r.text());

    // Unknown jobs.
    assert_eq!(p.get("/v1/jobs/nope").status, 404);
    assert_eq!(p.delete("/v1/jobs/nope").status, 404);
    // None of the refused requests started a job.
    let jobs = wait(p.api().jobs());
    assert!(jobs.is_empty(), "{jobs:?}");

    // A good request is created: 201, its body the job's status.
    let r = post(&request("lr", None, 1, &generated));
    assert_eq!(r.status, 201, "{}", r.text());
    let started: JobStatus = serde_json::from_slice(&r.body)
        .unwrap_or_else(|e| panic!("not a job's status ({e}): {}", r.text()));
    assert_eq!(started.function, "lr", "{started:?}");
    let status = wait_ended(&p, &started.id);
    assert_eq!(status.state, JobState::Succeeded, "{status:?}");

    // Prefixes are directories: `lr2-old` beside `lr2`, and what a crashed job staged under
    // it, are no committed output of `results/lr2`; the job commits beside the latter.
    put_objects(
        &objects,
        "results",
        "lr2-old",
        &[("part-00000", "0.5\n".to_owned())],
    );
    put_objects(
        &objects,
        "results",
        "lr2/_temporary/1-1",
        &[("part-00000", "0.5\n".to_owned())],
    );
    let s = run_ok(
        &p,
        &request("lr", None, 1, &[generated[0], ("output", "results/lr2")]),
    );
    let out = objects.join("results/lr2");
    assert!(out.join("_SUCCESS").is_file(), "{s:?}");
    assert!(out.join("part-00000").is_file(), "{s:?}");
    assert!(
        out.join("_temporary/1-1/part-00000").is_file(),
        "not this job's"
    );
    assert!(
        !out.join("_temporary").join(&s.id).exists(),
        "the job's staging is gone"
    );
}
