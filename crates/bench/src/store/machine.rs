//! The machine the experiment runs on: CPU time of processes and of the whole machine from
//! `/proc`, the load average, and a description of the machine and the moment for the report.

use super::StoreBenchConfig;
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

/// The CPU-time fields of `/proc/PID/stat`, in clock ticks.
#[derive(Debug, PartialEq)]
struct ProcTimes {
    utime: u64,
    stime: u64,
    cutime: u64,
    cstime: u64,
}

fn proc_stat_fields(path: &str) -> Option<ProcTimes> {
    parse_proc_stat(&std::fs::read_to_string(path).ok()?)
}

/// CPU time (user + system) process `pid` has used so far, in clock ticks; `None` once it is
/// gone.
pub(super) fn process_cpu_ticks(pid: u32) -> Option<u64> {
    proc_stat_fields(&format!("/proc/{pid}/stat")).map(|f| f.utime + f.stime)
}

/// Fields 14-17 of a `/proc/PID/stat` line; the command name (field 2) may hold spaces and
/// parentheses, so the fields are counted from its last `)`.
fn parse_proc_stat(line: &str) -> Option<ProcTimes> {
    let rest = &line[line.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (the state).
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some(ProcTimes {
        utime: field(14)?,
        stime: field(15)?,
        cutime: field(16)?,
        cstime: field(17)?,
    })
}

/// CPU time of this process's reaped children so far (the `benchmark` runs among them).
pub(super) fn children_cpu_ticks() -> u64 {
    proc_stat_fields("/proc/self/stat").map_or(0, |f| f.cutime + f.cstime)
}

/// CPU time every core of the machine spent busy so far (everything in `/proc/stat`'s first
/// line but idle and I/O wait), in clock ticks.
pub(super) fn machine_busy_ticks() -> u64 {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| parse_machine_busy(s.lines().next()?))
        .unwrap_or(0)
}

/// `cpu  user nice system idle iowait irq softirq steal ...` → all but idle and iowait (guest
/// time is already counted in user).
fn parse_machine_busy(line: &str) -> Option<u64> {
    let ticks: Vec<u64> = line
        .strip_prefix("cpu ")?
        .split_whitespace()
        .map(|t| t.parse().ok())
        .collect::<Option<_>>()?;
    let busy: u64 = ticks.iter().take(8).sum::<u64>() - ticks.get(3)? - ticks.get(4)?;
    Some(busy)
}

/// Linux reports `/proc` times in USER_HZ ticks, 100 per second on every architecture mote
/// runs on.
pub(super) fn ticks_to_s(ticks: u64) -> f64 {
    ticks as f64 / 100.0
}

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
        let cpuinfo = read("/proc/cpuinfo");
        let cpu = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .map_or("unknown CPU".into(), |m| m.trim().to_owned());
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
            cpu,
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
    fn reads_cpu_times_from_proc_stat() {
        let line = "1234 (a (weird) name) S 1 2 3 4 5 6 7 8 9 10 150 25 7 3 20 0 1 0";
        assert_eq!(
            parse_proc_stat(line),
            Some(ProcTimes {
                utime: 150,
                stime: 25,
                cutime: 7,
                cstime: 3
            })
        );
        assert!(proc_stat_fields("/proc/self/stat").is_some());
        assert_eq!(
            parse_machine_busy("cpu  100 5 50 1000 20 3 2 1 0 0"),
            Some(161)
        );
        assert_eq!(parse_machine_busy("intr 1 2"), None);
        assert!(machine_busy_ticks() > 0);
    }

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
