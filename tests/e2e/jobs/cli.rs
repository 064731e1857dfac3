//! `mote job` against a running node: `run` waits and prints a summary (or fails with the job's
//! error), `ls` and `status` show jobs, `run --detach` and `cancel` end a long one.

use super::{node, objects_of, put_objects, reference};
use crate::cli::{mote, stdout};
use mote_api::DeployParams;
use std::process::Output;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn mote_job_run_ls_status_and_cancel() {
    let p = node();
    p.deploy("lr", mote_guests::LR.wasm, &DeployParams::default());
    p.deploy("busy", mote_guests::BUSY.wasm, &DeployParams::default());
    put_objects(&objects_of(&p), "results", "", &[]);

    let o = mote(
        &p,
        &[
            "job",
            "run",
            "lr",
            "--partitions-per-core",
            "2",
            "--arg",
            "generate=200",
            "--arg",
            "seed=3",
            "--arg",
            "iterations=4",
            "--arg",
            "output=results/cli",
        ],
    );
    assert!(o.status.success(), "{o:?}");
    let out = stdout(&o);
    // "job ID succeeded: N tasks in S s (R tasks/s), 4 iterations"
    let id = out
        .strip_prefix("job ")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no summary line: {out}"))
        .to_owned();
    assert!(
        out.starts_with(&format!("job {id} succeeded: "))
            && out.trim_end().ends_with(" 4 iterations"),
        "{out}"
    );
    // An iteration is 3P + 3 tasks (P = 4), plus the generation (P), the last test (1) and the
    // store (1).
    let tasks = 4 * (3 * 4 + 3) + 4 + 1 + 1;
    assert!(out.contains(&format!(": {tasks} tasks in ")), "{out}");
    assert!(
        stderr(&o).contains(&format!("job {id} started: 4 partitions on 1 workers")),
        "{}",
        stderr(&o)
    );
    let weights = super::parse_weights(&super::output(&objects_of(&p), "results", "cli"));
    let points = reference::generate_labelled_points(200, 3);
    super::assert_all_close(
        "weights",
        &weights,
        &reference::logistic_regression(&points, 4, 1.0),
    );

    let o = mote(&p, &["job", "status", &id]);
    assert!(o.status.success(), "{o:?}");
    let out = stdout(&o);
    assert!(
        out.starts_with(&format!("job {id} (lr): succeeded\n")),
        "{out}"
    );
    assert!(
        out.contains(&format!("4 partitions, iteration 4, {tasks} tasks")),
        "{out}"
    );
    assert!(
        out.contains(&p.url),
        "the worker line names the node: {out}"
    );

    // A job that fails: the exit status says so and the error is the job's.
    let o = mote(&p, &["job", "run", "lr", "--arg", "input=results/nothing"]);
    assert!(!o.status.success(), "{o:?}");
    assert!(
        stderr(&o).contains("no objects under that prefix"),
        "{}",
        stderr(&o)
    );
    let o = mote(
        &p,
        &[
            "job",
            "run",
            "lr",
            "--arg",
            "generate=100",
            "--arg",
            "iterations=-1",
        ],
    );
    assert!(!o.status.success(), "{o:?}");
    let err = stderr(&o);
    assert!(
        err.contains(" failed: ") && err.contains("iterations=-1"),
        "the job's error names the bad argument: {err}"
    );
    let failed = err
        .split_whitespace()
        .skip_while(|w| *w != "job")
        .nth(1)
        .unwrap_or_else(|| panic!("no job id in: {err}"))
        .to_owned();
    let o = mote(&p, &["job", "run", "lr", "--arg", "novalue"]);
    assert!(!o.status.success(), "{o:?}");
    assert!(stderr(&o).contains("K=V"), "{}", stderr(&o));

    // A long job, detached, then cancelled.
    let o = mote(
        &p,
        &[
            "job",
            "run",
            "busy",
            "--detach",
            "--arg",
            "stages=100000000",
        ],
    );
    assert!(o.status.success(), "{o:?}");
    let busy = stdout(&o).trim().to_owned();
    assert!(!busy.is_empty() && !busy.contains(' '), "{busy:?}");
    let o = mote(&p, &["job", "cancel", &busy]);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(stdout(&o), format!("job {busy} is cancelled\n"));

    let o = mote(&p, &["job", "ls"]);
    assert!(o.status.success(), "{o:?}");
    let out = stdout(&o);
    let rows: Vec<Vec<&str>> = out
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    let summary: Vec<(&str, &str, &str)> = rows.iter().map(|r| (r[0], r[1], r[2])).collect();
    assert_eq!(
        summary,
        [
            (id.as_str(), "lr", "succeeded"),
            (failed.as_str(), "lr", "failed"),
            (busy.as_str(), "busy", "cancelled"),
        ],
        "{out}"
    );
    assert!(out.starts_with("ID "), "{out}");

    let o = mote(&p, &["job", "status", "nope"]);
    assert!(!o.status.success(), "{o:?}");
    assert!(stderr(&o).contains("no job `nope`"), "{}", stderr(&o));
}
