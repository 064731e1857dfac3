//! Where a stage's items come from: what a flow's dataset holds ([`Partition`]), and the
//! [`Source`]s that hand a task the items of the datasets its stage reads.

use super::{Data, Key, KeyMap, Of};
use crate::job::text::Text;
use crate::job::{Task, borrow, borrow_mut, sys};

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
pub struct TextShare(pub(super) Text);

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

pub(super) fn read_name(k: usize) -> String {
    sys::task_dataset(0, k).unwrap_or_else(|| panic!("this task's stage reads no dataset {k}"))
}

pub(super) fn written_name() -> String {
    sys::task_dataset(1, 0).expect("this task's stage writes a dataset")
}

/// A one-partition dataset's value as one item.
pub(super) struct One<B>(Of<B>);

impl<B: Data + Default> Source for One<B> {
    type Item = B;
    const READS: usize = 1;
    fn each(task: &Task, _: bool, mut out: impl FnMut(B)) {
        let name = read_name(0);
        out(borrow(task.cell_named::<B>(&name), &name).clone());
    }
}
