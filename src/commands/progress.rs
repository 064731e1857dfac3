//! Progress of the CLI's long commands (benchmarks, jobs, large uploads) on a terminal: a
//! spinner or a bar on stderr that redraws in place. When stderr is not a terminal (a pipe, a
//! file, CI) nothing is drawn and progress lines are dropped, so output meant for files stays
//! clean.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

/// How often a spinner redraws while nothing new arrives, so that it shows the command lives.
const TICK: Duration = Duration::from_millis(120);

/// A spinner or bar, or nothing when stderr is not a terminal.
pub struct Progress {
    bar: Option<ProgressBar>,
    /// Whether dropping it takes the bar off the terminal: the one that made it does, a
    /// [`Progress::share`] does not.
    owns: bool,
}

impl Progress {
    /// A spinner with the elapsed time and a message.
    pub fn spinner(message: &str) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new_spinner().with_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_msg}")
                    .expect("the template is valid"),
            );
            bar.set_message(message.to_owned());
            bar.enable_steady_tick(TICK);
            bar
        });
        Self { bar, owns: true }
    }

    /// A bar over `total` bytes.
    pub fn bytes(total: u64, message: &str) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(total).with_style(
                ProgressStyle::with_template(
                    "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {eta}",
                )
                .expect("the template is valid")
                .progress_chars("=> "),
            );
            bar.set_message(message.to_owned());
            bar
        });
        Self { bar, owns: true }
    }

    /// Shows `message` as the current state.
    pub fn set(&self, message: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(message.to_owned());
        }
    }

    /// Prints `line` above the spinner and makes it the current state.
    pub fn line(&self, line: &str) {
        if let Some(bar) = &self.bar {
            bar.println(line);
            bar.set_message(line.to_owned());
        }
    }

    /// Turns the bar into a spinner showing `message` (an upload done, the server at work).
    pub fn wait(&self, message: &str) {
        if let Some(bar) = &self.bar {
            bar.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_msg}")
                    .expect("the template is valid"),
            );
            bar.set_message(message.to_owned());
            bar.enable_steady_tick(TICK);
        }
    }

    /// The same bar, to be moved from elsewhere (an upload's body as it goes); it stays on
    /// the terminal until the original is dropped.
    pub fn share(&self) -> Self {
        Self {
            bar: self.bar.clone(),
            owns: false,
        }
    }

    /// Moves the bar to `position` (bytes done).
    pub fn at(&self, position: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(position);
        }
    }

    /// Takes the spinner or bar off the terminal.
    pub fn clear(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if self.owns {
            self.clear();
        }
    }
}
