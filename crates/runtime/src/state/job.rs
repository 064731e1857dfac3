//! What a job instance keeps in its `Store` ([`JobState`]): the job it belongs to
//! ([`JobContext`]), its limits and how much of its budget the running task has spent, and whether it is declaring the program (the
//! driver) or running tasks, with what the task reads and emits. The `mote_job` host functions
//! (`host::job`) act on it; the job engine (`job`) makes it and reads it after each task.

use super::CallLimiter;
use crate::guest_log::GuestLog;
use crate::job::TaskClock;
use mote_jobs::{DatasetId, Input, ProgramBuilder};
use mote_types::Limits;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use wasmtime_wasi::p1::WasiP1Ctx;

/// What every instance of a job shares: its name for messages, arguments and partition count.
#[derive(Clone, Debug)]
pub struct JobContext {
    /// The job function's name.
    pub function: Arc<str>,
    /// `--arg K=V`, in order.
    pub args: Arc<[(String, String)]>,
    /// The job's partition count.
    pub partitions: u32,
    /// The function's limits: its budget applies to each task, its memory to each instance.
    pub limits: Limits,
    /// Set when the job stops on this node: a running task ends at the next epoch tick rather
    /// than run out its budget.
    pub stopped: Arc<AtomicBool>,
    /// The program's dataset names by id, which `task_dataset` gives tasks: empty while the
    /// driver declares them.
    pub datasets: Arc<[String]>,
}

/// What an instance is doing: declaring the program, or running tasks.
pub(crate) enum Mode {
    Driver(ProgramBuilder),
    Task(TaskIo),
    Done,
}

/// What a task reads and emits, between the engine and the task's host calls.
#[derive(Default)]
pub(crate) struct TaskIo {
    /// The running task's stage's datasets read and written (`task_dataset`).
    pub(crate) reads: Vec<DatasetId>,
    pub(crate) writes: Vec<DatasetId>,
    pub(crate) inputs: Vec<Input>,
    pub(crate) emit_to: u32,
    pub(crate) emitted: Vec<(u32, Vec<u8>)>,
    pub(crate) emitted_bytes: usize,
}

/// A job instance's `Store` data.
pub(crate) struct JobState {
    pub(crate) limiter: CallLimiter,
    pub(crate) clock: TaskClock,
    pub(crate) timed_out: bool,
    pub(crate) ctx: JobContext,
    pub(crate) mode: Mode,
    pub(crate) wasi: Option<WasiP1Ctx>,
    /// What the running task (or the driver) logged, for the job function's log.
    pub(crate) log: GuestLog,
    /// The task's last `mote.log` line, quoted when it traps (the SDK logs a panic's message).
    pub(crate) last_log: Option<String>,
}

impl JobState {
    pub(crate) fn wasi_ctx(&mut self) -> &mut WasiP1Ctx {
        self.wasi
            .get_or_insert_with(|| wasmtime_wasi::WasiCtxBuilder::new().build_p1())
    }

    pub(crate) fn builder(&mut self, call: &str) -> wasmtime::Result<&mut ProgramBuilder> {
        match &mut self.mode {
            Mode::Driver(b) => Ok(b),
            _ => wasmtime::bail!("`{call}` declares a stage; only the driver may call it"),
        }
    }

    pub(crate) fn task_io(&mut self, call: &str) -> wasmtime::Result<&mut TaskIo> {
        match &mut self.mode {
            Mode::Task(io) => Ok(io),
            _ => wasmtime::bail!("`{call}` is for tasks; the driver never touches data"),
        }
    }
}
