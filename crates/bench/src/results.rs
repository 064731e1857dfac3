//! Where a benchmark that writes files puts them ([`ResultsDir`]), what it hands back to the
//! command that ran it ([`Outcome`], failing as [`RunFailed`]), and the machine it ran on as
//! reports name it ([`cpu_model`], [`load_average`]).

use std::path::{Path, PathBuf};

/// The directory a benchmark writes its results to, created. A smoke run's temporary
/// directory is removed, with its contents, when this is dropped.
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
    /// `out` if given, else `docs/benchmarks/{name}`, except that a smoke run, which must never
    /// overwrite the committed results, gets a temporary directory of its own.
    pub fn create(out: Option<PathBuf>, smoke: bool, name: &str) -> Result<Self, ResultsDirError> {
        let (path, temporary) = match (out, smoke) {
            (Some(out), _) => (out, false),
            (None, false) => (PathBuf::from("docs/benchmarks").join(name), false),
            (None, true) => {
                let dir = format!("mote-bench-{name}-smoke-{}", std::process::id());
                (std::env::temp_dir().join(dir), true)
            }
        };
        // Made the owner first, so a directory created halfway is still removed.
        let dir = Self { path, temporary };
        std::fs::create_dir_all(&dir.path).map_err(|error| ResultsDirError {
            path: dir.path.clone(),
            error,
        })?;
        Ok(dir)
    }

    /// Where the results go.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the directory is removed when this is dropped.
    pub fn is_temporary(&self) -> bool {
        self.temporary
    }
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
        drop(dir);
        assert!(!path.exists());
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
