//! Microtask share classes and how cores are split across them (the microtask paper, `000_…`).
//!
//! A call's current phase declares the share of a core it needs, in permille. Phases are
//! queued by [`ShareClass`], a few fixed share levels (like a slab allocator's size classes), so
//! every microtask in a queue needs the same share and a core given to class `s` runs up to
//! `1000 / s` of them at once. [`CoreSplit`] decides how many cores each class gets: the
//! paper's greedy allocator (cores go one at a time to the class with the most work, counted
//! in cores, not yet covered), or a fixed split for experiments.
//!
//! Invariants of [`CoreSplit::split`]: every core is given to exactly one class; a class with
//! nothing to run gets a core only when no class with work wants one more (spare cores go to
//! the whole-core class, where calls without phases run); and when there are more classes with
//! work than cores, a class passed over is first in line at the next split, so none starves.

use std::fmt;

/// The share levels, in permille of a core, largest first.
pub const SHARE_LEVELS: [u16; 4] = [1000, 500, 250, 100];

/// How many share classes there are.
pub const CLASSES: usize = SHARE_LEVELS.len();

/// A share level: the class of every phase that declared a share up to it and above the next
/// level down.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ShareClass(u8);

/// A phase declared a share outside 1..=1000 permille.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a phase declared {0} permille of a core; declare 1 to 1000 (1000 is a whole core)")]
pub struct InvalidShare(pub i32);

impl ShareClass {
    /// The class calls without declared phases run in: a whole core.
    pub const WHOLE_CORE: ShareClass = ShareClass(0);

    /// The class of a phase that declared `permille` of a core: the smallest share level that
    /// covers it, so a phase never gets less than it asked for.
    pub fn of(permille: i32) -> Result<Self, InvalidShare> {
        if !(1..=1000).contains(&permille) {
            return Err(InvalidShare(permille));
        }
        let index = SHARE_LEVELS
            .iter()
            .rposition(|&level| i32::from(level) >= permille)
            .expect("1000 covers every valid share");
        Ok(Self(index as u8))
    }

    /// Every class, largest share first.
    pub fn all() -> impl Iterator<Item = ShareClass> {
        (0..CLASSES as u8).map(ShareClass)
    }

    /// The class's position in [`SHARE_LEVELS`].
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// Its share of a core, in permille.
    pub fn permille(self) -> u16 {
        SHARE_LEVELS[self.index()]
    }

    /// How many of its microtasks one core runs at once.
    pub fn per_core(self) -> u32 {
        1000 / u32::from(self.permille())
    }
}

impl fmt::Display for ShareClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}‰", self.permille())
    }
}

/// How cores are split across the share classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitMode {
    /// From the work waiting in each class, at every split.
    Dynamic,
    /// Fixed cores per class (in [`SHARE_LEVELS`] order), for experiments; they must add up
    /// to the node's cores.
    Static([u32; CLASSES]),
}

/// A split that is neither `dynamic` nor four core counts.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not a core split; use `dynamic`, or four core counts for the 1000, 500, 250 and 100 permille classes, such as `1,0,0,1`"
)]
pub struct UnknownSplit(pub String);

impl std::str::FromStr for SplitMode {
    type Err = UnknownSplit;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "dynamic" {
            return Ok(Self::Dynamic);
        }
        let counts: Vec<u32> = s
            .split(',')
            .map(|n| n.trim().parse())
            .collect::<Result<_, _>>()
            .map_err(|_| UnknownSplit(s.to_owned()))?;
        let counts: [u32; CLASSES] = counts.try_into().map_err(|_| UnknownSplit(s.to_owned()))?;
        Ok(Self::Static(counts))
    }
}

/// A static split whose cores do not add up to the node's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the static split gives out {given} cores but the node has {cores}; make them add up")]
pub struct SplitMismatch {
    /// Cores the split names.
    pub given: u32,
    /// Cores the node has.
    pub cores: u32,
}

/// Splits a node's cores across the share classes.
#[derive(Clone, Debug)]
pub struct CoreSplit {
    cores: u32,
    mode: SplitMode,
    /// Consecutive splits in which each class had work but got no core.
    passed_over: [u32; CLASSES],
}

impl CoreSplit {
    /// A splitter for `cores` cores; a static split must account for every core.
    pub fn new(cores: u32, mode: SplitMode) -> Result<Self, SplitMismatch> {
        if let SplitMode::Static(split) = mode {
            let given = split.iter().sum();
            if given != cores {
                return Err(SplitMismatch { given, cores });
            }
        }
        Ok(Self {
            cores,
            mode,
            passed_over: [0; CLASSES],
        })
    }

    /// Cores for each class (in [`SHARE_LEVELS`] order), given how many microtasks of each
    /// class are waiting or running.
    pub fn split(&mut self, microtasks: [u64; CLASSES]) -> [u32; CLASSES] {
        if let SplitMode::Static(split) = self.mode {
            return split;
        }
        let mut given = [0u32; CLASSES];
        // A class's demand in cores, in permille: microtasks times their share.
        let demand: [u64; CLASSES] =
            std::array::from_fn(|c| microtasks[c].saturating_mul(u64::from(SHARE_LEVELS[c])));
        let mut left = self.cores;

        // First, one core for each class with work: those passed over longest first, then by
        // demand, so with fewer cores than busy classes every class gets its turn.
        // Sorted in place, with no allocation: the split is meant to run whenever a call moves
        // between classes.
        let mut order: [usize; CLASSES] = std::array::from_fn(|c| c);
        order.sort_unstable_by_key(|&c| {
            (
                std::cmp::Reverse(self.passed_over[c]),
                std::cmp::Reverse(demand[c]),
                c,
            )
        });
        for c in order.into_iter().filter(|&c| demand[c] > 0) {
            if left == 0 {
                break;
            }
            given[c] = 1;
            left -= 1;
        }
        for c in 0..CLASSES {
            self.passed_over[c] = match demand[c] > 0 && given[c] == 0 {
                true => self.passed_over[c].saturating_add(1),
                false => 0,
            };
        }

        // Then greedily, one core at a time, to the class with the most demand not yet covered.
        while left > 0 {
            let unmet = |c: usize| demand[c].saturating_sub(u64::from(given[c]) * 1000);
            let Some(c) = (0..CLASSES)
                .filter(|&c| unmet(c) > 0)
                .max_by_key(|&c| (unmet(c), std::cmp::Reverse(c)))
            else {
                break;
            };
            given[c] += 1;
            left -= 1;
        }
        // Spare cores wait in the whole-core class, which calls without phases use.
        given[ShareClass::WHOLE_CORE.index()] += left;
        given
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_share_rounds_up_to_its_class() {
        let class = |p| ShareClass::of(p).unwrap().permille();
        assert_eq!(class(1000), 1000);
        assert_eq!(class(501), 1000);
        assert_eq!(class(500), 500);
        assert_eq!(class(251), 500);
        assert_eq!(class(250), 250);
        assert_eq!(class(101), 250);
        assert_eq!(class(100), 100);
        assert_eq!(class(1), 100);
        for bad in [0, -5, 1001, i32::MAX, i32::MIN] {
            let e = ShareClass::of(bad).unwrap_err();
            assert!(e.to_string().contains(&bad.to_string()), "{e}");
        }
        assert_eq!(ShareClass::of(100).unwrap().per_core(), 10);
    }

    #[test]
    fn io_and_cpu_phases_share_two_cores() {
        // The sort's first stage: 40 calls reading or writing (100‰), 3 partitioning (1000‰).
        let mut split = CoreSplit::new(2, SplitMode::Dynamic).unwrap();
        assert_eq!(split.split([3, 0, 0, 40]), [1, 0, 0, 1]);
        // Only CPU work: both cores to it.
        assert_eq!(split.split([3, 0, 0, 0]), [2, 0, 0, 0]);
        // Nothing at all: the cores wait in the whole-core class.
        assert_eq!(split.split([0; CLASSES]), [2, 0, 0, 0]);
        // On eight cores: I/O's demand is 4 cores and it gets them; CPU's is 1, and the three
        // spare cores wait in its class.
        let mut eight = CoreSplit::new(8, SplitMode::Dynamic).unwrap();
        assert_eq!(eight.split([1, 0, 0, 40]), [4, 0, 0, 4]);
        // Demand beyond the cores (6, 2 and 3 cores' worth): after one core each, each next
        // core goes to the largest demand still uncovered.
        assert_eq!(eight.split([6, 4, 0, 30]), [5, 1, 0, 2]);
    }

    #[test]
    fn splits_parse_from_the_command_line() {
        assert_eq!("dynamic".parse(), Ok(SplitMode::Dynamic));
        assert_eq!("1, 0,0,1".parse(), Ok(SplitMode::Static([1, 0, 0, 1])));
        for bad in ["", "1,2,3", "1,2,3,4,5", "a,b,c,d", "-1,0,0,1", "static"] {
            let e = bad.parse::<SplitMode>().unwrap_err();
            assert!(e.to_string().contains(&format!("`{bad}`")), "{e}");
        }
    }

    #[test]
    fn a_static_split_is_kept_and_must_add_up() {
        let mut split = CoreSplit::new(4, SplitMode::Static([1, 1, 0, 2])).unwrap();
        assert_eq!(split.split([100, 0, 0, 0]), [1, 1, 0, 2]);
        let e = CoreSplit::new(4, SplitMode::Static([1, 1, 1, 2])).unwrap_err();
        assert_eq!(e, SplitMismatch { given: 5, cores: 4 });
        assert!(
            e.to_string().contains("5 cores") && e.to_string().contains("has 4"),
            "{e}"
        );
    }

    fn demand() -> impl Strategy<Value = [u64; CLASSES]> {
        prop::array::uniform4(prop_oneof![Just(0u64), 1u64..5, 5u64..500])
    }

    proptest! {
        /// Every core goes to exactly one class; with at least as many cores as busy classes,
        /// each busy class gets one; a class with no work never holds a core a busy class wanted.
        #[test]
        fn every_core_is_given_and_busy_classes_come_first(cores in 1u32..32, microtasks in demand()) {
            let mut split = CoreSplit::new(cores, SplitMode::Dynamic).unwrap();
            let given = split.split(microtasks);
            prop_assert_eq!(given.iter().sum::<u32>(), cores);
            let busy = microtasks.iter().filter(|&&n| n > 0).count() as u32;
            for c in 0..CLASSES {
                let wanted = (microtasks[c] * u64::from(SHARE_LEVELS[c])).div_ceil(1000);
                if busy <= cores && microtasks[c] > 0 {
                    prop_assert!(given[c] >= 1, "{given:?} for {microtasks:?}");
                }
                // Only the whole-core class takes spare cores beyond what it wanted.
                if c != ShareClass::WHOLE_CORE.index() {
                    prop_assert!(u64::from(given[c]) <= wanted.max(1), "{given:?} for {microtasks:?}");
                }
            }
        }

        /// With fewer cores than busy classes, each busy class gets a core within as many
        /// splits as there are classes.
        #[test]
        fn no_busy_class_starves(cores in 1u32..3, microtasks in demand()) {
            let mut split = CoreSplit::new(cores, SplitMode::Dynamic).unwrap();
            let mut served = [false; CLASSES];
            for _ in 0..CLASSES {
                let given = split.split(microtasks);
                for c in 0..CLASSES {
                    served[c] |= given[c] > 0;
                }
            }
            for c in 0..CLASSES {
                prop_assert!(microtasks[c] == 0 || served[c], "class {c} starved: {microtasks:?}");
            }
        }
    }
}
