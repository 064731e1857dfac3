//! The scheduling benchmark end to end: a short burst under every policy through the real
//! binary, checking that it runs, loses no call and writes its results.

use crate::platform::mote_bin;
use std::process::Command;

#[test]
fn a_short_burst_runs_under_every_policy_preemptive_or_not() {
    let out = tempfile::tempdir().unwrap();
    let mut args: Vec<String> = [
        "bench",
        "burst",
        "--cores",
        "1",
        "--window",
        "2",
        "--intensity",
        "40",
        "--preempt",
        "both",
    ]
    .map(String::from)
    .to_vec();
    for policy in ["fifo", "sept", "eect", "rect", "fc", "baseline"] {
        args.extend(["--policy".into(), policy.into()]);
    }
    for function in ["graph-bfs", "dynamic-html"] {
        args.extend(["--function".into(), function.into()]);
    }
    args.extend(["--idle-calls".into(), "1".into(), "--out".into()]);
    args.push(out.path().display().to_string());
    let o = Command::new(mote_bin()).args(&args).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("summary.json")).unwrap()).unwrap();
    let runs = summary.as_array().unwrap();
    // fifo and baseline never preempt; the four ranking policies run both ways.
    assert_eq!(runs.len(), 10);
    let names: Vec<&str> = runs.iter().map(|r| r["policy"].as_str().unwrap()).collect();
    assert!(
        ["sept-preempt", "eect-preempt", "rect-preempt", "fc-preempt"]
            .iter()
            .all(|n| names.contains(n)),
        "{names:?}"
    );
    // Every policy got the same burst: the same seed gives the same call sequence.
    let calls = runs[0]["calls"].as_u64().unwrap();
    assert!(calls >= 2, "{summary}");
    for run in runs {
        assert_eq!(run["failed"], 0, "{run}");
        assert_eq!(run["calls"].as_u64(), Some(calls), "{run}");
        assert!(run["response_ms"]["avg"].as_f64().unwrap() > 0.0);
        let policy = run["policy"].as_str().unwrap();
        let csv = std::fs::read_to_string(out.path().join(format!("{policy}-v40-s1.csv"))).unwrap();
        assert_eq!(csv.lines().count() as u64, calls + 1, "{csv}");
    }
    let report = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    assert!(
        report.contains("response avg (s)") && report.contains("FIFO / policy"),
        "{report}"
    );
}
