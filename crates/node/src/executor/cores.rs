//! Which of the node's cores run no call: the count that lets a call run on the thread that
//! received it (run-to-completion, [`super::inline`]) without ever running more calls than
//! there are cores.
//!
//! An executor that holds a core and waits for its next call counts its core as idle; when it
//! takes a call it counts the core busy again. A caller's thread may *borrow* an idle core for
//! one call and give it back at the end. If an executor takes a call while its core is lent, the
//! count goes below zero and the executor waits for the core to come back: the call it took
//! was queued after the borrowed call started, so it would have waited for that core anyway
//! (out of the queue meanwhile, where no peer can pull it: `Node::hand_over`).
//!
//! Under preemption cores pass between executor threads while calls run; those hand-offs are
//! between threads that are not idle, so they leave the count alone.

use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicIsize, Ordering};

/// The count of idle cores, and the executors waiting for a lent one to come back.
pub(crate) struct IdleCores {
    /// Idle cores; below zero, how many executors wait for a core that is lent.
    idle: AtomicIsize,
    /// Cores given back to waiting executors and not yet taken by one.
    returned: Mutex<usize>,
    back: Condvar,
}

impl IdleCores {
    /// No core idle: executors count theirs in as they first wait for a call.
    pub(crate) fn new() -> Self {
        Self {
            idle: AtomicIsize::new(0),
            returned: Mutex::new(0),
            back: Condvar::new(),
        }
    }

    /// An executor holding a core waits for a call: its core is idle.
    pub(crate) fn idle(&self) {
        self.give_back();
    }

    /// An executor that was idle took a call: it runs it on its core, after waiting for the
    /// core if a caller borrowed it meanwhile.
    pub(crate) fn busy(&self) {
        if self.idle.fetch_sub(1, Ordering::AcqRel) > 0 {
            return;
        }
        let mut returned = self.returned.lock();
        while *returned == 0 {
            self.back.wait(&mut returned);
        }
        *returned -= 1;
    }

    /// Borrows an idle core for one call on the caller's thread, if one is idle.
    #[inline]
    pub(crate) fn borrow(&self) -> bool {
        let mut idle = self.idle.load(Ordering::Acquire);
        while idle > 0 {
            match self.idle.compare_exchange_weak(
                idle,
                idle - 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(now) => idle = now,
            }
        }
        false
    }

    /// Gives back a borrowed core (or an executor's, as it goes idle): to an executor waiting
    /// for one, if any.
    #[inline]
    pub(crate) fn give_back(&self) {
        if self.idle.fetch_add(1, Ordering::AcqRel) >= 0 {
            return;
        }
        *self.returned.lock() += 1;
        self.back.notify_one();
    }

    /// Idle cores now (negative: executors waiting for lent ones).
    #[cfg(test)]
    pub(crate) fn count(&self) -> isize {
        self.idle.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    #[test]
    fn a_core_is_lent_only_while_idle() {
        let cores = IdleCores::new();
        assert!(!cores.borrow(), "no executor has counted its core in yet");
        cores.idle();
        assert!(cores.borrow());
        assert!(!cores.borrow(), "one idle core, lent once");
        cores.give_back();
        cores.busy();
        assert!(!cores.borrow(), "the executor runs a call on it");
        cores.idle();
        assert_eq!(cores.count(), 1);
    }

    #[test]
    fn an_executor_whose_core_is_lent_waits_for_it() {
        let cores = Arc::new(IdleCores::new());
        cores.idle();
        assert!(cores.borrow());
        let executor = {
            let cores = cores.clone();
            std::thread::spawn(move || cores.busy())
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !executor.is_finished(),
            "it must wait while the core is lent"
        );
        assert_eq!(cores.count(), -1);
        cores.give_back();
        executor.join().unwrap();
        assert_eq!(cores.count(), 0);
    }

    /// Executors and borrowers racing: never more calls on cores than cores, and every core
    /// counted back at the end.
    #[test]
    fn never_more_running_than_cores() {
        const CORES: usize = 2;
        let cores = Arc::new(IdleCores::new());
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let run = |running: &AtomicUsize, most: &AtomicUsize| {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            std::hint::spin_loop();
            running.fetch_sub(1, Ordering::SeqCst);
        };
        let mut executors = Vec::new();
        for _ in 0..CORES {
            let (cores, running, most) = (cores.clone(), running.clone(), most.clone());
            executors.push(std::thread::spawn(move || {
                for _ in 0..20_000 {
                    cores.idle();
                    cores.busy();
                    run(&running, &most);
                }
                cores.idle();
            }));
        }
        let mut borrowers = Vec::new();
        for _ in 0..3 {
            let (cores, running, most) = (cores.clone(), running.clone(), most.clone());
            borrowers.push(std::thread::spawn(move || {
                let mut n = 0u64;
                for _ in 0..20_000 {
                    if cores.borrow() {
                        run(&running, &most);
                        cores.give_back();
                        n += 1;
                    }
                }
                n
            }));
        }
        let borrowed: u64 = borrowers.into_iter().map(|t| t.join().unwrap()).sum();
        for t in executors {
            t.join().unwrap();
        }
        assert!(most.load(Ordering::SeqCst) <= CORES);
        assert!(borrowed > 0, "some calls ran on borrowed cores");
        assert_eq!(cores.count(), CORES as isize);
    }
}
