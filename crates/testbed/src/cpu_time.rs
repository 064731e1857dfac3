//! CPU time read from `/proc`: what a process has used (`/proc/PID/stat`), what this process's
//! reaped children used, and how long the machine's cores have been busy (`/proc/stat`), so a
//! benchmark can say where the cores went during a measurement.
//!
//! `/proc` counts clock ticks, whose length is read from `sysconf(_SC_CLK_TCK)` once; the
//! figures come back as [`Duration`]s.

use std::sync::OnceLock;
use std::time::Duration;

/// The CPU-time fields of a `/proc/PID/stat` line (fields 14 to 17), in clock ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcessTicks {
    /// User time.
    pub utime: u64,
    /// System time.
    pub stime: u64,
    /// User time of the children it has waited for.
    pub cutime: u64,
    /// System time of the children it has waited for.
    pub cstime: u64,
}

impl ProcessTicks {
    /// Parses the text of `/proc/PID/stat`. The command name (field 2, in parentheses) may hold
    /// spaces and parentheses of its own, so the fields are counted from its last `)`.
    pub fn parse(stat: &str) -> Option<Self> {
        let after_name = &stat[stat.rfind(')')? + 1..];
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        // `after_name` starts at field 3 (the state).
        let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
        Some(Self {
            utime: field(14)?,
            stime: field(15)?,
            cutime: field(16)?,
            cstime: field(17)?,
        })
    }

    /// Process `pid`'s; `None` once it is gone.
    pub fn of(pid: u32) -> Option<Self> {
        Self::read(&format!("/proc/{pid}/stat"))
    }

    /// This process's.
    pub fn own() -> Option<Self> {
        Self::read("/proc/self/stat")
    }

    fn read(path: &str) -> Option<Self> {
        Self::parse(&std::fs::read_to_string(path).ok()?)
    }
}

/// User plus system CPU time process `pid` has used so far; `None` once it is gone.
pub fn process_cpu(pid: u32) -> Option<Duration> {
    ProcessTicks::of(pid).and_then(|t| ticks(t.utime + t.stime))
}

/// User plus system CPU time of the children this process has waited for.
pub fn reaped_children_cpu() -> Option<Duration> {
    ProcessTicks::own().and_then(|t| ticks(t.cutime + t.cstime))
}

/// How long the machine's cores have been busy so far, summed over every core.
pub fn machine_busy() -> Option<Duration> {
    ticks(busy_ticks(&std::fs::read_to_string("/proc/stat").ok()?)?)
}

/// The busy ticks of `/proc/stat`'s first line (`cpu  user nice system idle iowait irq softirq
/// steal ...`): everything but idle and iowait (guest time is already counted in user). Steal
/// counts as busy: on a shared virtual machine it is time another tenant took from us.
pub fn busy_ticks(stat: &str) -> Option<u64> {
    let line = stat.lines().next()?;
    let mut fields = line.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let ticks: Vec<u64> = fields
        .take(8)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    let [user, nice, system, _idle, _iowait, irq, softirq, steal] = ticks[..] else {
        return None;
    };
    Some(user + nice + system + irq + softirq + steal)
}

/// `n` clock ticks; `None` if the kernel would not say how long a tick is.
fn ticks(n: u64) -> Option<Duration> {
    Some(duration(n, clock_ticks_per_second()?))
}

/// Clock ticks per second (USER_HZ), as `sysconf(_SC_CLK_TCK)` gives it.
pub fn clock_ticks_per_second() -> Option<u64> {
    static PER_SECOND: OnceLock<Option<u64>> = OnceLock::new();
    *PER_SECOND.get_or_init(|| {
        // SAFETY: sysconf takes a constant and reads no memory of ours.
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        u64::try_from(per_second).ok().filter(|&t| t > 0)
    })
}

/// `n` ticks of `per_second` a second.
fn duration(n: u64, per_second: u64) -> Duration {
    let nanos = u128::from(n % per_second) * 1_000_000_000 / u128::from(per_second);
    Duration::from_secs(n / per_second) + Duration::from_nanos(nanos as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn cpu_time_is_read_past_a_command_name_with_spaces_and_parentheses() {
        let stat = "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 \
                    250 50 7 3 20 0 9 0 12345 1000000 500";
        let expected = ProcessTicks {
            utime: 250,
            stime: 50,
            cutime: 7,
            cstime: 3,
        };
        assert_eq!(ProcessTicks::parse(stat), Some(expected));
        assert_eq!(ProcessTicks::parse("4242 (short"), None);
        assert_eq!(ProcessTicks::parse("4242 (name) S 1 2 3"), None);
        assert_eq!(ProcessTicks::parse("garbage"), None);
    }

    #[test]
    fn this_process_and_the_machine_are_read() {
        assert!(ProcessTicks::own().is_some());
        assert!(process_cpu(std::process::id()).is_some());
        assert!(reaped_children_cpu().is_some());
        assert!(machine_busy().is_some_and(|busy| busy > Duration::ZERO));
        assert_eq!(process_cpu(u32::MAX), None);
    }

    #[test]
    fn the_machine_is_busy_for_all_but_its_idle_and_iowait_ticks() {
        let stat = "cpu  100 5 50 1000 20 3 2 7 0 0\ncpu0 50 2 25 500 10 1 1 3 0 0\n";
        assert_eq!(busy_ticks(stat), Some(100 + 5 + 50 + 3 + 2 + 7));
        assert_eq!(busy_ticks("cpu0 1 2 3 4 5 6 7 8"), None);
        assert_eq!(busy_ticks("cpu  1 2 3"), None);
        assert_eq!(busy_ticks("intr 1 2"), None);
    }

    #[test]
    fn ticks_last_what_the_kernel_says_a_tick_lasts() {
        assert_eq!(duration(250, 100), Duration::from_millis(2500));
        assert_eq!(duration(250, 250), Duration::from_secs(1));
        assert_eq!(duration(1, 300), Duration::from_nanos(3_333_333));
        let getconf = std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .expect("running getconf CLK_TCK");
        let per_second: u64 = String::from_utf8_lossy(&getconf.stdout)
            .trim()
            .parse()
            .unwrap();
        assert_eq!(clock_ticks_per_second(), Some(per_second));
    }

    proptest! {
        /// Whatever the command name (spaces, parentheses, newlines, nothing at all), the
        /// fields after it come out as they were written.
        #[test]
        fn any_command_name_parses_to_the_right_fields(
            pid in 1u32..=4_194_304,
            name in any::<String>(),
            state in prop::sample::select(vec!['R', 'S', 'D', 'Z', 'T', 't', 'X', 'I']),
            middle in prop::collection::vec(-1i64..=i64::MAX, 10),
            times in any::<[u64; 4]>(),
            rest in prop::collection::vec(any::<u64>(), 0..36),
        ) {
            let join = |v: &[String]| v.join(" ");
            let middle: Vec<String> = middle.iter().map(i64::to_string).collect();
            let times_text: Vec<String> = times.iter().map(u64::to_string).collect();
            let rest: Vec<String> = rest.iter().map(u64::to_string).collect();
            let stat = format!(
                "{pid} ({name}) {state} {} {} {}\n",
                join(&middle),
                join(&times_text),
                join(&rest)
            );
            let [utime, stime, cutime, cstime] = times;
            prop_assert_eq!(
                ProcessTicks::parse(&stat),
                Some(ProcessTicks { utime, stime, cutime, cstime })
            );
        }
    }
}
