//! The machine the experiment runs on: the load average, and a description of the machine and
//! the moment for the report.

use super::config::StoreBenchConfig;
use serde::Serialize;
use std::fmt::Write as _;
use std::process::Command;
use std::time::SystemTime;

/// The machine and the moment, for the report.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// The CPU's model name.
    pub cpu: String,
    /// Cores this process may run on.
    pub cores: usize,
    /// `uname -r`.
    pub kernel: String,
    /// Total memory, GiB.
    pub memory_gib: f64,
    /// The first line of `etcd --version`.
    pub etcd_version: String,
    /// When the experiment started (UTC).
    pub started: String,
    /// The load average (1, 5, 15 minutes) when it started.
    pub load_at_start: String,
    /// The load average when it ended.
    pub load_at_end: String,
}

/// The one-minute load average.
pub(super) fn load_one() -> f64 {
    crate::results::load_average()
        .split_whitespace()
        .next()
        .and_then(|l| l.parse().ok())
        .unwrap_or(f64::NAN)
}

impl Machine {
    /// The machine as it is now, with the version of `config`'s etcd.
    pub(super) fn now(config: &StoreBenchConfig) -> Self {
        let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
        let memory_gib = read("/proc/meminfo")
            .lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
            .map_or(f64::NAN, |kib| kib / (1024.0 * 1024.0));
        let etcd_version = Command::new(config.tool("etcd"))
            .arg("--version")
            .output()
            .ok()
            .and_then(|o| {
                let text = String::from_utf8_lossy(&o.stdout).into_owned();
                text.lines().next().map(str::to_owned)
            })
            .unwrap_or_else(|| "unknown".into());
        Self {
            cpu: crate::results::cpu_model(),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            kernel: read("/proc/sys/kernel/osrelease").trim().to_owned(),
            memory_gib,
            etcd_version,
            started: utc_minutes(SystemTime::now()),
            load_at_start: crate::results::load_average(),
            load_at_end: String::new(),
        }
    }
}

/// `time` as `YYYY-MM-DD HH:MM UTC`, or `unknown` past the year 9999.
fn utc_minutes(time: SystemTime) -> String {
    // humantime panics on a time before the epoch (a clock set wrong) and fails after 9999.
    let rfc3339 = humantime::format_rfc3339_seconds(time.max(SystemTime::UNIX_EPOCH));
    let mut text = String::new();
    if write!(text, "{rfc3339}").is_err() {
        return "unknown".into();
    }
    // RFC 3339 to the second is `YYYY-MM-DDTHH:MM:SSZ`.
    format!("{} {} UTC", &text[..10], &text[11..16])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats_utc_dates() {
        let at = |secs| utc_minutes(SystemTime::UNIX_EPOCH + Duration::from_secs(secs));
        assert_eq!(at(0), "1970-01-01 00:00 UTC");
        assert_eq!(at(951_782_400), "2000-02-29 00:00 UTC");
        assert_eq!(at(1_795_382_100), "2026-11-22 21:15 UTC");
        assert_eq!(
            utc_minutes(SystemTime::UNIX_EPOCH - Duration::from_secs(60)),
            "1970-01-01 00:00 UTC"
        );
    }
}
