//! What a stage's task does with its items: the [`Sink`]s a chain ends in (a dataset, pieces
//! by key, the output), the gathers that receive pieces, the load of text, and [`Fused`], the
//! task that runs a source through a chain into a sink.

use super::combiner::{Combiner, fold};
use super::pipe::Pipe;
use super::source::{Source, TextShare, written_name};
use super::{Data, Key, KeyMap, Of, partition_of};
use crate::job::text::Text;
use crate::job::{Run, Task, borrow_mut, codec, conjure, sys};
use serde::Serialize;
use std::collections::hash_map::Entry;
use std::fmt::{Display, Write};
use std::hash::Hash;

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

pub(super) fn write<C: Default + 'static>(task: &Task, value: C) {
    let name = written_name();
    *borrow_mut(task.cell_named::<C>(&name), &name) = value;
}

/// Which of a job's partitions a key goes to: [`ByHash`] unless an operator's `_partitioned`
/// form is given a function ([`Given`]).
pub trait Partitioner<K: ?Sized>: 'static {
    /// The partition of `partitions` that `key` goes to.
    fn partition(key: &K, partitions: usize) -> usize;
}

/// Keys by their hash: [`partition_of`].
pub struct ByHash;

impl<K: Hash + ?Sized> Partitioner<K> for ByHash {
    #[inline(always)]
    fn partition(key: &K, partitions: usize) -> usize {
        partition_of(key, partitions)
    }
}

/// Keys by the function `R`, checked to name one of the job's partitions.
pub struct Given<R>(Of<R>);

impl<K, R: Fn(&K, usize) -> usize + Copy + 'static> Partitioner<K> for Given<R> {
    fn partition(key: &K, partitions: usize) -> usize {
        let to = conjure::<R>()(key, partitions);
        assert!(
            to < partitions,
            "the partitioner {} sent a key to partition {to}, but the job's partitions are 0 to {}",
            std::any::type_name::<R>(),
            partitions - 1
        );
        to
    }
}

/// Each pair to the partition `R` gives its key, after adding up the partition's values by key
/// with `F` (a map-side combiner).
pub struct CombineByKey<F, R = ByHash>(Of<(F, R)>);

impl<K, V, F, R> Sink<(K, V)> for CombineByKey<F, R>
where
    K: Key,
    V: Data,
    F: Fn(V, V) -> V + Copy + 'static,
    R: Partitioner<K>,
{
    type State = Combiner<K, V>;
    fn open(_: &Task) -> Self::State {
        Combiner::new()
    }
    #[inline(always)]
    fn push(state: &mut Self::State, (k, v): (K, V)) {
        state.combine(k, v, conjure::<F>());
    }
    fn close(task: &Task, mut state: Self::State) {
        let mut pieces = Pieces::new(task.partitions());
        for (k, v) in state.iter(conjure::<F>()) {
            pieces.add(R::partition(k, pieces.0.len()), &(k, v));
        }
        pieces.emit();
    }
}

/// Each pair to the partition `R` gives its key.
pub struct ByKey<R = ByHash>(Of<R>);

impl<K: Key, V: Data, R: Partitioner<K>> Sink<(K, V)> for ByKey<R> {
    type State = Pieces;
    fn open(task: &Task) -> Pieces {
        Pieces::new(task.partitions())
    }
    fn push(state: &mut Pieces, item: (K, V)) {
        state.add(R::partition(&item.0, state.0.len()), &item);
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

/// Every item to every partition: a broadcast's, from its one partition. Its items gather as
/// [`ToOne`]'s do; only where the piece goes differs.
pub struct ToAll;

impl<T: Data> Sink<T> for ToAll {
    type State = Pieces;
    fn open(task: &Task) -> Pieces {
        <ToOne as Sink<T>>::open(task)
    }
    fn push(state: &mut Pieces, item: T) {
        <ToOne as Sink<T>>::push(state, item);
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

/// `slot = f(slot, v)` where the map has `k`, else `v`. One probe, as a gather's keys are
/// mostly new to it.
#[inline(always)]
pub(super) fn merge<K: Key, V, F: Fn(V, V) -> V>(map: &mut KeyMap<K, V>, k: K, v: V, f: F) {
    match map.entry(k) {
        Entry::Occupied(mut e) => fold(e.get_mut(), v, f),
        Entry::Vacant(e) => {
            e.insert(v);
        }
    }
}

/// Decodes every `T` of a gather task's pieces, in order.
pub(super) fn gathered<T: Data>(task: &Task, mut each: impl FnMut(T)) {
    for piece in task.inputs() {
        codec::decode_each(&piece, &mut each).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// A gather that adds the pairs it receives up by key with `F`.
pub(super) struct MergeByKey<K, V, F>(Of<(K, V, F)>);

impl<K: Key, V: Data, F: Fn(V, V) -> V + Copy + 'static> Run for MergeByKey<K, V, F> {
    fn run(task: &mut Task) {
        let mut map = KeyMap::<K, V>::default();
        gathered(task, |(k, v)| merge(&mut map, k, v, conjure::<F>()));
        write(task, map);
    }
}

/// A gather that groups the pairs it receives by key.
pub(super) struct GroupByKey<K, V>(Of<(K, V)>);

impl<K: Key, V: Data> Run for GroupByKey<K, V> {
    fn run(task: &mut Task) {
        let mut map = KeyMap::<K, Vec<V>>::default();
        gathered(task, |(k, v)| map.entry(k).or_default().push(v));
        write(task, map);
    }
}

/// A gather that keeps every item it receives.
pub(super) struct Gather<T>(Of<T>);

impl<T: Data> Run for Gather<T> {
    fn run(task: &mut Task) {
        let mut items = Vec::new();
        gathered(task, |item: T| items.push(item));
        write(task, items);
    }
}

/// A gather that keeps the one value it receives, a broadcast's.
pub(super) struct GatherOne<B>(Of<B>);

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
pub(super) struct LoadText;

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
pub(super) struct Fused<S, P, K, const TAKE: bool>(Of<(S, P, K)>);

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_folds_values_by_key() {
        let mut merged = KeyMap::default();
        for (k, v) in [("a", 1), ("b", 2), ("a", 3)] {
            merge(&mut merged, k.to_owned(), v, |x, y| x + y);
        }
        assert_eq!((merged["a"], merged["b"]), (4, 2));
    }
}
