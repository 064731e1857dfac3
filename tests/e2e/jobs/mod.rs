//! Canary jobs end to end (`docs/jobs.md`): the example jobs `lr`, `kmeans` and `pagerank` on
//! input the tests put in object storage or generate, on one node and across several, compared
//! with the sequential textbook versions in [`reference`]; jobs that fail (a trap, a task past
//! its budget or its memory limit, a cancel) and requests that are refused; and `mote job`.
//!
//! Every wait polls up to a generous [`DEADLINE`]. Where a test asserts on CPU time (a call
//! takes its core from a job, a cancel stops running tasks), the margin is several times the
//! gap between what the platform does and what it would do without the mechanism tested.

mod apps;
mod cli;
mod failures;
mod nodes;
mod recovery;
mod reference;

pub(crate) use failures::{compute_job, driver_job_wat};

use crate::platform::{Platform, try_wait};
use mote_api::{JobState, JobStatus, RunRequest, WorkerChoice};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The longest a job of these tests may take on a loaded 2-core machine.
const DEADLINE: Duration = Duration::from_secs(60);

/// Relative tolerance of a job's numbers against the reference's: both sum in a different
/// order, so they agree to rounding.
const TOLERANCE: f64 = 1e-9;

/// A `mote up` with `--cores 2` and nothing deployed.
fn node() -> Platform {
    Platform::start(&["--cores", "2"])
}

/// The directory holding `p`'s objects (its default, `DATA/objects`).
fn objects_of(p: &Platform) -> PathBuf {
    p.data.join("objects")
}

/// Creates bucket `bucket` in the object directory `objects` and puts `files` (name, text)
/// under `prefix` in it.
fn put_objects(objects: &Path, bucket: &str, prefix: &str, files: &[(&str, String)]) {
    let dir = objects.join(bucket).join(prefix);
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
}

/// The job's committed output under `bucket/prefix`: its `part-*` objects, concatenated in key
/// order, beside the `_SUCCESS` marker a committed output carries.
fn output(objects: &Path, bucket: &str, prefix: &str) -> String {
    let dir = objects.join(bucket).join(prefix);
    let mut parts: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("the output {} is missing: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    parts.sort();
    let names: Vec<String> = parts
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().any(|n| n == "_SUCCESS")
            && names.iter().any(|n| n.starts_with("part-"))
            && names
                .iter()
                .all(|n| n == "_SUCCESS" || n.starts_with("part-")),
        "the output holds {names:?}"
    );
    parts
        .iter()
        .filter(|p| p.file_name().is_some_and(|n| n != "_SUCCESS"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect()
}

/// A `POST /v1/jobs` request.
fn request(
    function: &str,
    workers: Option<WorkerChoice>,
    ppc: u32,
    args: &[(&str, &str)],
) -> RunRequest {
    let args = args
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    RunRequest {
        workers,
        partitions_per_core: Some(ppc),
        ..RunRequest::new(function, args)
    }
}

/// Starts a job, asserting it is accepted; returns its status (a short job may have ended by
/// the time the answer is sent).
fn start(p: &Platform, request: &RunRequest) -> JobStatus {
    let status =
        try_wait(p.api().run_job(request)).unwrap_or_else(|e| panic!("starting {request:?}: {e}"));
    assert_eq!(status.function, request.function, "{status:?}");
    status
}

/// Job `id`'s status.
fn job(p: &Platform, id: &str) -> JobStatus {
    try_wait(p.api().job(id)).unwrap_or_else(|e| panic!("job {id}: {e}"))
}

/// Polls job `id` until it is no longer running; returns its last status.
fn wait_ended(p: &Platform, id: &str) -> JobStatus {
    let started = Instant::now();
    loop {
        let status = job(p, id);
        if status.state != JobState::Running {
            return status;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "job {id} still runs after {DEADLINE:?}: {status:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs a job to its end, asserting it succeeds; returns its final status.
fn run_ok(p: &Platform, request: &RunRequest) -> JobStatus {
    let id = start(p, request).id;
    let status = wait_ended(p, &id);
    assert_eq!(status.state, JobState::Succeeded, "{request:?}: {status:?}");
    assert_eq!(status.error, None, "{status:?}");
    status
}

/// Runs a job to its end, asserting it fails; returns its error.
fn run_failing(p: &Platform, request: &RunRequest) -> String {
    let id = start(p, request).id;
    let status = wait_ended(p, &id);
    assert_eq!(status.state, JobState::Failed, "{request:?}: {status:?}");
    status
        .error
        .clone()
        .unwrap_or_else(|| panic!("a failed job says why: {status:?}"))
}

/// Asserts `got` and `want` agree to [`TOLERANCE`], relative to the larger.
fn assert_close(what: &str, got: f64, want: f64) {
    let scale = got.abs().max(want.abs());
    assert!(
        (got - want).abs() <= TOLERANCE * scale + 1e-300,
        "{what}: the job found {got:e}, the reference {want:e} (difference {:e})",
        (got - want).abs()
    );
}

/// Asserts two vectors agree element by element.
fn assert_all_close(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(
        got.len(),
        want.len(),
        "{what}: the job found {got:?}, the reference {want:?}"
    );
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_close(&format!("{what}[{i}]"), *g, *w);
    }
}

/// A number the job wrote.
fn number(text: &str) -> f64 {
    text.trim()
        .parse()
        .unwrap_or_else(|e| panic!("{text:?} is not a number: {e}"))
}

/// `lr`'s output: a weight per line.
fn parse_weights(text: &str) -> Vec<f64> {
    text.lines().map(number).collect()
}

/// `kmeans`' output: a centroid per line, its features comma-separated.
fn parse_centroids(text: &str) -> Vec<Vec<f64>> {
    text.lines()
        .map(|line| line.split(',').map(number).collect())
        .collect()
}

/// `pagerank`'s output: `vertex rank` per line.
fn parse_ranks(text: &str) -> Vec<(u64, f64)> {
    text.lines()
        .map(|line| {
            let (v, r) = line
                .split_once(' ')
                .unwrap_or_else(|| panic!("{line:?} is not `vertex rank`"));
            (v.parse().unwrap(), number(r))
        })
        .collect()
}

/// Asserts a pagerank output matches the reference's ranks, vertex for vertex.
fn assert_ranks(got: &[(u64, f64)], want: &[(u64, f64)]) {
    let vertices = |r: &[(u64, f64)]| r.iter().map(|(v, _)| *v).collect::<Vec<_>>();
    assert_eq!(vertices(got), vertices(want), "the ranked vertices");
    for ((v, g), (_, w)) in got.iter().zip(want) {
        assert_close(&format!("rank of vertex {v}"), *g, *w);
    }
}

/// A point as `lr` and `kmeans` read it: comma-separated, the label first if `labelled`.
fn point_line(label: Option<f64>, features: &[f64]) -> String {
    let columns: Vec<String> = label
        .into_iter()
        .chain(features.iter().copied())
        .map(|x| x.to_string())
        .collect();
    columns.join(",")
}

/// `lines` split into objects of the given line counts (the last takes the rest), each ending
/// its last line, with a blank line added to the first.
fn split_objects(lines: &[String], counts: &[usize]) -> Vec<(&'static str, String)> {
    const NAMES: [&str; 4] = ["part-a.txt", "part-b.txt", "part-c.txt", "part-d.txt"];
    let mut objects = Vec::new();
    let mut rest = lines;
    for (n, name) in NAMES.iter().enumerate() {
        let take = counts.get(n).copied().unwrap_or(rest.len()).min(rest.len());
        let (these, after) = rest.split_at(take);
        let mut text: String = these.iter().map(|l| format!("{l}\n")).collect();
        if n == 0 {
            text.push('\n');
        }
        objects.push((*name, text));
        rest = after;
        if rest.is_empty() {
            break;
        }
    }
    objects
}

/// The edge list the pagerank tests use, as SNAP writes graphs, over three objects: a comment
/// header, blank lines, a trailing comment, a repeated edge, a self-loop, vertices without
/// out-edges (6, 9 and 12; 12 only a destination) and an object whose last line has no newline.
fn edge_objects() -> Vec<(&'static str, String)> {
    vec![
        (
            "graph-1.txt",
            "# Directed graph: test.txt\n# FromNodeId\tToNodeId\n0 1\n0 2\n1 2\n\n2 0\n2 3\n3 3\n"
                .to_owned(),
        ),
        (
            "graph-2.txt",
            "3 4\n4 5\n4 6\n5 4\n5 9 # a comment after an edge\n0 1\n7 8\n8 7\n8 12".to_owned(),
        ),
        ("graph-3.txt", "\n10 11\n11 10\n10 6\n1 9\n".to_owned()),
    ]
}

/// The edges of [`edge_objects`], as the reference parses them.
fn edges_of(objects: &[(&str, String)]) -> Vec<(u64, u64)> {
    let text: String = objects.iter().map(|(_, t)| format!("{t}\n")).collect();
    reference::parse_edges(&text)
}

/// `lr`'s training points for the stored-input tests: generated ones (so labels follow a
/// model), written as text.
fn lr_lines(points: u64, seed: u64) -> (Vec<String>, Vec<(f64, Vec<f64>)>) {
    let generated = reference::generate_labelled_points(points, seed);
    let lines: Vec<String> = generated
        .iter()
        .map(|(label, x)| point_line(Some(*label), x))
        .collect();
    // What the job reads is the text: the reference reads it too.
    let read = reference::parse_points(&lines.join("\n"), true);
    assert_eq!(read, generated, "points survive their text form");
    (lines, read)
}

/// `kmeans`' points for the stored-input tests, written as text.
fn kmeans_lines(points: u64, seed: u64) -> (Vec<String>, Vec<Vec<f64>>) {
    let generated = reference::generate_clustered_points(points, seed);
    let lines: Vec<String> = generated.iter().map(|x| point_line(None, x)).collect();
    let read: Vec<Vec<f64>> = reference::parse_points(&lines.join("\n"), false)
        .into_iter()
        .map(|(_, x)| x)
        .collect();
    assert_eq!(read, generated, "points survive their text form");
    (lines, read)
}
