//! The partition map (section 3.3) and the data exchange's version rules (section 4.2).
//!
//! The controller owns the map; workers hold copies that may lag behind it. Each entry carries a
//! version the controller increments whenever it changes the entry, and every piece of scatter
//! data travels with the version of the entry its sender routed it by. A worker that receives
//! data for a partition it does not hold compares versions: the sender's is newer, so this
//! worker is about to hold the partition and keeps the data ([`Delivery::Hold`]); the sender's
//! is older (or the same), so the sender's map is stale and this worker passes the data on to
//! the holder its own map names ([`Delivery::Forward`]). Updates are applied only when newer
//! than the entry held, so they may arrive late, twice or out of order.

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::program::GroupId;

/// A worker of a job, by its place in the job's worker list.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub struct WorkerId(pub u16);

/// A partition index of a group: the partitions of every dataset of the group at that index,
/// which always live together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PartitionKey {
    /// The group.
    pub group: GroupId,
    /// The index.
    pub index: u32,
}

/// Who holds a partition, as of which version of its entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The worker holding it.
    pub worker: WorkerId,
    /// The entry's version.
    pub version: u32,
}

/// Which worker holds each partition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionMap {
    groups: Vec<Vec<Entry>>,
}

impl PartitionMap {
    /// The initial map, version 1 everywhere. A partitioned group's indices are split into
    /// contiguous runs sized by each worker's cores, so every core gets the same number of
    /// partitions of it; one-partition groups go to the workers in turn, so that one worker
    /// does not hold every global value.
    pub fn assign(group_sizes: &[u32], cores: &[u32]) -> Self {
        assert!(!cores.is_empty(), "a job has at least one worker");
        let total: u64 = cores.iter().map(|&c| u64::from(c.max(1))).sum();
        let mut singles = 0usize;
        let groups = group_sizes
            .iter()
            .map(|&size| {
                if size == 1 {
                    let worker = WorkerId((singles % cores.len()) as u16);
                    singles += 1;
                    return vec![Entry { worker, version: 1 }];
                }
                let mut entries = Vec::with_capacity(size as usize);
                let mut before = 0u64;
                for (w, &c) in cores.iter().enumerate() {
                    before += u64::from(c.max(1));
                    let upto = (u64::from(size) * before / total) as usize;
                    while entries.len() < upto {
                        entries.push(Entry {
                            worker: WorkerId(w as u16),
                            version: 1,
                        });
                    }
                }
                entries
            })
            .collect();
        Self { groups }
    }

    /// The entry of a partition.
    pub fn entry(&self, key: PartitionKey) -> Entry {
        self.groups[key.group.0 as usize][key.index as usize]
    }

    /// Applies an update if it is newer than the entry held; returns whether it was.
    pub fn apply(&mut self, key: PartitionKey, entry: Entry) -> bool {
        let held = &mut self.groups[key.group.0 as usize][key.index as usize];
        if entry.version > held.version {
            *held = entry;
            true
        } else {
            false
        }
    }

    /// The indices of `group` that `worker` holds.
    pub fn held_by(&self, worker: WorkerId, group: GroupId) -> impl Iterator<Item = u32> + '_ {
        self.groups[group.0 as usize]
            .iter()
            .enumerate()
            .filter(move |(_, e)| e.worker == worker)
            .map(|(i, _)| i as u32)
    }

    /// How many partitions `group` has.
    pub fn size(&self, group: GroupId) -> u32 {
        self.groups[group.0 as usize].len() as u32
    }

    /// How many groups.
    pub fn groups(&self) -> usize {
        self.groups.len()
    }

    /// How many partitions of every group each worker holds, by [`WorkerId`].
    pub fn counts(&self, workers: usize) -> Vec<usize> {
        let mut counts = vec![0; workers];
        for e in self.groups.iter().flatten() {
            if let Some(c) = counts.get_mut(e.worker.0 as usize) {
                *c += 1;
            }
        }
        counts
    }
}

impl PartitionMap {
    /// The moves that give the workers the shares of partitions that let the busiest finish
    /// first, each worker's time being the indices it holds over its weight in `weights` (a
    /// worker of weight 0 is gone, or not taking part, and ends with nothing): new entries, each
    /// one version newer. Nothing moves unless that cuts the busiest worker's time by
    /// [`WORTH_MOVING`]. Partitioned groups move by index, every group's partition at an index
    /// together, so that co-partitioned data stays on one worker; a one-partition group moves
    /// only when its holder is gone, to the worker with the most weight left per partition. The
    /// fewest indices move: only workers above their share give, their highest indices, and
    /// only workers below it take.
    pub fn rebalance(&self, weights: &[f64]) -> Vec<(PartitionKey, Entry)> {
        if !weights.iter().any(|w| *w > 0.0) {
            return Vec::new();
        }
        let units = self
            .groups
            .iter()
            .filter(|g| g.len() > 1)
            .map(Vec::len)
            .max()
            .unwrap_or(0);
        // The owner of an index: the holder of its partition in the first group that has it.
        let owner = |i: usize| {
            self.groups
                .iter()
                .find(|g| g.len() > 1 && i < g.len())
                .map(|g| g[i].worker)
                .expect("an index below the largest group's size")
        };
        let mut held: Vec<Vec<usize>> = vec![Vec::new(); weights.len()];
        for i in 0..units {
            if let Some(h) = held.get_mut(owner(i).0 as usize) {
                h.push(i);
            }
        }
        let counts: Vec<usize> = held.iter().map(Vec::len).collect();
        let least = least_busiest(units, weights);
        if busiest(&counts, weights) > least * (1.0 + WORTH_MOVING) {
            // Each worker may hold what it finishes within the least time; every index over
            // that goes to the worker that would finish it first.
            let cap: Vec<usize> = weights
                .iter()
                .map(|w| (least * w.max(0.0) * (1.0 + 1e-9)).floor() as usize)
                .collect();
            let mut surplus: Vec<usize> = Vec::new();
            for (w, h) in held.iter_mut().enumerate() {
                while h.len() > cap[w] {
                    surplus.push(h.pop().expect("longer than its cap"));
                }
            }
            surplus.sort_unstable();
            for index in surplus {
                let to = (0..weights.len())
                    .filter(|&w| held[w].len() < cap[w])
                    .min_by(|&a, &b| {
                        let after = |w: usize| (held[w].len() + 1) as f64 / weights[w];
                        after(a).total_cmp(&after(b)).then(a.cmp(&b))
                    })
                    .expect("the caps hold every index");
                held[to].push(index);
            }
        }
        // Every group's partition at an index goes where the index now is.
        let mut unit_owner = vec![0usize; units];
        for (w, h) in held.iter().enumerate() {
            for &i in h {
                unit_owner[i] = w;
            }
        }
        let mut moves = Vec::new();
        for (g, group) in self.groups.iter().enumerate() {
            if group.len() == 1 {
                continue;
            }
            for (i, entry) in group.iter().enumerate() {
                if entry.worker.0 as usize != unit_owner[i] {
                    moves.push((
                        PartitionKey {
                            group: GroupId(g as u16),
                            index: i as u32,
                        },
                        Entry {
                            worker: WorkerId(unit_owner[i] as u16),
                            version: entry.version + 1,
                        },
                    ));
                }
            }
        }
        for (g, group) in self.groups.iter().enumerate() {
            if group.len() != 1
                || weights
                    .get(group[0].worker.0 as usize)
                    .is_some_and(|w| *w > 0.0)
            {
                continue;
            }
            let to = (0..weights.len())
                .filter(|&w| weights[w] > 0.0)
                .max_by(|&a, &b| {
                    let room = |w: usize| weights[w] / (held[w].len() + 1) as f64;
                    room(a).total_cmp(&room(b)).then(b.cmp(&a))
                })
                .expect("some weight is positive");
            moves.push((
                PartitionKey {
                    group: GroupId(g as u16),
                    index: 0,
                },
                Entry {
                    worker: WorkerId(to as u16),
                    version: group[0].version + 1,
                },
            ));
        }
        moves
    }
}

/// A rebalance moves indices only when that cuts the busiest worker's time by this fraction:
/// a move costs a transfer of state, and speeds measured over one window are noisy, so that
/// shares that are nearly right stay where they are instead of swinging back and forth.
pub const WORTH_MOVING: f64 = 0.1;

/// The busiest worker's time: its count over its weight (endless for a gone worker that holds
/// anything).
fn busiest(counts: &[usize], weights: &[f64]) -> f64 {
    counts
        .iter()
        .zip(weights)
        .map(|(&c, &w)| match (c, w > 0.0) {
            (0, _) => 0.0,
            (_, true) => c as f64 / w,
            (_, false) => f64::INFINITY,
        })
        .fold(0.0, f64::max)
}

/// The least time the busiest worker can have with `units` indices shared out: each index in
/// turn goes to the worker that would finish it first, which is optimal for equal indices on
/// workers of different speeds.
fn least_busiest(units: usize, weights: &[f64]) -> f64 {
    let mut counts = vec![0usize; weights.len()];
    for _ in 0..units {
        let w = (0..weights.len())
            .filter(|&w| weights[w] > 0.0)
            .min_by(|&a, &b| {
                let after = |w: usize| (counts[w] + 1) as f64 / weights[w];
                after(a).total_cmp(&after(b)).then(a.cmp(&b))
            })
            .expect("some weight is positive");
        counts[w] += 1;
    }
    busiest(&counts, weights)
}

/// What to do with data for a partition that reached this worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// This worker holds the partition: use it.
    Accept,
    /// This worker is about to hold it (the sender's entry is newer): keep it until then.
    Hold,
    /// The sender's map is stale: pass it to the holder this worker's map names, with this
    /// worker's version.
    Forward(Entry),
}

/// An item with its routing decision taken.
#[derive(Debug, PartialEq, Eq)]
pub enum Routed<T> {
    /// This worker holds the partition.
    Accept(PartitionKey, T),
    /// Send it on.
    Forward(PartitionKey, Entry, T),
}

/// A worker's copy of the map, and the data it holds for partitions it is about to hold.
#[derive(Debug)]
pub struct Exchange<T> {
    me: WorkerId,
    map: PartitionMap,
    held: FxHashMap<PartitionKey, Vec<(u32, T)>>,
}

impl<T> Exchange<T> {
    /// Worker `me`'s view, starting from `map`.
    pub fn new(me: WorkerId, map: PartitionMap) -> Self {
        Self {
            me,
            map,
            held: FxHashMap::default(),
        }
    }

    /// The map as this worker knows it.
    pub fn map(&self) -> &PartitionMap {
        &self.map
    }

    /// Where to send data for `key`, and the version to send with it.
    pub fn route(&self, key: PartitionKey) -> Entry {
        self.map.entry(key)
    }

    /// The decision for data the sender routed by an entry of version `sent_version`.
    pub fn decide(&self, key: PartitionKey, sent_version: u32) -> Delivery {
        let mine = self.map.entry(key);
        if mine.worker == self.me {
            Delivery::Accept
        } else if sent_version > mine.version {
            Delivery::Hold
        } else {
            Delivery::Forward(mine)
        }
    }

    /// Takes in data that arrived for `key`: accepted or to forward now, or held.
    pub fn receive(&mut self, key: PartitionKey, sent_version: u32, item: T) -> Option<Routed<T>> {
        match self.decide(key, sent_version) {
            Delivery::Accept => Some(Routed::Accept(key, item)),
            Delivery::Forward(entry) => Some(Routed::Forward(key, entry, item)),
            Delivery::Hold => {
                self.held.entry(key).or_default().push((sent_version, item));
                None
            }
        }
    }

    /// Applies a map update; data held for `key` that the new entry settles comes back out.
    pub fn update(&mut self, key: PartitionKey, entry: Entry) -> Vec<Routed<T>> {
        if !self.map.apply(key, entry) {
            return Vec::new();
        }
        let Some(held) = self.held.remove(&key) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (version, item) in held {
            if let Some(routed) = self.receive(key, version, item) {
                out.push(routed);
            }
        }
        out
    }

    /// Items held, waiting for an update.
    pub fn held(&self) -> usize {
        self.held.values().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests;
