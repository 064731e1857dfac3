//! Runs a whole job natively, on this thread, in `cargo test`: [`LocalJob`] plays the host's
//! part with every partition, so a job's author checks its result without WebAssembly or a node.
//!
//! The driver runs once and declares the program (the native `mote_job` imports, `native.rs`,
//! record it and refuse what the host refuses); the loads' and stores' arguments are checked as
//! the host checks them before a job starts; then the program runs in order, each stage's task
//! on every partition index in turn. As on the host (`docs/jobs.md`): one instance per partition
//! index of each group of co-partitioned datasets keeps its partitions between tasks; a scatter's
//! pieces for a destination reach its gather in the order of the partitions that emitted them; a
//! load splits its input's lines as `crates/job-service/src/input.rs` does; a store's parts, and
//! each output's `_SUCCESS`, are there only if the job succeeds; a failed task's error names its
//! stage, partition and datasets.
//!
//! Where it differs: objects are a map of `BUCKET/KEY` to bytes, given before the run; tasks run
//! one at a time in program order, never concurrently; there are no budgets or memory limits (a
//! task that loops forever hangs the test), no snapshots, no workers to lose or rebalance; the
//! error quotes a panic's message rather than the trap and the last log line.

use super::__private::{self, DATA};
use super::sys::{self, Context, Node, Program, StageKind, TaskIo};
use super::{Job, Partitions};
use std::collections::BTreeMap;
use std::fmt;
use std::rc::Rc;

/// A job to run locally: its driver, partition count, arguments and input objects.
#[derive(Clone, Debug)]
pub struct LocalJob {
    driver: fn(&mut Job),
    context: Context,
    objects: BTreeMap<String, Vec<u8>>,
}

impl LocalJob {
    /// A job whose driver is `driver`, of 4 partitions, without arguments or objects.
    pub fn new(driver: fn(&mut Job)) -> Self {
        Self {
            driver,
            context: Context {
                partitions: 4,
                args: Vec::new(),
            },
            objects: BTreeMap::new(),
        }
    }

    /// Sets the job's partition count, which a node's controller chooses.
    ///
    /// # Panics
    ///
    /// If `n` is 0.
    pub fn partitions(mut self, n: usize) -> Self {
        assert!(n > 0, "a job has at least one partition");
        self.context.partitions = n;
        self
    }

    /// Adds job argument `key=value` (`mote job run --arg`); a later one for `key` wins.
    pub fn arg(mut self, key: &str, value: &str) -> Self {
        self.context.args.push((key.into(), value.into()));
        self
    }

    /// Puts object `BUCKET/KEY` in storage before the job runs: input for its loads.
    ///
    /// # Panics
    ///
    /// If `path` is not `BUCKET/KEY`.
    pub fn object(mut self, path: &str, bytes: impl Into<Vec<u8>>) -> Self {
        assert!(
            matches!(path.split_once('/'), Some((b, k)) if !b.is_empty() && !k.is_empty()),
            "object `{path}` is not BUCKET/KEY"
        );
        self.objects.insert(path.into(), bytes.into());
        self
    }

    /// Runs the job to its end: what its stores committed, or why it failed.
    pub fn run(&self) -> Result<LocalOutput, LocalError> {
        let context = Rc::new(self.context.clone());
        let driver = self.driver;
        let mut program =
            sys::declare(&context, || __private::drive(driver)).map_err(LocalError::Driver)?;
        program
            .finish(context.partitions)
            .map_err(LocalError::Driver)?;
        let outputs = self.check_io(&program)?;
        let mut run = Run {
            program: &program,
            context: &context,
            objects: &self.objects,
            instances: BTreeMap::new(),
            stored: BTreeMap::new(),
        };
        run.block(&program.body)?;
        let mut stored = run.stored;
        for dir in outputs {
            stored.insert(format!("{dir}_SUCCESS"), Vec::new());
        }
        Ok(LocalOutput { stored })
    }

    /// The host's checks before a job starts: every load's and store's argument is given and is
    /// `BUCKET/PREFIX`, an input holds objects and an output none. Answers the outputs'
    /// directories, `BUCKET/DIR/`.
    fn check_io(&self, program: &Program) -> Result<Vec<String>, LocalError> {
        let mut outputs = Vec::new();
        for stage in &program.stages {
            let (arg, output) = match &stage.kind {
                StageKind::Load { arg } => (arg, false),
                StageKind::Store { arg } => (arg, true),
                _ => continue,
            };
            let Some(value) = self.context.arg(arg) else {
                let does = match output {
                    true => "stores its output under",
                    false => "loads its input from",
                };
                return Err(LocalError::Io(format!(
                    "the job {does} the argument `{arg}`, which was not given: add \
                     .arg(\"{arg}\", \"BUCKET/PREFIX\")"
                )));
            };
            let Some(dir) = directory(value) else {
                return Err(LocalError::Io(format!(
                    "{arg}={value}: expected BUCKET/PREFIX"
                )));
            };
            if output {
                // What a running job stages there is not output yet.
                let committed = |k: &&String| {
                    k.strip_prefix(&dir)
                        .is_some_and(|name| !name.starts_with("_temporary/"))
                };
                if let Some(first) = self.objects.keys().find(committed) {
                    return Err(LocalError::Io(format!(
                        "{arg}={value}: the output directory already holds objects (the first \
                         is {first}); choose another directory"
                    )));
                }
                outputs.push(dir);
            } else if input(&self.objects, value).next().is_none() {
                return Err(LocalError::Io(format!(
                    "{arg}={value}: no objects under that prefix; put the input there first"
                )));
            }
        }
        Ok(outputs)
    }
}

/// What a job's stores committed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LocalOutput {
    stored: BTreeMap<String, Vec<u8>>,
}

impl LocalOutput {
    /// Every object the job stored, by `BUCKET/KEY`: each partition's `part-NNNNN` (empty if
    /// its task emitted nothing) and each output's empty `_SUCCESS`.
    pub fn stored(&self) -> &BTreeMap<String, Vec<u8>> {
        &self.stored
    }

    /// The lines of output `BUCKET/PREFIX`: its parts' lines, in key order, as a job that reads
    /// it as input would.
    ///
    /// # Panics
    ///
    /// If `output` is not `BUCKET/PREFIX`, or a part is not UTF-8.
    pub fn lines(&self, output: &str) -> Vec<String> {
        let parts = input(&self.stored, output);
        let text = parts.map(|(key, bytes)| {
            std::str::from_utf8(bytes).unwrap_or_else(|_| panic!("{key} is not UTF-8"))
        });
        text.flat_map(str::lines).map(str::to_owned).collect()
    }
}

/// Why a local run failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LocalError {
    /// The driver panicked, or declared a program the host refuses.
    Driver(String),
    /// A load's or store's argument does not pass the host's checks before a job starts.
    Io(String),
    /// A task panicked, or made a call the host refuses.
    Task {
        /// Its stage's kind: `compute`, `scatter`, `gather`, `load`, `store` or `signal`.
        kind: &'static str,
        /// Its stage's place among the program's stages, signals included (the host's id).
        stage: usize,
        /// The partition index it ran on.
        partition: usize,
        /// The datasets its stage reads and writes.
        datasets: Vec<String>,
        /// The panic's message.
        message: String,
    },
}

impl fmt::Display for LocalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Driver(message) => write!(f, "the driver failed: {message}"),
            Self::Io(message) => f.write_str(message),
            Self::Task {
                kind,
                stage,
                partition,
                datasets,
                message,
            } => write!(
                f,
                "{kind} stage {stage} on partition {partition} of [{}] failed: {message}",
                datasets.join(", ")
            ),
        }
    }
}

impl std::error::Error for LocalError {}

/// A run of a checked program.
struct Run<'a> {
    program: &'a Program,
    context: &'a Rc<Context>,
    objects: &'a BTreeMap<String, Vec<u8>>,
    /// Each instance's partitions, by group and partition index.
    instances: BTreeMap<(usize, usize), Partitions>,
    /// What store tasks wrote, by `BUCKET/KEY`: committed if the job succeeds.
    stored: BTreeMap<String, Vec<u8>>,
}

impl Run<'_> {
    fn block(&mut self, body: &[Node]) -> Result<(), LocalError> {
        for node in body {
            match node {
                Node::Stage(id) => self.stage(*id)?,
                Node::Repeat(times, body) => {
                    for _ in 0..*times {
                        self.block(body)?;
                    }
                }
                Node::While(signal, body) => {
                    while self.signal(*signal)? {
                        self.block(body)?;
                    }
                }
                Node::If(signal, then, otherwise) => {
                    let taken = if self.signal(*signal)? {
                        then
                    } else {
                        otherwise
                    };
                    self.block(taken)?;
                }
            }
        }
        Ok(())
    }

    fn signal(&mut self, id: usize) -> Result<bool, LocalError> {
        let group = self.program.group_of(&self.program.stages[id]);
        let (answer, _) = self.task(id, false, (group, 0), Vec::new())?;
        Ok(answer != 0)
    }

    fn stage(&mut self, id: usize) -> Result<(), LocalError> {
        let program = self.program;
        let stage = &program.stages[id];
        let group = program.group_of(stage);
        let indices = 0..program.sizes[group];
        match &stage.kind {
            // A signal is declared with its loop or branch, which evaluates it, so it is
            // never a stage of its own here; were it one, it would run as a compute does.
            StageKind::Compute | StageKind::Signal => {
                for i in indices {
                    self.task(id, false, (group, i), Vec::new())?;
                }
            }
            StageKind::Scatter { .. } => {
                let to = program.groups[stage.writes[0]];
                let mut pieces = vec![Vec::new(); program.sizes[to]];
                for i in indices {
                    let (_, io) = self.task(id, false, (group, i), Vec::new())?;
                    for (dest, piece) in io.emitted {
                        pieces[dest].push(piece);
                    }
                }
                for (i, inputs) in pieces.into_iter().enumerate() {
                    self.task(id, true, (to, i), inputs)?;
                }
            }
            StageKind::Load { arg } => {
                let value = self.context.arg(arg).expect("checked before the run");
                let objects = input(self.objects, value).map(|(_, bytes)| bytes);
                let shares = shares(&objects.collect::<Vec<_>>(), indices.len());
                for (i, share) in shares.into_iter().enumerate() {
                    self.task(id, false, (group, i), vec![share])?;
                }
            }
            StageKind::Store { arg } => {
                let value = self.context.arg(arg).expect("checked before the run");
                let dir = directory(value).expect("checked before the run");
                for i in indices {
                    let (_, io) = self.task(id, false, (group, i), Vec::new())?;
                    let part = io.emitted.into_iter().flat_map(|(_, bytes)| bytes);
                    self.stored
                        .insert(format!("{dir}part-{i:05}"), part.collect());
                }
            }
        }
        Ok(())
    }

    /// Runs a task of stage `id` (its gather if `gather`) with `inputs`, on partition `index`
    /// in the instance of (`group`, `index`): the signal's answer, and what it emitted.
    fn task(
        &mut self,
        id: usize,
        gather: bool,
        (group, index): (usize, usize),
        inputs: Vec<Vec<u8>>,
    ) -> Result<(i32, TaskIo), LocalError> {
        let program = self.program;
        let stage = &program.stages[id];
        let (kind, func, emit_to) = match (&stage.kind, gather) {
            (StageKind::Scatter { gather }, true) => ("gather", *gather, 0),
            (StageKind::Scatter { .. }, false) => {
                let to = program.sizes[program.groups[stage.writes[0]]];
                ("scatter", stage.func, to)
            }
            (StageKind::Store { .. }, _) => ("store", stage.func, 1),
            (kind, _) => (kind.name(), stage.func, 0),
        };
        let io = TaskIo {
            reads: program.names(&stage.reads),
            writes: program.names(&stage.writes),
            inputs,
            emit_to,
            emitted: Vec::new(),
        };
        let at = i32::try_from(index).expect("a partition index fits an i32");
        DATA.set(self.instances.remove(&(group, index)).unwrap_or_default());
        let ran = sys::run_task(self.context, io, || __private::run_task(func, at));
        self.instances.insert((group, index), DATA.take());
        ran.map_err(|message| LocalError::Task {
            kind,
            stage: id,
            partition: index,
            datasets: program.names(&[&stage.reads[..], &stage.writes[..]].concat()),
            message,
        })
    }
}

/// `BUCKET/PREFIX`'s directory, `BUCKET/PREFIX/` (`BUCKET/` for the whole bucket), if it
/// names a bucket.
fn directory(value: &str) -> Option<String> {
    let (bucket, prefix) = value.split_once('/').unwrap_or((value, ""));
    match prefix.trim_end_matches('/') {
        _ if bucket.is_empty() => None,
        "" => Some(format!("{bucket}/")),
        prefix => Some(format!("{bucket}/{prefix}/")),
    }
}

/// The objects input `BUCKET/PREFIX` reads, in key order: the object of that name, and those
/// below it as a directory whose names there have no part starting with `_` or `.`.
fn input<'a>(
    objects: &'a BTreeMap<String, Vec<u8>>,
    value: &str,
) -> impl Iterator<Item = (&'a String, &'a [u8])> {
    let exact = value.trim_end_matches('/').to_owned();
    let dir = directory(value).unwrap_or_else(|| panic!("`{value}` is not BUCKET/PREFIX"));
    let visible = |name: &str| name.split('/').all(|p| !p.starts_with(['_', '.']));
    // Every key has a `/`, so a bare `BUCKET` names no object of its own.
    let read = move |key: &str| key == exact || key.strip_prefix(&dir).is_some_and(visible);
    let objects = objects.iter().filter(move |(key, _)| read(key));
    objects.map(|(key, bytes)| (key, bytes.as_slice()))
}

/// Each of `partitions` partitions' share of the lines of `objects`, read as one stream in
/// which each object ends its last line: partition `i` takes the lines that start in the
/// `i`-th `partitions`-th of the stream's bytes.
fn shares(objects: &[&[u8]], partitions: usize) -> Vec<Vec<u8>> {
    let total: usize = objects.iter().map(|o| o.len()).sum();
    let bound = |i: usize| (total as u128 * i as u128 / partitions as u128) as usize;
    let share = |i: usize| {
        let (lo, hi) = (bound(i), bound(i + 1));
        let (mut share, mut at) = (Vec::new(), 0);
        for object in objects {
            let lines = lines_starting_in(object, at, lo, hi);
            share.extend_from_slice(lines);
            if !lines.is_empty() && !lines.ends_with(b"\n") {
                share.push(b'\n');
            }
            at += object.len();
        }
        share
    };
    (0..partitions).map(share).collect()
}

/// The bytes of the lines that start in `[lo, hi)` of `object`, which starts at stream offset
/// `at`.
fn lines_starting_in(object: &[u8], at: usize, lo: usize, hi: usize) -> &[u8] {
    let line_start = |p: usize| match p {
        0 => 0,
        p => match object[p - 1..].iter().position(|&c| c == b'\n') {
            Some(n) => p + n,
            None => object.len(),
        },
    };
    let start = line_start(lo.saturating_sub(at).min(object.len()));
    let end = line_start(hi.saturating_sub(at).min(object.len()));
    &object[start..end.max(start)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::{Dataset, Task};

    const NUMS: Dataset<Vec<u64>> = Dataset::partitioned("nums");
    const SUM: Dataset<u64> = Dataset::partitioned("sum");
    const REPORT: Dataset<String> = Dataset::partitioned("report");
    const LINES: Dataset<Vec<String>> = Dataset::partitioned("lines");
    const TOTAL: Dataset<Total> = Dataset::single("total");

    #[derive(Default)]
    struct Total {
        sum: u64,
        rounds: u32,
        /// The partitions whose pieces the last round's gather got, in order.
        sources: Vec<u64>,
    }

    /// Every kind of stage and of control flow: the numbers are quadrupled in place, summed
    /// three times over, halved if even, and each partition writes its numbers and the total.
    fn driver(job: &mut Job) {
        job.load(parse, &NUMS, "input");
        job.repeat(2, |job| job.compute(double, &[], &[&NUMS]));
        job.while_signal(more, &TOTAL, |job| {
            job.compute(add_local, &[&NUMS], &[&SUM]);
            job.scatter(send_sum, &[&SUM], add_up, &[&TOTAL]);
        });
        let halve = |task: &mut Task| task.get_mut(&TOTAL).sum /= 2;
        let triple = |task: &mut Task| task.get_mut(&TOTAL).sum *= 3;
        job.if_else(
            |task| task.get(&TOTAL).sum.is_multiple_of(2),
            &TOTAL,
            |job| job.compute(halve, &[], &[&TOTAL]),
            |job| job.compute(triple, &[], &[&TOTAL]),
        );
        job.scatter(broadcast, &[&TOTAL], receive, &[&REPORT]);
        job.compute(render, &[&NUMS, &REPORT], &[&LINES]);
        job.store(write, &LINES, "output");
    }

    fn parse(task: &mut Task) {
        let input = task.inputs().next().expect("a load task has its share");
        let text = String::from_utf8(input).unwrap();
        *task.get_mut(&NUMS) = text.lines().map(|l| l.parse().unwrap()).collect();
    }
    fn double(task: &mut Task) {
        task.get_mut(&NUMS).iter_mut().for_each(|n| *n *= 2);
    }
    fn more(task: &mut Task) -> bool {
        task.get(&TOTAL).rounds < 3
    }
    fn add_local(task: &mut Task) {
        *task.get_mut(&SUM) = task.get(&NUMS).iter().sum();
    }
    fn send_sum(task: &mut Task) {
        let sum = *task.get(&SUM);
        if sum > 0 {
            task.emit_value(0, &(task.index() as u64, sum));
        }
    }
    fn add_up(task: &mut Task) {
        // A gather's stage is its scatter's.
        assert_eq!(sys::task_dataset(0, 0).as_deref(), Some("sum"));
        assert_eq!(sys::task_dataset(1, 0).as_deref(), Some("total"));
        let pieces: Vec<(u64, u64)> = task.input_values().unwrap();
        let mut total = task.get_mut(&TOTAL);
        total.sum += pieces.iter().map(|(_, sum)| sum).sum::<u64>();
        total.rounds += 1;
        total.sources = pieces.iter().map(|(source, _)| *source).collect();
    }
    fn broadcast(task: &mut Task) {
        let total = task.get(&TOTAL);
        let line = format!("total {} from {:?}", total.sum, total.sources);
        for dest in 0..task.partitions() {
            task.emit(dest, line.as_bytes());
        }
    }
    fn receive(task: &mut Task) {
        let pieces: Vec<Vec<u8>> = task.inputs().collect();
        *task.get_mut(&REPORT) = String::from_utf8(pieces.concat()).unwrap();
    }
    fn render(task: &mut Task) {
        let mut lines: Vec<String> = task.get(&NUMS).iter().map(u64::to_string).collect();
        lines.push(task.get(&REPORT).clone());
        *task.get_mut(&LINES) = lines;
    }
    fn write(task: &mut Task) {
        assert_eq!(sys::task_dataset(0, 0).as_deref(), Some("lines"));
        assert_eq!(sys::task_dataset(0, 1), None);
        for line in task.get(&LINES).iter() {
            task.emit(0, format!("{line}\n").as_bytes());
        }
    }

    /// Input whose lines split 1..=6, 7..=11 and nothing, nothing among 4 partitions, with
    /// objects beside it that are not its.
    fn job() -> LocalJob {
        LocalJob::new(driver)
            .partitions(4)
            .arg("input", "in/nums")
            .arg("output", "out/old")
            .arg("output", "out/res")
            .object("in/nums/a", "1\n2\n3\n")
            .object("in/nums/b", "4\n5\n6\n7\n8\n9\n10")
            .object("in/nums/c", "00000000000000000000000011\n")
            .object("in/nums/_SUCCESS", "100\n")
            .object("in/nums/.x/d", "100\n")
            .object("in/nums-old/e", "100\n")
            .object("out/old/part-00000", "")
    }

    #[test]
    fn a_job_runs_every_kind_of_stage_and_block_as_the_host_would() {
        let output = job().run().unwrap();
        let keys: Vec<&str> = output.stored().keys().map(String::as_str).collect();
        let parts = ["part-00000", "part-00001", "part-00002", "part-00003"];
        let expected: Vec<String> = ["_SUCCESS"]
            .iter()
            .chain(&parts)
            .map(|p| format!("out/res/{p}"))
            .collect();
        assert_eq!(keys, expected);
        // 1..=11 is 66, times 4 is 264, three rounds 792, halved 396; partitions 2 and 3 are
        // empty, so send no piece.
        let total = "total 396 from [0, 1]";
        let part = |k: usize| String::from_utf8(output.stored()[&expected[k + 1]].clone()).unwrap();
        assert_eq!(part(0), format!("4\n8\n12\n16\n20\n24\n{total}\n"));
        assert_eq!(part(1), format!("28\n32\n36\n40\n44\n{total}\n"));
        assert_eq!(part(2), format!("{total}\n"));
        assert_eq!(part(3), part(2));
        assert_eq!(output.lines("out/res").len(), 15);
        assert_eq!(output.lines("out/res/")[14], total);
    }

    #[test]
    fn shares_split_lines_as_the_host_does() {
        // crates/job-service/src/input.rs's own test.
        let objects: [&[u8]; 3] = [b"a1\nb22\nc333\n", b"d4\ne", b"f666666\ng\n"];
        for partitions in 1..9 {
            let all: Vec<u8> = shares(&objects, partitions).concat();
            assert_eq!(all, b"a1\nb22\nc333\nd4\ne\nf666666\ng\n", "{partitions}");
        }
        // Bytes 0..8, 8..17 and 17..26 of the stream: whole lines, by where they start.
        let split = shares(&objects, 3);
        assert_eq!(
            split,
            [&b"a1\nb22\nc333\n"[..], b"d4\ne\nf666666\n", b"g\n"]
        );
    }

    /// `job()`'s objects and arguments under another driver.
    fn with(driver: fn(&mut Job)) -> LocalJob {
        LocalJob { driver, ..job() }
    }

    fn fails_on_one(task: &mut Task) {
        if task.index() == 1 {
            panic!("partition {} is bad", task.index());
        }
    }

    #[test]
    fn a_panic_in_a_task_names_its_stage_partition_and_datasets() {
        let err = with(|job| {
            job.load(parse, &NUMS, "input");
            job.compute(fails_on_one, &[&NUMS], &[&SUM]);
            job.store(write, &LINES, "output");
        })
        .run()
        .unwrap_err();
        let expected = LocalError::Task {
            kind: "compute",
            stage: 1,
            partition: 1,
            datasets: vec!["nums".into(), "sum".into()],
            message: "partition 1 is bad".into(),
        };
        assert_eq!(err, expected);
        assert_eq!(
            err.to_string(),
            "compute stage 1 on partition 1 of [nums, sum] failed: partition 1 is bad"
        );
    }

    #[test]
    fn inputs_and_outputs_are_checked_before_any_task_runs() {
        let refused = |job: LocalJob, expected: &str| match job.run() {
            Err(LocalError::Io(message)) => assert!(message.contains(expected), "{message}"),
            other => panic!("{other:?}"),
        };
        // A prefix is a directory: `in/num` is neither `in/nums` nor below it.
        refused(
            job().arg("input", "in/num"),
            "in/num: no objects under that prefix",
        );
        refused(job().arg("input", "nope/nums"), "no objects");
        refused(job().arg("output", "out/old"), "already holds objects");
        refused(job().arg("output", "/out"), "expected BUCKET/PREFIX");
        refused(LocalJob::new(driver), "`input`, which was not given");
    }

    fn emits(task: &mut Task) {
        task.emit(0, b"x");
    }
    fn emits_to_1(task: &mut Task) {
        task.emit(1, b"x");
    }
    fn declares(_: &mut Task) {
        sys::repeat(1);
    }
    fn nothing(_: &mut Task) {}

    #[test]
    fn what_the_host_refuses_is_refused_saying_why() {
        type Driver = fn(&mut Job);
        let cases: [(Driver, &str); 7] = [
            (
                |job| job.compute(emits, &[&SUM], &[]),
                "compute stage 0 on partition 0 of [sum] failed: `emit`: this task emits nothing",
            ),
            (
                |job| job.scatter(emits_to_1, &[&SUM], nothing, &[&TOTAL]),
                "`emit(1, ..)`: the datasets written have 1 partitions",
            ),
            (
                |job| job.compute(declares, &[&TOTAL], &[]),
                "`repeat` declares a stage; only the driver may call it",
            ),
            (
                |_| {
                    sys::input_count();
                },
                "the driver failed: `input_count` is for tasks",
            ),
            (
                |_| sys::compute(1, &[5], &[]),
                "stage 0 names dataset 5, which the driver never declared",
            ),
            (
                |job| job.compute(nothing, &[&SUM, &TOTAL], &[]),
                "`sum` (4 partitions) and `total` (1) are touched together by a stage",
            ),
            (
                |job| job.while_signal(|_| false, &SUM, |_| {}),
                "a signal reads `sum`, which has 4 partitions",
            ),
        ];
        for (driver, expected) in cases {
            let err = with(driver).run().unwrap_err().to_string();
            assert!(err.contains(expected), "{err}");
        }
    }
}
