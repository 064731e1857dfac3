//! The sort as `mote bench sort` runs it: the sizes (a smoke run's are fixed), the scheduling
//! modes, the S3 server (a remote one, or s3s-fs started on loopback for the run), and the
//! files it writes: every run (`runs.json`), ECDF plots and the report (`report.md`).

use super::{SortConfig, measure, report};
use crate::results::Outcome;
use mote_node::MicrotaskMode;
use mote_objects::{ObjectsConfig, S3Endpoint};
use mote_sched::SplitMode;
use mote_testbed::LocalS3;
use std::path::{Path, PathBuf};

/// What `mote bench sort` was asked for.
#[derive(Clone, Debug)]
pub struct SortOptions {
    /// Data to sort, in GB (10^9 bytes) of 100-byte records.
    pub size_gb: f64,
    /// Input parts: stage 1's calls.
    pub parts: usize,
    /// Categories: stage 2's calls.
    pub categories: usize,
    /// Repetitions of each mode.
    pub reps: usize,
    /// The modes to run, alternating within each repetition ([`modes`]).
    pub modes: Vec<MicrotaskMode>,
    /// Executor cores.
    pub cores: usize,
    /// The S3 server the objects live in.
    pub objects: ObjectServer,
    /// The bucket; on a remote server it must exist.
    pub bucket: String,
    /// Memory limit of each call, MiB.
    pub memory_mb: u32,
    /// A short run of every part instead (2 MB, 4 parts and categories, one repetition of each
    /// mode), for the test command; its figures are not the benchmark's.
    pub smoke: bool,
}

/// Where the sort's objects live.
#[derive(Clone, Debug)]
pub enum ObjectServer {
    /// An S3 server that is already running (`scripts/remote-store` starts one behind an
    /// emulated link).
    Remote(S3Endpoint),
    /// This s3s-fs binary, started on loopback for the run.
    LocalS3(PathBuf),
}

/// The modes `--microtasks` values name (`on`, or `off` for task-based), the microtask-based
/// ones with `split`; both, microtasks first, if none is named.
pub fn modes(names: &[String], split: SplitMode) -> Vec<MicrotaskMode> {
    let mode = |name: &str| match name {
        "off" => MicrotaskMode::Off,
        _ => MicrotaskMode::On(split),
    };
    match names.is_empty() {
        true => vec![mode("on"), mode("off")],
        false => names.iter().map(|n| mode(n)).collect(),
    }
}

/// Runs the sort `options` ask for, as `command`, and writes its results to `out`: every run
/// (`runs.json`), and the report (`report.md`), which with both modes holds the floors and the
/// ECDF plots it writes beside it. `progress` gets a line as the sort starts and one per run.
/// The outcome fails if an output did not validate.
pub fn run(
    options: &SortOptions,
    out: &Path,
    command: &str,
    mut progress: impl FnMut(&str),
) -> anyhow::Result<Outcome> {
    let (size_gb, parts, categories, reps) = match options.smoke {
        true => (0.002, 4, 4, 1),
        false => (
            options.size_gb,
            options.parts,
            options.categories,
            options.reps,
        ),
    };
    anyhow::ensure!(size_gb > 0.0, "--size must be positive");
    anyhow::ensure!(
        parts > 0 && categories > 0 && reps > 0,
        "--parts, --categories and --reps must be at least 1"
    );
    // Held until the end: the local server stops when this is dropped.
    let (endpoint, _local) = match &options.objects {
        ObjectServer::Remote(endpoint) => (endpoint.clone(), None),
        ObjectServer::LocalS3(s3s_fs) => {
            let local = LocalS3::start(s3s_fs, &options.bucket)?;
            let endpoint = S3Endpoint {
                url: local.url().to_owned(),
                region: LocalS3::REGION.into(),
                access_key: LocalS3::ACCESS_KEY.into(),
                secret_key: LocalS3::SECRET_KEY.into(),
            };
            (endpoint, Some(local))
        }
    };
    let config = SortConfig {
        size_bytes: (size_gb * 1e9) as u64,
        parts,
        categories,
        cores: options.cores,
        objects: ObjectsConfig::S3(endpoint.clone()),
        bucket: options.bucket.clone(),
        memory_mb: options.memory_mb,
    };
    let names: Vec<&str> = options.modes.iter().map(|m| m.as_str()).collect();
    progress(&format!(
        "sort: {size_gb} GB in {parts} parts and {categories} categories on {} cores, {reps} rep(s) of {names:?}, objects at {}",
        config.cores, endpoint.url
    ));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let runs = rt.block_on(measure(&config, &options.modes, reps, |run| {
        progress(&report::progress_line(run));
    }))?;
    std::fs::write(out.join("runs.json"), serde_json::to_string_pretty(&runs)?)?;
    let mut markdown = report::heading(command, &config, size_gb, &endpoint.url);
    if options.modes.len() == 2 {
        markdown += &report::floors(&runs);
        for png in report::write_plots(out, &runs)? {
            let file = png.file_name().unwrap_or_default().to_string_lossy();
            markdown += &format!("\n![{file}]({file})\n");
        }
    }
    std::fs::write(out.join("report.md"), &markdown)?;
    let failure = match runs.iter().all(|r| r.valid) {
        true => None,
        false => Some("a sorted output did not validate (see above)".to_owned()),
    };
    Ok(Outcome {
        report: markdown,
        failure,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_modes_unless_some_are_named() {
        let split = SplitMode::Dynamic;
        assert_eq!(
            modes(&[], split),
            [MicrotaskMode::On(split), MicrotaskMode::Off]
        );
        assert_eq!(modes(&["off".into()], split), [MicrotaskMode::Off]);
    }
}
