//! Servers started as child processes that print where they serve once they do: `mote up`,
//! `mote store`, or any program that announces its address on a line of its output.
//!
//! [`Launch`] says what to start, which output carries the announcement and what comes before
//! the address on that line, where the process's other output goes (a log file, or nowhere),
//! and on which CPU it runs; [`Launch::start`] starts it and waits for the line, and hands back
//! a [`Served`]: the process, killed when dropped, and its URL.

use crate::cpu::pin_command;
use crate::process::KilledOnDrop;
use std::ffi::OsStr;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

/// Which of a process's outputs carries the line saying where it serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Announces {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// A server to start.
#[derive(Debug)]
pub struct Launch {
    command: Command,
    announces: Announces,
    prefix: String,
    log: Option<PathBuf>,
    cpu: Option<usize>,
}

/// A started server: its process, killed and reaped when this is dropped, and where it serves.
#[derive(Debug)]
pub struct Served {
    process: KilledOnDrop,
    url: String,
    log: Option<PathBuf>,
}

/// Why a [`Launch`] did not end in a [`Served`]. Each message carries its cause.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The log file could not be created or opened.
    #[error("cannot write the log {}: {error}", .path.display())]
    Log {
        /// The log file.
        path: PathBuf,
        /// Why.
        error: io::Error,
    },
    /// The process could not be started (or pinned to its CPU).
    #[error("cannot start {command}: {error}")]
    Spawn {
        /// The command, with its arguments.
        command: String,
        /// Why.
        error: io::Error,
    },
    /// It ended, or closed its output, before it said where it serves.
    #[error("{command} exited before it printed `{prefix}` and its address; it printed: {output}")]
    Exited {
        /// The command, with its arguments.
        command: String,
        /// What the announcement was looked for after.
        prefix: String,
        /// What it printed on the announcing output, and the end of its log.
        output: String,
    },
    /// Its output could not be read.
    #[error("cannot read what {command} printed: {error}")]
    Read {
        /// The command, with its arguments.
        command: String,
        /// Why.
        error: io::Error,
    },
}

impl Launch {
    /// Starts `command` once [`Launch::start`] is called, and takes as its URL the first word
    /// (up to a space or a comma, a trailing `/` dropped) after `prefix` on a line of
    /// `announces`.
    pub fn new(command: Command, announces: Announces, prefix: impl Into<String>) -> Self {
        Self {
            command,
            announces,
            prefix: prefix.into(),
            log: None,
            cpu: None,
        }
    }

    /// `mote up` from the binary `mote`, with its data in `data`, its API and its store on free
    /// loopback ports (`127.0.0.1:0`) and warnings only in its log; it announces `mote is up on
    /// URL`. The node's name, its store, its cores and the rest are added with
    /// [`Launch::args`].
    pub fn mote_up(mote: &Path, data: &Path) -> Self {
        let mut command = Command::new(mote);
        command
            .args([
                "up",
                "--listen",
                "127.0.0.1:0",
                "--store-listen",
                "127.0.0.1:0",
            ])
            .args(["--log", "warn", "--data"])
            .arg(data);
        Self::new(command, Announces::Stdout, "mote is up on ")
    }

    /// `mote store` replica `name` from the binary `mote`, in memory, its client and peer APIs
    /// on free loopback ports; its URL is its etcd v3 API's.
    pub fn mote_store(mote: &Path, name: &str) -> Self {
        let mut command = Command::new(mote);
        command
            .args(["store", "--name", name, "--log", "warn"])
            .args(["--listen", "127.0.0.1:0", "--peer-listen", "127.0.0.1:0"]);
        Self::new(command, Announces::Stdout, "etcd v3 API on ")
    }

    /// Adds `args` to the command.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.command.args(args);
        self
    }

    /// Keeps everything the process prints but its announcement in `path` (created afresh);
    /// without a log it goes nowhere.
    pub fn log(mut self, path: impl Into<PathBuf>) -> Self {
        self.log = Some(path.into());
        self
    }

    /// Runs the process on `cpu` alone, `None` on every CPU (see [`pin_command`]).
    pub fn pin(mut self, cpu: Option<usize>) -> Self {
        self.cpu = cpu;
        self
    }

    /// Starts the process and waits until it says where it serves. The rest of its announcing
    /// output is read on a thread of its own (into the log), so it never blocks on a full pipe.
    pub fn start(self) -> Result<Served, LaunchError> {
        let Self {
            mut command,
            announces,
            prefix,
            log,
            cpu,
        } = self;
        let name = format!("{command:?}");
        let spawn_error = |error| LaunchError::Spawn {
            command: name.clone(),
            error,
        };
        if let Some(cpu) = cpu {
            pin_command(&mut command, cpu).map_err(spawn_error)?;
        }
        // One file description, appended to by the process and by the thread that copies its
        // announcing output, so neither writes over the other.
        let mut log_file = match &log {
            Some(path) => Some(open_log(path).map_err(|error| LaunchError::Log {
                path: path.clone(),
                error,
            })?),
            None => None,
        };
        let quiet = match &log_file {
            Some(file) => Stdio::from(file.try_clone().map_err(spawn_error)?),
            None => Stdio::null(),
        };
        command.stdin(Stdio::null());
        match announces {
            Announces::Stdout => command.stdout(Stdio::piped()).stderr(quiet),
            Announces::Stderr => command.stderr(Stdio::piped()).stdout(quiet),
        };
        let mut child = command.spawn().map_err(spawn_error)?;
        let output: Box<dyn Read + Send> = match announces {
            Announces::Stdout => Box::new(child.stdout.take().expect("piped")),
            Announces::Stderr => Box::new(child.stderr.take().expect("piped")),
        };
        // Owned before anything is read, so a process that never announces is killed.
        let process = KilledOnDrop::new(child);
        let mut lines = BufReader::new(output).lines();
        let mut seen = Vec::new();
        let url = loop {
            let Some(line) = lines.next() else {
                if let Some(log) = &log {
                    seen.push(last_lines(log, 5));
                }
                return Err(LaunchError::Exited {
                    command: name,
                    prefix,
                    output: seen.join(" | "),
                });
            };
            let line = line.map_err(|error| LaunchError::Read {
                command: name.clone(),
                error,
            })?;
            if let Some(url) = announced_url(&line, &prefix) {
                break url;
            }
            keep(&mut log_file, &line);
            seen.push(line);
        };
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                keep(&mut log_file, &line);
            }
        });
        Ok(Served { process, url, log })
    }
}

/// Creates `path` afresh, for appending.
fn open_log(path: &Path) -> io::Result<std::fs::File> {
    std::fs::File::create(path)?;
    std::fs::OpenOptions::new().append(true).open(path)
}

/// Appends `line` to the log, if there is one.
fn keep(log: &mut Option<std::fs::File>, line: &str) {
    if let Some(file) = log {
        // A log that cannot be written loses lines, not the server.
        let _ = writeln!(file, "{line}");
    }
}

/// The URL announced on `line` after `prefix`, if it is there.
fn announced_url(line: &str, prefix: &str) -> Option<String> {
    let (_, rest) = line.split_once(prefix)?;
    let url = rest.split([' ', ',']).next()?.trim_end_matches('/');
    (!url.is_empty()).then(|| url.to_owned())
}

impl Served {
    /// Where it serves, such as `http://127.0.0.1:40123` (no trailing `/`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.process.id()
    }

    /// How it ended, if it has (without waiting).
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.process.try_wait()
    }

    /// The last `n` lines of its log, for an error message.
    pub fn log_tail(&self, n: usize) -> String {
        match &self.log {
            Some(log) => last_lines(log, n),
            None => "(no log kept)".into(),
        }
    }
}

/// The last `n` non-empty lines of a log file, joined with ` | `, for error messages.
pub fn last_lines(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(n)..].join(" | ");
    if tail.is_empty() {
        format!("(nothing in {})", path.display())
    } else {
        tail
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn sh(script: &str) -> Command {
        let mut command = Command::new("sh");
        command.args(["-c", script]);
        command
    }

    /// Waits up to 10 s for `path` to hold `text`.
    fn wait_for(path: &Path, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let log = std::fs::read_to_string(path).unwrap_or_default();
            if log.contains(text) || Instant::now() > deadline {
                return log;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn the_url_is_the_word_after_the_prefix() {
        let up = "mote is up on http://127.0.0.1:4000 with 2 executor cores, policy fc";
        assert_eq!(
            announced_url(up, "mote is up on ").as_deref(),
            Some("http://127.0.0.1:4000")
        );
        let store = "mote store b is up: etcd v3 API on http://127.0.0.1:2379, peer API on http://127.0.0.1:2380";
        assert_eq!(
            announced_url(store, "etcd v3 API on ").as_deref(),
            Some("http://127.0.0.1:2379")
        );
        let wasmtime = "Serving HTTP on http://127.0.0.1:8080/";
        assert_eq!(
            announced_url(wasmtime, "Serving HTTP on ").as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(announced_url("mote is up on ", "mote is up on "), None);
        assert_eq!(announced_url("starting", "mote is up on "), None);
    }

    #[test]
    fn a_server_is_served_at_its_announced_url_and_its_other_output_is_logged() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("server.log");
        let script = "echo starting; echo 'to stderr' >&2; echo 'up on http://127.0.0.1:9/ now'; \
                      echo after; exec sleep 600";
        let mut served = Launch::new(sh(script), Announces::Stdout, "up on ")
            .log(&log)
            .start()
            .unwrap();
        assert_eq!(served.url(), "http://127.0.0.1:9");
        let logged = wait_for(&log, "after");
        for line in ["starting", "to stderr", "after"] {
            assert!(logged.contains(line), "{line} is not in {logged}");
        }
        assert!(!logged.contains("up on"), "{logged}");
        assert!(
            served.log_tail(1).contains("after"),
            "{}",
            served.log_tail(1)
        );
        assert_eq!(served.try_wait().unwrap(), None);
        let pid = served.pid();
        drop(served);
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "{pid} lives on"
        );
    }

    #[test]
    fn an_announcement_on_stderr_is_found_there() {
        let script =
            "echo 'to stdout'; echo 'Serving HTTP on http://127.0.0.1:7/' >&2; exec sleep 600";
        let served = Launch::new(sh(script), Announces::Stderr, "Serving HTTP on ")
            .start()
            .unwrap();
        assert_eq!(served.url(), "http://127.0.0.1:7");
        assert_eq!(served.log_tail(5), "(no log kept)");
    }

    #[test]
    fn a_process_that_ends_without_announcing_says_what_it_printed() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("server.log");
        let script = "echo 'bad flag'; echo 'the reason' >&2; exit 2";
        let err = Launch::new(sh(script), Announces::Stdout, "up on ")
            .log(&log)
            .start()
            .unwrap_err();
        assert!(matches!(err, LaunchError::Exited { .. }), "{err:?}");
        let message = err.to_string();
        assert!(message.contains("bad flag"), "{message}");
        assert!(message.contains("the reason"), "{message}");
        assert!(message.contains("`up on `"), "{message}");
    }

    #[test]
    fn a_missing_program_is_named() {
        let err = Launch::new(
            Command::new("/nonexistent/mote"),
            Announces::Stdout,
            "up on ",
        )
        .start()
        .unwrap_err();
        assert!(matches!(err, LaunchError::Spawn { .. }), "{err:?}");
        assert!(err.to_string().contains("/nonexistent/mote"), "{err}");
    }

    #[test]
    fn a_pinned_server_runs_on_its_cpu() {
        let script = "echo 'up on http://127.0.0.1:5'; exec sleep 600";
        let served = Launch::new(sh(script), Announces::Stdout, "up on ")
            .pin(Some(0))
            .start()
            .unwrap();
        let status = std::fs::read_to_string(format!("/proc/{}/status", served.pid())).unwrap();
        assert!(
            status.lines().any(|l| l == "Cpus_allowed_list:\t0"),
            "{status}"
        );
    }

    /// A stand-in for the `mote` binary that announces itself with the arguments it was given.
    fn fake_mote(dir: &Path, announcement: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("mote");
        let script = format!("#!/bin/sh\necho \"{announcement} args: $*\"\nexec sleep 600\n");
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn mote_up_and_mote_store_listen_on_loopback_and_find_their_urls() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("up.log");
        let mote = fake_mote(
            dir.path(),
            "mote is up on http://127.0.0.1:1 with 1 executor core,",
        );
        let up = Launch::mote_up(&mote, &dir.path().join("data"))
            .args(["--node", "n1", "--cores", "1"])
            .log(&log)
            .start()
            .unwrap();
        assert_eq!(up.url(), "http://127.0.0.1:1");
        let command = Launch::mote_up(&mote, Path::new("/d")).args(["--node", "n1"]);
        let args: Vec<_> = command.command.get_args().collect();
        assert_eq!(
            args,
            [
                "up",
                "--listen",
                "127.0.0.1:0",
                "--store-listen",
                "127.0.0.1:0",
                "--log",
                "warn",
                "--data",
                "/d",
                "--node",
                "n1"
            ]
        );

        let mote = fake_mote(
            dir.path(),
            "mote store s is up: etcd v3 API on http://127.0.0.1:2, peer API on http://127.0.0.1:3",
        );
        let store = Launch::mote_store(&mote, "s").start().unwrap();
        assert_eq!(store.url(), "http://127.0.0.1:2");
    }
}
