//! The report of `mote bench jobs`: tables in Markdown (`report.md`), every figure
//! (`results.json`), and the two figures (`figure4.png`, `figure8.png`); and of its
//! `--wordcount` (`wordcount.md`, `wordcount.json`).

use super::figures::{
    CEILING_WORDCOUNT_OVER_SHUFFLE, FLOOR_OVER_PEERS, FLOOR_SPARK_LR, FLOOR_TASKS_PER_S_PER_CORE,
    FLOOR_WORDCOUNT_OVER_PEERS, JobsReport, SHUFFLE, WordcountReport,
};
use crate::plot::{ErrorBar, Line, Panel, error_bar_png};
use std::fmt::Write as _;
use std::path::Path;

fn spread(runs: &[f64], value: f64) -> Option<ErrorBar> {
    let low = runs.iter().copied().fold(f64::INFINITY, f64::min);
    let high = runs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    value.is_finite().then_some(ErrorBar { value, low, high })
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("–".into(), |v| format!("{v:.digits$}"))
}

fn met(ok: bool) -> &'static str {
    if ok { "met" } else { "NOT met" }
}

impl JobsReport {
    /// The report as Markdown tables.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let m = &self.machine;
        let _ = writeln!(
            s,
            "`{}` on {} ({} cores), {}; load average {} at start, {} at end; {} points, median of {} repetitions; {:.0} s\n",
            self.command,
            m.cpu,
            m.nproc,
            self.date,
            m.load_at_start,
            m.load_at_end,
            self.points,
            self.reps,
            self.bench_s
        );
        let _ = writeln!(
            s,
            "**Figure 4** (1 core, 10 partitions, `busy`): scheduling cost {:.0} ns per task \
             (wall time of an empty task); {:.0} tasks/s per core at ≤10% scheduler share \
             (floor {:.0}: {}). Executors' counters: {:.0} ns per task outside the guest.\n",
            self.scheduling_ns_per_task,
            self.tasks_per_s_per_core,
            FLOOR_TASKS_PER_S_PER_CORE,
            met(self.meets_floor_tasks_per_s_per_core),
            self.scheduling_ns_per_task_counters
        );
        s.push_str(
            "| work | wall ns/task | tasks/s | task µs | scheduler share | counters: task ns | counters: outside ns | counters: share |\n\
             |---|---|---|---|---|---|---|---|\n",
        );
        for p in &self.figure4 {
            let _ = writeln!(
                s,
                "| {} | {:.0} | {:.0} | {:.2} | {:.1}% | {:.0} | {:.0} | {:.1}% |",
                p.work,
                p.ns_per_task,
                p.tasks_per_s,
                p.task_us,
                p.scheduler_share * 100.0,
                p.counter_task_ns,
                p.counter_scheduling_ns,
                p.counter_scheduler_share * 100.0
            );
        }
        let v = &self.validation;
        let _ = writeln!(
            s,
            "\nTasks 9× the scheduling cost (work={}): {:.2} µs tasks, {:.0} tasks/s on one core, \
             scheduler share {:.1}% (wall) / {:.1}% (counters).\n",
            v.work,
            v.task_us,
            v.tasks_per_s,
            v.scheduler_share * 100.0,
            v.counter_scheduler_share * 100.0
        );
        let _ = writeln!(
            s,
            "**Beside the peers** (2 cores, 20 partitions; {} LR points):\n\n\
             | system | empty tasks/s | LR iteration ms |\n|---|---|---|\n\
             | mote | {:.0} | {:.2} |\n| Ray | {} | {} |\n| Dask | {} | {} |\n| Spark | {} | {} |\n",
            self.points,
            self.tasks_per_s_2core,
            self.lr_iteration_ms,
            opt(self.ray_tasks_per_s, 0),
            opt(self.ray_lr_iteration_ms, 2),
            opt(self.dask_tasks_per_s, 0),
            opt(self.dask_lr_iteration_ms, 2),
            opt(self.spark_tasks_per_s, 0),
            opt(self.spark_lr_iteration_ms, 2),
        );
        if let (Some(best), Some(ratio)) = (&self.best_peer, self.tasks_over_best_peer) {
            let _ = writeln!(
                s,
                "mote / {best} task rate: {ratio:.1}x (floor {FLOOR_OVER_PEERS}x: {})",
                met(ratio >= FLOOR_OVER_PEERS)
            );
        }
        if let Some(ratio) = self.spark_lr_over_mote {
            let _ = writeln!(
                s,
                "Spark LR iteration / mote's: {ratio:.1}x (floor {FLOOR_SPARK_LR}x: {})",
                met(ratio >= FLOOR_SPARK_LR)
            );
        }
        if let Some(error) = self.peers.as_ref().and_then(|p| p["error"].as_str()) {
            let _ = writeln!(s, "peers failed: {error}");
        }
        let _ = writeln!(
            s,
            "\nLR from the file: {:.2} ms per iteration, {:.0} tasks/s, {:.0} tasks per iteration.\n",
            self.lr.iteration_ms, self.lr.tasks_per_s, self.lr.tasks_per_iteration
        );
        s.push_str(
            "**Figure 8** (2 cores, LR on generated points):\n\n\
             | partitions/core | partitions | iteration ms | tasks/s | tasks/iteration |\n|---|---|---|---|---|\n",
        );
        for p in &self.figure8 {
            let _ = writeln!(
                s,
                "| {} | {} | {:.2} | {:.0} | {:.0} |",
                p.partitions_per_core,
                p.partitions,
                p.iteration_ms,
                p.tasks_per_s,
                p.tasks_per_iteration
            );
        }
        let o = &self.scale_out;
        let _ = writeln!(
            s,
            "\n**Two 1-core workers against one** (a shared store, jobs run against node 1):\n\n\
             | | 1 worker | 2 workers | ratio |\n|---|---|---|---|\n\
             | LR iteration ms | {:.2} | {:.2} | {:.2}x faster |\n\
             | LR tasks/s | {:.0} | {:.0} | {:.2}x |\n\
             | empty busy tasks/s | {:.0} | {:.0} | {:.2}x |\n\
             | busy tasks/s, work={} | {:.0} | {:.0} | {:.2}x |",
            o.lr_one.iteration_ms,
            o.lr_two.iteration_ms,
            o.lr_speedup,
            o.lr_one.tasks_per_s,
            o.lr_two.tasks_per_s,
            o.lr_two.tasks_per_s / o.lr_one.tasks_per_s,
            o.busy_one_tasks_per_s,
            o.busy_two_tasks_per_s,
            o.busy_speedup,
            o.busy_work,
            o.busy_work_one_tasks_per_s,
            o.busy_work_two_tasks_per_s,
            o.busy_work_two_tasks_per_s / o.busy_work_one_tasks_per_s
        );
        s
    }
}

/// Writes `results.json`, `report.md`, `figure4.png` and `figure8.png` to `out`.
pub(super) fn write(report: &JobsReport, out: &Path) -> anyhow::Result<()> {
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(report)? + "\n",
    )?;
    std::fs::write(out.join("report.md"), report.table())?;

    let labels: Vec<String> = report
        .figure4
        .iter()
        .map(|p| format!("{:.1}", p.task_us.max(0.0)))
        .collect();
    let categories: Vec<&str> = labels.iter().map(String::as_str).collect();
    let rate: Vec<Option<ErrorBar>> = report
        .figure4
        .iter()
        .map(|p| {
            let rates: Vec<f64> = p.ns_per_task_runs.iter().map(|n| 1e9 / n).collect();
            spread(&rates, p.tasks_per_s)
        })
        .collect();
    let share: Vec<Option<ErrorBar>> = report
        .figure4
        .iter()
        .map(|p| spread(&[p.scheduler_share * 100.0], p.scheduler_share * 100.0))
        .collect();
    let counter_share: Vec<Option<ErrorBar>> = report
        .figure4
        .iter()
        .map(|p| {
            let v = p.counter_scheduler_share * 100.0;
            spread(&[v], v)
        })
        .collect();
    let floor: Vec<Option<ErrorBar>> = report
        .figure4
        .iter()
        .map(|_| spread(&[FLOOR_TASKS_PER_S_PER_CORE], FLOOR_TASKS_PER_S_PER_CORE))
        .collect();
    let ten: Vec<Option<ErrorBar>> = report
        .figure4
        .iter()
        .map(|_| spread(&[10.0], 10.0))
        .collect();
    error_bar_png(
        &out.join("figure4.png"),
        "task length, µs (busy's work, 1 core, 10 partitions)",
        &categories,
        &[
            Panel {
                title: "Tasks per second on one core",
                y_label: "tasks/s",
                lines: &[
                    Line {
                        label: "mote (wall clock)",
                        points: &rate,
                    },
                    Line {
                        label: "executor counters (share only)",
                        points: &vec![None; categories.len()],
                    },
                    Line {
                        label: "paper: 136K tasks/s at 10%",
                        points: &floor,
                    },
                ],
                log_scale: true,
            },
            Panel {
                title: "Scheduler's share of the core",
                y_label: "% of the core",
                lines: &[
                    Line {
                        label: "mote (wall clock)",
                        points: &share,
                    },
                    Line {
                        label: "executor counters",
                        points: &counter_share,
                    },
                    Line {
                        label: "paper: 10%",
                        points: &ten,
                    },
                ],
                log_scale: true,
            },
        ],
        (1200, 520),
    )?;

    let labels: Vec<String> = report
        .figure8
        .iter()
        .map(|p| p.partitions_per_core.to_string())
        .collect();
    let categories: Vec<&str> = labels.iter().map(String::as_str).collect();
    let time: Vec<Option<ErrorBar>> = report
        .figure8
        .iter()
        .map(|p| spread(&p.iteration_ms_runs, p.iteration_ms))
        .collect();
    let rate: Vec<Option<ErrorBar>> = report
        .figure8
        .iter()
        .map(|p| spread(&p.tasks_per_s_runs, p.tasks_per_s))
        .collect();
    let label = format!("mote, 2 cores, {} points", report.points);
    error_bar_png(
        &out.join("figure8.png"),
        "partitions per core",
        &categories,
        &[
            Panel {
                title: "(a) LR iteration time",
                y_label: "ms",
                lines: &[Line {
                    label: &label,
                    points: &time,
                }],
                log_scale: false,
            },
            Panel {
                title: "(b) Task rate",
                y_label: "tasks/s",
                lines: &[Line {
                    label: &label,
                    points: &rate,
                }],
                log_scale: false,
            },
        ],
        (1100, 480),
    )?;
    Ok(())
}

impl WordcountReport {
    /// The report as Markdown tables.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let m = &self.machine;
        let r = &self.reference;
        let _ = writeln!(
            s,
            "`{}` on {} ({} cores), {}; load average {} at start, {} at end; {:.0} s\n\n\
             Text: {} bytes in {} objects, {} words of which {} distinct (Zipf, exponent {}, \
             over {} words; seed {}; written in {:.1} s). Median of {} repetitions, `{}` and \
             `{}` alternated, after an untimed run of each.\n",
            self.command,
            m.cpu,
            m.nproc,
            self.date,
            m.load_at_start,
            m.load_at_end,
            self.bench_s,
            self.bytes,
            self.objects,
            r.total,
            r.distinct,
            self.exponent,
            self.vocabulary,
            self.seed,
            self.generate_s,
            self.reps,
            self.job,
            SHUFFLE,
        );
        let _ = writeln!(
            s,
            "**Word count** (mote: one node of {} cores, {} partitions, from sending the job to \
             its output written; peers: from reading the text to the counts in the driver, \
             without the interpreter's, JVM's or cluster's start):\n\n\
             | system | method | s | MB/s | result |\n|---|---|---|---|---|",
            self.cores, self.partitions
        );
        let mb_per_s = |seconds: f64| self.bytes as f64 / 1e6 / seconds;
        let same = |equal: bool| if equal { "equal" } else { "NOT equal" };
        for (job, shuffle, seconds) in [
            (self.job.as_str(), false, self.job_s),
            (SHUFFLE, true, self.shuffle_s),
        ] {
            let equal = self
                .runs
                .iter()
                .filter(|r| r.shuffle == shuffle)
                .all(|r| r.equal);
            let _ = writeln!(
                s,
                "| mote | `{job}` | {seconds:.3} | {:.0} | {} |",
                mb_per_s(seconds),
                same(equal)
            );
        }
        for p in &self.peers {
            let _ = writeln!(
                s,
                "| {} | {} | {:.3} | {:.0} | {} |",
                p.system,
                p.method,
                p.seconds,
                mb_per_s(p.seconds),
                same(p.equal)
            );
        }
        s.push('\n');
        if let (Some(peer), Some(ratio)) = (&self.fastest_peer, self.fastest_peer_over_job) {
            let _ = writeln!(
                s,
                "fastest peer ({peer}) / `{}`: {ratio:.1}x (floor {FLOOR_WORDCOUNT_OVER_PEERS}x: {})",
                self.job,
                met(ratio >= FLOOR_WORDCOUNT_OVER_PEERS)
            );
        }
        if let Some(error) = self.peers_output.as_ref().and_then(|p| p["error"].as_str()) {
            let _ = writeln!(s, "peers failed: {error}");
        }
        let runs: Vec<String> = self
            .job_over_shuffle_runs
            .iter()
            .map(|r| format!("{r:.2}"))
            .collect();
        let _ = writeln!(
            s,
            "`{}` / `{}`: {:.2} (median of the repetitions' ratios: {}; ceiling \
             {CEILING_WORDCOUNT_OVER_SHUFFLE}: {})",
            self.job,
            SHUFFLE,
            self.job_over_shuffle,
            runs.join(" "),
            met(self.job_over_shuffle <= CEILING_WORDCOUNT_OVER_SHUFFLE)
        );
        s
    }
}

/// Writes `wordcount.json` and `wordcount.md` to `out`.
pub(super) fn write_wordcount(report: &WordcountReport, out: &Path) -> anyhow::Result<()> {
    std::fs::write(
        out.join("wordcount.json"),
        serde_json::to_string_pretty(report)? + "\n",
    )?;
    std::fs::write(out.join("wordcount.md"), report.table())?;
    Ok(())
}
