//! Where a benchmark that writes files puts them ([`ResultsDir`]: `--out`, or a fresh directory
//! outside the repository), what it hands back to the
//! command that ran it ([`Outcome`], failing as [`RunFailed`]), and the machine it ran on as
//! reports name it ([`cpu_model`], [`load_average`]).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The directory a benchmark writes its results to, created: the one `--out` names, or else a
/// fresh one under the system's temp dir, never in the repository (whose `docs/` holds the
/// committed results, written only when `--out` says so). A smoke run's own directory is
/// removed, with its contents, when this is dropped.
#[derive(Debug)]
pub struct ResultsDir {
    path: PathBuf,
    temporary: bool,
}

/// Why a [`ResultsDir`] could not be created.
#[derive(Debug, thiserror::Error)]
#[error("cannot create the results directory {}: {error}; pass --out DIR to write them elsewhere", .path.display())]
pub struct ResultsDirError {
    /// The directory.
    pub path: PathBuf,
    /// What creating it failed with.
    pub error: std::io::Error,
}

impl ResultsDir {
    /// `out` if given; else a fresh directory `{kind}-{UTC time}` (`{kind}-smoke-{UTC time}` for
    /// a smoke run, which is removed when this is dropped) under [`ResultsDir::default_parent`].
    pub fn create(out: Option<PathBuf>, smoke: bool, kind: &str) -> Result<Self, ResultsDirError> {
        let Some(out) = out else {
            let name = match smoke {
                true => format!("{kind}-smoke-{}", utc_stamp(SystemTime::now())),
                false => format!("{kind}-{}", utc_stamp(SystemTime::now())),
            };
            let parent = Self::default_parent();
            let path = fresh_dir(&parent, &name).map_err(|error| ResultsDirError {
                path: parent.join(&name),
                error,
            })?;
            return Ok(Self {
                path,
                temporary: smoke,
            });
        };
        std::fs::create_dir_all(&out).map_err(|error| ResultsDirError {
            path: out.clone(),
            error,
        })?;
        Ok(Self {
            path: out,
            temporary: false,
        })
    }

    /// Where results go without `--out`: `mote-bench` in the system's temp dir.
    pub fn default_parent() -> PathBuf {
        std::env::temp_dir().join("mote-bench")
    }

    /// Where the results go.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the directory is removed when this is dropped.
    pub fn is_temporary(&self) -> bool {
        self.temporary
    }

    /// The line to print once the benchmark has ended, so the user knows where to look.
    pub fn closing_line(&self) -> String {
        match self.temporary {
            true => format!(
                "the smoke run's files were in {}, removed at exit; pass --out DIR to keep them",
                self.path.display()
            ),
            false => format!("results in {}", self.path.display()),
        }
    }
}

/// Creates `parent/name`, or `parent/name-2`, `-3`... if it exists already (two runs in the same
/// second): a directory no earlier run wrote to.
fn fresh_dir(parent: &Path, name: &str) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(parent)?;
    for n in 1u32.. {
        let path = match n {
            1 => parent.join(name),
            n => parent.join(format!("{name}-{n}")),
        };
        match std::fs::create_dir(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    unreachable!("a u32's worth of directories of the same second")
}

/// `time` as `20261126T093000Z` (UTC, to the second): a directory name that sorts by time.
fn utc_stamp(time: SystemTime) -> String {
    // humantime panics on a time before the epoch (a clock set wrong).
    let rfc3339 = humantime::format_rfc3339_seconds(time.max(SystemTime::UNIX_EPOCH));
    rfc3339.to_string().replace(['-', ':'], "")
}

impl Drop for ResultsDir {
    fn drop(&mut self) {
        if self.temporary {
            // Nothing to tell: a smoke run's files are thrown away either way.
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// What a benchmark that judges its own results hands back once it has written them.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The report in Markdown, as written to `report.md`.
    pub report: String,
    /// Why the run as a whole failed though its results were written (a measurement that
    /// failed, an output that did not validate); `None` if it did not.
    pub failure: Option<String>,
}

/// A benchmark run that wrote its results but failed as a whole: the message says what failed.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("{0}")]
pub struct RunFailed(pub String);

impl Outcome {
    /// What failed, as an error, if anything did; to be called once the report is shown.
    pub fn check(self) -> Result<(), RunFailed> {
        match self.failure {
            Some(failure) => Err(RunFailed(failure)),
            None => Ok(()),
        }
    }
}

/// Writes a report to `out`: all of it as `results.json`, its table for humans as `report.md`.
pub fn write_report<R: serde::Serialize>(
    out: &Path,
    report: &R,
    table: impl FnOnce(&R) -> String,
) -> std::io::Result<()> {
    let json = serde_json::to_string_pretty(report).map_err(std::io::Error::other)?;
    std::fs::write(out.join("results.json"), json + "\n")?;
    std::fs::write(out.join("report.md"), table(report))
}

/// The 1, 5 and 15-minute load averages, as `/proc/loadavg` gives them.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// The CPU's model name, from `/proc/cpuinfo`.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_smoke_run_without_out_writes_to_a_temporary_directory_removed_on_drop() {
        let dir = ResultsDir::create(None, true, "test").unwrap();
        assert!(dir.is_temporary());
        assert!(dir.path().starts_with(std::env::temp_dir()), "{dir:?}");
        std::fs::write(dir.path().join("report.md"), "x").unwrap();
        let path = dir.path().to_owned();
        assert!(
            dir.closing_line().contains("removed at exit"),
            "{}",
            dir.closing_line()
        );
        drop(dir);
        assert!(!path.exists());
    }

    /// The default must never point into the repository (whose `docs/benchmarks` holds the
    /// committed results), wherever the command is run from.
    #[test]
    fn without_out_results_go_to_a_fresh_directory_outside_the_repository() {
        // The workspace root: this crate is `crates/bench` in it.
        let repository = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .canonicalize()
            .unwrap();
        assert!(
            repository.join("docs/benchmarks").is_dir(),
            "{repository:?}"
        );
        let first = ResultsDir::create(None, false, "test").unwrap();
        let second = ResultsDir::create(None, false, "test").unwrap();
        for dir in [&first, &second] {
            let path = dir.path().canonicalize().unwrap();
            assert!(path.is_dir() && !dir.is_temporary(), "{dir:?}");
            assert!(
                !path.starts_with(&repository),
                "{path:?} is inside {repository:?}"
            );
            assert!(
                dir.path().starts_with(ResultsDir::default_parent()),
                "{dir:?}"
            );
            let name = dir.path().file_name().unwrap().to_str().unwrap();
            assert!(name.starts_with("test-2"), "{name}");
            assert_eq!(
                dir.closing_line(),
                format!("results in {}", dir.path().display())
            );
        }
        assert_ne!(
            first.path(),
            second.path(),
            "each run gets its own directory"
        );
        for dir in [first, second] {
            let path = dir.path().to_owned();
            drop(dir);
            assert!(path.is_dir(), "kept after the run: {path:?}");
            std::fs::remove_dir(&path).unwrap();
        }
    }

    #[test]
    fn utc_stamps_sort_by_time_and_hold_no_colon() {
        use std::time::Duration;
        let at = |secs| utc_stamp(SystemTime::UNIX_EPOCH + Duration::from_secs(secs));
        assert_eq!(at(0), "19700101T000000Z");
        assert_eq!(at(1_795_382_100), "20261122T211500Z");
        assert!(at(1_795_382_100) < at(1_795_382_101));
    }

    #[test]
    fn out_is_kept_even_for_a_smoke_run() {
        let parent = tempfile::tempdir().unwrap();
        let out = parent.path().join("a/b");
        let dir = ResultsDir::create(Some(out.clone()), true, "test").unwrap();
        assert!(!dir.is_temporary());
        drop(dir);
        assert!(out.is_dir());
    }

    #[test]
    fn an_outcome_with_a_failure_checks_as_that_error() {
        let ok = Outcome {
            report: "r".into(),
            failure: None,
        };
        assert_eq!(ok.check(), Ok(()));
        let failed = Outcome {
            report: "r".into(),
            failure: Some("1 measurement(s) failed".into()),
        };
        assert_eq!(
            failed.check().unwrap_err().to_string(),
            "1 measurement(s) failed"
        );
    }

    #[test]
    fn a_directory_that_cannot_be_created_is_named_with_the_fix() {
        let parent = tempfile::tempdir().unwrap();
        let file = parent.path().join("file");
        std::fs::write(&file, "").unwrap();
        let err = ResultsDir::create(Some(file.join("out")), false, "test").unwrap_err();
        let message = err.to_string();
        assert!(message.contains("file/out"), "{message}");
        assert!(message.contains("--out"), "{message}");
    }
}
