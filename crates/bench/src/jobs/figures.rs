//! What `mote bench jobs` measured ([`JobsReport`] and its parts) and the floors it is held to.

use serde::Serialize;

/// The paper's floor: tasks one core schedules per second with the scheduler at most 10% of it.
pub const FLOOR_TASKS_PER_S_PER_CORE: f64 = 136_000.0;
/// The floor on mote's task rate over the best peer's.
pub const FLOOR_OVER_PEERS: f64 = 50.0;
/// The floor on Spark's LR iteration time over mote's.
pub const FLOOR_SPARK_LR: f64 = 4.0;

/// The machine and the moment.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// Cores this process may run on.
    pub nproc: usize,
    /// The CPU's model name.
    pub cpu: String,
    /// `/proc/loadavg`'s 1, 5 and 15 minute load when the run started.
    pub load_at_start: String,
    /// And when it ended.
    pub load_at_end: String,
}

impl Machine {
    /// This machine at the end of a run that began with `load_at_start` on `nproc` cores.
    pub fn at_end(nproc: usize, load_at_start: String) -> Self {
        Self {
            nproc,
            cpu: crate::results::cpu_model(),
            load_at_start,
            load_at_end: crate::results::load_average(),
        }
    }
}

/// One `work` value of Figure 4, on one core with 10 partitions.
#[derive(Clone, Debug, Serialize)]
pub struct WorkPoint {
    /// `busy`'s xorshift steps per task.
    pub work: u64,
    /// Wall time per task, ns: the median over the repetitions.
    pub ns_per_task: f64,
    /// Every repetition's.
    pub ns_per_task_runs: Vec<f64>,
    /// Tasks per second on the core: `1e9 / ns_per_task`.
    pub tasks_per_s: f64,
    /// The task's own length: its wall time per task less that of an empty task, µs.
    pub task_us: f64,
    /// The scheduler's share of the core: an empty task's wall time over this task's.
    pub scheduler_share: f64,
    /// The executors' counters (long runs, median): time in the guest per task, ns.
    pub counter_task_ns: f64,
    /// The executors' counters: busy time outside the guest per task, ns.
    pub counter_scheduling_ns: f64,
    /// The executors' counters: `scheduling / (task + scheduling)`.
    pub counter_scheduler_share: f64,
}

/// Tasks 9 times the scheduling cost, run to check the figure directly.
#[derive(Clone, Debug, Serialize)]
pub struct Validation {
    /// The `work` chosen: the steps whose wall time is 9 times an empty task's, from the
    /// longest Figure-4 point's time per step.
    pub work: u64,
    /// Its wall time per task, ns.
    pub ns_per_task: f64,
    /// Tasks per second measured on the core.
    pub tasks_per_s: f64,
    /// The task's own length, µs.
    pub task_us: f64,
    /// The scheduler's share from the wall times.
    pub scheduler_share: f64,
    /// The scheduler's share from the executors' counters.
    pub counter_scheduler_share: f64,
}

/// LR iterations of one configuration.
#[derive(Clone, Debug, Serialize)]
pub struct LrPoint {
    /// Partitions per core.
    pub partitions_per_core: u32,
    /// The job's partitions.
    pub partitions: u32,
    /// Iteration time, ms: the median over the repetitions.
    pub iteration_ms: f64,
    /// Every repetition's.
    pub iteration_ms_runs: Vec<f64>,
    /// Tasks per second over the iterations, median.
    pub tasks_per_s: f64,
    /// Every repetition's.
    pub tasks_per_s_runs: Vec<f64>,
    /// Tasks per iteration.
    pub tasks_per_iteration: f64,
}

/// Two 1-core workers against one, the same jobs run against node 1.
#[derive(Clone, Debug, Serialize)]
pub struct ScaleOut {
    /// LR on one worker.
    pub lr_one: LrPoint,
    /// LR on two.
    pub lr_two: LrPoint,
    /// One worker's iteration time over two workers'.
    pub lr_speedup: f64,
    /// Empty `busy` tasks per second on one worker.
    pub busy_one_tasks_per_s: f64,
    /// On two.
    pub busy_two_tasks_per_s: f64,
    /// Two workers' rate over one's.
    pub busy_speedup: f64,
    /// `busy` tasks of the validation's length per second on one worker.
    pub busy_work_one_tasks_per_s: f64,
    /// On two.
    pub busy_work_two_tasks_per_s: f64,
    /// The `work` of those tasks.
    pub busy_work: u64,
}

/// What the benchmark measured.
#[derive(Clone, Debug, Serialize)]
pub struct JobsReport {
    /// The command line.
    pub command: String,
    /// When it started (UTC).
    pub date: String,
    /// The machine.
    pub machine: Machine,
    /// A smoke run.
    pub smoke: bool,
    /// LR training points.
    pub points: u64,
    /// Repetitions of each measurement.
    pub reps: usize,
    /// LR iterations differenced.
    pub iterations: u64,
    /// The paper's figure: `0.1e9 / scheduling_ns_per_task`.
    pub tasks_per_s_per_core: f64,
    /// Wall time per empty task on one core (Figure 4's `work=0`): the cost of scheduling a task
    /// with entering and leaving the guest counted in.
    pub scheduling_ns_per_task: f64,
    /// The executors' `scheduling_us` per task, median over every Figure-4 long run.
    pub scheduling_ns_per_task_counters: f64,
    /// Whether `tasks_per_s_per_core` reaches 136,000.
    pub meets_floor_tasks_per_s_per_core: bool,
    /// Figure 4.
    pub figure4: Vec<WorkPoint>,
    /// Tasks 9 times the scheduling cost.
    pub validation: Validation,
    /// Empty tasks per second on the 2-core node, 10 partitions per core (the comparison's
    /// task rate).
    pub tasks_per_s_2core: f64,
    /// LR iteration on the 2-core node, 10 partitions per core, from the points file.
    pub lr_iteration_ms: f64,
    /// Its task rate.
    pub lr_tasks_per_s: f64,
    /// Its details.
    pub lr: LrPoint,
    /// Figure 8 on the 2-core node, generated points.
    pub figure8: Vec<LrPoint>,
    /// Two workers against one.
    pub scale_out: ScaleOut,
    /// Ray's task rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ray_tasks_per_s: Option<f64>,
    /// Dask's task rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dask_tasks_per_s: Option<f64>,
    /// Spark's task rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spark_tasks_per_s: Option<f64>,
    /// Spark's LR iteration, ms (median).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spark_lr_iteration_ms: Option<f64>,
    /// Ray's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ray_lr_iteration_ms: Option<f64>,
    /// Dask's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dask_lr_iteration_ms: Option<f64>,
    /// The fastest peer's task rate, and which.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub best_peer: Option<String>,
    /// `tasks_per_s_2core` over the best peer's task rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tasks_over_best_peer: Option<f64>,
    /// Spark's LR iteration over mote's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spark_lr_over_mote: Option<f64>,
    /// Everything the peers script printed, or why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peers: Option<serde_json::Value>,
    /// Wall time of the whole benchmark, s.
    pub bench_s: f64,
}

/// The floor on the fastest peer's word-count time over mote's `wordcount`.
pub const FLOOR_WORDCOUNT_OVER_PEERS: f64 = 5.0;
/// The hand-written word count (`wordcount-shuffle`) the typed one is measured against.
pub const SHUFFLE: &str = "wordcount-shuffle";
/// The ceiling on `wordcount`'s time (the SDK's `reduce_by_key`) over the hand-written
/// shuffle's (`wordcount-shuffle`).
pub const CEILING_WORDCOUNT_OVER_SHUFFLE: f64 = 1.1;

/// A word count's result in a few figures, which every system's must equal: its distinct
/// words, its words, and the SHA-256 of its lines `word<TAB>count\n` sorted by word (bytewise).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Digest {
    /// Distinct words.
    pub distinct: u64,
    /// Words: the sum of the counts.
    pub total: u64,
    /// The SHA-256 of the sorted lines, in hex.
    pub sha256: String,
}

/// One run of a word-count job on the node.
#[derive(Clone, Debug, Serialize)]
pub struct WordcountRun {
    /// The job function.
    pub job: String,
    /// Whether it ran as the hand-written reference ([`SHUFFLE`]'s place), not as the job
    /// measured against it.
    pub shuffle: bool,
    /// The repetition.
    pub rep: usize,
    /// From sending the job to seeing it succeeded, s: what the peers' times count.
    pub wall_s: f64,
    /// The job's own `elapsed_ms` (every worker running to the end), s.
    pub job_s: f64,
    /// Tasks.
    pub tasks: u64,
    /// Whether its output's digest is the reference's.
    pub equal: bool,
}

/// A peer's word count: its fastest method's median time.
#[derive(Clone, Debug, Serialize)]
pub struct PeerWordcount {
    /// `ray`, `dask` or `spark`.
    pub system: String,
    /// Its fastest method.
    pub method: String,
    /// That method's median time, s.
    pub seconds: f64,
    /// Whether every method that ran gave the reference's digest.
    pub equal: bool,
}

/// What `mote bench jobs --wordcount` measured.
#[derive(Clone, Debug, Serialize)]
pub struct WordcountReport {
    /// The command line.
    pub command: String,
    /// When it started (UTC).
    pub date: String,
    /// The machine.
    pub machine: Machine,
    /// A smoke run.
    pub smoke: bool,
    /// The text's size, bytes, and the objects it is in.
    pub bytes: u64,
    /// Objects of text.
    pub objects: usize,
    /// The generator's seed, vocabulary and Zipf exponent.
    pub seed: u64,
    /// Distinct words the generator draws from.
    pub vocabulary: usize,
    /// Zipf's exponent.
    pub exponent: f64,
    /// Time to write the text, s.
    pub generate_s: f64,
    /// The bench's own count of the text, which every result must equal.
    pub reference: Digest,
    /// The job measured against the hand-written shuffle (`wordcount` unless told).
    pub job: String,
    /// The node's cores, and the jobs' partitions.
    pub cores: usize,
    /// Partitions of each job.
    pub partitions: u32,
    /// Repetitions of each job, alternated.
    pub reps: usize,
    /// Every timed run, in the order run.
    pub runs: Vec<WordcountRun>,
    /// `job`'s median wall time, s.
    pub job_s: f64,
    /// `wordcount-shuffle`'s.
    pub shuffle_s: f64,
    /// `job`'s wall time over the shuffle's in each repetition.
    pub job_over_shuffle_runs: Vec<f64>,
    /// Their median.
    pub job_over_shuffle: f64,
    /// Whether every run's output equals the reference.
    pub outputs_equal: bool,
    /// The peers that ran.
    pub peers: Vec<PeerWordcount>,
    /// The fastest of them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fastest_peer: Option<String>,
    /// Its time over `job`'s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fastest_peer_over_job: Option<f64>,
    /// Everything the peers script printed, or why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peers_output: Option<serde_json::Value>,
    /// Wall time of the whole benchmark, s.
    pub bench_s: f64,
}
