//! What a burst experiment's runs say: the paper's Table III per intensity and seed (with the
//! cluster simulation's model of the node on the same burst beside it), the ratios
//! to FIFO and the baseline, the rare function's stretch in the fairness mix, box plots of
//! response time and stretch per policy, and the report that holds them.

use super::experiment::{BurstOptions, Experiment};
use super::{BurstRun, BurstSummary, CallRecord};
use crate::plot::{PlotError, Series, box_plot_png};
use std::path::Path;

/// A table in the form of the paper's Table III: one column per run, rows for the average and
/// percentiles of response time and stretch, and the last completion.
pub(super) fn table(runs: &[&BurstSummary]) -> String {
    let mut s = format!(
        "| metric |{}\n|---|{}\n",
        runs.iter()
            .map(|r| format!(" {} |", r.policy))
            .collect::<String>(),
        runs.iter().map(|_| "---|").collect::<String>()
    );
    let row = |name: &str, get: &dyn Fn(&BurstSummary) -> f64, digits: usize| {
        format!(
            "| {name} |{}\n",
            runs.iter()
                .map(|r| format!(" {:.*} |", digits, get(r)))
                .collect::<String>()
        )
    };
    s += &row("response avg (s)", &|r| r.response_ms.avg / 1e3, 3);
    s += &row("response p50 (s)", &|r| r.response_ms.p50 / 1e3, 3);
    s += &row("response p75 (s)", &|r| r.response_ms.p75 / 1e3, 3);
    s += &row("response p95 (s)", &|r| r.response_ms.p95 / 1e3, 3);
    s += &row("response p99 (s)", &|r| r.response_ms.p99 / 1e3, 3);
    s += &row("stretch avg", &|r| r.stretch.avg, 1);
    s += &row("stretch p50", &|r| r.stretch.p50, 1);
    s += &row("stretch p75", &|r| r.stretch.p75, 1);
    s += &row("stretch p95", &|r| r.stretch.p95, 1);
    s += &row("stretch p99", &|r| r.stretch.p99, 1);
    s += &row("last completion (s)", &|r| r.last_completion_s, 1);
    s += &row("failed calls", &|r| r.failed as f64, 0);
    s += &row(
        "simulated: response avg (s)",
        &|r| r.simulated_response_ms.avg / 1e3,
        3,
    );
    s += &row(
        "simulated / measured avg",
        &|r| r.simulated_response_ms.avg / r.response_ms.avg.max(f64::MIN_POSITIVE),
        2,
    );
    s += &row("simulated: stretch avg", &|r| r.simulated_stretch.avg, 1);
    s
}

/// A metric to plot: file name part, axis label, and how to read it from a call.
type PlottedMetric = (&'static str, &'static str, fn(&CallRecord) -> f64);

/// Box plots of response time and stretch per policy, one pair of PNGs per intensity
/// (`v<V>-response.png`, `v<V>-stretch.png`), all seeds together.
pub(super) fn write_plots(out: &Path, runs: &[BurstRun]) -> Result<(), PlotError> {
    let mut intensities: Vec<u32> = runs.iter().map(|r| r.summary.intensity).collect();
    intensities.sort();
    intensities.dedup();
    for v in intensities {
        let at_v: Vec<&BurstRun> = runs.iter().filter(|r| r.summary.intensity == v).collect();
        let mut policies: Vec<&'static str> = at_v.iter().map(|r| r.summary.policy).collect();
        policies.dedup();
        let values = |policy: &str, get: fn(&CallRecord) -> f64| -> Vec<f64> {
            at_v.iter()
                .filter(|r| r.summary.policy == policy)
                .flat_map(|r| r.calls.iter().filter(|c| c.error.is_none()).map(get))
                .collect()
        };
        let metrics: [PlottedMetric; 2] = [
            ("response", "response time (s)", |c| c.response_ms / 1e3),
            ("stretch", "stretch (response / idle response)", |c| {
                c.stretch
            }),
        ];
        for (file, label, get) in metrics {
            let data: Vec<Vec<f64>> = policies.iter().map(|p| values(p, get)).collect();
            let series: Vec<Series<'_>> = policies
                .iter()
                .zip(&data)
                .map(|(p, d)| Series {
                    label: p,
                    values: d,
                })
                .collect();
            let title = format!("{file} by policy, intensity {v}");
            box_plot_png(
                &out.join(format!("v{v}-{file}.png")),
                &title,
                label,
                &series,
                true,
                (900, 560),
            )?;
        }
    }
    Ok(())
}

/// The paper's "baseline-to-us" ratios, per intensity: how many times lower each policy's average
/// response time and stretch are than FIFO's and than the baseline's (averaged over seeds).
pub(super) fn ratios(summaries: &[BurstSummary]) -> String {
    let mut intensities: Vec<u32> = summaries.iter().map(|s| s.intensity).collect();
    intensities.sort();
    intensities.dedup();
    let mean = |v: u32, policy: &str, get: &dyn Fn(&BurstSummary) -> f64| {
        let runs: Vec<f64> = summaries
            .iter()
            .filter(|s| s.intensity == v && s.policy == policy)
            .map(get)
            .collect();
        (!runs.is_empty()).then(|| runs.iter().sum::<f64>() / runs.len() as f64)
    };
    let mut out = String::from(
        "| intensity | policy | avg response (s) | avg stretch | response: FIFO / policy | stretch: FIFO / policy | response: baseline / policy | stretch: baseline / policy |\n|---|---|---|---|---|---|---|---|\n",
    );
    let mut names: Vec<&str> = Vec::new();
    for s in summaries {
        if !names.contains(&s.policy) {
            names.push(s.policy);
        }
    }
    for v in intensities {
        for &policy in &names {
            let response = |p: &str| mean(v, p, &|s| s.response_ms.avg / 1e3);
            let stretch = |p: &str| mean(v, p, &|s| s.stretch.avg);
            let (Some(r), Some(st)) = (response(policy), stretch(policy)) else {
                continue;
            };
            let ratio = |base: Option<f64>, x: f64| match base {
                Some(b) if x > 0.0 => format!("{:.2}x", b / x),
                _ => "-".to_owned(),
            };
            out += &format!(
                "| {v} | {policy} | {r:.2} | {st:.1} | {} | {} | {} | {} |\n",
                ratio(response("fifo"), r),
                ratio(stretch("fifo"), st),
                ratio(response("baseline"), r),
                ratio(stretch("baseline"), st),
            );
        }
    }
    out
}

/// The p99 response time of the three functions with the shortest idle response times, as a
/// multiple of their idle time, per intensity and policy (averaged over seeds): how long the
/// shortest calls wait in the tail.
fn shortest_functions(summaries: &[BurstSummary]) -> String {
    let Some(first) = summaries.first() else {
        return String::new();
    };
    let mut shortest: Vec<(&str, f64)> = first.idle_ms.iter().map(|(&f, &ms)| (f, ms)).collect();
    shortest.sort_by(|a, b| a.1.total_cmp(&b.1));
    shortest.truncate(3);
    let mut out = format!(
        "| intensity | policy |{}\n|---|---|{}\n",
        shortest
            .iter()
            .map(|(f, ms)| format!(" `{f}` p99 (idle {ms:.1} ms) |"))
            .collect::<String>(),
        "---|".repeat(shortest.len())
    );
    let mut seen: Vec<(u32, &str)> = Vec::new();
    for s in summaries {
        if seen.contains(&(s.intensity, s.policy)) {
            continue;
        }
        seen.push((s.intensity, s.policy));
        let runs: Vec<&BurstSummary> = summaries
            .iter()
            .filter(|r| r.intensity == s.intensity && r.policy == s.policy)
            .collect();
        out += &format!("| {} | {} |", s.intensity, s.policy);
        for (f, idle) in &shortest {
            let p99s: Vec<f64> = runs
                .iter()
                .filter_map(|r| r.response_by_function.get(f).map(|d| d.p99))
                .collect();
            let p99 = p99s.iter().sum::<f64>() / p99s.len().max(1) as f64;
            out += &format!(" {p99:.1} ms ({:.1}x) |", p99 / idle.max(1e-3));
        }
        out += "\n";
    }
    out
}

/// Stretch of the rare function alone in each run.
fn rare_function_table(summaries: &[BurstSummary], rare: &str) -> String {
    let mut table = format!(
        "| policy | intensity | seed | `{rare}` avg stretch | its p99 stretch | all calls' avg stretch |\n|---|---|---|---|---|---|\n"
    );
    for s in summaries {
        let Some(d) = s.stretch_by_function.get(rare) else {
            continue;
        };
        table += &format!(
            "| {} | {} | {} | {:.1} | {:.1} | {:.1} |\n",
            s.policy, s.intensity, s.seed, d.avg, d.p99, s.stretch.avg
        );
    }
    table
}

/// The report: what ran, Table III for each intensity and seed, the ratios and, in the
/// fairness mix, the `rare` function's stretch.
pub(super) fn markdown(
    options: &BurstOptions,
    experiment: &Experiment,
    summaries: &[BurstSummary],
    rare: Option<&str>,
) -> String {
    let mut report = format!(
        "# Burst results\n\n{} cores, window {} s, {} load, seeds {:?}, {}\n",
        options.cores,
        options.window_s,
        options.load.as_str(),
        experiment.seeds,
        if options.fairness {
            "fairness mix (rare long function)"
        } else {
            "every function equally often"
        }
    );
    for &v in &experiment.intensities {
        for &seed in &experiment.seeds {
            let runs: Vec<_> = summaries
                .iter()
                .filter(|s| s.intensity == v && s.seed == seed)
                .collect();
            report += &format!("\n## Intensity {v}, seed {seed}\n\n{}", table(&runs));
        }
    }
    report += &format!("\n## Ratios (averaged over seeds)\n\n{}", ratios(summaries));
    report += &format!(
        "\n## The shortest functions' tail\n\n{}",
        shortest_functions(summaries)
    );
    if let Some(rare) = rare {
        report += &format!(
            "\n## The rare function\n\n{}",
            rare_function_table(summaries, rare)
        );
    }
    report
}

/// The line a run's summary prints as it ends.
pub(super) fn progress_line(s: &BurstSummary) -> String {
    format!(
        "  {:>12} v={:<3} seed={:<3} calls={:<4} failed={} avg response {:.2} s (simulated {:.2} s), avg stretch {:.1}, last completion {:.1} s, preemptions {}",
        s.policy,
        s.intensity,
        s.seed,
        s.calls,
        s.failed,
        s.response_ms.avg / 1e3,
        s.simulated_response_ms.avg / 1e3,
        s.stretch.avg,
        s.last_completion_s,
        s.preemptions
    )
}
