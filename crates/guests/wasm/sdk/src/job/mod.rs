//! Write data-parallel jobs (`docs/jobs.md`): one module whose driver declares datasets and
//! stages, and whose tasks compute on one partition of them at a time.
//!
//! Most jobs are best written with the typed operators of [`flow`] (`lines`, `map`,
//! `reduce_by_key`, `join`, ...), which make the stages below; this module is what they are
//! made of, for jobs that need a stage of their own. [`local`] runs a job natively, in tests.
//!
//! A job module has two entry points, which [`crate::job!`] exports:
//!
//! - the driver, `fn(&mut Job)`, runs once in a fresh instance to tell the host the job's
//!   program. It never touches data: it names [`Dataset`]s in stages ([`Job::compute`],
//!   [`Job::scatter`], [`Job::load`], [`Job::store`]) and nests them in control flow that the
//!   host interprets on every worker ([`Job::repeat`], [`Job::while_signal`],
//!   [`Job::if_signal`], [`Job::if_else`]);
//! - the tasks, `fn(&mut Task)`, each run on one partition index in a long-lived instance that
//!   holds that partition of every dataset it is co-partitioned with. [`Task::get`] and
//!   [`Task::get_mut`] reach a dataset's partition, which stays in the instance between tasks.
//!   A signal is a `fn(&mut Task) -> bool` over a one-partition dataset.
//!
//! Datasets are constants, so that tasks, which never run the driver, name the same ones:
//!
//! ```ignore
//! use mote_sdk::job::{Dataset, Job, Task, decode_u64s};
//!
//! const COUNTS: Dataset<u64> = Dataset::partitioned("counts");
//! const TOTAL: Dataset<u64> = Dataset::single("total");
//!
//! fn driver(job: &mut Job) {
//!     job.repeat(job.arg_or("rounds", 3), |job| {
//!         job.compute(count, &[&COUNTS], &[&COUNTS]);
//!         job.scatter(send, &[&COUNTS], sum, &[&TOTAL]);
//!     });
//! }
//! fn count(task: &mut Task) {
//!     *task.get_mut(&COUNTS) += 1;
//! }
//! fn send(task: &mut Task) {
//!     let count = *task.get(&COUNTS);
//!     task.emit(0, &count.to_le_bytes());
//! }
//! fn sum(task: &mut Task) {
//!     let total = task.inputs().map(|piece| decode_u64s(&piece)[0]).sum();
//!     *task.get_mut(&TOTAL) = total;
//! }
//! mote_sdk::job!(driver);
//! ```
//!
//! Stages take task functions as fn items or closures that capture nothing, never as function
//! pointers: the SDK hands the host the function table index of a wrapper made for each one, and
//! that wrapper has to call the function without having been given it (see [`Job::compute`]).
//! The host's imports are those of the `mote_job` module (`mote_abi::JOB_MODULE`); natively
//! an in-process stand-in serves them, which [`local::LocalJob`] runs jobs on.
//!
//! A panic in a driver or a task is written to the log (with [`crate::log`]) and then aborts the
//! instance, which the host reports with that message.

pub mod codec;
mod entry;
pub mod flow;
#[cfg(not(target_family = "wasm"))]
pub mod local;
pub mod text;

pub use codec::DecodeError;
pub use entry::Outcome;
use entry::{Entry, Run, conjure, fail, install_panic_hook, run_id, signal_id, task_id};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::any::{Any, type_name};
use std::cell::{Ref, RefCell, RefMut};
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::str::FromStr;
pub use text::Text;

/// Exports `driver: fn(&mut Job)` as this module's job driver, and the task entry point that
/// runs the task functions its stages name.
#[macro_export]
macro_rules! job {
    ($driver:path) => {
        #[unsafe(no_mangle)]
        pub extern "C" fn mote_job_driver() {
            $crate::job::__private::drive($driver)
        }

        #[unsafe(no_mangle)]
        pub extern "C" fn mote_job_task(func: i32, index: i32) -> i32 {
            $crate::job::__private::run_task(func, index)
        }
    };
}

/// A dataset of `T`s: one `T` per partition, created with `T::default()` the first time a task
/// reaches it in an instance. A constant names it, so the driver and every task agree on it.
pub struct Dataset<T> {
    name: &'static str,
    partitioned: bool,
    // `fn() -> T`: a handle neither owns a `T` nor stops `Dataset<T>` from being `Sync`.
    _values: PhantomData<fn() -> T>,
}

impl<T> Dataset<T> {
    /// A dataset of the job's partition count ([`Job::partitions`]).
    pub const fn partitioned(name: &'static str) -> Self {
        Self {
            name,
            partitioned: true,
            _values: PhantomData,
        }
    }

    /// A dataset of one partition: a job's global values, such as a model or a loop counter.
    pub const fn single(name: &'static str) -> Self {
        Self {
            name,
            partitioned: false,
            _values: PhantomData,
        }
    }

    /// The name the host knows the dataset by.
    pub const fn name(&self) -> &'static str {
        self.name
    }
}

/// A dataset of any type, as stages list the datasets they read and write.
pub trait AnyDataset {
    /// The dataset's name.
    fn name(&self) -> &'static str;
    /// Whether it has the job's partition count rather than one partition.
    fn is_partitioned(&self) -> bool;
}

impl<T> AnyDataset for Dataset<T> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn is_partitioned(&self) -> bool {
        self.partitioned
    }
}

/// The driver's view of the job: declares stages and control flow to the host, in order.
///
/// A dataset is declared to the host the first time a stage names it.
pub struct Job {
    _declares: (),
}

/// What the driver has declared so far. Thread-local rather than in [`Job`], so that a
/// [`flow::Flow`] declares its stages without holding the `Job`, and two flows can be alive at
/// once (a join's sides).
#[derive(Default)]
struct Declared {
    /// Named datasets' ids.
    ids: BTreeMap<&'static str, i32>,
    /// Datasets made by flows, so far: their names' numbers.
    made: u32,
    /// The body being declared: 0 at the top, a fresh number for each loop or branch body.
    scope: u32,
    /// Bodies so far.
    scopes: u32,
}

thread_local! {
    static DECLARED: RefCell<Declared> = RefCell::new(Declared::default());
}

/// The id of the named dataset `dataset`, declared to the host the first time.
fn declared_id(dataset: &dyn AnyDataset) -> i32 {
    DECLARED.with_borrow_mut(|d| {
        *d.ids
            .entry(dataset.name())
            .or_insert_with(|| sys::dataset(dataset.name(), dataset.is_partitioned()))
    })
}

/// Declares a new dataset for a flow, named for what makes it (`reduce_by_key.3`), as errors
/// name it: its id.
fn made_dataset(made_by: &str, partitioned: bool) -> i32 {
    let name = DECLARED.with_borrow_mut(|d| {
        d.made += 1;
        format!("{made_by}.{}", d.made)
    });
    sys::dataset(&name, partitioned)
}

/// The body being declared (see [`Declared::scope`]).
fn scope() -> u32 {
    DECLARED.with_borrow(|d| d.scope)
}

/// Declares `body` as a body of its own: a flow made before it and read in it is read once per
/// run of the body, so it must be kept, not consumed.
fn in_scope(body: impl FnOnce()) {
    let outer = DECLARED.with_borrow_mut(|d| {
        d.scopes += 1;
        std::mem::replace(&mut d.scope, d.scopes)
    });
    body();
    DECLARED.with_borrow_mut(|d| d.scope = outer);
}

impl Job {
    /// The job's partition count, chosen by the controller.
    pub fn partitions(&self) -> usize {
        partitions()
    }

    /// The value of job argument `key` (`--arg key=value`), if the job has one.
    pub fn arg(&self, key: &str) -> Option<String> {
        arg(key)
    }

    /// Job argument `key` parsed as a `T`, or `default` if the job has no such argument.
    ///
    /// # Panics
    ///
    /// If the argument does not parse, naming it and its value.
    pub fn arg_or<T: FromStr>(&self, key: &str, default: T) -> T {
        arg_or(key, default)
    }

    /// A compute stage: `f` runs once per partition index, on the partitions of `reads` and
    /// `writes` of that index, which must all have the same partition count.
    ///
    /// `f` must be a fn item or a closure that captures nothing; a capturing closure fails to
    /// compile.
    pub fn compute<F: Fn(&mut Task) -> R + Copy + 'static, R: Outcome>(
        &mut self,
        f: F,
        reads: &[&dyn AnyDataset],
        writes: &[&dyn AnyDataset],
    ) {
        let func = task_id(f);
        let reads = self.ids(reads);
        let writes = self.ids(writes);
        sys::compute(func, &reads, &writes);
    }

    /// A scatter stage and its gather: `scatter` runs on each partition of `reads` and
    /// [`Task::emit`]s pieces for partitions of `writes`; then `gather` runs on each partition of
    /// `writes`, even one no piece was addressed to, with [`Task::inputs`] the pieces emitted
    /// for it in the order of the partitions that emitted them.
    ///
    /// Both functions must be fn items or closures that capture nothing.
    pub fn scatter<S, G, R: Outcome, Q: Outcome>(
        &mut self,
        scatter: S,
        reads: &[&dyn AnyDataset],
        gather: G,
        writes: &[&dyn AnyDataset],
    ) where
        S: Fn(&mut Task) -> R + Copy + 'static,
        G: Fn(&mut Task) -> Q + Copy + 'static,
    {
        let scatter = task_id(scatter);
        let gather = task_id(gather);
        let reads = self.ids(reads);
        let writes = self.ids(writes);
        sys::scatter(scatter, &reads, gather, &writes);
    }

    /// A load stage: `f` runs on each partition of `dataset` with input 0 its share of the text
    /// lines of the objects job argument `arg` names (`BUCKET/PREFIX`): whole lines, in key
    /// order, partition `i` a contiguous range after partition `i - 1`'s. A share may be empty.
    pub fn load<T, F: Fn(&mut Task) -> R + Copy + 'static, R: Outcome>(
        &mut self,
        f: F,
        dataset: &Dataset<T>,
        arg: &str,
    ) {
        let func = task_id(f);
        let id = self.id(dataset);
        sys::load(func, id, arg);
    }

    /// A store stage: `f` runs on each partition `k` of `dataset`, and what it emits (to
    /// destination 0) becomes object `PREFIX/part-{k:05}` under job argument `arg`'s
    /// `BUCKET/PREFIX`. The objects in key order are the result, so emit whole lines.
    pub fn store<T, F: Fn(&mut Task) -> R + Copy + 'static, R: Outcome>(
        &mut self,
        f: F,
        dataset: &Dataset<T>,
        arg: &str,
    ) {
        let func = task_id(f);
        let id = self.id(dataset);
        sys::store(func, id, arg);
    }

    /// The stages `body` declares run `times` times.
    pub fn repeat(&mut self, times: u32, body: impl FnOnce(&mut Self)) {
        let times = i32::try_from(times).expect("a repeat count fits an i32");
        sys::repeat(times);
        in_scope(|| body(self));
        sys::end();
    }

    /// The stages `body` declares run for as long as `signal`, evaluated on the one-partition
    /// `dataset` before each iteration, is true.
    ///
    /// `signal` must be a fn item or a closure that captures nothing.
    pub fn while_signal<T, F: Fn(&mut Task) -> bool + Copy + 'static>(
        &mut self,
        signal: F,
        dataset: &Dataset<T>,
        body: impl FnOnce(&mut Self),
    ) {
        let func = signal_id(signal);
        let id = self.id(dataset);
        sys::while_signal(func, id);
        in_scope(|| body(self));
        sys::end();
    }

    /// The stages `then` declares run if `signal` on the one-partition `dataset` is true.
    pub fn if_signal<T, F: Fn(&mut Task) -> bool + Copy + 'static>(
        &mut self,
        signal: F,
        dataset: &Dataset<T>,
        then: impl FnOnce(&mut Self),
    ) {
        self.if_else(signal, dataset, then, |_| {});
    }

    /// The stages `then` declares run if `signal` on the one-partition `dataset` is true, those
    /// `otherwise` declares if it is false.
    pub fn if_else<T, F: Fn(&mut Task) -> bool + Copy + 'static>(
        &mut self,
        signal: F,
        dataset: &Dataset<T>,
        then: impl FnOnce(&mut Self),
        otherwise: impl FnOnce(&mut Self),
    ) {
        let func = signal_id(signal);
        let id = self.id(dataset);
        sys::if_signal(func, id);
        in_scope(|| then(self));
        sys::else_branch();
        in_scope(|| otherwise(self));
        sys::end();
    }

    fn ids(&mut self, datasets: &[&dyn AnyDataset]) -> Vec<i32> {
        datasets.iter().map(|d| declared_id(*d)).collect()
    }

    fn id(&mut self, dataset: &dyn AnyDataset) -> i32 {
        declared_id(dataset)
    }
}

/// A task's view of its partition: the partitions of the datasets its instance holds, its inputs
/// and its output.
pub struct Task {
    index: usize,
    /// The instance's partitions by dataset name, each a boxed `RefCell<T>`.
    data: RefCell<Partitions>,
}

/// An instance's partitions by dataset name, each a boxed `RefCell<T>`. Names are owned, as the
/// datasets [`flow`] makes are named when the driver runs, and a task learns them from the host.
type Partitions = BTreeMap<String, Box<dyn Any>>;

impl Task {
    /// The partition index this task runs on.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The job's partition count.
    pub fn partitions(&self) -> usize {
        partitions()
    }

    /// This instance's partition of `dataset`.
    ///
    /// # Panics
    ///
    /// If the task already holds it through [`Task::get_mut`].
    pub fn get<T: Default + 'static>(&self, dataset: &Dataset<T>) -> Ref<'_, T> {
        borrow(self.cell(dataset), dataset.name)
    }

    /// This instance's partition of `dataset`, to change.
    ///
    /// # Panics
    ///
    /// If the task already holds it through [`Task::get`] or [`Task::get_mut`].
    pub fn get_mut<T: Default + 'static>(&self, dataset: &Dataset<T>) -> RefMut<'_, T> {
        borrow_mut(self.cell(dataset), dataset.name)
    }

    /// The task's inputs, in order: a load task's share of lines, or a gather task's pieces.
    pub fn inputs(&self) -> impl Iterator<Item = Vec<u8>> {
        (0..sys::input_count()).map(sys::input)
    }

    /// Sends `bytes` to partition `dest` of the datasets a scatter writes (appended to what this
    /// task sent there before), or, from a store task, to the output (`dest` 0).
    pub fn emit(&self, dest: usize, bytes: &[u8]) {
        let dest = i32::try_from(dest).expect("a partition index fits an i32");
        sys::emit(dest, bytes);
    }

    /// Sends `value`, encoded ([`codec`]), to partition `dest` like [`Task::emit`]: values sent
    /// to one partition arrive there one after another, which [`Task::input_values`] reads.
    pub fn emit_value<T: Serialize + ?Sized>(&self, dest: usize, value: &T) {
        self.emit(dest, &codec::encode(value));
    }

    /// Every value in the task's inputs ([`Task::emit_value`]'s), input after input.
    pub fn input_values<T: DeserializeOwned>(&self) -> Result<Vec<T>, DecodeError> {
        let mut values = Vec::new();
        for input in self.inputs() {
            values.extend(codec::decode_all(&input)?);
        }
        Ok(values)
    }

    /// The value of job argument `key`, if the job has one.
    pub fn arg(&self, key: &str) -> Option<String> {
        arg(key)
    }

    /// Job argument `key` parsed as a `T`, or `default` if the job has no such argument.
    ///
    /// # Panics
    ///
    /// If the argument does not parse, naming it and its value.
    pub fn arg_or<T: FromStr>(&self, key: &str, default: T) -> T {
        arg_or(key, default)
    }

    fn cell<T: Default + 'static>(&self, dataset: &Dataset<T>) -> &RefCell<T> {
        self.cell_named(dataset.name)
    }

    /// The partition of the dataset called `name`, made with `T::default()` if the instance has
    /// none yet.
    fn cell_named<T: Default + 'static>(&self, name: &str) -> &RefCell<T> {
        let mut data = self.data.borrow_mut();
        // One lookup where the instance has the partition, as it has but for its first task.
        let cell = match data.get(name) {
            Some(slot) => cell_in::<T>(slot, name),
            None => {
                let slot: Box<dyn Any> = Box::new(RefCell::new(T::default()));
                let cell = cell_in::<T>(&slot, name);
                data.insert(name.to_owned(), slot);
                cell
            }
        };
        // SAFETY: the cell lives in its own heap allocation, which moves with neither the map
        // nor its box, and the task only ever adds slots, so it lives as long as `self`.
        unsafe { &*cell }
    }
}

/// The cell in `slot`, a partition of dataset `name`.
fn cell_in<T: 'static>(slot: &Box<dyn Any>, name: &str) -> *const RefCell<T> {
    slot.downcast_ref::<RefCell<T>>().unwrap_or_else(|| {
        panic!(
            "dataset {name} is used as a {} but holds another type",
            type_name::<T>()
        )
    })
}

fn borrow<'a, T>(cell: &'a RefCell<T>, name: &str) -> Ref<'a, T> {
    cell.try_borrow()
        .unwrap_or_else(|_| panic!("dataset {name} is borrowed mutably by this task already"))
}

fn borrow_mut<'a, T>(cell: &'a RefCell<T>, name: &str) -> RefMut<'a, T> {
    cell.try_borrow_mut()
        .unwrap_or_else(|_| panic!("dataset {name} is borrowed by this task already"))
}

/// Encodes `values` as consecutive little-endian `f64`s, for pieces and broadcasts.
pub fn encode_f64s(values: &[f64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Decodes [`encode_f64s`]'s bytes.
///
/// # Panics
///
/// If the length is not a multiple of 8.
pub fn decode_f64s(bytes: &[u8]) -> Vec<f64> {
    chunks(bytes).map(f64::from_le_bytes).collect()
}

/// Encodes `values` as consecutive little-endian `u64`s.
pub fn encode_u64s(values: &[u64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Decodes [`encode_u64s`]'s bytes.
///
/// # Panics
///
/// If the length is not a multiple of 8.
pub fn decode_u64s(bytes: &[u8]) -> Vec<u64> {
    chunks(bytes).map(u64::from_le_bytes).collect()
}

fn chunks(bytes: &[u8]) -> impl Iterator<Item = [u8; 8]> {
    assert!(
        bytes.len().is_multiple_of(8),
        "{} bytes are not a whole number of 8-byte values",
        bytes.len()
    );
    bytes
        .chunks_exact(8)
        .map(|c| c.try_into().expect("chunks of 8"))
}

fn partitions() -> usize {
    usize::try_from(sys::partitions()).expect("the host's partition count is positive")
}

fn arg(key: &str) -> Option<String> {
    let value = sys::arg(key)?;
    Some(String::from_utf8(value).unwrap_or_else(|_| panic!("job argument {key} is not UTF-8")))
}

fn arg_or<T: FromStr>(key: &str, default: T) -> T {
    match arg(key) {
        None => default,
        Some(value) => value.trim().parse().unwrap_or_else(|_| {
            panic!(
                "job argument {key}={value} is not a valid {}",
                type_name::<T>()
            )
        }),
    }
}

#[doc(hidden)]
pub mod __private {
    use super::{Entry, Job, Task, install_panic_hook};
    use std::cell::RefCell;
    use std::collections::BTreeMap;

    thread_local! {
        /// The instance's partitions, lent to each task while it runs.
        pub(super) static DATA: RefCell<super::Partitions> =
            const { RefCell::new(BTreeMap::new()) };
    }

    /// Runs the job's driver.
    pub fn drive(driver: fn(&mut Job)) {
        install_panic_hook();
        super::DECLARED.set(super::Declared::default());
        driver(&mut Job { _declares: () });
    }

    /// Runs the task function whose entry has table index `func` on partition `index`, and
    /// returns a signal's answer (0 for any other task).
    pub fn run_task(func: i32, index: i32) -> i32 {
        install_panic_hook();
        assert!(func > 0, "task function {func} is not a table index");
        let index = usize::try_from(index)
            .unwrap_or_else(|_| panic!("partition index {index} is negative"));
        // SAFETY: the host passes back an index the driver took from an `Entry` in this same
        // module (`entry_id`), and every instance of a module has the same table.
        #[cfg(target_family = "wasm")]
        let entry: Entry = unsafe { std::mem::transmute::<usize, Entry>(func as usize) };
        #[cfg(not(target_family = "wasm"))]
        let entry: Entry = super::entry::ENTRIES
            .with_borrow(|entries| entries.get(func as usize - 1).copied())
            .unwrap_or_else(|| panic!("task function {func} was not registered on this thread"));
        let mut task = Task {
            index,
            data: RefCell::new(DATA.take()),
        };
        let answer = entry(&mut task);
        DATA.set(task.data.into_inner());
        i32::from(answer)
    }
}

/// The `mote_job` imports, converted to Rust types.
#[cfg(target_family = "wasm")]
mod sys;

/// Natively (tests) the host's imports are served in-process, for [`local`].
#[cfg(not(target_family = "wasm"))]
#[path = "native.rs"]
mod sys;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f64s_round_trip() {
        let values = [0.0, -1.5, f64::MAX, f64::MIN_POSITIVE, 1e-300];
        assert_eq!(decode_f64s(&encode_f64s(&values)), values);
        assert!(decode_f64s(&[]).is_empty());
    }

    #[test]
    fn u64s_round_trip() {
        let values = [0, 1, u64::MAX, 1 << 40];
        assert_eq!(decode_u64s(&encode_u64s(&values)), values);
    }

    #[test]
    #[should_panic(expected = "not a whole number")]
    fn a_partial_value_is_refused() {
        decode_f64s(&[0; 9]);
    }

    #[test]
    fn a_task_lends_each_dataset_separately() {
        const A: Dataset<Vec<u64>> = Dataset::partitioned("a");
        const B: Dataset<u64> = Dataset::single("b");
        let task = Task {
            index: 0,
            data: RefCell::new(BTreeMap::new()),
        };
        task.get_mut(&A).push(7);
        let a = task.get(&A);
        *task.get_mut(&B) += a[0];
        assert_eq!(*task.get(&B), 7);
    }

    #[test]
    #[should_panic(expected = "holds another type")]
    fn a_dataset_keeps_its_type() {
        const A: Dataset<u64> = Dataset::partitioned("a");
        const ALSO_A: Dataset<f64> = Dataset::partitioned("a");
        let task = Task {
            index: 0,
            data: RefCell::new(BTreeMap::new()),
        };
        *task.get_mut(&A) = 1;
        task.get(&ALSO_A);
    }
}
