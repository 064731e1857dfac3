//! The job engine: its own wasmtime engine (no pooling allocator: an instance lives as long as
//! its partitions, not a call) and epoch ticker, the job modules compiled for it, and the
//! instances that hold a job's partitions ([`JobInstance`]), each task a call into one under
//! the function's budget, on a core the node's calls leave ([`JobCores`]).

use crate::error::{CompileError, JobError, RuntimeError, explain_job};
use crate::guest_log::GuestLog;
use crate::host;
use crate::job::clock::TaskClock;
use crate::job::cores::{JobCores, Stopped};
use crate::state::{CallLimiter, JobContext, JobState, Mode, TaskIo};
use crate::ticker::{EpochTicker, Running, TickerPeriods};
use mote_jobs::{Input, Program, ProgramBuilder, Stage};
use mote_types::abi;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use wasmtime::{
    Config, Engine, InstancePre, Linker, Memory, Module, Store, Trap, TypedFunc, UpdateDeadline,
};

/// The engine, linker and compiled modules of the jobs a node runs.
pub struct JobEngine {
    engine: Engine,
    linker: Linker<JobState>,
    modules: Mutex<HashMap<String, Arc<JobModule>>>,
    ticker: EpochTicker,
    cores: Arc<JobCores>,
}

impl JobEngine {
    /// Builds the engine and starts its epoch ticker; its tasks run on the `cores` the node's
    /// calls leave.
    pub fn new(cores: Arc<JobCores>) -> Result<Self, RuntimeError> {
        let engine_error = |e: wasmtime::Error| RuntimeError::Engine(format!("{e:#}"));
        let mut config = Config::new();
        config.epoch_interruption(true);
        let engine = Engine::new(&config).map_err(engine_error)?;
        let mut linker = Linker::new(&engine);
        host::add_job(&mut linker).map_err(engine_error)?;
        // Tasks' budgets are seconds by default, and a cancel needs a tick to stop a running
        // task: 10 ms does both. Each tick takes the core from a job's executor for a moment
        // (the ticker is a normal thread, the executors idle ones), so fewer are cheaper.
        let ticker = EpochTicker::start(
            engine.clone(),
            TickerPeriods {
                coarse: Duration::from_millis(10),
                fine: Duration::from_micros(50),
            },
        );
        cores.attach(&engine);
        Ok(Self {
            engine,
            linker,
            modules: Mutex::new(HashMap::new()),
            ticker,
            cores,
        })
    }

    /// The job module with these bytes' `sha256`, compiled on first use.
    pub fn module(&self, sha256: &str, wasm: &[u8]) -> Result<Arc<JobModule>, CompileError> {
        if let Some(m) = self.modules.lock().get(sha256) {
            return Ok(m.clone());
        }
        let module = Module::from_binary(&self.engine, wasm)
            .map_err(|e| CompileError::Invalid(format!("{e:#}")))?;
        // Build the copy-on-write memory image (a memfd) here, where the module is compiled:
        // the driver and the tasks run on confined threads, which may not create files.
        module
            .initialize_copy_on_write_image()
            .map_err(|e| CompileError::Link(format!("cannot build the memory image: {e:#}")))?;
        let pre = self
            .linker
            .instantiate_pre(&module)
            .map_err(|e| CompileError::Link(format!("{e:#}")))?;
        let m = Arc::new(JobModule { pre });
        self.modules.lock().insert(sha256.to_owned(), m.clone());
        Ok(m)
    }

    fn store(&self, ctx: &JobContext, mode: Mode) -> Store<JobState> {
        let state = JobState {
            limiter: CallLimiter {
                memory_limit: ctx.limits.memory_bytes(),
                denied: None,
            },
            clock: TaskClock::start(ctx.limits.timeout()),
            timed_out: false,
            ctx: ctx.clone(),
            mode,
            wasi: None,
            log: GuestLog::default(),
            last_log: None,
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        let cores = self.cores.clone();
        store.epoch_deadline_callback(move |mut c| {
            let state = c.data_mut();
            if state.ctx.stopped.load(Ordering::Relaxed) {
                return Err(Trap::Interrupt.into());
            }
            // Waiting for calls spends no CPU time, so none of the task's budget.
            if cores.asked_to_yield() && cores.hold(&state.ctx.stopped) == Err(Stopped) {
                return Err(Trap::Interrupt.into());
            }
            if state.clock.ran_out() {
                state.timed_out = true;
                return Err(Trap::Interrupt.into());
            }
            Ok(UpdateDeadline::Continue(1))
        });
        store
    }

    /// Runs the driver of `module` in a fresh instance and returns the program it declared.
    pub fn program(&self, module: &JobModule, ctx: &JobContext) -> Result<Program, JobError> {
        let mut store = self.store(ctx, Mode::Driver(ProgramBuilder::new(ctx.partitions)));
        let running = self.arm(&mut store, ctx);
        let instance = module
            .pre
            .instantiate(&mut store)
            .map_err(|e| classify(e, store.data()))?;
        initialize(&instance, &mut store)?;
        let driver: TypedFunc<(), ()> = instance
            .get_typed_func(&mut store, abi::EXPORT_JOB_DRIVER)
            .map_err(|e| JobError::Trap(format!("the job module's `mote_job_driver`: {e}")))?;
        drop(running);
        let _running = self.arm(&mut store, ctx);
        driver
            .call(&mut store, ())
            .map_err(|e| classify(e, store.data()))?;
        match std::mem::replace(&mut store.data_mut().mode, Mode::Done) {
            Mode::Driver(b) => Ok(b.finish()?),
            _ => unreachable!("only the driver's instance is in driver mode"),
        }
    }

    /// A fresh instance for the partitions of one index.
    pub fn instance(&self, module: &JobModule, ctx: &JobContext) -> Result<JobInstance, JobError> {
        let mut store = self.store(ctx, Mode::Task(TaskIo::default()));
        let _running = self.arm(&mut store, ctx);
        let instance = module
            .pre
            .instantiate(&mut store)
            .map_err(|e| classify(e, store.data()))?;
        initialize(&instance, &mut store)?;
        let task = instance
            .get_typed_func(&mut store, abi::EXPORT_JOB_TASK)
            .map_err(|e| JobError::Trap(format!("the job module's `mote_job_task`: {e}")))?;
        let memory = instance.get_memory(&mut store, abi::EXPORT_MEMORY);
        Ok(JobInstance {
            store,
            instance,
            task,
            memory,
            budget: ctx.limits.timeout(),
        })
    }

    /// An instance holding what [`JobInstance::image`] saved.
    pub fn restore(
        &self,
        module: &JobModule,
        ctx: &JobContext,
        image: &[u8],
    ) -> Result<JobInstance, JobError> {
        let mut instance = self.instance(module, ctx)?;
        instance.load_image(image)?;
        Ok(instance)
    }

    /// A batch of tasks under `budget` about to run on this thread: keeps the ticker going
    /// (finely for a short budget) and, from the first task on, holds a core of the node's.
    pub fn running(&self, budget: Duration) -> TaskBatch<'_> {
        TaskBatch {
            _ticking: self.ticker.call_starting(budget),
            cores: &self.cores,
        }
    }

    fn arm(&self, store: &mut Store<JobState>, ctx: &JobContext) -> Running<'_> {
        let running = self.ticker.call_starting(ctx.limits.timeout());
        store.data_mut().clock = TaskClock::start(ctx.limits.timeout());
        store.set_epoch_deadline(1);
        running
    }
}

/// A batch of tasks running on one thread, from [`JobEngine::running`]: the engine's ticker
/// ticks while it lives, and the thread gives up its core when it drops.
pub struct TaskBatch<'a> {
    _ticking: Running<'a>,
    cores: &'a JobCores,
}

impl Drop for TaskBatch<'_> {
    fn drop(&mut self) {
        self.cores.release();
    }
}

/// A job module compiled and linked for the job engine.
pub struct JobModule {
    pre: InstancePre<JobState>,
}

/// One instance of a job module: the partitions of one index of one group.
pub struct JobInstance {
    pub(super) store: Store<JobState>,
    pub(super) instance: wasmtime::Instance,
    task: TypedFunc<(i32, i32), i32>,
    pub(super) memory: Option<Memory>,
    budget: Duration,
}

/// A task to run ([`JobInstance::run`]).
pub struct TaskCall<'a> {
    /// The task function, as the guest numbers it (a scatter stage's gather function for its
    /// gather tasks).
    pub func: u32,
    /// The partition index it runs on.
    pub index: u32,
    /// Its stage: the datasets it reads and writes, which the task may ask for.
    pub stage: &'a Stage,
    /// A load task's input, or a gather task's pieces.
    pub inputs: Vec<Input>,
    /// How many partitions its emits may address (0 for a task that emits nothing).
    pub emit_to: u32,
    /// When the caller counts the task begun: its budget counts from then. A worker passes
    /// the end of the task before, since a clock read costs a tenth of an empty task.
    pub started: Instant,
}

/// What a task produced.
#[derive(Debug, Default)]
pub struct TaskOutput {
    /// What `mote_job_task` returned: a signal's value (1 or 0), 0 for other tasks.
    pub value: i32,
    /// What it emitted, by destination partition, in the order first emitted.
    pub emitted: Vec<(u32, Vec<u8>)>,
}

impl JobInstance {
    /// Runs `task`. `batch`, from [`JobEngine::running`], keeps the engine's ticker going and
    /// holds a core: a worker holds one over a batch of tasks rather than count each task in
    /// and out. The task waits first if calls want the cores; it fails with
    /// [`JobError::Stopped`] if the job stops meanwhile. Its inputs come back with its output.
    pub fn run(
        &mut self,
        batch: &TaskBatch<'_>,
        task: TaskCall<'_>,
    ) -> Result<(TaskOutput, Vec<Input>), JobError> {
        let state = self.store.data_mut();
        batch
            .cores
            .hold(&state.ctx.stopped)
            .map_err(|Stopped| JobError::Stopped)?;
        state.clock = TaskClock::start_at(self.budget, task.started);
        // A trap quotes a line of its own task, never one an earlier task logged.
        state.last_log = None;
        let Mode::Task(io) = &mut state.mode else {
            unreachable!("task instances stay in task mode")
        };
        io.inputs = task.inputs;
        io.emit_to = task.emit_to;
        io.reads.clone_from(&task.stage.reads);
        io.writes.clone_from(&task.stage.writes);
        self.store.set_epoch_deadline(1);
        let result = self
            .task
            .call(&mut self.store, (task.func as i32, task.index as i32));
        let state = self.store.data_mut();
        let Mode::Task(io) = &mut state.mode else {
            unreachable!("task instances stay in task mode")
        };
        let inputs = std::mem::take(&mut io.inputs);
        let emitted = std::mem::take(&mut io.emitted);
        io.emitted_bytes = 0;
        match result {
            Ok(value) => Ok((TaskOutput { value, emitted }, inputs)),
            Err(e) => Err(classify(e, self.store.data())),
        }
    }

    /// What the last task logged: the worker keeps it in the job function's log.
    pub fn take_log(&mut self) -> GuestLog {
        std::mem::take(&mut self.store.data_mut().log)
    }

    /// The size of the instance's linear memory: what its partitions take.
    pub fn memory_bytes(&self) -> usize {
        self.memory.map_or(0, |m| m.data_size(&self.store))
    }
}

/// Runs a WASI reactor's `_initialize`, as a function's instance does before its handler.
fn initialize(instance: &wasmtime::Instance, store: &mut Store<JobState>) -> Result<(), JobError> {
    if let Ok(init) = instance.get_typed_func::<(), ()>(&mut *store, abi::EXPORT_INITIALIZE) {
        init.call(&mut *store, ())
            .map_err(|e| classify(e, store.data()))?;
    }
    Ok(())
}

/// What a task's or the driver's failure was, from what its store saw.
fn classify(e: wasmtime::Error, state: &JobState) -> JobError {
    explain_job(
        e,
        state.timed_out,
        state.limiter.denied,
        state.ctx.limits,
        state.last_log.as_deref(),
    )
}
