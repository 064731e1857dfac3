//! One worker's task graph (sections 4.1 and 4.3): tasks for the partitions this worker holds,
//! spawned as soon as their stage is declared and released when their inputs are ready.
//!
//! For each partition of each dataset it holds, the graph remembers the last task to write it
//! and the tasks that read it since. A new task waits for the last writer of everything it reads
//! or writes, and for the readers of everything it writes, so stages run out of program order
//! wherever the datasets allow. A gather task also waits for one piece from every partition its
//! scatter reads (empty pieces count but carry nothing), and a load task for its input.
//!
//! Invariants:
//! - A task is *live* from its stage's declaration until [`TaskGraph::complete`]; references to
//!   it ([`TaskRef`]) carry a generation, so a reference to a finished task is recognised as
//!   such after its slot is reused, and never needs to be removed from the partitions' records.
//! - All partitions of one index of one group live in one guest instance, which runs one task
//!   at a time: a ready task whose instance is busy is parked on it and released when the
//!   running task completes.
//! - The graph allocates only when a record outgrows what it held before: slots, dependent
//!   lists and input lists of finished tasks are reused.
//! - A partition moves between workers (section 4.4) at a stage boundary: the source
//!   [`TaskGraph::release`]s it, spawns nothing more on it and lets the tasks it spawned finish;
//!   the destination [`TaskGraph::adopt`]s it from the next occurrence on, so every occurrence
//!   of a stage runs on a partition exactly once, on one worker or the other.

use crate::map::{PartitionKey, PartitionMap, WorkerId};
use crate::program::{GroupId, Program, StageId, StageKind};
use bytes::Bytes;
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, VecDeque};

/// A task, by its slot and generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TaskRef {
    slot: u32,
    generation: u32,
}

/// What a task does, which decides what the worker does with its outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskKind {
    /// Reads and writes its partitions.
    Compute,
    /// Emits pieces for a gather.
    Scatter,
    /// Merges the pieces addressed to its partition.
    Gather,
    /// Parses its share of the input.
    Load,
    /// Renders its partition for the output.
    Store,
    /// Computes a signal's value.
    Signal,
}

/// A piece of data a task reads: a gather's piece, by the partition that emitted it, or a
/// load's input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Input {
    /// The partition index that emitted it (0 for a load's input).
    pub source: u32,
    /// The bytes.
    pub data: Bytes,
}

/// What the worker needs to run a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskView {
    /// The occurrence of the stage it belongs to.
    pub seq: u64,
    /// The stage.
    pub stage: StageId,
    /// What it does.
    pub kind: TaskKind,
    /// The guest function to run.
    pub func: u32,
    /// The group of the partitions it runs on.
    pub group: GroupId,
    /// Their index.
    pub index: u32,
}

#[derive(Debug)]
struct Task {
    generation: u32,
    live: bool,
    view: TaskView,
    /// Unfinished tasks, pieces and inputs it still waits for.
    waiting: u32,
    dependents: Vec<TaskRef>,
    inputs: Vec<Input>,
}

#[derive(Debug, Default)]
struct Part {
    last_write: Option<TaskRef>,
    readers: Vec<TaskRef>,
}

#[derive(Debug, Default)]
struct Instance {
    busy: bool,
    parked: VecDeque<TaskRef>,
    /// Its live tasks.
    live: u32,
    /// The first occurrence this worker spawns tasks for on it: 0, or where it was adopted.
    from: u64,
}

/// Pieces that arrived for a gather this worker has not declared yet: by the partition that
/// emitted each, with its bytes (`None` for an empty piece).
pub type EarlyPieces = Vec<(u32, Option<Bytes>)>;

/// One worker's tasks.
#[derive(Debug)]
pub struct TaskGraph {
    tasks: Vec<Task>,
    free: Vec<u32>,
    /// By dataset, then partition index.
    parts: Vec<Vec<Part>>,
    /// By group, then partition index.
    instances: Vec<Vec<Instance>>,
    /// By group: the indices this worker holds.
    held: Vec<Vec<u32>>,
    ready: VecDeque<TaskRef>,
    /// Gathers still missing pieces, by occurrence and index: the task, and how many.
    gathers: FxHashMap<(u64, u32), (TaskRef, u32)>,
    /// How many gathers of each occurrence wait for pieces: the oldest bounds how far the
    /// worker declares ahead (`oldest_waiting_gather`).
    waiting_gathers: BTreeMap<u64, u32>,
    /// By occurrence, gather group and index.
    early: FxHashMap<(u64, GroupId, u32), EarlyPieces>,
    live: usize,
    /// Scratch space for the writers and readers a new task waits for.
    deps: Vec<TaskRef>,
}

impl TaskGraph {
    /// The graph of worker `me`, which holds the partitions `map` gives it.
    pub fn new(program: &Program, map: &PartitionMap, me: WorkerId) -> Self {
        let groups = program.groups.sizes();
        let parts = program
            .datasets
            .iter()
            .enumerate()
            .map(|(d, _)| {
                let size = groups[program.groups.of(crate::DatasetId(d as u32)).0 as usize];
                (0..size).map(|_| Part::default()).collect()
            })
            .collect();
        let instances = groups
            .iter()
            .map(|&size| (0..size).map(|_| Instance::default()).collect())
            .collect();
        let held = (0..groups.len())
            .map(|g| map.held_by(me, GroupId(g as u16)).collect())
            .collect();
        Self {
            tasks: Vec::new(),
            free: Vec::new(),
            parts,
            instances,
            held,
            ready: VecDeque::new(),
            gathers: FxHashMap::default(),
            waiting_gathers: BTreeMap::new(),
            early: FxHashMap::default(),
            live: 0,
            deps: Vec::new(),
        }
    }

    /// The indices of `group` this worker holds.
    pub fn held(&self, group: GroupId) -> &[u32] {
        &self.held[group.0 as usize]
    }

    /// Unfinished tasks.
    pub fn live(&self) -> usize {
        self.live
    }

    /// Tasks ready to run, parked ones included.
    pub fn ready(&self) -> usize {
        self.ready.len()
    }

    /// Declares occurrence `seq` of `stage`: spawns its tasks on the partitions this worker
    /// holds. Load tasks, which wait for their input, are appended to `loads`. Returns how many
    /// tasks it spawned on the stage's own group (a scatter's, not its gather's).
    pub fn declare(
        &mut self,
        program: &Program,
        seq: u64,
        stage_id: StageId,
        loads: &mut Vec<TaskRef>,
    ) -> u32 {
        self.declare_on(program, seq, stage_id, None, loads)
    }

    /// Whether partition `index` of `group` gets a task of occurrence `seq`: it is held since
    /// before it, and it is `only` when that is given.
    fn spawns_on(&self, group: GroupId, index: u32, seq: u64, only: Option<PartitionKey>) -> bool {
        self.instances[group.0 as usize][index as usize].from <= seq
            && only.is_none_or(|k| k.group == group && k.index == index)
    }

    fn declare_on(
        &mut self,
        program: &Program,
        seq: u64,
        stage_id: StageId,
        only: Option<PartitionKey>,
        loads: &mut Vec<TaskRef>,
    ) -> u32 {
        let stage = program.stage(stage_id);
        let group = program.group_of(stage);
        let view = |kind, func, group, index| TaskView {
            seq,
            stage: stage_id,
            kind,
            func,
            group,
            index,
        };
        let mut spawned = 0;
        match &stage.kind {
            StageKind::Compute | StageKind::Store { .. } | StageKind::Signal => {
                let kind = match stage.kind {
                    StageKind::Compute => TaskKind::Compute,
                    StageKind::Store { .. } => TaskKind::Store,
                    _ => TaskKind::Signal,
                };
                for n in 0..self.held[group.0 as usize].len() {
                    let index = self.held[group.0 as usize][n];
                    if !self.spawns_on(group, index, seq, only) {
                        continue;
                    }
                    let task = self.spawn(view(kind, stage.func, group, index), 0);
                    self.link(task, &stage.reads, &stage.writes, index);
                    self.settle(task);
                    spawned += 1;
                }
            }
            StageKind::Load { .. } => {
                for n in 0..self.held[group.0 as usize].len() {
                    let index = self.held[group.0 as usize][n];
                    if !self.spawns_on(group, index, seq, only) {
                        continue;
                    }
                    let task = self.spawn(view(TaskKind::Load, stage.func, group, index), 1);
                    self.link(task, &[], &stage.writes, index);
                    loads.push(task);
                    spawned += 1;
                }
            }
            StageKind::Scatter { gather } => {
                for n in 0..self.held[group.0 as usize].len() {
                    let index = self.held[group.0 as usize][n];
                    if !self.spawns_on(group, index, seq, only) {
                        continue;
                    }
                    let task = self.spawn(view(TaskKind::Scatter, stage.func, group, index), 0);
                    self.link(task, &stage.reads, &[], index);
                    self.settle(task);
                    spawned += 1;
                }
                let to = program.gather_group_of(stage);
                let sources = program.groups.size(group);
                for n in 0..self.held[to.0 as usize].len() {
                    let index = self.held[to.0 as usize][n];
                    if !self.spawns_on(to, index, seq, only) {
                        continue;
                    }
                    let task = self.spawn(view(TaskKind::Gather, *gather, to, index), sources);
                    self.link(task, &[], &stage.writes, index);
                    let mut missing = sources;
                    if let Some(early) = self.early.remove(&(seq, to, index)) {
                        missing -= early.len() as u32;
                        let t = &mut self.tasks[task.slot as usize];
                        t.waiting -= early.len() as u32;
                        t.inputs
                            .extend(early.into_iter().filter_map(|(source, data)| {
                                Some(Input {
                                    source,
                                    data: data?,
                                })
                            }));
                    }
                    if missing > 0 {
                        self.gathers.insert((seq, index), (task, missing));
                        *self.waiting_gathers.entry(seq).or_default() += 1;
                    }
                    if self.tasks[task.slot as usize].waiting == 0 {
                        self.ready.push_back(task);
                    }
                }
            }
        }
        spawned
    }

    /// Stops spawning tasks on partition `key`, which moves to another worker from the next
    /// occurrence on; the tasks already spawned on it still run here.
    pub fn release(&mut self, key: PartitionKey) {
        self.held[key.group.0 as usize].retain(|&i| i != key.index);
    }

    /// The first occurrence this worker spawns tasks of on `key`: 0, or where it arrived.
    pub fn from(&self, key: PartitionKey) -> u64 {
        self.instances[key.group.0 as usize][key.index as usize].from
    }

    /// Whether tasks spawned on partition `key` are still to finish.
    pub fn busy(&self, key: PartitionKey) -> bool {
        self.instances[key.group.0 as usize][key.index as usize].live > 0
    }

    /// The pieces that arrived here for gathers on `key` that this worker will not declare:
    /// they travel with the partition.
    pub fn take_early(&mut self, key: PartitionKey) -> Vec<(u64, EarlyPieces)> {
        let seqs: Vec<u64> = self
            .early
            .keys()
            .filter(|(_, g, i)| *g == key.group && *i == key.index)
            .map(|(seq, _, _)| *seq)
            .collect();
        let mut taken: Vec<(u64, EarlyPieces)> = seqs
            .into_iter()
            .map(|seq| {
                let pieces = self
                    .early
                    .remove(&(seq, key.group, key.index))
                    .expect("listed just now");
                (seq, pieces)
            })
            .collect();
        taken.sort_unstable_by_key(|(seq, _)| *seq);
        taken
    }

    /// Takes partition `key`, which ran every occurrence before `from` elsewhere: tasks are
    /// spawned on it for occurrences from `from` on. `declared` lists the occurrences this
    /// worker declared already at or after `from`, in order; their tasks on `key` are spawned
    /// now (load tasks appended to `loads`). Returns the occurrences of scatter stages it
    /// spawned a scatter task of.
    pub fn adopt(
        &mut self,
        program: &Program,
        key: PartitionKey,
        from: u64,
        declared: &[(u64, StageId)],
        loads: &mut Vec<TaskRef>,
    ) -> Vec<u64> {
        let held = &mut self.held[key.group.0 as usize];
        if !held.contains(&key.index) {
            held.push(key.index);
        }
        self.instances[key.group.0 as usize][key.index as usize].from = from;
        let mut scatters = Vec::new();
        for &(seq, stage) in declared {
            debug_assert!(seq >= from, "only occurrences from the adoption on");
            let spawned = self.declare_on(program, seq, stage, Some(key), loads);
            if spawned > 0 && matches!(program.stage(stage).kind, StageKind::Scatter { .. }) {
                scatters.push(seq);
            }
        }
        scatters
    }

    /// Pieces that reached no declared gather yet, for tests of what is left over.
    #[cfg(test)]
    pub(crate) fn early_pieces(&self) -> usize {
        self.early.values().map(Vec::len).sum()
    }

    fn spawn(&mut self, view: TaskView, waiting: u32) -> TaskRef {
        self.live += 1;
        self.instances[view.group.0 as usize][view.index as usize].live += 1;
        match self.free.pop() {
            Some(slot) => {
                let t = &mut self.tasks[slot as usize];
                t.live = true;
                t.view = view;
                t.waiting = waiting;
                t.dependents.clear();
                t.inputs.clear();
                TaskRef {
                    slot,
                    generation: t.generation,
                }
            }
            None => {
                self.tasks.push(Task {
                    generation: 0,
                    live: true,
                    view,
                    waiting,
                    dependents: Vec::new(),
                    inputs: Vec::new(),
                });
                TaskRef {
                    slot: self.tasks.len() as u32 - 1,
                    generation: 0,
                }
            }
        }
    }

    fn is_live(&self, r: TaskRef) -> bool {
        let t = &self.tasks[r.slot as usize];
        t.live && t.generation == r.generation
    }

    /// Makes `task` wait for the accesses before it to the partitions at `index` it reads and
    /// writes, and records its own.
    fn link(
        &mut self,
        task: TaskRef,
        reads: &[crate::DatasetId],
        writes: &[crate::DatasetId],
        index: u32,
    ) {
        let mut deps = std::mem::take(&mut self.deps);
        deps.clear();
        for d in reads {
            let part = &self.parts[d.0 as usize][index as usize];
            deps.extend(part.last_write);
        }
        for d in writes {
            let part = &self.parts[d.0 as usize][index as usize];
            deps.extend(part.last_write);
            deps.extend(part.readers.iter().copied());
        }
        for &dep in &deps {
            if dep != task && self.is_live(dep) {
                let t = &mut self.tasks[dep.slot as usize];
                if t.dependents.last() != Some(&task) {
                    t.dependents.push(task);
                    self.tasks[task.slot as usize].waiting += 1;
                }
            }
        }
        self.deps = deps;
        for d in reads {
            let tasks = &self.tasks;
            let part = &mut self.parts[d.0 as usize][index as usize];
            part.readers.retain(|r| {
                let t = &tasks[r.slot as usize];
                t.live && t.generation == r.generation
            });
            part.readers.push(task);
        }
        for d in writes {
            let part = &mut self.parts[d.0 as usize][index as usize];
            part.last_write = Some(task);
            part.readers.clear();
        }
    }

    fn settle(&mut self, task: TaskRef) {
        if self.tasks[task.slot as usize].waiting == 0 {
            self.ready.push_back(task);
        }
    }

    /// A piece for partition `index` of `group`, the gather of occurrence `seq`, from partition
    /// `source`; `None` says that partition emitted nothing for this one.
    pub fn piece(
        &mut self,
        seq: u64,
        group: GroupId,
        index: u32,
        source: u32,
        data: Option<Bytes>,
    ) {
        match self.gathers.get_mut(&(seq, index)) {
            Some((task, missing)) => {
                let task = *task;
                *missing -= 1;
                if *missing == 0 {
                    // Its last piece: what it may still wait for is an earlier task here.
                    self.gathers.remove(&(seq, index));
                    if let Some(n) = self.waiting_gathers.get_mut(&seq) {
                        *n -= 1;
                        if *n == 0 {
                            self.waiting_gathers.remove(&seq);
                        }
                    }
                }
                let t = &mut self.tasks[task.slot as usize];
                t.inputs.extend(data.map(|data| Input { source, data }));
                t.waiting -= 1;
                if t.waiting == 0 {
                    self.ready.push_back(task);
                }
            }
            None => self
                .early
                .entry((seq, group, index))
                .or_default()
                .push((source, data)),
        }
    }

    /// The oldest occurrence with a gather here still waiting for pieces from other workers:
    /// a worker that declares far past it would hold ever more pieces for gathers that cannot
    /// run yet, so it stops a bounded distance ahead.
    pub fn oldest_waiting_gather(&self) -> Option<u64> {
        self.waiting_gathers.keys().next().copied()
    }

    /// A load task's input.
    pub fn input(&mut self, task: TaskRef, data: Bytes) {
        let t = &mut self.tasks[task.slot as usize];
        t.inputs.push(Input { source: 0, data });
        t.waiting -= 1;
        if t.waiting == 0 {
            self.ready.push_back(task);
        }
    }

    /// The next ready task whose instance is free, which is then marked busy.
    pub fn pop(&mut self) -> Option<TaskRef> {
        while let Some(task) = self.ready.pop_front() {
            let v = self.tasks[task.slot as usize].view;
            let instance = &mut self.instances[v.group.0 as usize][v.index as usize];
            if instance.busy {
                instance.parked.push_back(task);
                continue;
            }
            instance.busy = true;
            return Some(task);
        }
        None
    }

    /// What a task runs.
    pub fn view(&self, task: TaskRef) -> TaskView {
        self.tasks[task.slot as usize].view
    }

    /// Takes a task's inputs, sorted by the partition that emitted them.
    pub fn take_inputs(&mut self, task: TaskRef) -> Vec<Input> {
        let mut inputs = std::mem::take(&mut self.tasks[task.slot as usize].inputs);
        inputs.sort_unstable_by_key(|i| i.source);
        inputs
    }

    /// Gives back the input list [`TaskGraph::take_inputs`] took, so its allocation is reused.
    pub fn return_inputs(&mut self, task: TaskRef, mut inputs: Vec<Input>) {
        inputs.clear();
        self.tasks[task.slot as usize].inputs = inputs;
    }

    /// A task finished: its instance is free, and the tasks waiting for it may be ready.
    pub fn complete(&mut self, task: TaskRef) {
        let t = &mut self.tasks[task.slot as usize];
        debug_assert!(t.live && t.generation == task.generation);
        t.live = false;
        t.generation = t.generation.wrapping_add(1);
        let v = t.view;
        let mut dependents = std::mem::take(&mut t.dependents);
        for d in dependents.drain(..) {
            let dt = &mut self.tasks[d.slot as usize];
            if dt.generation == d.generation && dt.live {
                dt.waiting -= 1;
                if dt.waiting == 0 {
                    self.ready.push_back(d);
                }
            }
        }
        self.tasks[task.slot as usize].dependents = dependents;
        self.free.push(task.slot);
        self.live -= 1;
        let instance = &mut self.instances[v.group.0 as usize][v.index as usize];
        instance.busy = false;
        instance.live -= 1;
        if let Some(next) = instance.parked.pop_front() {
            self.ready.push_front(next);
        }
    }
}

#[cfg(test)]
mod tests;
