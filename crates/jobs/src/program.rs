//! The program a job's driver declares: its datasets, its stages, and the loops and branches
//! around them, flattened into a list of [`Op`]s a [`crate::Cursor`] steps through.
//!
//! The driver runs once per worker (and once in the controller); every copy makes the same
//! calls in the same order, so every copy builds the same program and the stage identifiers
//! agree across workers without any coordination. The driver never sees data: a loop that
//! depends on data waits at a signal, a boolean one worker computes and broadcasts.
//!
//! [`Groups`] are the placement constraints of section 3.3: datasets that any stage touches
//! together (a compute stage's reads and writes; a scatter's reads, and separately its writes)
//! form one group, whose partitions of one index must live on one worker. They must therefore
//! have the same partition count, which [`ProgramBuilder::finish`] checks.

use serde::{Deserialize, Serialize};
use std::sync::Arc;
use thiserror::Error;

/// A dataset, by the order the driver declared it in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DatasetId(pub u32);

/// A group of co-partitioned datasets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GroupId(pub u16);

/// A stage, by its place in the program: the same on every worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct StageId(pub u32);

/// A dataset as the driver declared it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatasetInfo {
    /// Its name in the driver, for messages.
    pub name: String,
    /// The job's partition count (true) or one partition (false).
    pub partitioned: bool,
}

/// What a stage does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum StageKind {
    /// One task per partition index over co-partitioned datasets.
    Compute,
    /// Tasks on the partitions read emit pieces for partitions of the datasets written; a
    /// `gather` task on each of those merges the pieces addressed to it.
    Scatter {
        /// The gather function.
        gather: u32,
    },
    /// A task per partition of the dataset written parses its share of the input objects.
    Load {
        /// The job argument naming `BUCKET/PREFIX`.
        arg: String,
    },
    /// A task per partition of the dataset read renders it for `PREFIX/part-NNNNN`.
    Store {
        /// The job argument naming `BUCKET/PREFIX`.
        arg: String,
    },
    /// A task on the one partition of the dataset read computes a boolean every worker waits
    /// for.
    Signal,
}

/// One stage of the program.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stage {
    /// What it does.
    pub kind: StageKind,
    /// The task function (a scatter's scatter function), as the guest numbers it.
    pub func: u32,
    /// The datasets its tasks read (a scatter's: those its scatter tasks read).
    pub reads: Vec<DatasetId>,
    /// The datasets its tasks write (a scatter's: those its gather tasks write).
    pub writes: Vec<DatasetId>,
}

/// One step of the flattened program. Jumps are indices into [`Program::ops`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// Run a stage.
    Stage(StageId),
    /// Run the body up to `end` `times` times.
    Repeat {
        /// How many times.
        times: u64,
        /// The index of the matching [`Op::End`].
        end: usize,
    },
    /// Evaluate `signal`; while it is true run the body up to `end`.
    While {
        /// The signal stage.
        signal: StageId,
        /// The index of the matching [`Op::End`].
        end: usize,
    },
    /// Evaluate `signal`; run the body up to `otherwise` if true, the rest up to `end` if not.
    If {
        /// The signal stage.
        signal: StageId,
        /// The index of the matching [`Op::Else`], or `end` if there is none.
        otherwise: usize,
        /// The index of the matching [`Op::End`].
        end: usize,
    },
    /// The end of an `If`'s true branch.
    Else {
        /// The index of the matching [`Op::End`].
        end: usize,
    },
    /// The end of a `Repeat`, `While` or `If`.
    End {
        /// The index of the opening op.
        start: usize,
    },
}

/// A job's program, the same on every worker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Program {
    /// The job's partition count, which the controller chose before the driver ran.
    pub partitions: u32,
    /// Every dataset, by [`DatasetId`].
    pub datasets: Vec<DatasetInfo>,
    /// Every stage, by [`StageId`].
    pub stages: Vec<Stage>,
    /// The flattened control flow.
    pub ops: Vec<Op>,
    /// Which group each dataset belongs to.
    pub groups: Groups,
    /// By op: how many blocks enclose it (0 for the program's top level).
    pub depth: Vec<u16>,
}

/// The placement constraints: each dataset's group, and each group's partition count.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Groups {
    of_dataset: Vec<GroupId>,
    sizes: Vec<u32>,
}

impl Groups {
    /// The group `dataset` belongs to.
    pub fn of(&self, dataset: DatasetId) -> GroupId {
        self.of_dataset[dataset.0 as usize]
    }

    /// How many partitions the datasets of `group` have.
    pub fn size(&self, group: GroupId) -> u32 {
        self.sizes[group.0 as usize]
    }

    /// Every group's partition count, by [`GroupId`].
    pub fn sizes(&self) -> &[u32] {
        &self.sizes
    }
}

impl Program {
    /// A stage by id.
    pub fn stage(&self, id: StageId) -> &Stage {
        &self.stages[id.0 as usize]
    }

    /// The group a stage's tasks run on (a scatter's: its scatter tasks').
    pub fn group_of(&self, stage: &Stage) -> GroupId {
        let dataset = stage
            .reads
            .first()
            .or(stage.writes.first())
            .expect("the builder refuses a stage that touches no dataset");
        self.groups.of(*dataset)
    }

    /// The group a scatter's gather tasks run on.
    pub fn gather_group_of(&self, stage: &Stage) -> GroupId {
        self.groups.of(stage.writes[0])
    }

    /// Every dataset's name, by id: what a task instance may ask for (`task_dataset`).
    pub fn dataset_names(&self) -> Arc<[String]> {
        self.datasets.iter().map(|d| d.name.clone()).collect()
    }

    /// The name of a dataset, for messages.
    pub fn dataset_name(&self, dataset: DatasetId) -> &str {
        &self.datasets[dataset.0 as usize].name
    }
}

/// A driver's program is refused, with what is wrong in its terms.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ProgramError {
    /// A stage names a dataset that was never declared.
    #[error("stage {stage} names dataset {dataset}, which the driver never declared")]
    UnknownDataset {
        /// The stage's position.
        stage: u32,
        /// The id it named.
        dataset: u32,
    },
    /// A stage reads and writes nothing.
    #[error("stage {stage} ({kind}) touches no dataset; every stage reads or writes one")]
    NoDataset {
        /// The stage's position.
        stage: u32,
        /// What kind of stage.
        kind: &'static str,
    },
    /// A stage has the wrong number of datasets for its kind.
    #[error("stage {stage} ({kind}) {problem}")]
    Shape {
        /// The stage's position.
        stage: u32,
        /// What kind of stage.
        kind: &'static str,
        /// What is wrong.
        problem: &'static str,
    },
    /// Datasets that must be co-partitioned have different partition counts.
    #[error(
        "datasets `{a}` ({a_parts} partitions) and `{b}` ({b_parts}) are touched together by a \
         stage, so they must have the same partitioning"
    )]
    Partitioning {
        /// One dataset.
        a: String,
        /// Its partition count.
        a_parts: u32,
        /// The other.
        b: String,
        /// Its partition count.
        b_parts: u32,
    },
    /// A signal over a partitioned dataset.
    #[error(
        "a signal reads `{dataset}`, which has {parts} partitions; a signal reads a one-partition dataset"
    )]
    SignalNotSingle {
        /// The dataset.
        dataset: String,
        /// Its partition count.
        parts: u32,
    },
    /// `else` or `end` without an open block, or blocks left open.
    #[error("the driver's control flow does not nest: {0}")]
    Nesting(&'static str),
    /// A program with more stages or groups than the wire format numbers.
    #[error("the program is too large: {0}")]
    TooLarge(&'static str),
}

/// Builds a [`Program`] from the driver's calls, in order.
#[derive(Debug)]
pub struct ProgramBuilder {
    partitions: u32,
    datasets: Vec<DatasetInfo>,
    stages: Vec<Stage>,
    ops: Vec<Op>,
    depth: Vec<u16>,
    /// Indices of the ops that opened the blocks still open.
    open: Vec<usize>,
}

impl ProgramBuilder {
    /// A builder for a job of `partitions` partitions.
    pub fn new(partitions: u32) -> Self {
        Self {
            partitions: partitions.max(1),
            datasets: Vec::new(),
            stages: Vec::new(),
            ops: Vec::new(),
            depth: Vec::new(),
            open: Vec::new(),
        }
    }

    /// The job's partition count.
    pub fn partitions(&self) -> u32 {
        self.partitions
    }

    /// Declares a dataset.
    pub fn dataset(&mut self, name: &str, partitioned: bool) -> DatasetId {
        self.datasets.push(DatasetInfo {
            name: name.to_owned(),
            partitioned,
        });
        DatasetId(self.datasets.len() as u32 - 1)
    }

    /// Appends a stage run where the program is.
    pub fn stage(&mut self, stage: Stage) -> Result<StageId, ProgramError> {
        let id = self.push_stage(stage)?;
        self.push_op(Op::Stage(id));
        Ok(id)
    }

    fn push_op(&mut self, op: Op) {
        // A block's ops sit at the depth outside it: `open` already holds the block when its
        // opener or `Else` is pushed, and no longer holds it when its `End` is.
        let depth = match op {
            Op::Stage(_) => self.open.len() as u16,
            Op::End { start } => self.depth[start],
            _ => self.open.len().saturating_sub(1) as u16,
        };
        self.ops.push(op);
        self.depth.push(depth);
    }

    fn push_stage(&mut self, stage: Stage) -> Result<StageId, ProgramError> {
        let at = self.stages.len() as u32;
        if at == u32::MAX {
            return Err(ProgramError::TooLarge("more than 2^32 stages"));
        }
        let kind = kind_name(&stage.kind);
        for d in stage.reads.iter().chain(&stage.writes) {
            if d.0 as usize >= self.datasets.len() {
                return Err(ProgramError::UnknownDataset {
                    stage: at,
                    dataset: d.0,
                });
            }
        }
        let shape = |problem| ProgramError::Shape {
            stage: at,
            kind,
            problem,
        };
        match &stage.kind {
            StageKind::Compute if stage.reads.is_empty() && stage.writes.is_empty() => {
                return Err(ProgramError::NoDataset { stage: at, kind });
            }
            StageKind::Scatter { .. } if stage.reads.is_empty() || stage.writes.is_empty() => {
                return Err(shape(
                    "must read at least one dataset and write at least one",
                ));
            }
            StageKind::Load { .. } if stage.writes.len() != 1 || !stage.reads.is_empty() => {
                return Err(shape("writes exactly one dataset"));
            }
            StageKind::Store { .. } | StageKind::Signal
                if stage.reads.len() != 1 || !stage.writes.is_empty() =>
            {
                return Err(shape("reads exactly one dataset"));
            }
            _ => {}
        }
        self.stages.push(stage);
        Ok(StageId(at))
    }

    /// Opens a loop of `times` iterations.
    pub fn repeat(&mut self, times: u64) {
        self.open.push(self.ops.len());
        self.push_op(Op::Repeat { times, end: 0 });
    }

    /// Opens a loop that runs while the signal `func` over `dataset` is true.
    pub fn while_signal(&mut self, func: u32, dataset: DatasetId) -> Result<(), ProgramError> {
        let signal = self.signal(func, dataset)?;
        self.open.push(self.ops.len());
        self.push_op(Op::While { signal, end: 0 });
        Ok(())
    }

    /// Opens a branch on the signal `func` over `dataset`.
    pub fn if_signal(&mut self, func: u32, dataset: DatasetId) -> Result<(), ProgramError> {
        let signal = self.signal(func, dataset)?;
        self.open.push(self.ops.len());
        self.push_op(Op::If {
            signal,
            otherwise: 0,
            end: 0,
        });
        Ok(())
    }

    fn signal(&mut self, func: u32, dataset: DatasetId) -> Result<StageId, ProgramError> {
        self.push_stage(Stage {
            kind: StageKind::Signal,
            func,
            reads: vec![dataset],
            writes: Vec::new(),
        })
    }

    /// Starts the false branch of the innermost `if`.
    pub fn otherwise(&mut self) -> Result<(), ProgramError> {
        let Some(&start) = self.open.last() else {
            return Err(ProgramError::Nesting("an `else` outside any `if`"));
        };
        let here = self.ops.len();
        match &mut self.ops[start] {
            Op::If { otherwise, .. } if *otherwise == 0 => *otherwise = here,
            Op::If { .. } => return Err(ProgramError::Nesting("two `else`s in one `if`")),
            _ => {
                return Err(ProgramError::Nesting(
                    "an `else` inside a loop, not an `if`",
                ));
            }
        }
        self.push_op(Op::Else { end: 0 });
        Ok(())
    }

    /// Closes the innermost block.
    pub fn end(&mut self) -> Result<(), ProgramError> {
        let Some(start) = self.open.pop() else {
            return Err(ProgramError::Nesting("an `end` with no block open"));
        };
        let here = self.ops.len();
        let mut else_at = None;
        match &mut self.ops[start] {
            Op::Repeat { end, .. } | Op::While { end, .. } => *end = here,
            Op::If { otherwise, end, .. } => {
                *end = here;
                if *otherwise == 0 {
                    *otherwise = here;
                } else {
                    else_at = Some(*otherwise);
                }
            }
            _ => unreachable!("only block-opening ops are pushed on `open`"),
        }
        if let Some(Op::Else { end }) = else_at.map(|at| &mut self.ops[at]) {
            *end = here;
        }
        self.push_op(Op::End { start });
        Ok(())
    }

    /// Checks nesting and partitioning and computes the groups.
    pub fn finish(self) -> Result<Program, ProgramError> {
        if !self.open.is_empty() {
            return Err(ProgramError::Nesting(
                "the driver returned with a loop or branch not closed by `end`",
            ));
        }
        let mut sets = UnionFind::new(self.datasets.len());
        for stage in &self.stages {
            // A scatter moves data between partitionings: its reads are one group and its
            // writes another. Every other stage's datasets are one group.
            let together: [&[DatasetId]; 2] = [&stage.reads, &stage.writes];
            let sides: Vec<Vec<DatasetId>> = match stage.kind {
                StageKind::Scatter { .. } => together.iter().map(|s| s.to_vec()).collect(),
                _ => vec![together.concat()],
            };
            for side in sides {
                for pair in side.windows(2) {
                    sets.join(pair[0].0 as usize, pair[1].0 as usize);
                }
            }
        }
        let parts = |info: &DatasetInfo| match info.partitioned {
            true => self.partitions,
            false => 1,
        };
        let mut group_of_root = vec![None; self.datasets.len()];
        let mut of_dataset = Vec::with_capacity(self.datasets.len());
        let mut sizes: Vec<u32> = Vec::new();
        let mut first_of_group: Vec<usize> = Vec::new();
        for (i, info) in self.datasets.iter().enumerate() {
            let root = sets.find(i);
            let group = match group_of_root[root] {
                Some(g) => g,
                None => {
                    if sizes.len() == usize::from(u16::MAX) {
                        return Err(ProgramError::TooLarge("more than 65535 dataset groups"));
                    }
                    let g = GroupId(sizes.len() as u16);
                    sizes.push(parts(info));
                    first_of_group.push(i);
                    group_of_root[root] = Some(g);
                    g
                }
            };
            let size = sizes[group.0 as usize];
            if parts(info) != size {
                let first = &self.datasets[first_of_group[group.0 as usize]];
                return Err(ProgramError::Partitioning {
                    a: first.name.clone(),
                    a_parts: size,
                    b: info.name.clone(),
                    b_parts: parts(info),
                });
            }
            of_dataset.push(group);
        }
        let groups = Groups { of_dataset, sizes };
        for stage in &self.stages {
            if stage.kind == StageKind::Signal {
                let d = stage.reads[0];
                if groups.size(groups.of(d)) != 1 {
                    return Err(ProgramError::SignalNotSingle {
                        dataset: self.datasets[d.0 as usize].name.clone(),
                        parts: groups.size(groups.of(d)),
                    });
                }
            }
        }
        Ok(Program {
            partitions: self.partitions,
            datasets: self.datasets,
            stages: self.stages,
            ops: self.ops,
            groups,
            depth: self.depth,
        })
    }
}

fn kind_name(kind: &StageKind) -> &'static str {
    match kind {
        StageKind::Compute => "compute",
        StageKind::Scatter { .. } => "scatter",
        StageKind::Load { .. } => "load",
        StageKind::Store { .. } => "store",
        StageKind::Signal => "signal",
    }
}

impl StageKind {
    /// The kind's name, for messages.
    pub fn name(&self) -> &'static str {
        kind_name(self)
    }
}

struct UnionFind(Vec<usize>);

impl UnionFind {
    fn new(n: usize) -> Self {
        Self((0..n).collect())
    }

    fn find(&mut self, mut x: usize) -> usize {
        while self.0[x] != x {
            self.0[x] = self.0[self.0[x]];
            x = self.0[x];
        }
        x
    }

    fn join(&mut self, a: usize, b: usize) {
        let (a, b) = (self.find(a), self.find(b));
        if a != b {
            self.0[a.max(b)] = a.min(b);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The paper's Figure 2: logistic regression's datasets and stages.
    pub(crate) fn logistic_regression(partitions: u32, iterations: u64) -> Program {
        let mut b = ProgramBuilder::new(partitions);
        let td = b.dataset("training_data", true);
        let lw = b.dataset("local_weight", true);
        let lg = b.dataset("local_gradient", true);
        let gw = b.dataset("global_weight", false);
        let gg = b.dataset("global_gradient", false);
        b.stage(load(1, td)).unwrap();
        b.repeat(iterations);
        b.stage(compute(2, &[td, lw], &[lg])).unwrap();
        b.stage(scatter(3, &[lg], 4, &[gg])).unwrap();
        b.stage(compute(5, &[gg, gw], &[gw])).unwrap();
        b.stage(scatter(6, &[gw], 7, &[lw])).unwrap();
        b.end().unwrap();
        b.finish().unwrap()
    }

    pub(crate) fn compute(func: u32, reads: &[DatasetId], writes: &[DatasetId]) -> Stage {
        Stage {
            kind: StageKind::Compute,
            func,
            reads: reads.to_vec(),
            writes: writes.to_vec(),
        }
    }

    pub(crate) fn scatter(
        func: u32,
        reads: &[DatasetId],
        gather: u32,
        writes: &[DatasetId],
    ) -> Stage {
        Stage {
            kind: StageKind::Scatter { gather },
            func,
            reads: reads.to_vec(),
            writes: writes.to_vec(),
        }
    }

    pub(crate) fn load(func: u32, dataset: DatasetId) -> Stage {
        Stage {
            kind: StageKind::Load {
                arg: "input".into(),
            },
            func,
            reads: vec![],
            writes: vec![dataset],
        }
    }

    #[test]
    fn co_accessed_datasets_form_groups_and_scatter_crosses_them() {
        let p = logistic_regression(8, 3);
        let g = &p.groups;
        let (td, lw, lg, gw, gg) = (
            DatasetId(0),
            DatasetId(1),
            DatasetId(2),
            DatasetId(3),
            DatasetId(4),
        );
        assert_eq!(g.of(td), g.of(lw));
        assert_eq!(g.of(td), g.of(lg));
        assert_eq!(g.of(gw), g.of(gg));
        assert_ne!(g.of(td), g.of(gw));
        assert_eq!(g.size(g.of(td)), 8);
        assert_eq!(g.size(g.of(gw)), 1);
        assert_eq!(g.sizes().len(), 2);
    }

    #[test]
    fn a_stage_over_differently_partitioned_datasets_is_refused_by_name() {
        let mut b = ProgramBuilder::new(4);
        let big = b.dataset("points", true);
        let one = b.dataset("weights", false);
        b.stage(compute(1, &[big, one], &[big])).unwrap();
        let err = b.finish().unwrap_err();
        assert!(
            matches!(&err, ProgramError::Partitioning { a, b, .. } if a == "points" && b == "weights"),
            "{err}"
        );
    }

    #[test]
    fn signals_must_read_one_partition() {
        let mut b = ProgramBuilder::new(4);
        let big = b.dataset("points", true);
        b.while_signal(1, big).unwrap();
        b.end().unwrap();
        let err = b.finish().unwrap_err();
        assert!(matches!(err, ProgramError::SignalNotSingle { .. }), "{err}");
    }

    #[test]
    fn unbalanced_blocks_are_refused() {
        let mut b = ProgramBuilder::new(1);
        assert!(b.end().is_err());
        let mut b = ProgramBuilder::new(1);
        b.repeat(2);
        assert!(b.otherwise().is_err());
        assert!(matches!(b.finish(), Err(ProgramError::Nesting(_))));
        let mut b = ProgramBuilder::new(1);
        let d = b.dataset("flag", false);
        b.if_signal(1, d).unwrap();
        b.otherwise().unwrap();
        assert!(b.otherwise().is_err());
    }

    #[test]
    fn stages_with_the_wrong_shape_or_unknown_datasets_are_refused() {
        let mut b = ProgramBuilder::new(1);
        let d = b.dataset("d", true);
        assert!(matches!(
            b.stage(compute(1, &[], &[])),
            Err(ProgramError::NoDataset { .. })
        ));
        assert!(matches!(
            b.stage(compute(1, &[DatasetId(9)], &[])),
            Err(ProgramError::UnknownDataset { dataset: 9, .. })
        ));
        assert!(matches!(
            b.stage(scatter(1, &[d], 2, &[])),
            Err(ProgramError::Shape { .. })
        ));
    }
}
