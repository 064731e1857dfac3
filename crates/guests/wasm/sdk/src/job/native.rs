//! Natively there is no host: `local` plays it on this thread, and these functions are
//! its side of the `mote_job` imports, with `sys.rs`'s signatures. The driver's calls record a
//! `Program` and refuse what the host's builder refuses (`crates/jobs/src/program.rs`), with
//! its messages; a task's calls serve the `TaskIo` the run gives it. As on the host, a task
//! that calls a driver import, or a driver a task import, fails saying so, and so does any call
//! made outside a local run. All state is thread-local: tests on parallel threads run jobs of
//! their own.

use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::rc::Rc;

/// What every instance of a run shares: the job's partition count and its arguments, in order.
#[derive(Clone, Debug)]
pub struct Context {
    pub partitions: usize,
    pub args: Vec<(String, String)>,
}

impl Context {
    /// Argument `key`'s value; the last one given wins, as on the host.
    pub fn arg(&self, key: &str) -> Option<&str> {
        let mut given = self.args.iter().rev();
        given.find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// A dataset as the driver declared it.
pub struct DatasetInfo {
    pub name: String,
    pub partitioned: bool,
}

/// What a stage does, as the host's `StageKind`.
pub enum StageKind {
    Compute,
    Scatter { gather: i32 },
    Load { arg: String },
    Store { arg: String },
    Signal,
}

impl StageKind {
    /// The kind's name, for messages.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Compute => "compute",
            Self::Scatter { .. } => "scatter",
            Self::Load { .. } => "load",
            Self::Store { .. } => "store",
            Self::Signal => "signal",
        }
    }
}

/// A stage, by its place among the program's stages (signals included), as the host numbers it.
pub struct Stage {
    pub kind: StageKind,
    pub func: i32,
    pub reads: Vec<usize>,
    pub writes: Vec<usize>,
}

/// The control flow as a tree of stage ids, which a local run walks (the host flattens it into
/// jumps). A loop's or branch's `usize` is its signal stage.
pub enum Node {
    Stage(usize),
    Repeat(u32, Vec<Node>),
    While(usize, Vec<Node>),
    If(usize, Vec<Node>, Vec<Node>),
}

/// A loop or branch the driver has opened and not yet ended.
struct Open {
    block: Block,
    then: Vec<Node>,
    /// The false branch, once `else_branch` started it.
    otherwise: Option<Vec<Node>>,
}

enum Block {
    Repeat(u32),
    While(usize),
    If(usize),
}

/// What the driver declared, and, once [`Program::finish`] checked it, its groups.
#[derive(Default)]
pub struct Program {
    pub datasets: Vec<DatasetInfo>,
    pub stages: Vec<Stage>,
    pub body: Vec<Node>,
    /// Each dataset's group of co-partitioned datasets, numbered by their first dataset.
    pub groups: Vec<usize>,
    /// Each group's partition count.
    pub sizes: Vec<usize>,
    open: Vec<Open>,
}

impl Program {
    /// The group a stage's tasks run in (a scatter's: its scatter tasks').
    pub fn group_of(&self, stage: &Stage) -> usize {
        let first = stage.reads.first().or(stage.writes.first());
        self.groups[*first.expect("every stage touches a dataset")]
    }

    pub fn names(&self, ids: &[usize]) -> Vec<String> {
        ids.iter().map(|&d| self.datasets[d].name.clone()).collect()
    }

    fn stage(&mut self, stage: Stage) -> usize {
        let at = self.stages.len();
        for &d in stage.reads.iter().chain(&stage.writes) {
            assert!(
                d < self.datasets.len(),
                "stage {at} names dataset {d}, which the driver never declared"
            );
        }
        // The SDK gives loads, stores and signals one dataset each; these it leaves to the user.
        let (no_reads, no_writes) = (stage.reads.is_empty(), stage.writes.is_empty());
        match stage.kind {
            StageKind::Compute if no_reads && no_writes => {
                panic!("stage {at} (compute) touches no dataset; every stage reads or writes one")
            }
            StageKind::Scatter { .. } if no_reads || no_writes => {
                panic!("stage {at} (scatter) must read at least one dataset and write at least one")
            }
            _ => {}
        }
        self.stages.push(stage);
        at
    }

    fn push(&mut self, node: Node) {
        match self.open.last_mut() {
            Some(open) => open.otherwise.as_mut().unwrap_or(&mut open.then).push(node),
            None => self.body.push(node),
        }
    }

    fn open(&mut self, block: Block) {
        self.open.push(Open {
            block,
            then: Vec::new(),
            otherwise: None,
        });
    }

    /// Declares a signal stage, which a loop or branch evaluates.
    fn signal(&mut self, func: i32, dataset: i32) -> usize {
        self.stage(Stage {
            kind: StageKind::Signal,
            func,
            reads: ids(&[dataset]),
            writes: Vec::new(),
        })
    }

    // The SDK's `Job` pairs every `else_branch` and `end` with the block it belongs to, so the
    // host's nesting errors cannot happen here.
    fn otherwise(&mut self) {
        let open = self.open.last_mut().expect("an `else` inside an `if`");
        open.otherwise = Some(Vec::new());
    }

    fn end(&mut self) {
        let open = self.open.pop().expect("an `end` of an open block");
        self.push(match open.block {
            Block::Repeat(times) => Node::Repeat(times, open.then),
            Block::While(signal) => Node::While(signal, open.then),
            Block::If(signal) => Node::If(signal, open.then, open.otherwise.unwrap_or_default()),
        });
    }

    /// Checks what the host checks once the driver returns, and computes the groups: datasets
    /// that a stage touches together (a scatter's reads, and separately its writes) share an
    /// instance per partition index, so they must have the same partition count.
    pub fn finish(&mut self, partitions: usize) -> Result<(), String> {
        // Each dataset's set, named by its lowest dataset id.
        let mut root: Vec<usize> = (0..self.datasets.len()).collect();
        for stage in &self.stages {
            let sides = match stage.kind {
                StageKind::Scatter { .. } => vec![stage.reads.clone(), stage.writes.clone()],
                _ => vec![[&stage.reads[..], &stage.writes[..]].concat()],
            };
            for pair in sides.iter().flat_map(|side| side.windows(2)) {
                let (a, b) = (root[pair[0]], root[pair[1]]);
                let (keep, gone) = (a.min(b), a.max(b));
                root.iter_mut()
                    .filter(|r| **r == gone)
                    .for_each(|r| *r = keep);
            }
        }
        let parts = |d: &DatasetInfo| if d.partitioned { partitions } else { 1 };
        for (d, info) in self.datasets.iter().enumerate() {
            let group = match root[d] {
                first if first == d => {
                    self.sizes.push(parts(info));
                    self.sizes.len() - 1
                }
                first => self.groups[first],
            };
            if parts(info) != self.sizes[group] {
                let first = &self.datasets[root[d]];
                return Err(format!(
                    "datasets `{}` ({} partitions) and `{}` ({}) are touched together by a \
                     stage, so they must have the same partitioning",
                    first.name,
                    parts(first),
                    info.name,
                    parts(info)
                ));
            }
            self.groups.push(group);
        }
        let signals = self
            .stages
            .iter()
            .filter(|s| matches!(s.kind, StageKind::Signal));
        match signals
            .map(|s| s.reads[0])
            .find(|&d| self.sizes[self.groups[d]] != 1)
        {
            Some(d) => Err(format!(
                "a signal reads `{}`, which has {partitions} partitions; a signal reads a \
                 one-partition dataset",
                self.datasets[d].name
            )),
            None => Ok(()),
        }
    }
}

/// What a task reads and emits, between the run and the task's calls.
#[derive(Default)]
pub struct TaskIo {
    /// The names of the datasets the task's stage reads and writes (`task_dataset`).
    pub reads: Vec<String>,
    pub writes: Vec<String>,
    pub inputs: Vec<Vec<u8>>,
    /// How many destinations it may emit to: a scatter's gather partitions, a store's one.
    pub emit_to: usize,
    /// What it emitted, by destination in the order first emitted to, each concatenated.
    pub emitted: Vec<(usize, Vec<u8>)>,
}

enum Mode {
    Driver(Program),
    Task(TaskIo),
}

/// The instance a local run is running guest code in.
struct Instance {
    context: Rc<Context>,
    mode: Mode,
}

thread_local! {
    static INSTANCE: RefCell<Option<Instance>> = const { RefCell::new(None) };
}

/// Runs `driver` as a job's driver: the program it declared, or its panic's message.
pub fn declare(context: &Rc<Context>, driver: impl FnOnce()) -> Result<Program, String> {
    let (ran, mode) = serve(context, Mode::Driver(Program::default()), driver);
    let Mode::Driver(program) = mode else {
        unreachable!("no call changes what an instance is doing")
    };
    ran.map(|()| program)
}

/// Runs `task` as a task with `io`: its answer and what it emitted, or its panic's message.
pub fn run_task(
    context: &Rc<Context>,
    io: TaskIo,
    task: impl FnOnce() -> i32,
) -> Result<(i32, TaskIo), String> {
    let (ran, mode) = serve(context, Mode::Task(io), task);
    let Mode::Task(io) = mode else {
        unreachable!("no call changes what an instance is doing")
    };
    ran.map(|answer| (answer, io))
}

fn serve<R>(context: &Rc<Context>, mode: Mode, f: impl FnOnce() -> R) -> (Result<R, String>, Mode) {
    let context = context.clone();
    INSTANCE.set(Some(Instance { context, mode }));
    // The guest code's panics are its traps: the run reports them; no state outlives them.
    let ran = catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        let message = payload.downcast_ref::<&str>().map(|s| s.to_string());
        message
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into())
    });
    let instance = INSTANCE.take().expect("set above");
    (ran, instance.mode)
}

fn with<R>(f: impl FnOnce(&mut Instance) -> R) -> R {
    INSTANCE.with_borrow_mut(|instance| {
        f(instance.as_mut().expect(
            "natively the mote_job imports exist only while mote_sdk::job::local runs a job",
        ))
    })
}

fn driver<R>(call: &str, f: impl FnOnce(&mut Program) -> R) -> R {
    with(|instance| match &mut instance.mode {
        Mode::Driver(program) => f(program),
        Mode::Task(_) => panic!("`{call}` declares a stage; only the driver may call it"),
    })
}

fn task<R>(call: &str, f: impl FnOnce(&mut TaskIo) -> R) -> R {
    with(|instance| match &mut instance.mode {
        Mode::Task(io) => f(io),
        Mode::Driver(_) => panic!("`{call}` is for tasks; the driver never touches data"),
    })
}

/// Dataset ids as the host reads them: unsigned, so a negative one is unknown too.
fn ids(ids: &[i32]) -> Vec<usize> {
    ids.iter().map(|&id| id as u32 as usize).collect()
}

fn declare_stage(call: &str, kind: StageKind, func: i32, reads: &[i32], writes: &[i32]) {
    let (reads, writes) = (ids(reads), ids(writes));
    driver(call, |p| {
        let id = p.stage(Stage {
            kind,
            func,
            reads,
            writes,
        });
        p.push(Node::Stage(id));
    });
}

pub fn dataset(name: &str, partitioned: bool) -> i32 {
    driver("dataset", |p| {
        let name = name.to_owned();
        p.datasets.push(DatasetInfo { name, partitioned });
        i32::try_from(p.datasets.len() - 1).expect("dataset ids fit an i32")
    })
}
pub fn compute(func: i32, reads: &[i32], writes: &[i32]) {
    declare_stage("compute", StageKind::Compute, func, reads, writes);
}
pub fn scatter(func: i32, reads: &[i32], gather: i32, writes: &[i32]) {
    let kind = StageKind::Scatter { gather };
    declare_stage("scatter", kind, func, reads, writes);
}
pub fn load(func: i32, dataset: i32, arg: &str) {
    let kind = StageKind::Load { arg: arg.into() };
    declare_stage("load", kind, func, &[], &[dataset]);
}
pub fn store(func: i32, dataset: i32, arg: &str) {
    let kind = StageKind::Store { arg: arg.into() };
    declare_stage("store", kind, func, &[dataset], &[]);
}
pub fn repeat(times: i32) {
    driver("repeat", |p| p.open(Block::Repeat(times.max(0) as u32)));
}
pub fn while_signal(func: i32, dataset: i32) {
    driver("while_signal", |p| {
        let signal = p.signal(func, dataset);
        p.open(Block::While(signal));
    });
}
pub fn if_signal(func: i32, dataset: i32) {
    driver("if_signal", |p| {
        let signal = p.signal(func, dataset);
        p.open(Block::If(signal));
    });
}
pub fn else_branch() {
    driver("else_branch", Program::otherwise);
}
pub fn end() {
    driver("end", Program::end);
}
pub fn partitions() -> i32 {
    with(|i| i32::try_from(i.context.partitions).expect("a partition count fits an i32"))
}
pub fn arg(key: &str) -> Option<Vec<u8>> {
    with(|i| i.context.arg(key).map(|v| v.as_bytes().to_vec()))
}
pub fn input_count() -> i32 {
    task("input_count", |io| io.inputs.len() as i32)
}
pub fn input(k: i32) -> Vec<u8> {
    task("input_len", |io| match io.inputs.get(k as u32 as usize) {
        Some(input) => input.clone(),
        None => panic!("`input_len({k})`: the task has {} inputs", io.inputs.len()),
    })
}
pub fn input_shared(k: i32) -> std::rc::Rc<[u8]> {
    input(k).into()
}
pub fn emit(dest: i32, data: &[u8]) {
    task("emit", |io| {
        let dest = dest as u32 as usize;
        match io.emit_to {
            0 => panic!("`emit`: this task emits nothing (only scatter and store tasks do)"),
            n if dest >= n => {
                panic!("`emit({dest}, ..)`: the datasets written have {n} partitions")
            }
            _ => {}
        }
        match io.emitted.iter_mut().find(|(d, _)| *d == dest) {
            Some((_, piece)) => piece.extend_from_slice(data),
            None => io.emitted.push((dest, data.to_vec())),
        }
    });
}
pub fn task_dataset(which: i32, k: usize) -> Option<String> {
    task("task_dataset", |io| {
        let names = match which {
            0 => &io.reads,
            1 => &io.writes,
            _ => panic!(
                "`task_dataset({which}, {k}, ..)`: give 0 for the datasets read, 1 for those \
                 written"
            ),
        };
        names.get(k).cloned()
    })
}
