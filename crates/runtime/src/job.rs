//! Job modules (`docs/jobs.md`): a Canary job's driver and tasks, run in long-lived instances.
//!
//! A function call gets a fresh instance and loses it at the end; a job's partitions must stay
//! resident between tasks, so a job runs on a [`JobEngine`] of its own: no pooling allocator
//! (an instance lives as long as its partitions, not a call) and its own epoch ticker. One
//! [`JobInstance`] holds the partitions of one index of one group of co-partitioned datasets in
//! its linear memory; a task is a call of `mote_job_task(func, index)` into it, under the
//! function's budget (per task) and memory limit (per instance).
//!
//! The driver runs once in a fresh instance ([`JobModule::program`]): its `mote_job` calls build
//! a [`Program`] and nothing else. The host functions check which of the two the instance is
//! doing, so a task that declares a stage, or a driver that reads an input, traps with a message
//! that says so.

use crate::error::{CompileError, RuntimeError};
use crate::host::trace_line;
use crate::state::CallLimiter;
use crate::ticker::{EpochTicker, TickerPeriods};
use mote_jobs::{DatasetId, Input, Program, ProgramBuilder, ProgramError, Stage, StageKind, image};
use mote_types::{Limits, ShowBudget, abi};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wasmtime::{
    Caller, Config, Engine, Extern, InstancePre, Linker, Memory, Module, Store, Trap, TypedFunc,
    UpdateDeadline, Val,
};
use wasmtime_wasi::p1::WasiP1Ctx;

/// The most one task may emit, in bytes: pieces and outputs are held in host memory until sent.
const MAX_EMIT_BYTES: usize = 1 << 30;
/// The longest job argument value or dataset name read from the guest.
const MAX_NAME: usize = 64 << 10;

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
}

/// A job task or driver failed.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// The module could not be compiled or linked for jobs.
    #[error(transparent)]
    Compile(#[from] CompileError),
    /// The driver declared an invalid program.
    #[error("the driver's program is invalid: {0}")]
    Program(#[from] ProgramError),
    /// No instance could be created.
    #[error("cannot instantiate the job module: {0}")]
    Instantiate(String),
    /// A partition's image does not fit this module.
    #[error("the partition's image cannot be restored: {0}")]
    Image(String),
    /// The guest trapped.
    #[error("{0}")]
    Trap(String),
    /// A task ran past the function's budget.
    #[error("the task exceeded the function's budget of {} and was stopped; redeploy with a larger timeout_ms if its partitions need longer", ShowBudget(*timeout_us))]
    Timeout {
        /// The budget, in µs.
        timeout_us: u64,
    },
    /// An instance grew past the function's memory limit.
    #[error(
        "the partitions of one index outgrew the function's memory limit of {memory_mb} MiB (they asked for {asked_mb} MiB); use more partitions or redeploy with a larger memory_mb"
    )]
    MemoryLimit {
        /// The limit.
        memory_mb: u32,
        /// What was asked for.
        asked_mb: usize,
    },
}

/// The engine, linker and compiled modules of the jobs a node runs.
pub struct JobEngine {
    engine: Engine,
    linker: Linker<JobState>,
    modules: Mutex<HashMap<String, Arc<JobModule>>>,
    ticker: EpochTicker,
}

impl JobEngine {
    /// Builds the engine and starts its epoch ticker.
    pub fn new() -> Result<Self, RuntimeError> {
        let engine_error = |e: wasmtime::Error| RuntimeError::Engine(format!("{e:#}"));
        let mut config = Config::new();
        config.epoch_interruption(true);
        let engine = Engine::new(&config).map_err(engine_error)?;
        let mut linker = Linker::new(&engine);
        add_job_functions(&mut linker).map_err(engine_error)?;
        wasmtime_wasi::p1::add_to_linker_sync(&mut linker, JobState::wasi_ctx)
            .map_err(engine_error)?;
        let ticker = EpochTicker::start(
            engine.clone(),
            TickerPeriods {
                coarse: Duration::from_millis(1),
                fine: Duration::from_micros(50),
            },
        );
        Ok(Self {
            engine,
            linker,
            modules: Mutex::new(HashMap::new()),
            ticker,
        })
    }

    /// The job module with these bytes' `sha256`, compiled on first use.
    pub fn module(&self, sha256: &str, wasm: &[u8]) -> Result<Arc<JobModule>, CompileError> {
        if let Some(m) = self.modules.lock().expect("never poisoned").get(sha256) {
            return Ok(m.clone());
        }
        let module = Module::from_binary(&self.engine, wasm)
            .map_err(|e| CompileError::Invalid(format!("{e:#}")))?;
        let pre = self
            .linker
            .instantiate_pre(&module)
            .map_err(|e| CompileError::Link(format!("{e:#}")))?;
        let m = Arc::new(JobModule { pre });
        self.modules
            .lock()
            .expect("never poisoned")
            .insert(sha256.to_owned(), m.clone());
        Ok(m)
    }

    fn store(&self, ctx: &JobContext, mode: Mode) -> Store<JobState> {
        let state = JobState {
            limiter: CallLimiter {
                memory_limit: ctx.limits.memory_bytes(),
                denied: None,
            },
            deadline: Instant::now(),
            timed_out: false,
            ctx: ctx.clone(),
            mode,
            wasi: None,
            last_log: None,
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        store.epoch_deadline_callback(|mut c| {
            let state = c.data_mut();
            if Instant::now() >= state.deadline {
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
        self.arm(&mut store, ctx);
        let instance = module
            .pre
            .instantiate(&mut store)
            .map_err(|e| classify(e, store.data()))?;
        initialize(&instance, &mut store)?;
        let driver: TypedFunc<(), ()> = instance
            .get_typed_func(&mut store, abi::EXPORT_JOB_DRIVER)
            .map_err(|e| JobError::Trap(format!("the job module's `mote_job_driver`: {e}")))?;
        self.arm(&mut store, ctx);
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
        self.arm(&mut store, ctx);
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

    fn arm(&self, store: &mut Store<JobState>, ctx: &JobContext) {
        self.ticker.call_starting(ctx.limits.timeout());
        store.data_mut().deadline = Instant::now() + ctx.limits.timeout();
        store.set_epoch_deadline(1);
    }
}

/// A job module compiled and linked for the job engine.
pub struct JobModule {
    pre: InstancePre<JobState>,
}

/// One instance of a job module: the partitions of one index of one group.
pub struct JobInstance {
    store: Store<JobState>,
    instance: wasmtime::Instance,
    task: TypedFunc<(i32, i32), i32>,
    memory: Option<Memory>,
    budget: Duration,
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
    /// Runs task function `func` on partition `index` with `inputs`; `emit_to` is how many
    /// partitions its emits may address (0 for a task that emits nothing).
    pub fn run(
        &mut self,
        engine: &JobEngine,
        func: u32,
        index: u32,
        inputs: Vec<Input>,
        emit_to: u32,
    ) -> Result<(TaskOutput, Vec<Input>), JobError> {
        // A short budget needs the ticker's fine ticks (it returns at once for others).
        engine.ticker.call_starting(self.budget);
        let state = self.store.data_mut();
        state.deadline = Instant::now() + self.budget;
        let Mode::Task(io) = &mut state.mode else {
            unreachable!("task instances stay in task mode")
        };
        io.inputs = inputs;
        io.emit_to = emit_to;
        self.store.set_epoch_deadline(1);
        let result = self.task.call(&mut self.store, (func as i32, index as i32));
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

    /// The size of the instance's linear memory: what its partitions take.
    pub fn memory_bytes(&self) -> usize {
        self.memory.map_or(0, |m| m.data_size(&self.store))
    }

    /// Its state between tasks, which [`JobEngine::restore`] brings back: the linear memory and
    /// the exported mutable globals. Between tasks a guest's other globals (its stack pointer)
    /// are back where instantiation put them, so this is all of it.
    pub fn image(&mut self) -> Vec<u8> {
        let mut globals = Vec::new();
        let exports: Vec<(String, wasmtime::Global)> = self
            .instance
            .exports(&mut self.store)
            .filter_map(|e| {
                let name = e.name().to_owned();
                e.into_global().map(|g| (name, g))
            })
            .collect();
        for (name, global) in exports {
            if global.ty(&self.store).mutability() == wasmtime::Mutability::Var
                && let Some(value) = image_value(global.get(&mut self.store))
            {
                globals.push((name, value));
            }
        }
        let memory = self.memory.map_or(&[][..], |m| m.data(&self.store));
        image::encode(&globals, memory)
    }

    /// Overwrites a fresh instance's memory and exported globals with an image's.
    pub fn load_image(&mut self, image: &[u8]) -> Result<(), JobError> {
        let image::Image {
            globals,
            memory: bytes,
        } = image::decode(image).map_err(|e| JobError::Image(e.to_string()))?;
        let store = &mut self.store;
        for (name, value) in globals {
            let value = wasm_value(value);
            let Some(global) = self.instance.get_global(&mut *store, &name) else {
                return Err(JobError::Image(format!(
                    "the module exports no global `{name}`"
                )));
            };
            global
                .set(&mut *store, value)
                .map_err(|e| JobError::Image(format!("global `{name}`: {e}")))?;
        }
        match self.memory {
            Some(memory) => {
                let have = memory.data_size(&*store);
                if bytes.len() > have {
                    let pages = (bytes.len() - have).div_ceil(WASM_PAGE);
                    memory
                        .grow(&mut *store, pages as u64)
                        .map_err(|_| classify_grow(store.data(), bytes.len()))?;
                }
                memory.data_mut(&mut *store)[..bytes.len()].copy_from_slice(bytes);
            }
            None if bytes.is_empty() => {}
            None => return Err(JobError::Image("the module exports no memory".into())),
        }
        Ok(())
    }
}

const WASM_PAGE: usize = 65536;

fn classify_grow(state: &JobState, wanted: usize) -> JobError {
    JobError::MemoryLimit {
        memory_mb: state.ctx.limits.memory_mb,
        asked_mb: wanted.div_ceil(1 << 20),
    }
}

/// A global's value in the image format (`mote_jobs::image`), if it is a number: references
/// cannot be saved, and a job module's state is its memory and numbers.
fn image_value(value: Val) -> Option<image::Value> {
    Some(match value {
        Val::I32(v) => image::Value::I32(v),
        Val::I64(v) => image::Value::I64(v),
        Val::F32(v) => image::Value::F32(v),
        Val::F64(v) => image::Value::F64(v),
        Val::V128(v) => image::Value::V128(v.as_u128()),
        _ => return None,
    })
}

fn wasm_value(value: image::Value) -> Val {
    match value {
        image::Value::I32(v) => Val::I32(v),
        image::Value::I64(v) => Val::I64(v),
        image::Value::F32(v) => Val::F32(v),
        image::Value::F64(v) => Val::F64(v),
        image::Value::V128(v) => Val::V128(v.into()),
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

fn classify(e: wasmtime::Error, state: &JobState) -> JobError {
    if state.timed_out {
        return JobError::Timeout {
            timeout_us: state.ctx.limits.timeout_us,
        };
    }
    if let Some(desired) = state.limiter.denied {
        return JobError::MemoryLimit {
            memory_mb: state.ctx.limits.memory_mb,
            asked_mb: desired.div_ceil(1 << 20),
        };
    }
    let mut message = crate::entry::trap_message(&e);
    if let Some(line) = &state.last_log {
        message.push_str(&format!("; its last log line: {line}"));
    }
    JobError::Trap(message)
}

/// What an instance is doing: declaring the program, or running tasks.
enum Mode {
    Driver(ProgramBuilder),
    Task(TaskIo),
    Done,
}

#[derive(Default)]
struct TaskIo {
    inputs: Vec<Input>,
    emit_to: u32,
    emitted: Vec<(u32, Vec<u8>)>,
    emitted_bytes: usize,
}

/// A job instance's `Store` data.
pub(crate) struct JobState {
    limiter: CallLimiter,
    deadline: Instant,
    timed_out: bool,
    ctx: JobContext,
    mode: Mode,
    wasi: Option<WasiP1Ctx>,
    /// The guest's last `mote.log` line, quoted when it traps (the SDK logs a panic's message).
    last_log: Option<String>,
}

impl JobState {
    fn wasi_ctx(&mut self) -> &mut WasiP1Ctx {
        self.wasi
            .get_or_insert_with(|| wasmtime_wasi::WasiCtxBuilder::new().build_p1())
    }

    fn builder(&mut self, call: &str) -> wasmtime::Result<&mut ProgramBuilder> {
        match &mut self.mode {
            Mode::Driver(b) => Ok(b),
            _ => wasmtime::bail!("`{call}` declares a stage; only the driver may call it"),
        }
    }

    fn task_io(&mut self, call: &str) -> wasmtime::Result<&mut TaskIo> {
        match &mut self.mode {
            Mode::Task(io) => Ok(io),
            _ => wasmtime::bail!("`{call}` is for tasks; the driver never touches data"),
        }
    }
}

fn memory(caller: &mut Caller<'_, JobState>) -> wasmtime::Result<Memory> {
    match caller.get_export(abi::EXPORT_MEMORY) {
        Some(Extern::Memory(m)) => Ok(m),
        _ => wasmtime::bail!("a job module must export its `memory`"),
    }
}

fn read_bytes(
    caller: &mut Caller<'_, JobState>,
    ptr: i32,
    len: i32,
    max: usize,
) -> wasmtime::Result<Vec<u8>> {
    let m = memory(caller)?;
    let (ptr, len) = (ptr as u32 as usize, len as u32 as usize);
    if len > max {
        wasmtime::bail!("a {len}-byte argument is longer than the {max} bytes allowed");
    }
    match m.data(&*caller).get(ptr..ptr + len) {
        Some(b) => Ok(b.to_vec()),
        None => wasmtime::bail!("({ptr}, {len}) lies outside the guest's memory"),
    }
}

fn read_str(caller: &mut Caller<'_, JobState>, ptr: i32, len: i32) -> wasmtime::Result<String> {
    String::from_utf8(read_bytes(caller, ptr, len, MAX_NAME)?)
        .map_err(|_| wasmtime::format_err!("a name or argument is not UTF-8"))
}

fn read_ids(
    caller: &mut Caller<'_, JobState>,
    ptr: i32,
    len: i32,
) -> wasmtime::Result<Vec<DatasetId>> {
    let bytes = read_bytes(caller, ptr, len.saturating_mul(4), MAX_NAME)?;
    Ok(bytes
        .chunks_exact(4)
        .map(|c| DatasetId(u32::from_le_bytes([c[0], c[1], c[2], c[3]])))
        .collect())
}

fn declare(caller: &mut Caller<'_, JobState>, call: &str, stage: Stage) -> wasmtime::Result<()> {
    caller
        .data_mut()
        .builder(call)?
        .stage(stage)
        .map(|_| ())
        .map_err(wasmtime::Error::from)
}

fn add_job_functions(linker: &mut Linker<JobState>) -> wasmtime::Result<()> {
    let m = abi::JOB_MODULE;
    linker.func_wrap(
        abi::IMPORT_MODULE,
        abi::IMPORT_LOG,
        |mut c: Caller<'_, JobState>, ptr: i32, len: i32| -> wasmtime::Result<()> {
            let line =
                String::from_utf8_lossy(&read_bytes(&mut c, ptr, len, MAX_NAME)?).into_owned();
            trace_line(&c.data().ctx.function, &line);
            c.data_mut().last_log = Some(line);
            Ok(())
        },
    )?;
    linker.func_wrap(
        m,
        abi::JOB_DATASET,
        |mut c: Caller<'_, JobState>, ptr: i32, len: i32, partitioned: i32| {
            let name = read_str(&mut c, ptr, len)?;
            Ok(c.data_mut()
                .builder("dataset")?
                .dataset(&name, partitioned != 0)
                .0 as i32)
        },
    )?;
    linker.func_wrap(
        m,
        abi::JOB_COMPUTE,
        |mut c: Caller<'_, JobState>, func: i32, rp: i32, rl: i32, wp: i32, wl: i32| {
            let (reads, writes) = (read_ids(&mut c, rp, rl)?, read_ids(&mut c, wp, wl)?);
            let stage = Stage {
                kind: StageKind::Compute,
                func: func as u32,
                reads,
                writes,
            };
            declare(&mut c, "compute", stage)
        },
    )?;
    linker.func_wrap(
        m,
        abi::JOB_SCATTER,
        |mut c: Caller<'_, JobState>,
         func: i32,
         rp: i32,
         rl: i32,
         gather: i32,
         wp: i32,
         wl: i32| {
            let (reads, writes) = (read_ids(&mut c, rp, rl)?, read_ids(&mut c, wp, wl)?);
            let stage = Stage {
                kind: StageKind::Scatter {
                    gather: gather as u32,
                },
                func: func as u32,
                reads,
                writes,
            };
            declare(&mut c, "scatter", stage)
        },
    )?;
    linker.func_wrap(
        m,
        abi::JOB_LOAD,
        |mut c: Caller<'_, JobState>, func: i32, dataset: i32, ap: i32, al: i32| {
            let arg = read_str(&mut c, ap, al)?;
            let stage = Stage {
                kind: StageKind::Load { arg },
                func: func as u32,
                reads: Vec::new(),
                writes: vec![DatasetId(dataset as u32)],
            };
            declare(&mut c, "load", stage)
        },
    )?;
    linker.func_wrap(
        m,
        abi::JOB_STORE,
        |mut c: Caller<'_, JobState>, func: i32, dataset: i32, ap: i32, al: i32| {
            let arg = read_str(&mut c, ap, al)?;
            let stage = Stage {
                kind: StageKind::Store { arg },
                func: func as u32,
                reads: vec![DatasetId(dataset as u32)],
                writes: Vec::new(),
            };
            declare(&mut c, "store", stage)
        },
    )?;
    linker.func_wrap(
        m,
        abi::JOB_REPEAT,
        |mut c: Caller<'_, JobState>, times: i32| -> wasmtime::Result<()> {
            c.data_mut().builder("repeat")?.repeat(times.max(0) as u64);
            Ok(())
        },
    )?;
    linker.func_wrap(
        m,
        abi::JOB_WHILE,
        |mut c: Caller<'_, JobState>, func: i32, dataset: i32| -> wasmtime::Result<()> {
            let b = c.data_mut().builder("while_signal")?;
            Ok(b.while_signal(func as u32, DatasetId(dataset as u32))?)
        },
    )?;
    linker.func_wrap(
        m,
        abi::JOB_IF,
        |mut c: Caller<'_, JobState>, func: i32, dataset: i32| -> wasmtime::Result<()> {
            let b = c.data_mut().builder("if_signal")?;
            Ok(b.if_signal(func as u32, DatasetId(dataset as u32))?)
        },
    )?;
    linker.func_wrap(
        m,
        abi::JOB_ELSE,
        |mut c: Caller<'_, JobState>| -> wasmtime::Result<()> {
            Ok(c.data_mut().builder("else_branch")?.otherwise()?)
        },
    )?;
    linker.func_wrap(
        m,
        abi::JOB_END,
        |mut c: Caller<'_, JobState>| -> wasmtime::Result<()> {
            Ok(c.data_mut().builder("end")?.end()?)
        },
    )?;
    linker.func_wrap(m, abi::JOB_PARTITIONS, |c: Caller<'_, JobState>| {
        c.data().ctx.partitions as i32
    })?;
    linker.func_wrap(
        m,
        abi::JOB_ARG,
        |mut c: Caller<'_, JobState>, kp: i32, kl: i32, out: i32, cap: i32| {
            let key = read_str(&mut c, kp, kl)?;
            let args = c.data().ctx.args.clone();
            let Some(value) = mote_jobs::arg(&args, &key) else {
                return Ok(-1);
            };
            if value.len() <= cap as u32 as usize {
                let mem = memory(&mut c)?;
                mem.write(&mut c, out as u32 as usize, value.as_bytes())
                    .map_err(|_| {
                        wasmtime::format_err!("`arg` writes outside the guest's memory")
                    })?;
            }
            Ok(value.len() as i32)
        },
    )?;
    linker.func_wrap(
        m,
        abi::JOB_INPUT_COUNT,
        |mut c: Caller<'_, JobState>| -> wasmtime::Result<i32> {
            Ok(c.data_mut().task_io("input_count")?.inputs.len() as i32)
        },
    )?;
    linker.func_wrap(
        m,
        abi::JOB_INPUT_LEN,
        |mut c: Caller<'_, JobState>, k: i32| -> wasmtime::Result<i32> {
            let io = c.data_mut().task_io("input_len")?;
            match io.inputs.get(k as u32 as usize) {
                Some(i) => Ok(i.data.len() as i32),
                None => {
                    wasmtime::bail!("`input_len({k})`: the task has {} inputs", io.inputs.len())
                }
            }
        },
    )?;
    linker.func_wrap(
        m,
        abi::JOB_INPUT_READ,
        |mut c: Caller<'_, JobState>, k: i32, ptr: i32| -> wasmtime::Result<()> {
            let io = c.data_mut().task_io("input_read")?;
            let Some(data) = io.inputs.get(k as u32 as usize).map(|i| i.data.clone()) else {
                wasmtime::bail!("`input_read({k})`: the task has {} inputs", io.inputs.len());
            };
            let mem = memory(&mut c)?;
            mem.write(&mut c, ptr as u32 as usize, &data).map_err(|_| {
                wasmtime::format_err!("`input_read` writes outside the guest's memory")
            })
        },
    )?;
    linker.func_wrap(
        m,
        abi::JOB_EMIT,
        |mut c: Caller<'_, JobState>, dest: i32, ptr: i32, len: i32| -> wasmtime::Result<()> {
            let bytes = read_bytes(&mut c, ptr, len, MAX_EMIT_BYTES)?;
            let io = c.data_mut().task_io("emit")?;
            let dest = dest as u32;
            if dest >= io.emit_to {
                match io.emit_to {
                    0 => wasmtime::bail!(
                        "`emit`: this task emits nothing (only scatter and store tasks do)"
                    ),
                    n => wasmtime::bail!(
                        "`emit({dest}, ..)`: the datasets written have {n} partitions"
                    ),
                }
            }
            io.emitted_bytes += bytes.len();
            if io.emitted_bytes > MAX_EMIT_BYTES {
                wasmtime::bail!("a task emitted more than {MAX_EMIT_BYTES} bytes");
            }
            match io.emitted.iter_mut().find(|(d, _)| *d == dest) {
                Some((_, piece)) => piece.extend_from_slice(&bytes),
                None => io.emitted.push((dest, bytes)),
            }
            Ok(())
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(partitions: u32) -> JobContext {
        JobContext {
            function: Arc::from("test-job"),
            args: Arc::from(vec![("n".to_owned(), "3".to_owned())]),
            partitions,
            limits: Limits::default(),
        }
    }

    /// A job whose driver declares one partitioned dataset and a compute stage over it, and
    /// whose task adds its index to a counter in memory and returns it.
    const JOB: &str = r#"(module
        (import "mote_job" "dataset" (func $dataset (param i32 i32 i32) (result i32)))
        (import "mote_job" "compute" (func $compute (param i32 i32 i32 i32 i32)))
        (import "mote_job" "emit" (func $emit (param i32 i32 i32)))
        (memory (export "memory") 1)
        (data (i32.const 0) "points")
        (func (export "mote_job_driver")
            (i32.store (i32.const 64) (call $dataset (i32.const 0) (i32.const 6) (i32.const 1)))
            (call $compute (i32.const 7) (i32.const 64) (i32.const 1) (i32.const 64) (i32.const 1)))
        (func (export "mote_job_task") (param $func i32) (param $index i32) (result i32)
            (i32.store (i32.const 128) (i32.add (i32.load (i32.const 128)) (local.get $index)))
            (if (i32.eq (local.get $func) (i32.const 9))
                (then (call $emit (i32.const 5) (i32.const 0) (i32.const 6))))
            (if (i32.eq (local.get $func) (i32.const 8)) (then (loop $spin (br $spin))))
            (i32.load (i32.const 128))))"#;

    #[test]
    fn the_driver_declares_a_program_and_tasks_keep_state_between_calls() {
        let engine = JobEngine::new().unwrap();
        let m = engine.module("x", &wat::parse_str(JOB).unwrap()).unwrap();
        let program = engine.program(&m, &ctx(4)).unwrap();
        assert_eq!(program.stages.len(), 1);
        assert_eq!(program.stages[0].func, 7);
        assert_eq!(program.groups.sizes(), [4]);
        let mut i = engine.instance(&m, &ctx(4)).unwrap();
        assert_eq!(i.run(&engine, 7, 2, Vec::new(), 0).unwrap().0.value, 2);
        assert_eq!(i.run(&engine, 7, 3, Vec::new(), 0).unwrap().0.value, 5);
    }

    #[test]
    fn emitting_out_of_range_and_running_forever_are_errors_that_say_so() {
        let engine = JobEngine::new().unwrap();
        let m = engine.module("x", &wat::parse_str(JOB).unwrap()).unwrap();
        let mut i = engine.instance(&m, &ctx(4)).unwrap();
        let err = i.run(&engine, 9, 0, Vec::new(), 4).unwrap_err();
        assert!(err.to_string().contains("have 4 partitions"), "{err}");
        let (out, _) = i.run(&engine, 9, 0, Vec::new(), 6).unwrap();
        assert_eq!(out.emitted, vec![(5, b"points".to_vec())]);
        let mut short = ctx(4);
        short.limits.timeout_us = 20_000;
        let mut i = engine.instance(&m, &short).unwrap();
        let started = Instant::now();
        assert!(matches!(
            i.run(&engine, 8, 0, Vec::new(), 0),
            Err(JobError::Timeout { timeout_us: 20_000 })
        ));
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn an_image_restores_memory_and_globals_into_a_fresh_instance() {
        const COUNTER: &str = r#"(module
            (import "mote_job" "dataset" (func $dataset (param i32 i32 i32) (result i32)))
            (import "mote_job" "compute" (func $compute (param i32 i32 i32 i32 i32)))
            (memory (export "memory") 1)
            (global $calls (export "calls") (mut i64) (i64.const 0))
            (data (i32.const 0) "points")
            (func (export "mote_job_driver")
                (i32.store (i32.const 64) (call $dataset (i32.const 0) (i32.const 6) (i32.const 1)))
                (call $compute (i32.const 7) (i32.const 64) (i32.const 1) (i32.const 64) (i32.const 1)))
            (func (export "mote_job_task") (param $func i32) (param $index i32) (result i32)
                (global.set $calls (i64.add (global.get $calls) (i64.const 1)))
                (if (i32.eq (local.get $func) (i32.const 2)) (then (drop (memory.grow (i32.const 20)))))
                (i32.store (i32.const 200000) (i32.const 1))
                (i32.wrap_i64 (i64.add (global.get $calls)
                    (i64.extend_i32_u (i32.load (i32.const 128)))))))"#;
        let engine = JobEngine::new().unwrap();
        let m = engine
            .module("c", &wat::parse_str(COUNTER).unwrap())
            .unwrap();
        let mut a = engine.instance(&m, &ctx(1)).unwrap();
        assert_eq!(a.run(&engine, 2, 0, Vec::new(), 0).unwrap().0.value, 1);
        assert_eq!(a.run(&engine, 1, 0, Vec::new(), 0).unwrap().0.value, 2);
        let image = a.image();
        assert_eq!(a.memory_bytes(), 21 * 65536);
        let mut b = engine.restore(&m, &ctx(1), &image).unwrap();
        assert_eq!(b.memory_bytes(), 21 * 65536, "the grown memory comes back");
        assert_eq!(
            b.run(&engine, 1, 0, Vec::new(), 0).unwrap().0.value,
            a.run(&engine, 1, 0, Vec::new(), 0).unwrap().0.value,
            "both go on from the same state"
        );
        let err = engine.restore(&m, &ctx(1), b"not an image").err().unwrap();
        assert!(err.to_string().contains("MOTEIMG1"), "{err}");
        let mut small = ctx(1);
        small.limits.memory_mb = 1;
        let err = engine.restore(&m, &small, &image).err().unwrap();
        assert!(
            matches!(
                err,
                JobError::MemoryLimit {
                    memory_mb: 1,
                    asked_mb: 2
                }
            ),
            "{err}"
        );
    }

    /// The image encoder once skipped a reference global's type and value but not its name,
    /// while counting it: every global after it was read from the wrong bytes, and a module
    /// that exports a mutable `funcref` could never move or restore a partition. References
    /// are not saved; the numbers after them still are.
    #[test]
    fn a_reference_global_does_not_spoil_the_image() {
        const TABLE: &str = r#"(module
            (import "mote_job" "dataset" (func $dataset (param i32 i32 i32) (result i32)))
            (import "mote_job" "compute" (func $compute (param i32 i32 i32 i32 i32)))
            (memory (export "memory") 1)
            (global (export "handler") (mut funcref) (ref.null func))
            (global $calls (export "calls") (mut i32) (i32.const 0))
            (data (i32.const 0) "points")
            (func (export "mote_job_driver")
                (i32.store (i32.const 64) (call $dataset (i32.const 0) (i32.const 6) (i32.const 1)))
                (call $compute (i32.const 7) (i32.const 64) (i32.const 1) (i32.const 64) (i32.const 1)))
            (func (export "mote_job_task") (param $func i32) (param $index i32) (result i32)
                (global.set $calls (i32.add (global.get $calls) (i32.const 1)))
                (global.get $calls)))"#;
        let engine = JobEngine::new().unwrap();
        let m = engine.module("t", &wat::parse_str(TABLE).unwrap()).unwrap();
        let mut a = engine.instance(&m, &ctx(1)).unwrap();
        assert_eq!(a.run(&engine, 7, 0, Vec::new(), 0).unwrap().0.value, 1);
        let image = a.image();
        let globals = image::decode(&image).unwrap().globals;
        assert_eq!(globals, [("calls".to_owned(), image::Value::I32(1))]);
        let mut b = engine.restore(&m, &ctx(1), &image).unwrap();
        assert_eq!(b.run(&engine, 7, 0, Vec::new(), 0).unwrap().0.value, 2);
    }
}
