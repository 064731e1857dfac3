//! What the sort's runs say: the floors on the medians of each mode, ECDF plots as in
//! the paper's Figure 7, and the report that holds them.

use super::{RECORD_BYTES, SortConfig, SortRun};
use crate::plot::{self, PlotError, Series};
use crate::stats::median;
use std::path::{Path, PathBuf};

/// The floors, judged on the medians of the runs of each mode. A measure with no
/// finite value in a mode (a sub-stage no call reported, say) has `-` for its median and its
/// change, and its floor is `not measured`.
pub(super) fn floors(runs: &[SortRun]) -> String {
    let of = |mode: &str, f: &dyn Fn(&SortRun) -> Option<f64>| -> Option<f64> {
        let values: Vec<f64> = runs
            .iter()
            .filter(|r| r.microtasks == mode)
            .filter_map(f)
            .collect();
        median(&values)
    };
    // A row without a floor is reported for reading the others; its last two cells stay empty.
    type Floor<'a> = Option<(&'a str, &'a dyn Fn(f64) -> bool)>;
    let row = |what: &str, f: &dyn Fn(&SortRun) -> Option<f64>, floor: Floor<'_>| {
        let (on, off) = (of("on", f), of("off", f));
        let change = on.zip(off).map(|(on, off)| on / off - 1.0);
        let (floor, verdict) = match (floor, change) {
            (Some((floor, met)), Some(change)) => {
                (floor, if met(change) { "met" } else { "**not met**" })
            }
            (Some((floor, _)), None) => (floor, "not measured"),
            (None, _) => ("", ""),
        };
        let seconds = |s: Option<f64>| s.map_or("-".to_owned(), |s| format!("{s:.3}"));
        let change = change.map_or("-".to_owned(), |c| format!("{:+.1}%", c * 100.0));
        format!(
            "| {what} | {} | {} | {change} | {floor} | {verdict} |\n",
            seconds(off),
            seconds(on),
        )
    };
    let mut out = String::from(
        "| median | task-based (s) | microtasks (s) | change | floor | |\n|---|---|---|---|---|---|\n",
    );
    out += &row(
        "makespan",
        &|r| Some(r.makespan_s),
        Some(("≤ -37%", &|c| c <= -0.37)),
    );
    out += &row(
        "write categorized partitions (stage 1 write)",
        &|r| Some(r.span("stage1.write")),
        Some(("≤ -70%", &|c| c <= -0.70)),
    );
    out += &row(
        "sort category (stage 2 sort)",
        &|r| Some(r.span("stage2.sort")),
        Some(("≤ +15%", &|c| c <= 0.15)),
    );
    out += &row(
        "sort category, per call, once admitted to its core",
        &|r| median(&r.sort_admitted_s),
        Some(("≤ +15%", &|c| c <= 0.15)),
    );
    out += &row(
        "sort category, per call, waiting included",
        &|r| median(&r.sort_calls_s),
        None,
    );
    out += &row(
        "write categorized partitions, per call",
        &|r| median(&r.write_calls_s),
        None,
    );
    let all_valid = runs.iter().all(|r| r.valid);
    out += &format!(
        "\nEvery sorted output validates: {}\n",
        if all_valid { "yes" } else { "**no**" }
    );
    out
}

/// A plotted measure: file name, axis label, and how to read its values off a run (one per run,
/// or one per call).
type Metric = (&'static str, &'static str, fn(&SortRun) -> Vec<f64>);

/// ECDF plots of makespan and the two sub-stages, one line per mode, as in Figure 7, and of the
/// sort's per-call durations once admitted to a core.
pub(super) fn write_plots(out: &Path, runs: &[SortRun]) -> Result<Vec<PathBuf>, PlotError> {
    let metrics: [Metric; 4] = [
        ("makespan", "Makespan (s)", |r| vec![r.makespan_s]),
        (
            "write-partitions",
            "Write categorized partitions (s)",
            |r| vec![r.span("stage1.write")],
        ),
        ("sort-category", "Sort category (s)", |r| {
            vec![r.span("stage2.sort")]
        }),
        (
            "sort-category-calls",
            "Sort category, one call once admitted (s)",
            |r| r.sort_admitted_s.clone(),
        ),
    ];
    let mut written = Vec::new();
    for (file, label, metric) in metrics {
        let of = |mode: &str| -> Vec<f64> {
            runs.iter()
                .filter(|r| r.microtasks == mode)
                .flat_map(metric)
                .collect()
        };
        let (on, off) = (of("on"), of("off"));
        let series = [
            Series {
                label: "task-based",
                values: &off,
            },
            Series {
                label: "microtask-based",
                values: &on,
            },
        ];
        written.push(plot::ecdf_png(
            &out.join(format!("{file}.png")),
            label,
            label,
            &series,
        )?);
    }
    Ok(written)
}

/// The report's title and what ran: `command` on `config`, `size_gb` of records, objects at
/// `objects_url`.
pub(super) fn heading(
    command: &str,
    config: &SortConfig,
    size_gb: f64,
    objects_url: &str,
) -> String {
    format!(
        "# mote bench sort\n\n`{command}` on {} cores: {size_gb} GB ({} records), {} parts, {} categories, objects at {objects_url}\n\n",
        config.cores,
        config.size_bytes / RECORD_BYTES,
        config.parts,
        config.categories,
    )
}

/// The line a repetition prints as it ends.
pub(super) fn progress_line(run: &SortRun) -> String {
    let admitted = median(&run.sort_admitted_s).map_or("-".to_owned(), |s| format!("{s:.3}"));
    format!(
        "  rep {} microtasks {:<3} makespan {:>7.2} s  stage 1 {:>6.2} s (write {:>6.2})  stage 2 {:>6.2} s (sort {:>6.2}, one call once admitted {admitted:>5})  valid {}",
        run.rep,
        run.microtasks,
        run.makespan_s,
        run.stage1_s,
        run.span("stage1.write"),
        run.stage2_s,
        run.span("stage2.sort"),
        run.valid
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(microtasks: &'static str, makespan_s: f64, sort_admitted_s: Vec<f64>) -> SortRun {
        SortRun {
            microtasks,
            rep: 0,
            makespan_s,
            stage1_s: 0.0,
            stage2_s: 0.0,
            spans_s: vec![("stage1.write".into(), makespan_s / 2.0)],
            write_calls_s: vec![],
            sort_calls_s: vec![],
            sort_admitted_s,
            valid: true,
            records: 0,
        }
    }

    #[test]
    fn floors_judge_medians_and_say_what_was_not_measured() {
        let runs = [
            run("on", 1.0, vec![0.2]),
            run("off", 2.0, vec![]),
            run("on", 3.0, vec![0.4]),
            run("off", 4.0, vec![]),
        ];
        let table = floors(&runs);
        assert!(
            table.contains("| makespan | 3.000 | 2.000 | -33.3% | ≤ -37% | **not met** |"),
            "{table}"
        );
        assert!(
            table.contains("| write categorized partitions (stage 1 write) | 1.500 | 1.000 | -33.3% | ≤ -70% | **not met** |"),
            "{table}"
        );
        // No stage-2 span was reported, and only one mode has per-call sort durations.
        assert!(
            table.contains("| sort category (stage 2 sort) | - | - | - | ≤ +15% | not measured |"),
            "{table}"
        );
        assert!(
            table.contains("| sort category, per call, once admitted to its core | - | 0.300 | - | ≤ +15% | not measured |"),
            "{table}"
        );
        assert!(
            table.contains("| write categorized partitions, per call | - | - | - |  |  |"),
            "{table}"
        );
        assert!(
            table.contains("Every sorted output validates: yes"),
            "{table}"
        );
    }
}
