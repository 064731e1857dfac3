//! The node's cores as calls hold them ([`CoreSet`]), and the one protocol by which a core
//! passes to waiting work: a holder that is done hands its core to what waits next
//! ([`CoreSet::release`]), and a submitter that queued work finds it a free core
//! ([`CoreSet::dispatch`]). A thread that wants to run a call where it is (a reader, on the
//! thread that read the request) may take a core only while nothing waits
//! ([`CoreSet::take_if_idle`]): the policy would have run that call next anyway.
//!
//! Invariants (checked under loom in `tests`, every interleaving of two cores, a releaser and
//! submitters):
//! - a core is held by at most one holder: taking clears its bit with a compare-and-swap, and
//!   only its holder sets it again;
//! - no work waits while a core is free once everyone is done: a releaser frees its core and
//!   then looks at the queue, a submitter queues and then looks for a free core, a
//!   sequentially consistent fence between the two steps on each side, so one of them sees the
//!   other and hands the core on (the fences are what loom can check: it models `SeqCst`
//!   accesses as acquire-release, and fences exactly);
//! - work taken from the queue is taken once, with the core it will run on.
//!
//! Who runs the work and how the core travels to that thread (a parked executor, a task) is the
//! node's; this module only decides.

#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, Ordering, fence};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU64, Ordering, fence};

/// What a thread does while work it saw counted is not yet in the queue.
fn spin() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// What waits for a core: the node's queue of calls and resumptions.
pub trait Waiting {
    /// What waits.
    type Work;
    /// Whether nothing waits: read after a core was freed, so it must see every push that came
    /// before (sequentially consistent with [`CoreSet`]'s operations).
    fn is_empty(&self) -> bool;
    /// The work that should run next, if any.
    fn take(&self) -> Option<Self::Work>;
}

/// Bits per word of the set.
const WORD: usize = 64;

/// Which of `count` cores are free: a bit per core, set while free.
pub struct CoreSet {
    words: Box<[AtomicU64]>,
    count: usize,
}

impl std::fmt::Debug for CoreSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoreSet")
            .field("count", &self.count)
            .field("free", &self.free())
            .finish()
    }
}

impl CoreSet {
    /// `count` cores (at least one), all free.
    pub fn new(count: usize) -> Self {
        let count = count.max(1);
        let words = (0..count.div_ceil(WORD))
            .map(|w| {
                let bits = (count - w * WORD).min(WORD);
                AtomicU64::new(if bits == WORD {
                    u64::MAX
                } else {
                    (1 << bits) - 1
                })
            })
            .collect();
        Self { words, count }
    }

    /// How many cores there are.
    pub fn count(&self) -> usize {
        self.count
    }

    /// How many are free now.
    pub fn free(&self) -> usize {
        self.words
            .iter()
            .map(|w| w.load(Ordering::SeqCst).count_ones() as usize)
            .sum()
    }

    /// Takes a free core, if any.
    pub fn take(&self) -> Option<usize> {
        for (w, word) in self.words.iter().enumerate() {
            let mut bits = word.load(Ordering::SeqCst);
            while bits != 0 {
                let bit = bits.trailing_zeros() as usize;
                match word.compare_exchange_weak(
                    bits,
                    bits & !(1 << bit),
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                ) {
                    Ok(_) => return Some(w * WORD + bit),
                    Err(now) => bits = now,
                }
            }
        }
        None
    }

    /// Takes a free core if nothing in `waiting` waits for one: the call at hand would run
    /// next anyway.
    #[inline]
    pub fn take_if_idle<W: Waiting>(&self, waiting: &W) -> Option<usize> {
        if !waiting.is_empty() {
            return None;
        }
        self.take()
    }

    fn put(&self, core: usize) {
        let bit = 1u64 << (core % WORD);
        let before = self.words[core / WORD].fetch_or(bit, Ordering::SeqCst);
        debug_assert_eq!(before & bit, 0, "core {core} freed twice");
    }

    /// The holder of `core` is done with it: the work that runs on it next, with the core it
    /// runs on (this one, or another taken again after this one was freed), or `None` once it
    /// is free and nothing waits (or whatever came meanwhile went to another core's holder).
    pub fn release<W: Waiting>(&self, core: usize, waiting: &W) -> Option<(usize, W::Work)> {
        let mut core = core;
        loop {
            if let Some(work) = waiting.take() {
                return Some((core, work));
            }
            self.put(core);
            fence(Ordering::SeqCst);
            if waiting.is_empty() {
                return None;
            }
            // Work came as the core was freed (or is counted and not yet queued): take a core
            // for it, unless its submitter (or another releaser) already did, who then hands
            // it on.
            core = self.take()?;
            spin();
        }
    }

    /// After work was queued in `waiting`: a free core and the work to run on it, if there are
    /// both.
    pub fn dispatch<W: Waiting>(&self, waiting: &W) -> Option<(usize, W::Work)> {
        fence(Ordering::SeqCst);
        let core = self.take()?;
        self.release(core, waiting)
    }
}

#[cfg(test)]
mod tests;
