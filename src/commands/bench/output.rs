//! Where a benchmark's progress, report and results go: progress lines above a spinner on a
//! terminal, the report as a table or one JSON object on stdout, and the results directory
//! ([`Results`]), named on stderr when the benchmark ends.

use super::super::progress::Progress;
use mote_bench::results::{ResultsDir, ResultsDirError};
use std::path::{Path, PathBuf};

/// Where a benchmark's progress goes, a line at a time: above a spinner on a terminal,
/// nowhere otherwise.
pub(super) fn progress(line: &str) {
    SPINNER.line(line);
}

/// The running benchmark's spinner, made on its first progress line.
static SPINNER: std::sync::LazyLock<Progress> =
    std::sync::LazyLock::new(|| Progress::spinner("starting"));

/// The command line as typed, for the report.
pub(super) fn command_line() -> String {
    std::iter::once("mote".to_owned())
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Takes the spinner off the terminal, if there is one.
pub(super) fn clear_progress() {
    if let Some(spinner) = std::sync::LazyLock::get(&SPINNER) {
        spinner.clear();
    }
}

/// Prints `report` as one JSON object, or as its `table` for humans.
pub(super) fn print_report<R: serde::Serialize>(
    report: &R,
    json: bool,
    table: impl FnOnce(&R) -> String,
) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        print!("{}", table(report));
    }
    Ok(())
}

/// A benchmark's results directory ([`ResultsDir`]) that names itself on stderr when the
/// benchmark ends, however it ends (a failed check, an error, a panic), since its files are
/// there either way.
pub(super) struct Results(ResultsDir);

impl Results {
    /// `--out` if given, else a fresh directory `kind-TIME` under the system's temp dir.
    pub(super) fn create(
        out: Option<PathBuf>,
        smoke: bool,
        kind: &str,
    ) -> Result<Self, ResultsDirError> {
        ResultsDir::create(out, smoke, kind).map(Self)
    }

    /// Where the results go.
    pub(super) fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for Results {
    fn drop(&mut self) {
        clear_progress();
        eprintln!("{}", self.0.closing_line());
    }
}
