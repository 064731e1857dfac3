//! Quarantine: a function whose calls keep running past their budget stops getting cores. After
//! `after` budget kills in a row its calls are refused (409) until it is released
//! (`mote release`) or redeployed (a redeploy makes a new [`Quarantine`], which starts clear).
//!
//! One [`Quarantine`] per deployed function holds the whole state and the node's
//! `mote_functions_quarantined` gauge: the gauge counts the functions whose flag is set, raised
//! only by the call that sets it and lowered only by whoever clears it (a release, or the
//! function's removal), each with a swap so no change is counted twice.

use prometheus_client::metrics::gauge::Gauge;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// One function's run of budget kills, and whether it is quarantined.
#[derive(Debug)]
pub(crate) struct Quarantine {
    /// Budget kills in a row that quarantine the function; 0 never quarantines.
    after: u32,
    /// Calls in a row killed for running past their budget; any other ending resets it.
    kills: AtomicU32,
    quarantined: AtomicBool,
    /// Set when the function is removed or replaced: calls still queued for it finish, but
    /// cannot quarantine it (and count it) again.
    retired: AtomicBool,
    /// The node's count of quarantined functions.
    gauge: Gauge,
}

impl Quarantine {
    /// A clear state that quarantines after `after` kills in a row, counted in `gauge`.
    pub(crate) fn new(after: u32, gauge: Gauge) -> Self {
        Self {
            after,
            kills: AtomicU32::new(0),
            quarantined: AtomicBool::new(false),
            retired: AtomicBool::new(false),
            gauge,
        }
    }

    /// `None` if calls may run, else the budget kills in a row that quarantined the function.
    #[inline]
    pub(crate) fn refuses(&self) -> Option<u32> {
        self.quarantined
            .load(Ordering::Acquire)
            .then(|| self.kills.load(Ordering::Relaxed))
    }

    /// Counts how a call ended; returns true if this call put the function in quarantine.
    #[inline]
    pub(crate) fn record(&self, killed: bool) -> bool {
        if !killed {
            // Most calls end well: read before writing, so they leave the cache line shared.
            if self.kills.load(Ordering::Relaxed) != 0 {
                self.kills.store(0, Ordering::Relaxed);
            }
            return false;
        }
        let kills = self.kills.fetch_add(1, Ordering::Relaxed) + 1;
        let quarantines = self.after != 0
            && kills >= self.after
            && !self.retired.load(Ordering::Acquire)
            && !self.quarantined.swap(true, Ordering::AcqRel);
        if quarantines {
            self.gauge.inc();
        }
        quarantines
    }

    /// Lets calls in again; returns whether the function was quarantined.
    pub(crate) fn release(&self) -> bool {
        self.kills.store(0, Ordering::Relaxed);
        let was = self.quarantined.swap(false, Ordering::AcqRel);
        if was {
            self.gauge.dec();
        }
        was
    }

    /// The function is gone: clears its quarantine for good.
    pub(crate) fn retire(&self) {
        self.retired.store(true, Ordering::Release);
        self.release();
    }

    /// How many kills in a row quarantine the function.
    pub(crate) fn after(&self) -> u32 {
        self.after
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kills_in_a_row_quarantine_and_a_release_or_a_good_call_starts_over() {
        let gauge = Gauge::default();
        let q = Quarantine::new(3, gauge.clone());
        assert!(!q.record(true) && !q.record(true));
        assert!(!q.record(false), "a call that ends well resets the count");
        assert!(!q.record(true) && !q.record(true));
        assert_eq!(q.refuses(), None);
        assert!(q.record(true), "the third kill in a row quarantines");
        assert_eq!(q.refuses(), Some(3));
        assert_eq!(gauge.get(), 1);
        assert!(!q.record(true), "already quarantined: counted once");
        assert_eq!(gauge.get(), 1);
        assert!(q.release());
        assert!(!q.release(), "a second release finds nothing to release");
        assert_eq!((q.refuses(), gauge.get()), (None, 0));
        let never = Quarantine::new(0, gauge.clone());
        assert!((0..100).all(|_| !never.record(true)));
        assert_eq!(gauge.get(), 0);
        let gone = Quarantine::new(1, gauge.clone());
        assert!(gone.record(true));
        gone.retire();
        assert_eq!(gauge.get(), 0, "a removed function leaves the count");
        assert!(
            !gone.record(true),
            "a call that was still queued cannot quarantine it again"
        );
        assert_eq!((gone.refuses(), gauge.get()), (None, 0));
    }
}
