//! The burst experiment run: the idle times measured once, then every scheduler, intensity and
//! seed on a fresh node, each run's calls written as it ends; then the plots, the summaries and
//! the report ([`run`]).

use super::experiment::{BurstOptions, Experiment};
use super::report;
use super::{BurstConfig, BurstRun, BurstSummary, SuiteEntry};
use super::{burst, idle_times, shut_down, start, write_csv};
use anyhow::Context;
use std::path::Path;

/// Runs the experiment `options` ask for and writes its results to `out`: each run's calls
/// (`<policy>-v<V>-s<seed>.csv`), box plots per intensity, the summaries (`summary.json`) and
/// the report (`report.md`), which it returns. `progress` gets a line as the experiment starts
/// and one per run.
pub fn run(
    options: &BurstOptions,
    out: &Path,
    mut progress: impl FnMut(&str),
) -> anyhow::Result<String> {
    let suite = options.suite()?;
    let experiment = options.experiment(&suite)?;
    progress(&format!(
        "burst: {} schedulers x {} intensities x {} seeds on {} cores, {} s windows; results in {}",
        experiment.schedulers.len(),
        experiment.intensities.len(),
        experiment.seeds.len(),
        options.cores,
        options.window_s,
        out.display()
    ));
    let runs = run_experiment(&experiment, &suite, out, |s| {
        progress(&report::progress_line(s));
    })?;
    report::write_plots(out, &runs)?;
    let summaries: Vec<_> = runs.into_iter().map(|r| r.summary).collect();
    let json = serde_json::to_string_pretty(&summaries)?;
    std::fs::write(out.join("summary.json"), json).context("writing summary.json")?;
    let rare = match options.fairness {
        true => suite.last().map(|f| f.name),
        false => None,
    };
    let report = report::markdown(options, &experiment, &summaries, rare);
    std::fs::write(out.join("report.md"), &report).context("writing report.md")?;
    Ok(report)
}

/// Runs `experiment` on `suite`, writing each run's calls to `out/<policy>-v<V>-s<seed>.csv`;
/// returns every run. Idle times are measured once, on an idle FIFO node.
fn run_experiment(
    experiment: &Experiment,
    suite: &[SuiteEntry],
    out: &Path,
    mut progress: impl FnMut(&BurstSummary),
) -> anyhow::Result<Vec<BurstRun>> {
    std::fs::create_dir_all(out)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let idle = rt.block_on(async {
        let dir = tempfile::tempdir()?;
        let config = experiment.base.clone();
        let node = start(dir.path(), &config, suite).await?;
        let idle = idle_times(&node, suite, config.idle_calls).await?;
        shut_down(node).await;
        anyhow::Ok(idle)
    })?;
    let mut runs = Vec::new();
    for &intensity in &experiment.intensities {
        for &seed in &experiment.seeds {
            for &scheduler in &experiment.schedulers {
                let config = BurstConfig {
                    scheduler,
                    intensity,
                    seed,
                    ..experiment.base.clone()
                };
                let run = rt.block_on(async {
                    let dir = tempfile::tempdir()?;
                    let node = start(dir.path(), &config, suite).await?;
                    let run = burst(node.clone(), &config, suite, &idle).await?;
                    shut_down(node).await;
                    anyhow::Ok(run)
                })?;
                write_csv(
                    &out.join(format!("{}-v{intensity}-s{seed}.csv", scheduler.name())),
                    &run.calls,
                )?;
                progress(&run.summary);
                runs.push(run);
            }
        }
    }
    Ok(runs)
}
