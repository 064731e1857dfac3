//! Typed operators over datasets, built on the job engine's stages: a [`Flow`] is a chain of
//! per-item functions over one partition at a time, and each keyed operator ends a stage.
//!
//! ```ignore
//! fn driver(job: &mut Job) {
//!     job.lines("input")
//!         .flat_map(|line| line.words())
//!         .map(|word| (word, 1u64))
//!         .reduce_by_key(|a, b| a + b)
//!         .save_lines("output", |(word, n)| format!("{word}\t{n}"));
//! }
//! ```
//!
//! That is three stages: the load puts each partition's share of the text in the partition;
//! a scatter runs `flat_map` and `map` on each line, adds up each partition's counts by word
//! (the map-side combiner) and sends each word's count to the partition its hash picks, whose
//! gather adds up what it receives; the store runs the formatting on every partition and writes
//! `part-NNNNN`. Per-item operators ([`Flow::map`], [`Flow::flat_map`], [`Flow::filter`],
//! [`Flow::try_map`], [`Flow::map_with`]) never make a stage of their own: they run inside the
//! next stage's tasks, one item at a time, without materializing what passes between them.
//!
//! The functions are types, not values: each must be a fn item or a closure that captures
//! nothing (as for [`super::Job::compute`]), because a task gets from the host only the table
//! index of an entry instantiated for the whole chain's type. A value a function needs comes
//! from a [`Broadcast`] or a job argument.
//!
//! A dataset a flow made is consumed by the stage that reads it, unless that stage runs in a
//! loop or branch body the flow was not made in ([`super::Job::repeat`] and kin), where it is
//! read again on the next run and so copied; [`Flow::cache`] keeps one for reading many times.
//! Items cross partitions in postcard's encoding ([`super::codec`]); keys go to partition
//! `mix(hash(key)) % partitions` ([`partition_of`]), the same on every worker and every run.

mod combiner;
mod pipe;
mod source;
mod stage;

pub use pipe::{Filter, FlatMap, Id, Map, MapWith, Pipe, TryMap};
pub use source::{Joined, Partition, Source, Stored, TextShare};
pub use stage::{
    ByHash, ByKey, CombineByKey, Given, IntoVec, JsonOut, LinesOut, Partitioner, Pieces, Sink,
    ToAll, ToOne,
};

use crate::job::{AnyDataset, Dataset, Job, Run, declared_id, made_dataset, run_id, scope, sys};
use serde::Serialize;
use serde::de::DeserializeOwned;
use source::One;
use stage::{Fused, Gather, GatherOne, GroupByKey, LoadText, MergeByKey};
use std::collections::HashMap;
use std::fmt::Display;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::marker::PhantomData;

/// A marker of types `T` that holds none: neither owns a `T` nor keeps its holder from being
/// `Send`, `Sync` or zero-sized.
type Of<T> = PhantomData<fn() -> T>;

/// What can travel between tasks and live in a partition: any cloneable `serde` type.
pub trait Data: Clone + Serialize + DeserializeOwned + 'static {}
impl<T: Clone + Serialize + DeserializeOwned + 'static> Data for T {}

/// What keyed operators group by.
pub trait Key: Data + Hash + Eq {}
impl<T: Data + Hash + Eq> Key for T {}

/// The maps keyed operators keep a partition's keys in.
pub type KeyMap<K, V> = HashMap<K, V, BuildHasherDefault<KeyHasher>>;

/// The hash of keys: fixed, so that every worker sends a key to the same partition, and eight
/// bytes a step (a multiply and a rotate each, as rustc's FxHash), where FNV-1a takes a multiply
/// a byte. `finish` mixes the state (MurmurHash3's finalizer), as a [`KeyMap`] indexes its
/// buckets by the low bits and tags them with the high ones.
#[derive(Clone, Copy, Default)]
pub struct KeyHasher(u64);

impl KeyHasher {
    #[inline(always)]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

fn read_u64(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(*bytes[at..].first_chunk().expect("eight bytes from at"))
}

fn read_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(*bytes[at..].first_chunk().expect("four bytes from at"))
}

/// MurmurHash3's finalizer: every input bit reaches every output bit.
#[inline(always)]
fn mix(mut h: u64) -> u64 {
    h = (h ^ (h >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    h = (h ^ (h >> 33)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

impl Hasher for KeyHasher {
    #[inline(always)]
    fn finish(&self) -> u64 {
        mix(self.0)
    }

    #[inline(always)]
    fn write(&mut self, bytes: &[u8]) {
        let (words, rest) = bytes.as_chunks::<8>();
        for word in words {
            self.add(u64::from_le_bytes(*word));
        }
        if !rest.is_empty() {
            // The last 1 to 7 bytes as one word, read in loads of a fixed size (in WebAssembly
            // a copy of a varying length is a call out of the guest's code), with their
            // length, so that a short write does not hash as its zero-padded word.
            let n = bytes.len();
            let last = match (n >= 8, rest.len()) {
                (true, r) => read_u64(bytes, n - 8) >> (64 - 8 * r),
                (false, 4..) => {
                    u64::from(read_u32(bytes, 0)) | u64::from(read_u32(bytes, n - 4)) << 32
                }
                (false, _) => {
                    u64::from(bytes[0])
                        | u64::from(bytes[n / 2]) << 8
                        | u64::from(bytes[n - 1]) << 16
                }
            };
            self.add(last ^ ((rest.len() as u64) << 59));
        }
    }

    #[inline(always)]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline(always)]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    #[inline(always)]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline(always)]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
}

/// The partition of `partitions` that `key` goes to. The hash is mixed again first: a
/// partition's keys then still spread over all of a [`KeyMap`]'s buckets, which index by the
/// same hash's low bits.
pub fn partition_of<K: Hash + ?Sized>(key: &K, partitions: usize) -> usize {
    (mix(key_hash(key) ^ 0x9e37_79b9_7f4a_7c15) % partitions as u64) as usize
}

/// `key`'s [`KeyHasher`] hash, as a [`KeyMap`] and the combiner's table index by it; inlined,
/// where `BuildHasher::hash_one` is not.
#[inline(always)]
fn key_hash<K: Hash + ?Sized>(key: &K) -> u64 {
    let mut hasher = KeyHasher::default();
    key.hash(&mut hasher);
    hasher.finish()
}

/// Items of a dataset, with a chain of per-item operators to run on them in the next stage.
///
/// A flow is used once: each operator takes it and returns the next. Made by [`Job::lines`],
/// [`Job::read`] and [`Cached::flow`].
#[must_use = "a flow declares nothing until an operator that ends a stage takes it"]
pub struct Flow<S, P> {
    /// The datasets the source reads, then the chain's broadcasts.
    reads: Vec<i32>,
    /// Whether the source's datasets have the job's partition count.
    partitioned: bool,
    /// The body the source was made in, if a stage may consume it there.
    consumable_in: Option<u32>,
    pipe: P,
    _source: Of<S>,
}

impl<S: Source, P: Pipe<S::Item>> Flow<S, P> {
    fn then<Q>(self, pipe: Q) -> Flow<S, Q> {
        Flow {
            reads: self.reads,
            partitioned: self.partitioned,
            consumable_in: self.consumable_in,
            pipe,
            _source: PhantomData,
        }
    }

    /// `f` of each item.
    pub fn map<F, U>(self, f: F) -> Flow<S, Map<P, F, U>>
    where
        F: Fn(P::Out) -> U + Copy + 'static,
        U: 'static,
    {
        let pipe = Map(self.pipe, f, PhantomData);
        self.then(pipe)
    }

    /// `f` of each item, where `f` may fail: an error fails the job, with `f`'s name, the
    /// stage, the partition and the error's message.
    pub fn try_map<F, U, E>(self, f: F) -> Flow<S, TryMap<P, F, U>>
    where
        F: Fn(P::Out) -> Result<U, E> + Copy + 'static,
        U: 'static,
        E: Display,
    {
        let pipe = TryMap(self.pipe, f, PhantomData);
        self.then(pipe)
    }

    /// The items of `f` of each item.
    pub fn flat_map<F, I>(self, f: F) -> Flow<S, FlatMap<P, F, I>>
    where
        F: Fn(P::Out) -> I + Copy + 'static,
        I: IntoIterator + 'static,
    {
        let pipe = FlatMap(self.pipe, f, PhantomData);
        self.then(pipe)
    }

    /// The items `keep` is true of.
    pub fn filter<F>(self, keep: F) -> Flow<S, Filter<P, F>>
    where
        F: Fn(&P::Out) -> bool + Copy + 'static,
    {
        let pipe = Filter(self.pipe, keep);
        self.then(pipe)
    }

    /// `f` of each item and the broadcast value: each task reads its partition's copy.
    pub fn map_with<F, B, U>(mut self, value: &Broadcast<B>, f: F) -> Flow<S, MapWith<P, F, B, U>>
    where
        F: Fn(P::Out, &B) -> U + Copy + 'static,
        B: Default + 'static,
        U: 'static,
    {
        self.reads.push(value.id);
        let pipe = MapWith(self.pipe, f, PhantomData);
        self.then(pipe)
    }

    /// The flow's items, kept in a dataset of their own to be read any number of times, in
    /// any loop or branch: each read copies them.
    pub fn cache(self) -> Cached<P::Out>
    where
        P::Out: Clone + 'static,
    {
        let partitioned = self.partitioned;
        let id = self.compute::<IntoVec>("cache", partitioned);
        Cached {
            id,
            partitioned,
            _items: PhantomData,
        }
    }

    /// Every item in the one partition of `dataset`, a `Vec` that loop signals and the next
    /// stages read by name (a model, centroids, a counter's input). Items come in the order of
    /// their partitions.
    pub fn collect_into(self, dataset: &Dataset<Vec<P::Out>>)
    where
        P::Out: Data,
    {
        assert!(
            !dataset.is_partitioned(),
            "collect_into({}): collect into a dataset of one partition (Dataset::single)",
            dataset.name()
        );
        let to = declared_id(dataset);
        self.scatter::<ToOne, Gather<P::Out>>(to);
    }

    /// A copy of every item in every partition, for [`Flow::map_with`]: a scatter to one
    /// partition, then one from it to all. For small datasets: each partition holds them all.
    pub fn broadcast(self) -> Broadcast<Vec<P::Out>>
    where
        P::Out: Data,
    {
        let all = made_dataset("broadcast", false);
        self.scatter::<ToOne, Gather<P::Out>>(all);
        let each = made_dataset("broadcast", true);
        sys::scatter(
            run_id::<Fused<Stored<Vec<P::Out>>, Id, ToAll, true>>(),
            &[all],
            run_id::<Gather<P::Out>>(),
            &[each],
        );
        Broadcast {
            id: each,
            _value: PhantomData,
        }
    }

    /// Writes a line of text for each item, as `format` makes it, to `part-NNNNN` objects
    /// under job argument `arg`'s `BUCKET/PREFIX` (one object a partition).
    pub fn save_lines<F, T>(self, arg: &str, format: F)
    where
        F: Fn(P::Out) -> T + Copy + 'static,
        T: Display,
        P::Out: Clone + 'static,
    {
        // `format` is its type, `F`, as `f` is for `reduce_by_key`.
        let _ = format;
        self.save::<LinesOut<F>>(arg);
    }

    /// Writes each item as a line of JSON (JSON Lines) to `part-NNNNN` objects under job
    /// argument `arg`'s `BUCKET/PREFIX`, for readers other than mote.
    pub fn save_json(self, arg: &str)
    where
        P::Out: Data,
    {
        self.save::<JsonOut>(arg);
    }

    /// A store stage that runs the chain into output sink `K`: after a compute stage that
    /// keeps the items if the flow reads more than the one dataset a store stage may.
    fn save<K: Sink<P::Out>>(self, arg: &str)
    where
        P::Out: Clone + 'static,
    {
        if self.reads.len() == 1 {
            let func = self.fused_id::<K>();
            sys::store(func, self.reads[0], arg);
        } else {
            let partitioned = self.partitioned;
            let items = self.compute::<IntoVec>("save", partitioned);
            let func = run_id::<Fused<Stored<Vec<P::Out>>, Id, K, true>>();
            sys::store(func, items, arg);
        }
    }

    /// The task entry of a stage that runs the chain into sink `K`.
    fn fused_id<K: Sink<P::Out>>(&self) -> i32 {
        if self.consumable_in == Some(scope()) {
            run_id::<Fused<S, P, K, true>>()
        } else {
            run_id::<Fused<S, P, K, false>>()
        }
    }

    /// A compute stage that runs the chain into sink `K`, which writes a new dataset.
    fn compute<K: Sink<P::Out>>(self, made_by: &str, partitioned: bool) -> i32 {
        let to = made_dataset(made_by, partitioned);
        sys::compute(self.fused_id::<K>(), &self.reads, &[to]);
        to
    }

    /// A scatter stage that runs the chain into sink `K`, and gather `G` into dataset `to`.
    fn scatter<K: Sink<P::Out>, G: Run>(self, to: i32) {
        sys::scatter(self.fused_id::<K>(), &self.reads, run_id::<G>(), &[to]);
    }
}

/// A flow of the items of `reads` as source `S` reads them; `consumable` if a stage of the body
/// being declared may consume them.
fn source<S>(reads: Vec<i32>, partitioned: bool, consumable: bool) -> Flow<S, Id> {
    Flow {
        reads,
        partitioned,
        consumable_in: consumable.then(scope),
        pipe: Id,
        _source: PhantomData,
    }
}

impl<S: Source, P: Pipe<S::Item, Out = (K, V)>, K: Key, V: Data> Flow<S, P> {
    /// Each key once, with `f` folded over its values, in no particular order: `f` runs first
    /// on each partition's values (so one pair a key and partition crosses the network), then
    /// on what each key's partition receives. A scatter stage: `f` must be associative and
    /// commutative, as the order it sees values in is not fixed.
    pub fn reduce_by_key<F>(self, f: F) -> Flow<Stored<KeyMap<K, V>>, Id>
    where
        F: Fn(V, V) -> V + Copy + 'static,
    {
        // `f` is its type, `F`: the tasks run it from there.
        let _ = f;
        self.reduce_by::<F, ByHash>()
    }

    /// [`Flow::reduce_by_key`] with each key in partition `partitioner(&key, partitions)`
    /// rather than its hash's, such as ranges of keys, so that the parts of a saved output
    /// hold the ranges in order. A result outside `0..partitions` fails the job.
    pub fn reduce_by_key_partitioned<R, F>(
        self,
        partitioner: R,
        f: F,
    ) -> Flow<Stored<KeyMap<K, V>>, Id>
    where
        R: Fn(&K, usize) -> usize + Copy + 'static,
        F: Fn(V, V) -> V + Copy + 'static,
    {
        let _ = (partitioner, f);
        self.reduce_by::<F, Given<R>>()
    }

    fn reduce_by<F, R>(self) -> Flow<Stored<KeyMap<K, V>>, Id>
    where
        F: Fn(V, V) -> V + Copy + 'static,
        R: Partitioner<K>,
    {
        let to = made_dataset("reduce_by_key", true);
        self.scatter::<CombineByKey<F, R>, MergeByKey<K, V, F>>(to);
        source(vec![to], true, true)
    }

    /// Each key once, with all its values. A scatter stage that sends every pair: prefer
    /// [`Flow::reduce_by_key`] where values can be combined.
    pub fn group_by_key(self) -> Flow<Stored<KeyMap<K, Vec<V>>>, Id> {
        self.group_by::<ByHash>()
    }

    /// [`Flow::group_by_key`] with each key in partition `partitioner(&key, partitions)`, as
    /// [`Flow::reduce_by_key_partitioned`] has it.
    pub fn group_by_key_partitioned<R>(self, partitioner: R) -> Flow<Stored<KeyMap<K, Vec<V>>>, Id>
    where
        R: Fn(&K, usize) -> usize + Copy + 'static,
    {
        let _ = partitioner;
        self.group_by::<Given<R>>()
    }

    fn group_by<R: Partitioner<K>>(self) -> Flow<Stored<KeyMap<K, Vec<V>>>, Id> {
        let to = made_dataset("group_by_key", true);
        self.scatter::<ByKey<R>, GroupByKey<K, V>>(to);
        source(vec![to], true, true)
    }

    /// The pairs `(key, (v, w))` of every `v` of this flow and `w` of `other` with the same key
    /// (an inner join): both sides grouped by key (two scatter stages), then paired in the
    /// stage that reads the result.
    pub fn join<T, Q, W>(self, other: Flow<T, Q>) -> Flow<Joined<K, V, W>, Id>
    where
        T: Source,
        Q: Pipe<T::Item, Out = (K, W)>,
        W: Data,
    {
        self.join_by::<T, Q, W, ByHash>(other)
    }

    /// [`Flow::join`] with both sides' keys in partition `partitioner(&key, partitions)`, as
    /// [`Flow::reduce_by_key_partitioned`] has it.
    pub fn join_partitioned<T, Q, W, R>(
        self,
        other: Flow<T, Q>,
        partitioner: R,
    ) -> Flow<Joined<K, V, W>, Id>
    where
        T: Source,
        Q: Pipe<T::Item, Out = (K, W)>,
        W: Data,
        R: Fn(&K, usize) -> usize + Copy + 'static,
    {
        let _ = partitioner;
        self.join_by::<T, Q, W, Given<R>>(other)
    }

    fn join_by<T, Q, W, R>(self, other: Flow<T, Q>) -> Flow<Joined<K, V, W>, Id>
    where
        T: Source,
        Q: Pipe<T::Item, Out = (K, W)>,
        W: Data,
        R: Partitioner<K>,
    {
        let left = self.group_by::<R>();
        let right = other.group_by::<R>();
        source(vec![left.reads[0], right.reads[0]], true, true)
    }
}

/// A value in every partition, for [`Flow::map_with`]: from [`Flow::broadcast`] or
/// [`Job::broadcast`].
pub struct Broadcast<B> {
    id: i32,
    _value: Of<B>,
}

/// A flow's items kept for reading many times ([`Flow::cache`]).
pub struct Cached<T> {
    id: i32,
    partitioned: bool,
    _items: Of<T>,
}

impl<T> Clone for Cached<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Cached<T> {}

impl<T: Clone + 'static> Cached<T> {
    /// The items, to run operators on: copied, never consumed.
    pub fn flow(&self) -> Flow<Stored<Vec<T>>, Id> {
        source(vec![self.id], self.partitioned, false)
    }
}

impl Job {
    /// The text lines of the objects job argument `arg` names (`BUCKET/PREFIX`), split among
    /// the job's partitions: a load stage that keeps each partition's share as it is; the
    /// lines are split out as the next stage reads them.
    pub fn lines(&mut self, arg: &str) -> Flow<Stored<TextShare>, Id> {
        let to = made_dataset(&format!("lines({arg})"), true);
        sys::load(run_id::<LoadText>(), to, arg);
        source(vec![to], true, true)
    }

    /// The items of named dataset `dataset`, which tasks of [`Job::compute`] and kin fill:
    /// copied, never consumed.
    pub fn read<T: Clone + 'static>(
        &mut self,
        dataset: &Dataset<Vec<T>>,
    ) -> Flow<Stored<Vec<T>>, Id> {
        source(vec![declared_id(dataset)], dataset.is_partitioned(), false)
    }

    /// The value of one-partition dataset `dataset` in every partition, for
    /// [`Flow::map_with`]: a model, centroids.
    pub fn broadcast<B: Data + Default>(&mut self, dataset: &Dataset<B>) -> Broadcast<B> {
        assert!(
            !dataset.is_partitioned(),
            "broadcast({}): broadcast a dataset of one partition (Dataset::single)",
            dataset.name()
        );
        let from = declared_id(dataset);
        let each = made_dataset(&format!("broadcast({})", dataset.name()), true);
        sys::scatter(
            run_id::<Fused<One<B>, Id, ToAll, false>>(),
            &[from],
            run_id::<GatherOne<B>>(),
            &[each],
        );
        Broadcast {
            id: each,
            _value: PhantomData,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_goes_to_the_same_partition_every_time_and_keys_spread() {
        let mut counts = [0usize; 4];
        for k in 0..4000u64 {
            let p = partition_of(&k, 4);
            assert_eq!(p, partition_of(&k, 4));
            counts[p] += 1;
        }
        assert!(counts.iter().all(|&c| c > 800), "{counts:?}");
        assert_eq!(partition_of("word", 1), 0);
    }

    /// Every byte of a key counts, whichever loads read it: all 8,190 strings of `a` and `b` of
    /// 1 to 12 bytes (the tail of 1 to 7 bytes read as one, two or three loads) hash apart.
    #[test]
    fn keys_that_differ_in_any_byte_hash_apart() {
        let mut seen = std::collections::HashMap::new();
        for len in 1..=12u32 {
            for bits in 0..1u32 << len {
                let key: String = (0..len)
                    .map(|i| if bits >> i & 1 == 1 { 'b' } else { 'a' })
                    .collect();
                let mut hasher = KeyHasher::default();
                hasher.write(key.as_bytes());
                if let Some(other) = seen.insert(hasher.finish(), key.clone()) {
                    panic!("{key:?} and {other:?} hash alike");
                }
            }
        }
    }
}
