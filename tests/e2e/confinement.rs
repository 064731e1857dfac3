//! Guest code runs only on confined threads, through the real binary. For each way a guest runs
//! (an ABI call run where it was read, one queued for an executor, a `wasi:http` component, a
//! WASI command, a function with phases, a module's `_initialize`, a job's task, a job's driver,
//! a job module's `_initialize`), a guest loops while the test watches the `mote up` process's
//! threads in `/proc`: the thread that burns the CPU is the one the guest runs on, and it is
//! confined by its seccomp filter (`Seccomp: 2`).

use crate::fixtures::{self, wasm};
use crate::platform::{Platform, try_wait, wait};
use mote_api::{DeployParams, RunRequest};
use std::time::Duration;

/// One thread of a process: its name, its CPU time so far (ticks) and its seccomp mode.
struct Thread {
    tid: u32,
    name: String,
    ticks: u64,
    seccomp: u32,
}

/// Every thread of process `pid` now.
fn threads(pid: u32) -> Vec<Thread> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the process's threads");
    tasks
        .filter_map(|task| {
            let tid: u32 = task.ok()?.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
            let status = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).ok()?;
            // `comm` is in parentheses and may hold spaces: the fields after it are counted
            // from its closing one (utime and stime are the 14th and 15th of the line).
            let (head, rest) = stat.rsplit_once(')')?;
            let name = head.split_once('(')?.1.to_owned();
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let ticks =
                fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
            let seccomp = status
                .lines()
                .find_map(|l| l.strip_prefix("Seccomp:"))?
                .trim()
                .parse()
                .ok()?;
            Some(Thread {
                tid,
                name,
                ticks,
                seccomp,
            })
        })
        .collect()
}

/// The thread of `pid` that burned the most CPU over a second, once one has burned some for
/// 10 s at most (a guest that loops is starting): its name, its seccomp mode, and the CPU time
/// it burned in that second (ticks of 10 ms).
fn busiest(pid: u32) -> (String, u32, u64) {
    let until = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let before = threads(pid);
        std::thread::sleep(Duration::from_secs(1));
        let after = threads(pid);
        let burned = after.iter().filter_map(|t| {
            let was = before.iter().find(|b| b.tid == t.tid)?;
            Some((t, t.ticks - was.ticks))
        });
        let (thread, ticks) = burned.max_by_key(|(_, ticks)| *ticks).expect("a thread");
        // Half a core over the second: the machine is shared, and busy with other tests.
        if ticks >= 50 || std::time::Instant::now() >= until {
            return (thread.name.clone(), thread.seccomp, ticks);
        }
    }
}

/// Asserts that while `start` has a guest loop in `p`, the thread burning the CPU is named
/// `thread...` and confined; `what` names the way the guest runs.
fn assert_confined(p: &Platform, what: &str, thread: &str, start: impl FnOnce() + Send) {
    std::thread::scope(|s| {
        s.spawn(start);
        let (name, seccomp, ticks) = busiest(p.pid());
        assert!(
            ticks >= 50,
            "{what}: no thread burned the CPU ({name}: {ticks} ticks)"
        );
        assert!(
            name.starts_with(thread),
            "{what}: the guest burned CPU on `{name}`, not on a `{thread}` thread"
        );
        assert_eq!(seccomp, 2, "{what}: `{name}` is not confined");
    });
}

/// A budget the loops run to.
fn seconds(s: u64) -> DeployParams {
    DeployParams {
        timeout_ms: Some(s * 1000),
        ..DeployParams::default()
    }
}

#[test]
fn every_call_of_a_function_runs_on_a_confined_thread() {
    let p = Platform::start(&["--cores", "1"]);
    p.deploy("turncoat", &fixtures::turncoat(), &seconds(3));
    for _ in 0..3 {
        assert_eq!(p.invoke("turncoat", b"").status, 200);
    }
    assert_confined(
        &p,
        "an ABI call run where it was read",
        "mote-reader-",
        || {
            assert_eq!(p.invoke("turncoat", b"loop").status, 504);
        },
    );
    let looping_start =
        wasm(r#"(module (memory (export "memory") 1) (func (export "_start") (loop $l (br $l))))"#);
    p.deploy("command", &looping_start, &seconds(3));
    assert_confined(&p, "a WASI command", "mote-exec-", || {
        assert_eq!(p.invoke("command", b"").status, 504);
    });
    let looping_phase = wasm(
        r#"(module
            (import "mote" "phase" (func $phase (param i32)))
            (memory (export "memory") 1)
            (func (export "mote_alloc") (param i32) (result i32) i32.const 1024)
            (func (export "mote_handle") (param i32 i32) (result i64)
              (call $phase (i32.const 1000)) (loop $l (br $l)) i64.const 0))"#,
    );
    p.deploy("phases", &looping_phase, &seconds(3));
    assert_confined(&p, "a function with phases", "mote-microtask", || {
        assert_eq!(p.invoke("phases", b"").status, 504);
    });
    let looping_initialize = wasm(
        r#"(module (memory (export "memory") 1)
            (func (export "_initialize") (loop $l (br $l)))
            (func (export "mote_alloc") (param i32) (result i32) i32.const 1024)
            (func (export "mote_handle") (param i32 i32) (result i64) i64.const 0))"#,
    );
    p.deploy("initializes", &looping_initialize, &seconds(3));
    assert_confined(&p, "a module's _initialize", "mote-reader-", || {
        assert_eq!(p.invoke("initializes", b"").status, 504);
    });
    p.deploy(
        "http-hello",
        mote_guests::HTTP_HELLO.wasm,
        &DeployParams {
            route: Some("/hello-http/...".into()),
            ..seconds(3)
        },
    );
    assert_confined(&p, "a wasi:http component", "mote-reader-", || {
        let reply = p.get("/hello-http/spin");
        assert!(reply.status >= 500, "{}", reply.text());
    });
    // The node answered throughout.
    assert_eq!(p.invoke("turncoat", b"").status, 200);
}

#[test]
fn a_queued_call_runs_on_a_confined_executor() {
    let p = Platform::start(&["--cores", "1", "--inline", "off"]);
    p.deploy("spin", &fixtures::spin(), &seconds(3));
    assert_confined(
        &p,
        "an ABI call queued for an executor",
        "mote-exec-",
        || {
            assert_eq!(p.invoke("spin", b"").status, 504);
        },
    );
}

#[test]
fn a_jobs_tasks_driver_and_initializer_run_on_confined_threads() {
    let p = Platform::start(&["--cores", "1"]);
    let task_loops = crate::jobs::compute_job("(loop $l (br $l))");
    p.deploy("task-loops", &task_loops, &seconds(3));
    let run = |function: &str| {
        let request = RunRequest::new(function, Vec::new());
        let status = wait(p.api().run_job(&request));
        status.id
    };
    let id = parking_lot::Mutex::new(String::new());
    assert_confined(&p, "a job's task", "mote-job-", || {
        *id.lock() = run("task-loops");
    });
    let _ = try_wait(p.api().cancel_job(&id.lock()));
    let driver_loops = crate::jobs::driver_job_wat("(loop $l (br $l))", "");
    p.deploy("driver-loops", &wasm(&driver_loops), &seconds(3));
    assert_confined(&p, "a job's driver", "mote-driver", || {
        let refused = try_wait(
            p.api()
                .run_job(&RunRequest::new("driver-loops", Vec::new())),
        );
        assert!(
            refused.is_err(),
            "a driver that never returns started a job"
        );
    });
    let initialize_loops = crate::jobs::driver_job_wat(
        "(i32.store (i32.const 64) (call $dataset (i32.const 0) (i32.const 6) (i32.const 1)))",
        r#"(func (export "_initialize") (loop $l (br $l)))"#,
    );
    p.deploy("initialize-loops", &wasm(&initialize_loops), &seconds(3));
    assert_confined(&p, "a job module's _initialize", "mote-driver", || {
        let _ = try_wait(
            p.api()
                .run_job(&RunRequest::new("initialize-loops", Vec::new())),
        );
    });
    assert_eq!(p.get("/healthz").status, 200, "the node still answers");
}
