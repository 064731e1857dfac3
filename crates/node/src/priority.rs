//! Threads that give way to calls by the kernel's priorities. The node's call executors run at
//! normal priority; its object I/O threads (microtasks) run lower, so that a call's executor
//! that wakes gets its core at once from the kernel, and they fill the time calls leave. A
//! job's executors give their cores up to calls themselves (`mote_runtime::JobCores`), and they
//! also run in `SCHED_IDLE` unless `--job-idle off` ([`run_this_thread_idle`]), where any other
//! thread that wakes takes their core at once, a call's on its way through the gateway too.

use std::io;

/// Puts the calling thread in `SCHED_IDLE`: it runs only on cores no other thread wants. An
/// unprivileged thread cannot leave it again.
pub fn run_this_thread_idle() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler reads `param`, which lives across the call; pid 0 is the
    // calling thread.
    let failed = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0;
    match failed {
        true => Err(io::Error::last_os_error()),
        false => Ok(()),
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

    fn this_threads_nice() -> i32 {
        // SAFETY: gettid and getpriority take and return plain integers.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as _) }
    }

    #[test]
    fn a_thread_lowers_its_own_priority_only() {
        let here = this_threads_nice();
        std::thread::spawn(|| {
            set_this_thread_nice(19).unwrap();
            assert_eq!(this_threads_nice(), 19);
        })
        .join()
        .unwrap();
        assert_eq!(
            this_threads_nice(),
            here,
            "another thread's nice value moved this one's"
        );
    }

    #[test]
    fn a_thread_goes_idle() {
        std::thread::spawn(|| {
            run_this_thread_idle().unwrap();
            // SAFETY: sched_getscheduler takes and returns plain integers.
            assert_eq!(unsafe { libc::sched_getscheduler(0) }, libc::SCHED_IDLE);
        })
        .join()
        .unwrap();
    }
}
