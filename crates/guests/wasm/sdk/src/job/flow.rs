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
//! `mix(fnv1a(key)) % partitions`, the same on every worker and every run.

use super::codec;
use super::text::Text;
use super::{
    AnyDataset, Dataset, Job, Run, Task, borrow, borrow_mut, conjure, declared_id, fail,
    function_name, made_dataset, run_id, scope, sys,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::cell::Ref;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt::{Display, Write};
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
pub type KeyMap<K, V> = HashMap<K, V, BuildHasherDefault<Fnv>>;

/// FNV-1a, 64-bit: fixed, so that every worker sends a key to the same partition, and quick on
/// short keys such as words.
#[derive(Clone, Copy)]
pub struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// The partition of `partitions` that `key` goes to. The hash is mixed first: a partition's keys
/// then still spread over all of a [`KeyMap`]'s buckets, which index by the same hash's low bits.
pub fn partition_of<K: Hash + ?Sized>(key: &K, partitions: usize) -> usize {
    let mut hasher = Fnv::default();
    key.hash(&mut hasher);
    let mut h = hasher.finish();
    // The finalizer of MurmurHash3: every input bit reaches every output bit.
    h = (h ^ (h >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    h = (h ^ (h >> 33)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    (h % partitions as u64) as usize
}

/// What a partition of a flow's dataset holds, and the items it yields.
pub trait Partition: Default + 'static {
    /// One item.
    type Item;
    /// Hands `out` every item, consuming the partition.
    fn drain(self, out: impl FnMut(Self::Item));
    /// Hands `out` a copy of every item, keeping the partition.
    fn copy(&self, out: impl FnMut(Self::Item));
}

impl<T: Clone + 'static> Partition for Vec<T> {
    type Item = T;
    fn drain(self, out: impl FnMut(T)) {
        self.into_iter().for_each(out);
    }
    fn copy(&self, out: impl FnMut(T)) {
        self.iter().cloned().for_each(out);
    }
}

impl<K: Clone + 'static, V: Clone + 'static> Partition for KeyMap<K, V> {
    type Item = (K, V);
    fn drain(self, out: impl FnMut((K, V))) {
        self.into_iter().for_each(out);
    }
    fn copy(&self, out: impl FnMut((K, V))) {
        self.iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .for_each(out);
    }
}

/// A partition's share of the input text, as the load stage of [`Job::lines`] keeps it; its
/// items are its lines, without their line ends, each a [`Text`] that shares the share's bytes.
#[derive(Default)]
pub struct TextShare(Text);

impl Partition for TextShare {
    type Item = Text;
    fn drain(self, out: impl FnMut(Text)) {
        self.copy(out);
    }
    fn copy(&self, out: impl FnMut(Text)) {
        self.0.each_line(out);
    }
}

/// Where a stage's items come from: the first datasets its stage reads.
pub trait Source: 'static {
    /// One item.
    type Item;
    /// How many datasets it reads.
    const READS: usize;
    /// Hands `out` every item of this task's partition; `take` consumes the partition.
    fn each(task: &Task, take: bool, out: impl FnMut(Self::Item));
}

/// A dataset of `C` partitions.
pub struct Stored<C>(Of<C>);

impl<C: Partition> Source for Stored<C> {
    type Item = C::Item;
    const READS: usize = 1;
    fn each(task: &Task, take: bool, out: impl FnMut(C::Item)) {
        let name = read_name(0);
        let cell = task.cell_named::<C>(&name);
        if take {
            std::mem::take(&mut *borrow_mut(cell, &name)).drain(out);
        } else {
            borrow(cell, &name).copy(out);
        }
    }
}

/// The pairs of two grouped datasets that share a key: [`Flow::join`]'s.
pub struct Joined<K, V, W>(Of<(K, V, W)>);

impl<K: Key, V: Data, W: Data> Source for Joined<K, V, W> {
    type Item = (K, (V, W));
    const READS: usize = 2;
    fn each(task: &Task, take: bool, mut out: impl FnMut(Self::Item)) {
        let (left, right) = (read_name(0), read_name(1));
        let left_cell = task.cell_named::<KeyMap<K, Vec<V>>>(&left);
        let right_cell = task.cell_named::<KeyMap<K, Vec<W>>>(&right);
        let mut pair = |k: &K, vs: &[V], ws: &[W]| {
            for v in vs {
                for w in ws {
                    out((k.clone(), (v.clone(), w.clone())));
                }
            }
        };
        if take {
            let rights = std::mem::take(&mut *borrow_mut(right_cell, &right));
            for (k, vs) in std::mem::take(&mut *borrow_mut(left_cell, &left)) {
                if let Some(ws) = rights.get(&k) {
                    pair(&k, &vs, ws);
                }
            }
        } else {
            let rights = borrow(right_cell, &right);
            for (k, vs) in borrow(left_cell, &left).iter() {
                if let Some(ws) = rights.get(k) {
                    pair(k, vs, ws);
                }
            }
        }
    }
}

fn read_name(k: usize) -> String {
    sys::task_dataset(0, k).unwrap_or_else(|| panic!("this task's stage reads no dataset {k}"))
}

fn written_name() -> String {
    sys::task_dataset(1, 0).expect("this task's stage writes a dataset")
}

/// A chain of per-item operators, applied to `In`s.
pub trait Pipe<In>: Copy + 'static {
    /// What comes out of the chain.
    type Out;
    /// What the chain holds while a task runs: its broadcasts.
    type State<'t>;
    /// Gets the chain's broadcasts ready; `side` is the position among the datasets the stage
    /// reads of the next one.
    fn open<'t>(self, task: &'t Task, side: &mut usize) -> Self::State<'t>;
    /// Runs `item` through the chain, handing `out` what comes out.
    fn push(self, state: &mut Self::State<'_>, item: In, out: &mut impl FnMut(Self::Out));
}

/// No operator: items pass unchanged.
#[derive(Clone, Copy)]
pub struct Id;

impl<In> Pipe<In> for Id {
    type Out = In;
    type State<'t> = ();
    fn open(self, _: &Task, _: &mut usize) {}
    fn push(self, _: &mut (), item: In, out: &mut impl FnMut(In)) {
        out(item);
    }
}

/// [`Flow::map`]'s operator after the chain `P`.
pub struct Map<P, F, U>(P, F, Of<U>);
/// [`Flow::try_map`]'s.
pub struct TryMap<P, F, U>(P, F, Of<U>);
/// [`Flow::flat_map`]'s.
pub struct FlatMap<P, F, I>(P, F, Of<I>);
/// [`Flow::filter`]'s.
#[derive(Clone, Copy)]
pub struct Filter<P, F>(P, F);
/// [`Flow::map_with`]'s.
pub struct MapWith<P, F, B, U>(P, F, Of<(B, U)>);

// By hand, as a derive would ask the phantom parameters to be `Copy` too.
macro_rules! copy_operator {
    ($op:ident<$($t:ident),*>) => {
        impl<P: Copy, F: Copy, $($t),*> Clone for $op<P, F, $($t),*> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<P: Copy, F: Copy, $($t),*> Copy for $op<P, F, $($t),*> {}
    };
}

copy_operator!(Map<U>);
copy_operator!(TryMap<U>);
copy_operator!(FlatMap<I>);
copy_operator!(MapWith<B, U>);

impl<In, P, F, U> Pipe<In> for Map<P, F, U>
where
    P: Pipe<In>,
    F: Fn(P::Out) -> U + Copy + 'static,
    U: 'static,
{
    type Out = U;
    type State<'t> = P::State<'t>;
    fn open<'t>(self, task: &'t Task, side: &mut usize) -> Self::State<'t> {
        self.0.open(task, side)
    }
    fn push(self, state: &mut Self::State<'_>, item: In, out: &mut impl FnMut(U)) {
        self.0.push(state, item, &mut |x| out((self.1)(x)));
    }
}

impl<In, P, F, U, E> Pipe<In> for TryMap<P, F, U>
where
    P: Pipe<In>,
    F: Fn(P::Out) -> Result<U, E> + Copy + 'static,
    U: 'static,
    E: Display,
{
    type Out = U;
    type State<'t> = P::State<'t>;
    fn open<'t>(self, task: &'t Task, side: &mut usize) -> Self::State<'t> {
        self.0.open(task, side)
    }
    fn push(self, state: &mut Self::State<'_>, item: In, out: &mut impl FnMut(U)) {
        self.0.push(state, item, &mut |x| match (self.1)(x) {
            Ok(y) => out(y),
            Err(e) => fail(function_name::<F>(), &e.to_string()),
        });
    }
}

impl<In, P, F, I> Pipe<In> for FlatMap<P, F, I>
where
    P: Pipe<In>,
    F: Fn(P::Out) -> I + Copy + 'static,
    I: IntoIterator + 'static,
{
    type Out = I::Item;
    type State<'t> = P::State<'t>;
    fn open<'t>(self, task: &'t Task, side: &mut usize) -> Self::State<'t> {
        self.0.open(task, side)
    }
    fn push(self, state: &mut Self::State<'_>, item: In, out: &mut impl FnMut(I::Item)) {
        self.0.push(state, item, &mut |x| {
            (self.1)(x).into_iter().for_each(&mut *out)
        });
    }
}

impl<In, P, F> Pipe<In> for Filter<P, F>
where
    P: Pipe<In>,
    F: Fn(&P::Out) -> bool + Copy + 'static,
{
    type Out = P::Out;
    type State<'t> = P::State<'t>;
    fn open<'t>(self, task: &'t Task, side: &mut usize) -> Self::State<'t> {
        self.0.open(task, side)
    }
    fn push(self, state: &mut Self::State<'_>, item: In, out: &mut impl FnMut(P::Out)) {
        self.0.push(state, item, &mut |x| {
            if (self.1)(&x) {
                out(x);
            }
        });
    }
}

impl<In, P, F, B, U> Pipe<In> for MapWith<P, F, B, U>
where
    P: Pipe<In>,
    F: Fn(P::Out, &B) -> U + Copy + 'static,
    B: Default + 'static,
    U: 'static,
{
    type Out = U;
    type State<'t> = (P::State<'t>, Ref<'t, B>, String);
    fn open<'t>(self, task: &'t Task, side: &mut usize) -> Self::State<'t> {
        let inner = self.0.open(task, side);
        let name = read_name(*side);
        *side += 1;
        (inner, borrow(task.cell_named::<B>(&name), &name), name)
    }
    fn push(self, state: &mut Self::State<'_>, item: In, out: &mut impl FnMut(U)) {
        let (inner, value, _) = state;
        self.0.push(inner, item, &mut |x| out((self.1)(x, value)));
    }
}

/// Where the items of a stage's chain go.
pub trait Sink<T>: 'static {
    /// What it holds while a task runs.
    type State;
    /// Gets ready for a task's items.
    fn open(task: &Task) -> Self::State;
    /// Takes one item.
    fn push(state: &mut Self::State, item: T);
    /// Puts away what the task's items made.
    fn close(task: &Task, state: Self::State);
}

/// Into the written dataset's partition, as a `Vec`.
pub struct IntoVec;

impl<T: 'static> Sink<T> for IntoVec {
    type State = Vec<T>;
    fn open(_: &Task) -> Vec<T> {
        Vec::new()
    }
    fn push(state: &mut Vec<T>, item: T) {
        state.push(item);
    }
    fn close(task: &Task, state: Vec<T>) {
        write(task, state);
    }
}

fn write<C: Default + 'static>(task: &Task, value: C) {
    let name = written_name();
    *borrow_mut(task.cell_named::<C>(&name), &name) = value;
}

/// Each pair to the partition its key goes to, after adding up the partition's values by key
/// with `F` (a map-side combiner).
pub struct CombineByKey<F>(Of<F>);

impl<K: Key, V: Data, F: Fn(V, V) -> V + Copy + 'static> Sink<(K, V)> for CombineByKey<F> {
    type State = KeyMap<K, V>;
    fn open(_: &Task) -> Self::State {
        KeyMap::default()
    }
    fn push(state: &mut Self::State, (k, v): (K, V)) {
        combine(state, k, v, conjure::<F>());
    }
    fn close(task: &Task, state: Self::State) {
        let mut pieces = Pieces::new(task.partitions());
        for (k, v) in &state {
            pieces.add(partition_of(k, pieces.0.len()), &(k, v));
        }
        pieces.emit();
    }
}

/// Each pair to the partition its key goes to.
pub struct ByKey;

impl<K: Key, V: Data> Sink<(K, V)> for ByKey {
    type State = Pieces;
    fn open(task: &Task) -> Pieces {
        Pieces::new(task.partitions())
    }
    fn push(state: &mut Pieces, item: (K, V)) {
        state.add(partition_of(&item.0, state.0.len()), &item);
    }
    fn close(_: &Task, state: Pieces) {
        state.emit();
    }
}

/// Every item to partition 0 (of a one-partition dataset).
pub struct ToOne;

impl<T: Data> Sink<T> for ToOne {
    type State = Pieces;
    fn open(_: &Task) -> Pieces {
        Pieces::new(1)
    }
    fn push(state: &mut Pieces, item: T) {
        state.add(0, &item);
    }
    fn close(_: &Task, state: Pieces) {
        state.emit();
    }
}

/// Every item to every partition: a broadcast's, from its one partition.
pub struct ToAll;

impl<T: Data> Sink<T> for ToAll {
    type State = Pieces;
    fn open(_: &Task) -> Pieces {
        Pieces::new(1)
    }
    fn push(state: &mut Pieces, item: T) {
        state.add(0, &item);
    }
    fn close(task: &Task, state: Pieces) {
        let piece = &state.0[0];
        for dest in 0..task.partitions() {
            task.emit(dest, piece);
        }
    }
}

/// Lines of text to the output, one an item, as `F` formats it.
pub struct LinesOut<F>(Of<F>);

impl<T, F: Fn(T) -> S + Copy + 'static, S: Display> Sink<T> for LinesOut<F> {
    type State = String;
    fn open(_: &Task) -> String {
        String::new()
    }
    fn push(state: &mut String, item: T) {
        writeln!(state, "{}", conjure::<F>()(item)).expect("a String takes any text");
    }
    fn close(task: &Task, state: String) {
        if !state.is_empty() {
            task.emit(0, state.as_bytes());
        }
    }
}

/// Each item to the output as a line of JSON.
pub struct JsonOut;

impl<T: Serialize> Sink<T> for JsonOut {
    type State = Vec<u8>;
    fn open(_: &Task) -> Vec<u8> {
        Vec::new()
    }
    fn push(state: &mut Vec<u8>, item: T) {
        serde_json::to_writer(&mut *state, &item)
            .unwrap_or_else(|e| panic!("a {} does not make JSON: {e}", std::any::type_name::<T>()));
        state.push(b'\n');
    }
    fn close(task: &Task, state: Vec<u8>) {
        if !state.is_empty() {
            task.emit(0, &state);
        }
    }
}

/// A scatter task's pieces by destination partition, emitted once each when the task ends:
/// a host call a piece, not an item.
pub struct Pieces(Vec<Vec<u8>>);

impl Pieces {
    fn new(partitions: usize) -> Self {
        Self(vec![Vec::new(); partitions])
    }

    fn add<T: Serialize + ?Sized>(&mut self, dest: usize, value: &T) {
        codec::encode_into(value, &mut self.0[dest]);
    }

    fn emit(self) {
        for (dest, piece) in self.0.into_iter().enumerate() {
            if !piece.is_empty() {
                sys::emit(dest as i32, &piece);
            }
        }
    }
}

/// `slot = f(slot, v)` where the map has `k`, else `v`. A lookup first, then an insert if the
/// key is new: most keys a combiner sees are old, and the lookup leaves the key in place where
/// `HashMap::entry` would move it in and out.
#[inline(always)]
fn combine<K: Key, V, F: Fn(V, V) -> V>(map: &mut KeyMap<K, V>, k: K, v: V, f: F) {
    match map.get_mut(&k) {
        Some(slot) => fold(slot, v, f),
        None => {
            map.insert(k, v);
        }
    }
}

/// `slot = f(slot, v)` where the map has `k`, else `v`. One probe, as a gather's keys are
/// mostly new to it.
#[inline(always)]
fn merge<K: Key, V, F: Fn(V, V) -> V>(map: &mut KeyMap<K, V>, k: K, v: V, f: F) {
    match map.entry(k) {
        Entry::Occupied(mut e) => fold(e.get_mut(), v, f),
        Entry::Vacant(e) => {
            e.insert(v);
        }
    }
}

/// `slot = f(slot, v)`, in place.
#[inline(always)]
fn fold<V, F: Fn(V, V) -> V>(slot: &mut V, v: V, f: F) {
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

/// Decodes every `T` of a gather task's pieces, in order.
fn gathered<T: Data>(task: &Task, mut each: impl FnMut(T)) {
    for piece in task.inputs() {
        codec::decode_each(&piece, &mut each).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// A gather that adds the pairs it receives up by key with `F`.
struct MergeByKey<K, V, F>(Of<(K, V, F)>);

impl<K: Key, V: Data, F: Fn(V, V) -> V + Copy + 'static> Run for MergeByKey<K, V, F> {
    fn run(task: &mut Task) {
        let mut map = KeyMap::<K, V>::default();
        gathered(task, |(k, v)| merge(&mut map, k, v, conjure::<F>()));
        write(task, map);
    }
}

/// A gather that groups the pairs it receives by key.
struct GroupByKey<K, V>(Of<(K, V)>);

impl<K: Key, V: Data> Run for GroupByKey<K, V> {
    fn run(task: &mut Task) {
        let mut map = KeyMap::<K, Vec<V>>::default();
        gathered(task, |(k, v)| map.entry(k).or_default().push(v));
        write(task, map);
    }
}

/// A gather that keeps every item it receives.
struct Gather<T>(Of<T>);

impl<T: Data> Run for Gather<T> {
    fn run(task: &mut Task) {
        let mut items = Vec::new();
        gathered(task, |item: T| items.push(item));
        write(task, items);
    }
}

/// A gather that keeps the one value it receives, a broadcast's.
struct GatherOne<B>(Of<B>);

impl<B: Data + Default> Run for GatherOne<B> {
    fn run(task: &mut Task) {
        let mut value = None;
        gathered(task, |v: B| value = Some(v));
        write(
            task,
            value.expect("a broadcast sends its value to every partition"),
        );
    }
}

/// A load task: the partition's share of the input text, kept as it is.
struct LoadText;

impl Run for LoadText {
    fn run(task: &mut Task) {
        let text = if sys::input_count() > 0 {
            Text::from_utf8(sys::input_shared(0)).unwrap_or_else(|e| {
                panic!(
                    "the input of partition {} is not UTF-8 text (byte {} of its share)",
                    task.index(),
                    e.valid_up_to()
                )
            })
        } else {
            Text::default()
        };
        write(task, TextShare(text));
    }
}

/// A task that runs source `S`'s items through chain `P` into sink `K`; `TAKE` consumes the
/// source's partitions.
struct Fused<S, P, K, const TAKE: bool>(Of<(S, P, K)>);

impl<S, P, K, const TAKE: bool> Run for Fused<S, P, K, TAKE>
where
    S: Source,
    P: Pipe<S::Item>,
    K: Sink<P::Out>,
{
    fn run(task: &mut Task) {
        let task = &*task;
        let pipe = conjure::<P>();
        let mut side = S::READS;
        let mut state = pipe.open(task, &mut side);
        let mut sink = K::open(task);
        S::each(task, TAKE, |item| {
            pipe.push(&mut state, item, &mut |out| K::push(&mut sink, out));
        });
        drop(state);
        K::close(task, sink);
    }
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
        let to = made_dataset("reduce_by_key", true);
        self.scatter::<CombineByKey<F>, MergeByKey<K, V, F>>(to);
        source(vec![to], true, true)
    }

    /// Each key once, with all its values. A scatter stage that sends every pair: prefer
    /// [`Flow::reduce_by_key`] where values can be combined.
    pub fn group_by_key(self) -> Flow<Stored<KeyMap<K, Vec<V>>>, Id> {
        let to = made_dataset("group_by_key", true);
        self.scatter::<ByKey, GroupByKey<K, V>>(to);
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
        let left = self.group_by_key();
        let right = other.group_by_key();
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

/// A one-partition dataset's value as one item.
struct One<B>(Of<B>);

impl<B: Data + Default> Source for One<B> {
    type Item = B;
    const READS: usize = 1;
    fn each(task: &Task, _: bool, mut out: impl FnMut(B)) {
        let name = read_name(0);
        out(borrow(task.cell_named::<B>(&name), &name).clone());
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

    #[test]
    fn combining_and_merging_fold_values_by_key() {
        let (mut combined, mut merged) = (KeyMap::default(), KeyMap::default());
        for (k, v) in [("a", 1), ("b", 2), ("a", 3)] {
            merge(&mut merged, k.to_owned(), v, |x, y| x + y);
            combine(&mut combined, Text::from(k), v, |x, y| x + y);
        }
        assert_eq!((merged["a"], merged["b"]), (4, 2));
        assert_eq!((combined["a"], combined["b"]), (4, 2));
    }
}
