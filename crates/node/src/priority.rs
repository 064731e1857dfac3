//! Threads that give way to calls. The node's call executors run at normal priority; its
//! object I/O threads (microtasks) run lower, so that a call's executor that wakes gets its
//! core at once from the kernel, and they fill the time calls leave. A job's executor threads
//! run at the [`JobShare`] the operator sets: how much of a core a job keeps while calls want
//! it: the kernel's fair scheduler weighs a thread at nice `n` as `1024 / 1.25^n`
//! against 1024 for a call's executor at nice 0, so the share picks the nice value; a share of
//! 0 puts job threads in `SCHED_IDLE`, where they run only on cores nothing else wants.

use std::io;

/// The most a job may keep of a contended core, in percent: an unprivileged process can lower
/// a thread's priority, never raise it above its calls'.
pub const MAX_JOB_SHARE: u8 = 50;

/// How much of a core both want a job's executor thread gets against a call's executor, in
/// percent: 0 to [`MAX_JOB_SHARE`]. On an idle core a job runs at full speed whatever its share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobShare(u8);

/// A share out of range.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "a job share of {0}% is out of range: give 0 to {MAX_JOB_SHARE} (0: jobs only use idle cores)"
)]
pub struct ShareOutOfRange(pub u8);

impl Default for JobShare {
    /// The most, [`MAX_JOB_SHARE`]: nice 0, as any thread of the node. Smaller shares trade a
    /// job's progress for calls' latency, measured with `mote bench jobs --sharing`: nice 10 (a
    /// share of 10) still left a short call's p99 beside a job at 7.4 times its p99 alone, since
    /// the kernel lets a running thread finish its slice first; `SCHED_IDLE` (0) kept it within
    /// 3 times, but a job then gets nothing on a core another process keeps busy, and its tasks
    /// run out their wall-clock budgets (the slowed-worker test, three busy loops on a worker's
    /// core, failed 3 runs of 3). So 0 is for nodes given to mote alone.
    fn default() -> Self {
        Self(MAX_JOB_SHARE)
    }
}

impl JobShare {
    /// `percent` of a contended core.
    pub fn new(percent: u8) -> Result<Self, ShareOutOfRange> {
        match percent <= MAX_JOB_SHARE {
            true => Ok(Self(percent)),
            false => Err(ShareOutOfRange(percent)),
        }
    }

    /// The share, in percent.
    pub fn percent(self) -> u8 {
        self.0
    }

    /// The nice value whose weight gives this share against nice 0, or none for `SCHED_IDLE`.
    pub fn nice(self) -> Option<i32> {
        if self.0 == 0 {
            return None;
        }
        let share = f64::from(self.0) / 100.0;
        let weight = 1024.0 * share / (1.0 - share);
        let nice = ((1024.0 / weight).ln() / 1.25f64.ln()).round();
        Some(nice.clamp(0.0, 19.0) as i32)
    }

    /// Puts the calling thread at this share: its nice value, or `SCHED_IDLE` for 0.
    pub fn apply_to_this_thread(self) -> io::Result<()> {
        match self.nice() {
            Some(nice) => set_this_thread_nice(nice),
            None => {
                let param = libc::sched_param { sched_priority: 0 };
                // SAFETY: sched_setscheduler reads `param`, which lives across the call; pid 0
                // is the calling thread.
                let failed = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0;
                match failed {
                    true => Err(io::Error::last_os_error()),
                    false => Ok(()),
                }
            }
        }
    }
}

/// Sets the calling thread's nice value (on Linux, nice is per thread).
pub(crate) fn set_this_thread_nice(nice: i32) -> io::Result<()> {
    // SAFETY: gettid and setpriority take and return plain integers and touch no memory.
    let failed = unsafe {
        let tid = libc::gettid() as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, nice) != 0
    };
    match failed {
        true => Err(io::Error::last_os_error()),
        false => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The share a thread at `nice` gets against one at nice 0, in percent.
    fn share_of(nice: i32) -> f64 {
        let weight = 1024.0 / 1.25f64.powi(nice);
        100.0 * weight / (weight + 1024.0)
    }

    #[test]
    fn shares_pick_nice_values_and_out_of_range_is_refused() {
        assert_eq!(JobShare::default().nice(), Some(0));
        assert_eq!(JobShare::new(50).unwrap().nice(), Some(0));
        assert_eq!(JobShare::new(10).unwrap().nice(), Some(10));
        assert_eq!(JobShare::new(0).unwrap().nice(), None);
        assert_eq!(JobShare::new(1).unwrap().nice(), Some(19));
        let e = JobShare::new(51).unwrap_err();
        assert!(e.to_string().contains("give 0 to 50"), "{e}");
    }

    #[test]
    fn a_thread_takes_its_share() {
        std::thread::spawn(|| {
            JobShare::new(10).unwrap().apply_to_this_thread().unwrap();
            // SAFETY: getpriority takes and returns plain integers.
            let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as _) };
            assert_eq!(nice, 10);
            JobShare::new(0).unwrap().apply_to_this_thread().unwrap();
            // SAFETY: as above.
            let policy = unsafe { libc::sched_getscheduler(0) };
            assert_eq!(policy, libc::SCHED_IDLE);
        })
        .join()
        .unwrap();
    }

    proptest! {
        /// A larger share never gets a lower priority, and the nice value chosen gives about
        /// the share asked for (within the step of one nice level, 25%).
        #[test]
        fn the_nice_value_follows_the_share(a in 1u8..=50, b in 1u8..=50) {
            let (lo, hi) = (a.min(b), a.max(b));
            let (nice_lo, nice_hi) = (
                JobShare::new(lo).unwrap().nice().unwrap(),
                JobShare::new(hi).unwrap().nice().unwrap(),
            );
            prop_assert!(nice_hi <= nice_lo);
            let got = share_of(nice_lo);
            if nice_lo < 19 {
                prop_assert!(got / f64::from(lo) < 1.25 && f64::from(lo) / got < 1.25,
                    "{lo}% asked, nice {nice_lo} gives {got:.1}%");
            }
        }
    }
}
