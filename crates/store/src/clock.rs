//! The hybrid logical clock that orders concurrent writes to a key across replicas.
//!
//! A stamp is (wall milliseconds, logical counter, replica id), compared in that order. A
//! replica's stamps only grow, even if its wall clock steps back, and every stamp it issues is
//! greater than every stamp it has seen, so a write made after seeing another write wins over
//! it. The replica id breaks ties between writes made at the same instant on different replicas,
//! so every replica picks the same winner.

use crate::pb;

/// The latest wall time a stamp may carry: the last millisecond of the year 9999. No clock
/// reads later, and a clock that had seen a later stamp might have no greater one left to
/// issue: `(u64::MAX, u32::MAX)` has no successor. Below it, the logical counter would have to
/// run through four billion writes per millisecond for years to get there.
pub const MAX_WALL_MS: u64 = 253_402_300_799_999;

/// One clock reading. Field order is the comparison order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Stamp {
    /// Physical time, in milliseconds since the Unix epoch (at least the greatest seen).
    pub wall_ms: u64,
    /// Orders stamps within one millisecond.
    pub logical: u32,
    /// The replica that issued the stamp.
    pub replica: u64,
}

impl From<Stamp> for pb::Stamp {
    fn from(s: Stamp) -> Self {
        Self {
            wall_ms: s.wall_ms,
            logical: s.logical,
            replica: s.replica,
        }
    }
}

impl From<pb::Stamp> for Stamp {
    fn from(s: pb::Stamp) -> Self {
        Self {
            wall_ms: s.wall_ms,
            logical: s.logical,
            replica: s.replica,
        }
    }
}

/// A replica's hybrid logical clock.
#[derive(Clone, Debug)]
pub struct Clock {
    replica: u64,
    last: Stamp,
}

impl Clock {
    /// A clock for `replica` that has seen nothing yet.
    pub fn new(replica: u64) -> Self {
        Self {
            replica,
            last: Stamp {
                replica,
                ..Stamp::default()
            },
        }
    }

    /// A new stamp, greater than every stamp issued or seen, at wall time `wall_ms`.
    pub fn tick(&mut self, wall_ms: u64) -> Stamp {
        self.last = if wall_ms > self.last.wall_ms {
            Stamp {
                wall_ms,
                logical: 0,
                replica: self.replica,
            }
        } else {
            self.after(self.last)
        };
        self.last
    }

    /// Takes note of a stamp from another replica, so later ticks are greater than it.
    pub fn observe(&mut self, seen: Stamp) {
        if seen > self.last {
            self.last = Stamp {
                replica: self.replica,
                ..seen
            };
        }
    }

    fn after(&self, s: Stamp) -> Stamp {
        match s.logical.checked_add(1) {
            Some(logical) => Stamp {
                wall_ms: s.wall_ms,
                logical,
                replica: self.replica,
            },
            // Four billion writes in one millisecond: borrow the next millisecond.
            None => Stamp {
                wall_ms: s.wall_ms + 1,
                logical: 0,
                replica: self.replica,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_grow_when_the_wall_clock_steps_back() {
        let mut c = Clock::new(1);
        let a = c.tick(1000);
        let b = c.tick(900);
        let d = c.tick(1000);
        assert!(a < b && b < d, "{a:?} {b:?} {d:?}");
    }

    #[test]
    fn a_tick_after_observing_beats_what_was_observed() {
        let mut c = Clock::new(1);
        let remote = Stamp {
            wall_ms: 5000,
            logical: 7,
            replica: 9,
        };
        c.observe(remote);
        let mine = c.tick(10);
        assert!(mine > remote);
        assert_eq!(mine.replica, 1);
    }
}
