//! [`Combiner`]: the table a scatter's map-side combiner folds its pairs into.
//!
//! A combiner over text meets hundreds of thousands of keys in a task, most of them out of
//! cache when they come back. A `HashMap` keeps each bucket's control byte apart from the
//! bucket, so such a key costs two misses (its control group, then its bucket); here a slot
//! holds a tag of its key's hash beside the key and the value, slots are probed one after
//! another, and a lookup usually reads one cache line.
//!
//! That miss is still most of a combiner's time, so pairs wait in a batch of [`BATCH`] whose
//! slots are all read first: the reads do not depend on each other, so the processor has them
//! in flight together (WebAssembly has no prefetch instruction; a load is one), and the batch
//! then finds its slots in cache.

use super::{Key, key_hash};
use std::alloc::{Layout, alloc_zeroed, dealloc, handle_alloc_error};
use std::mem::MaybeUninit;
use std::ptr::NonNull;

/// Pairs by key, each key once: a table of slots probed linearly from the slot its hash's low
/// bits name, at most [`MAX_LOAD`] full.
pub struct Combiner<K, V> {
    /// `mask + 1` slots, a power of two, zeroed when made (every tag empty).
    slots: NonNull<Slot<K, V>>,
    mask: usize,
    /// Keys in `slots`.
    len: usize,
    /// Pairs not yet folded in, with their keys' hashes.
    batch: Vec<(u64, K, V)>,
}

/// A slot: empty while `tag` is 0, else the key and value it holds are initialized.
struct Slot<K, V> {
    /// The hash's high 32 bits with the lowest set, so never 0: most slots a probe passes are
    /// told apart by it without comparing keys.
    tag: u32,
    key: MaybeUninit<K>,
    value: MaybeUninit<V>,
}

/// The fraction of slots that may be full, as `numerator / 8`: linear probing's runs grow fast
/// past it.
const MAX_LOAD: usize = 5;
/// Slots of a new table.
const FIRST_SLOTS: usize = 1024;
/// Pairs a batch holds: enough to keep the processor's line fill buffers (10 to 16) busy.
const BATCH: usize = 16;

impl<K: Key, V> Combiner<K, V> {
    pub(super) fn new() -> Self {
        Self {
            slots: Self::zeroed(FIRST_SLOTS),
            mask: FIRST_SLOTS - 1,
            len: 0,
            batch: Vec::with_capacity(BATCH),
        }
    }

    /// `slot = f(slot, v)` where the table has `k`, else `v` under `k`, once the batch is
    /// folded in: by [`Combiner::iter`] at the latest.
    #[inline(always)]
    pub(super) fn combine<F: Fn(V, V) -> V + Copy>(&mut self, k: K, v: V, f: F) {
        self.batch.push((key_hash(&k), k, v));
        if self.batch.len() == BATCH {
            self.fold_batch(f);
        }
    }

    /// Reads the batch's first slots, then folds its pairs in.
    #[inline(always)]
    fn fold_batch<F: Fn(V, V) -> V + Copy>(&mut self, f: F) {
        for (hash, _, _) in &self.batch {
            // SAFETY: the index is masked to the table. Volatile, so that the compiler keeps a
            // load whose value nothing uses (`black_box` is no barrier in WebAssembly).
            unsafe {
                let slot = self.slots.as_ptr().add(*hash as usize & self.mask);
                std::ptr::read_volatile(&raw const (*slot).tag);
            }
        }
        let mut batch = std::mem::take(&mut self.batch);
        for (hash, k, v) in batch.drain(..) {
            self.fold_pair(hash, k, v, f);
        }
        self.batch = batch;
    }

    /// `slot = f(slot, v)` where the table has `k`, else `v` under `k`.
    #[inline(always)]
    fn fold_pair<F: Fn(V, V) -> V>(&mut self, hash: u64, k: K, v: V, f: F) {
        let tag = tag(hash);
        let mut at = hash as usize & self.mask;
        loop {
            // SAFETY: `at` is masked to the table.
            let slot = unsafe { &mut *self.slots.as_ptr().add(at) };
            if slot.tag == tag {
                // SAFETY: a slot with a tag holds a key and a value.
                if unsafe { slot.key.assume_init_ref() } == &k {
                    fold(unsafe { slot.value.assume_init_mut() }, v, f);
                    return;
                }
            } else if slot.tag == 0 {
                if (self.len + 1) * 8 > (self.mask + 1) * MAX_LOAD {
                    self.grow();
                    self.insert_new(hash, k, v);
                } else {
                    *slot = Slot {
                        tag,
                        key: MaybeUninit::new(k),
                        value: MaybeUninit::new(v),
                    };
                }
                self.len += 1;
                return;
            }
            at = (at + 1) & self.mask;
        }
    }

    /// Its pairs, in no particular order, once the batch is folded in with `f`.
    pub(super) fn iter<F: Fn(V, V) -> V + Copy>(&mut self, f: F) -> impl Iterator<Item = (&K, &V)> {
        self.fold_batch(f);
        // SAFETY: the table has `mask + 1` slots.
        let slots = unsafe { std::slice::from_raw_parts(self.slots.as_ptr(), self.mask + 1) };
        slots.iter().filter(|slot| slot.tag != 0).map(|slot| {
            // SAFETY: a slot with a tag holds a key and a value.
            unsafe { (slot.key.assume_init_ref(), slot.value.assume_init_ref()) }
        })
    }

    /// Puts `k`, known not to be in the table, in the first empty slot from its hash's. Does not
    /// count it.
    fn insert_new(&mut self, hash: u64, k: K, v: V) {
        let mut at = hash as usize & self.mask;
        loop {
            // SAFETY: `at` is masked to the table.
            let slot = unsafe { &mut *self.slots.as_ptr().add(at) };
            if slot.tag == 0 {
                *slot = Slot {
                    tag: tag(hash),
                    key: MaybeUninit::new(k),
                    value: MaybeUninit::new(v),
                };
                return;
            }
            at = (at + 1) & self.mask;
        }
    }

    /// Moves every pair into a table of twice the slots.
    #[cold]
    fn grow(&mut self) {
        let (old, old_slots) = (self.slots, self.mask + 1);
        self.slots = Self::zeroed(old_slots * 2);
        self.mask = old_slots * 2 - 1;
        for at in 0..old_slots {
            // SAFETY: `at` is within the old table, and a slot with a tag holds a key and a
            // value, read out once here before the old table is freed without dropping them.
            unsafe {
                let slot = &*old.as_ptr().add(at);
                if slot.tag != 0 {
                    let k = slot.key.assume_init_read();
                    self.insert_new(key_hash(&k), k, slot.value.assume_init_read());
                }
            }
        }
        // SAFETY: `old` was allocated with this layout, and its pairs moved out above.
        unsafe { dealloc(old.as_ptr().cast(), layout::<K, V>(old_slots)) };
    }

    /// A table of `slots` empty slots, aligned to a cache line so that no slot of 64 bytes or
    /// less straddles two.
    fn zeroed(slots: usize) -> NonNull<Slot<K, V>> {
        let layout = layout::<K, V>(slots);
        // SAFETY: the layout's size is not zero (a slot holds at least its tag).
        NonNull::new(unsafe { alloc_zeroed(layout) }.cast())
            .unwrap_or_else(|| handle_alloc_error(layout))
    }
}

impl<K, V> Drop for Combiner<K, V> {
    fn drop(&mut self) {
        let slots = self.mask + 1;
        // SAFETY: slots with a tag hold a key and a value, dropped once here; the table was
        // allocated with this layout.
        unsafe {
            if std::mem::needs_drop::<(K, V)>() {
                for at in 0..slots {
                    let slot = &mut *self.slots.as_ptr().add(at);
                    if slot.tag != 0 {
                        slot.key.assume_init_drop();
                        slot.value.assume_init_drop();
                    }
                }
            }
            dealloc(self.slots.as_ptr().cast(), layout::<K, V>(slots));
        }
    }
}

/// `slot = f(slot, v)`, in place.
#[inline(always)]
pub(super) fn fold<V, F: Fn(V, V) -> V>(slot: &mut V, v: V, f: F) {
    /// Aborts if `f` unwinds while the slot's value is moved out, rather than let the map drop
    /// it a second time.
    struct Abort;
    impl Drop for Abort {
        fn drop(&mut self) {
            std::process::abort();
        }
    }
    let abort = Abort;
    // SAFETY: the value read out is written back before anything else sees the slot, and an
    // unwinding `f` aborts the process (`abort`) before the map could drop it.
    unsafe { std::ptr::write(slot, f(std::ptr::read(slot), v)) };
    std::mem::forget(abort);
}

/// The layout of a table of `slots` slots.
fn layout<K, V>(slots: usize) -> Layout {
    Layout::array::<Slot<K, V>>(slots)
        .and_then(|layout| layout.align_to(64))
        .expect("a combiner's table fits in memory")
}

#[inline(always)]
fn tag(hash: u64) -> u32 {
    (hash >> 32) as u32 | 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    proptest! {
        /// Whatever the keys, the table sums as a `HashMap` does, across its growths.
        #[test]
        fn sums_as_a_hash_map_does(
            pairs in proptest::collection::vec((0u16..3000, 0u64..100), 0..5000)
        ) {
            let mut combiner = Combiner::new();
            let mut reference = HashMap::new();
            for (k, v) in pairs {
                combiner.combine(k.to_string(), v, |a, b| a + b);
                *reference.entry(k.to_string()).or_insert(0) += v;
            }
            let got: HashMap<String, u64> =
                combiner.iter(|a, b| a + b).map(|(k, v)| (k.clone(), *v)).collect();
            prop_assert_eq!(got, reference);
        }
    }

    /// Keys and values that own memory are dropped once each, whether the table grew or not.
    #[test]
    fn drops_what_it_holds_once() {
        let value = std::rc::Rc::new(());
        let mut combiner = Combiner::new();
        for k in 0..FIRST_SLOTS * 2 {
            combiner.combine(k.to_string(), value.clone(), |a, _| a);
        }
        combiner.combine("0".to_owned(), value.clone(), |a, _| a);
        assert_eq!(combiner.iter(|a, _| a).count(), FIRST_SLOTS * 2);
        assert_eq!(std::rc::Rc::strong_count(&value), FIRST_SLOTS * 2 + 1);
        drop(combiner);
        assert_eq!(std::rc::Rc::strong_count(&value), 1);
    }
}
