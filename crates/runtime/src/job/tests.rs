//! The job engine's tests: programs, tasks, budgets and images.

use crate::job::cores::tests::eventually;
use crate::{
    JobContext, JobCores, JobEngine, JobError, JobInstance, JobShare, TaskBatch, TaskCall,
};
use mote_jobs::image;
use mote_jobs::{DatasetId, Stage, StageKind};
use mote_types::Limits;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The ticker kept going and a core held for tasks of the default budget, as a worker holds
/// them over a batch.
fn ticking(engine: &JobEngine) -> TaskBatch<'_> {
    engine.running(Limits::default().timeout())
}

/// An engine whose tasks share `cores` with calls.
fn engine_on(cores: &Arc<JobCores>) -> JobEngine {
    JobEngine::new(cores.clone()).unwrap()
}

/// A stage over no datasets, for tasks that ask for none.
static NO_DATASETS: Stage = Stage {
    kind: StageKind::Compute,
    func: 0,
    reads: Vec::new(),
    writes: Vec::new(),
};

/// Task function `func` on partition `index`, emitting to `emit_to` partitions, no inputs.
fn task_call(func: u32, index: u32, emit_to: u32) -> TaskCall<'static> {
    TaskCall {
        func,
        index,
        stage: &NO_DATASETS,
        inputs: Vec::new(),
        emit_to,
        started: Instant::now(),
    }
}

fn engine() -> JobEngine {
    engine_on(&Arc::new(JobCores::new(2, JobShare::default())))
}

fn ctx(partitions: u32) -> JobContext {
    JobContext {
        function: Arc::from("test-job"),
        args: Arc::from(vec![("n".to_owned(), "3".to_owned())]),
        partitions,
        limits: Limits::default(),
        stopped: Arc::default(),
        datasets: Arc::default(),
    }
}

/// A job whose driver declares one partitioned dataset and a compute stage over it, and
/// whose task adds its index to a counter in memory and returns it.
const JOB: &str = r#"(module
    (import "mote_job" "dataset" (func $dataset (param i32 i32 i32) (result i32)))
    (import "mote_job" "compute" (func $compute (param i32 i32 i32 i32 i32)))
    (import "mote_job" "emit" (func $emit (param i32 i32 i32)))
    (memory (export "memory") 1)
    (data (i32.const 0) "points")
    (func (export "mote_job_driver")
        (i32.store (i32.const 64) (call $dataset (i32.const 0) (i32.const 6) (i32.const 1)))
        (call $compute (i32.const 7) (i32.const 64) (i32.const 1) (i32.const 64) (i32.const 1)))
    (func (export "mote_job_task") (param $func i32) (param $index i32) (result i32)
        (i32.store (i32.const 128) (i32.add (i32.load (i32.const 128)) (local.get $index)))
        (if (i32.eq (local.get $func) (i32.const 9))
            (then (call $emit (i32.const 5) (i32.const 0) (i32.const 6))))
        (if (i32.eq (local.get $func) (i32.const 8)) (then (loop $spin (br $spin))))
        (i32.load (i32.const 128))))"#;

#[test]
fn the_driver_declares_a_program_and_tasks_keep_state_between_calls() {
    let engine = engine();
    let m = engine.module("x", &wat::parse_str(JOB).unwrap()).unwrap();
    let program = engine.program(&m, &ctx(4)).unwrap();
    assert_eq!(program.stages.len(), 1);
    assert_eq!(program.stages[0].func, 7);
    assert_eq!(program.groups.sizes(), [4]);
    let mut i = engine.instance(&m, &ctx(4)).unwrap();
    assert_eq!(
        i.run(&ticking(&engine), task_call(7, 2, 0))
            .unwrap()
            .0
            .value,
        2
    );
    assert_eq!(
        i.run(&ticking(&engine), task_call(7, 3, 0))
            .unwrap()
            .0
            .value,
        5
    );
}

/// A job whose task 1 returns `100 * len(read 0) + 10 * len(write 0) + (read 1 is none)`,
/// the lengths of the names `task_dataset` gives with no room to write them; task 3 writes
/// read 0's name at address 8 and returns its first byte; task 2 asks with a `which` that is
/// neither 0 nor 1.
const ASKS_DATASETS: &str = r#"(module
    (import "mote_job" "task_dataset" (func $ds (param i32 i32 i32 i32) (result i32)))
    (memory (export "memory") 1)
    (func (export "mote_job_driver"))
    (func (export "mote_job_task") (param $func i32) (param $index i32) (result i32)
        (if (i32.eq (local.get $func) (i32.const 2))
            (then (return (call $ds (i32.const 2) (i32.const 0) (i32.const 0) (i32.const 0)))))
        (if (i32.eq (local.get $func) (i32.const 3))
            (then
                (drop (call $ds (i32.const 0) (i32.const 0) (i32.const 8) (i32.const 16)))
                (return (i32.load8_u (i32.const 8)))))
        (i32.add
            (i32.add
                (i32.mul (call $ds (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0))
                    (i32.const 100))
                (i32.mul (call $ds (i32.const 1) (i32.const 0) (i32.const 0) (i32.const 0))
                    (i32.const 10)))
            (i32.eq (call $ds (i32.const 0) (i32.const 1) (i32.const 0) (i32.const 0))
                (i32.const -1)))))"#;

#[test]
fn a_task_learns_the_datasets_its_stage_reads_and_writes() {
    let engine = engine();
    let m = engine
        .module("x", &wat::parse_str(ASKS_DATASETS).unwrap())
        .unwrap();
    let names = ["a", "bb", "ccc", "dddd", "eeeee", "ffffff"];
    let ctx = JobContext {
        datasets: names.iter().map(|n| n.to_string()).collect(),
        ..ctx(2)
    };
    let mut i = engine.instance(&m, &ctx).unwrap();
    let stage = Stage {
        kind: StageKind::Compute,
        func: 1,
        reads: vec![DatasetId(3)],
        writes: vec![DatasetId(5)],
    };
    let run = |i: &mut JobInstance, func| {
        i.run(
            &ticking(&engine),
            TaskCall {
                stage: &stage,
                ..task_call(func, 0, 0)
            },
        )
    };
    assert_eq!(run(&mut i, 1).unwrap().0.value, 4 * 100 + 6 * 10 + 1);
    assert_eq!(run(&mut i, 3).unwrap().0.value, i32::from(b'd'));
    // The next task's stage is its own, not the one before's.
    let (out, _) = i.run(&ticking(&engine), task_call(1, 1, 0)).unwrap();
    assert_eq!(out.value, -100 - 10 + 1);
    let err = i.run(&ticking(&engine), task_call(2, 0, 0)).unwrap_err();
    assert!(
        err.to_string().contains("give 0 for the datasets read"),
        "{err}"
    );
}

#[test]
fn emitting_out_of_range_and_running_forever_are_errors_that_say_so() {
    let engine = engine();
    let m = engine.module("x", &wat::parse_str(JOB).unwrap()).unwrap();
    let mut i = engine.instance(&m, &ctx(4)).unwrap();
    let err = i.run(&ticking(&engine), task_call(9, 0, 4)).unwrap_err();
    assert!(err.to_string().contains("have 4 partitions"), "{err}");
    let (out, _) = i.run(&ticking(&engine), task_call(9, 0, 6)).unwrap();
    assert_eq!(out.emitted, vec![(5, b"points".to_vec())]);
    let mut short = ctx(4);
    short.limits.timeout_us = 20_000;
    let mut i = engine.instance(&m, &short).unwrap();
    let started = Instant::now();
    assert!(matches!(
        i.run(&engine.running(short.limits.timeout()), task_call(8, 0, 0)),
        Err(JobError::Timeout { timeout_us: 20_000 })
    ));
    assert!(started.elapsed() < Duration::from_secs(1));
}

/// Runs task 8 of [`JOB`] (a loop without end) under `budget` on its own thread, and returns
/// what the run ended with and when.
fn spin_task(
    engine: &Arc<JobEngine>,
    ctx: JobContext,
) -> std::thread::JoinHandle<(Result<(), JobError>, Instant)> {
    let engine = engine.clone();
    std::thread::spawn(move || {
        let m = engine.module("x", &wat::parse_str(JOB).unwrap()).unwrap();
        let mut i = engine.instance(&m, &ctx).unwrap();
        let batch = engine.running(ctx.limits.timeout());
        let result = i.run(&batch, task_call(8, 0, 0)).map(|_| ());
        (result, Instant::now())
    })
}

#[test]
fn a_running_task_gives_its_core_to_a_call_without_spending_its_budget() {
    let cores = Arc::new(JobCores::new(1, JobShare::default()));
    let engine = Arc::new(engine_on(&cores));
    let mut c = ctx(4);
    c.limits.timeout_us = 300_000;
    let started = Instant::now();
    let task = spin_task(&engine, c);
    eventually("the task holds the core", || cores.tasks_on_cores() == 1);
    let call = cores.call();
    // The call advances the job engine's epoch: the task gives way at once, not at a tick.
    eventually("the task gives way to the call", || {
        cores.tasks_on_cores() == 0
    });
    assert_eq!(cores.yields(), 1);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(cores.tasks_on_cores(), 0, "the task ran beside the call");
    let freed = Instant::now();
    drop(call);
    let (result, ended) = task.join().unwrap();
    assert!(
        matches!(
            result,
            Err(JobError::Timeout {
                timeout_us: 300_000
            })
        ),
        "{result:?}"
    );
    // Its 300 ms budget ran on from where the call took its core.
    assert!(
        ended - started >= Duration::from_millis(800) && ended > freed,
        "the task timed out {:?} after it began, {:?} after the call left",
        ended - started,
        ended.saturating_duration_since(freed)
    );
    assert_eq!(cores.tasks_on_cores(), 0);
}

#[test]
fn a_task_waiting_for_a_core_ends_when_its_job_stops() {
    let cores = Arc::new(JobCores::new(1, JobShare::default()));
    let engine = Arc::new(engine_on(&cores));
    let mut c = ctx(4);
    c.limits.timeout_us = 60_000_000;
    let stopped = c.stopped.clone();
    let task = spin_task(&engine, c.clone());
    eventually("the task holds the core", || cores.tasks_on_cores() == 1);
    let _call = cores.call();
    eventually("the task gives way to the call", || {
        cores.tasks_on_cores() == 0
    });
    let stop = Instant::now();
    stopped.store(true, std::sync::atomic::Ordering::Relaxed);
    let (result, ended) = task.join().unwrap();
    assert!(result.is_err(), "a stopped task ran on");
    assert!(ended - stop < Duration::from_secs(1), "{:?}", ended - stop);
    // A task of a stopped job does not wait for a core either.
    let m = engine.module("x", &wat::parse_str(JOB).unwrap()).unwrap();
    let mut i = engine.instance(&m, &c).unwrap();
    let batch = engine.running(c.limits.timeout());
    assert!(matches!(
        i.run(&batch, task_call(7, 0, 0)),
        Err(JobError::Stopped)
    ));
}

/// A job whose task 1 logs a short line, and whose task 2 logs a 200,000-byte line of `x`s
/// and traps, as a panic with a long message does.
const LOGGING: &str = r#"(module
    (import "mote_job" "dataset" (func $dataset (param i32 i32 i32) (result i32)))
    (import "mote_job" "compute" (func $compute (param i32 i32 i32 i32 i32)))
    (import "mote" "log" (func $log (param i32 i32)))
    (memory (export "memory") 4)
    (data (i32.const 0) "points")
    (data (i32.const 16) "a short line")
    (func (export "mote_job_driver")
        (i32.store (i32.const 64) (call $dataset (i32.const 0) (i32.const 6) (i32.const 1)))
        (call $compute (i32.const 1) (i32.const 64) (i32.const 1) (i32.const 64) (i32.const 1)))
    (func (export "mote_job_task") (param $func i32) (param $index i32) (result i32)
        (if (i32.eq (local.get $func) (i32.const 1))
            (then (call $log (i32.const 16) (i32.const 12))))
        (if (i32.eq (local.get $func) (i32.const 2))
            (then
                (memory.fill (i32.const 1024) (i32.const 120) (i32.const 200000))
                (call $log (i32.const 1024) (i32.const 200000))
                unreachable))
        (i32.const 0)))"#;

#[test]
fn a_tasks_log_lines_are_kept_cut_and_a_long_panic_message_reaches_its_error() {
    let engine = engine();
    let m = engine
        .module("log", &wat::parse_str(LOGGING).unwrap())
        .unwrap();
    let mut i = engine.instance(&m, &ctx(1)).unwrap();
    i.run(&ticking(&engine), task_call(1, 0, 0)).unwrap();
    let log = i.take_log();
    let lines: Vec<&str> = log.lines().iter().map(|l| l.text.as_str()).collect();
    assert_eq!(lines, ["a short line"]);
    assert!(i.take_log().is_empty(), "taken once");

    let err = i
        .run(&ticking(&engine), task_call(2, 0, 0))
        .unwrap_err()
        .to_string();
    assert!(err.contains("unreachable"), "{err}");
    assert!(
        !err.contains("a short line"),
        "an earlier task's line: {err}"
    );
    assert!(
        err.contains(&"x".repeat(60_000)),
        "the message's start is quoted"
    );
    assert!(
        err.contains("(134464 more bytes)"),
        "{}",
        &err[err.len() - 200..]
    );
    let log = i.take_log();
    assert_eq!(log.lines().len(), 1);
    assert_eq!(
        log.lines()[0].text.len(),
        crate::MAX_LINE_BYTES,
        "cut as a call's are"
    );
}

#[test]
fn an_image_restores_memory_and_globals_into_a_fresh_instance() {
    const COUNTER: &str = r#"(module
        (import "mote_job" "dataset" (func $dataset (param i32 i32 i32) (result i32)))
        (import "mote_job" "compute" (func $compute (param i32 i32 i32 i32 i32)))
        (memory (export "memory") 1)
        (global $calls (export "calls") (mut i64) (i64.const 0))
        (data (i32.const 0) "points")
        (func (export "mote_job_driver")
            (i32.store (i32.const 64) (call $dataset (i32.const 0) (i32.const 6) (i32.const 1)))
            (call $compute (i32.const 7) (i32.const 64) (i32.const 1) (i32.const 64) (i32.const 1)))
        (func (export "mote_job_task") (param $func i32) (param $index i32) (result i32)
            (global.set $calls (i64.add (global.get $calls) (i64.const 1)))
            (if (i32.eq (local.get $func) (i32.const 2)) (then (drop (memory.grow (i32.const 20)))))
            (i32.store (i32.const 200000) (i32.const 1))
            (i32.wrap_i64 (i64.add (global.get $calls)
                (i64.extend_i32_u (i32.load (i32.const 128)))))))"#;
    let engine = engine();
    let m = engine
        .module("c", &wat::parse_str(COUNTER).unwrap())
        .unwrap();
    let mut a = engine.instance(&m, &ctx(1)).unwrap();
    assert_eq!(
        a.run(&ticking(&engine), task_call(2, 0, 0))
            .unwrap()
            .0
            .value,
        1
    );
    assert_eq!(
        a.run(&ticking(&engine), task_call(1, 0, 0))
            .unwrap()
            .0
            .value,
        2
    );
    let image = a.image();
    assert_eq!(a.memory_bytes(), 21 * 65536);
    let mut b = engine.restore(&m, &ctx(1), &image).unwrap();
    assert_eq!(b.memory_bytes(), 21 * 65536, "the grown memory comes back");
    assert_eq!(
        b.run(&ticking(&engine), task_call(1, 0, 0))
            .unwrap()
            .0
            .value,
        a.run(&ticking(&engine), task_call(1, 0, 0))
            .unwrap()
            .0
            .value,
        "both go on from the same state"
    );
    let err = engine.restore(&m, &ctx(1), b"not an image").err().unwrap();
    assert!(err.to_string().contains("MOTEIMG1"), "{err}");
    let mut small = ctx(1);
    small.limits.memory_mb = 1;
    let err = engine.restore(&m, &small, &image).err().unwrap();
    assert!(
        matches!(
            err,
            JobError::MemoryLimit {
                memory_mb: 1,
                asked_mb: 2
            }
        ),
        "{err}"
    );
}

/// The image encoder once skipped a reference global's type and value but not its name,
/// while counting it: every global after it was read from the wrong bytes, and a module
/// that exports a mutable `funcref` could never move or restore a partition. References
/// are not saved; the numbers after them still are.
#[test]
fn a_reference_global_does_not_spoil_the_image() {
    const TABLE: &str = r#"(module
        (import "mote_job" "dataset" (func $dataset (param i32 i32 i32) (result i32)))
        (import "mote_job" "compute" (func $compute (param i32 i32 i32 i32 i32)))
        (memory (export "memory") 1)
        (global (export "handler") (mut funcref) (ref.null func))
        (global $calls (export "calls") (mut i32) (i32.const 0))
        (data (i32.const 0) "points")
        (func (export "mote_job_driver")
            (i32.store (i32.const 64) (call $dataset (i32.const 0) (i32.const 6) (i32.const 1)))
            (call $compute (i32.const 7) (i32.const 64) (i32.const 1) (i32.const 64) (i32.const 1)))
        (func (export "mote_job_task") (param $func i32) (param $index i32) (result i32)
            (global.set $calls (i32.add (global.get $calls) (i32.const 1)))
            (global.get $calls)))"#;
    let engine = engine();
    let m = engine.module("t", &wat::parse_str(TABLE).unwrap()).unwrap();
    let mut a = engine.instance(&m, &ctx(1)).unwrap();
    assert_eq!(
        a.run(&ticking(&engine), task_call(7, 0, 0))
            .unwrap()
            .0
            .value,
        1
    );
    let image = a.image();
    let globals = image::decode(&image).unwrap().globals;
    assert_eq!(globals, [("calls".to_owned(), image::Value::I32(1))]);
    let mut b = engine.restore(&m, &ctx(1), &image).unwrap();
    assert_eq!(
        b.run(&ticking(&engine), task_call(7, 0, 0))
            .unwrap()
            .0
            .value,
        2
    );
}
