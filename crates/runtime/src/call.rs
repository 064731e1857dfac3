//! One call: a fresh `Store` and instance, the guest's entry point, the response copied out, and
//! every failure classified into a [`CallError`]. Also the host functions guests may import.
//!
//! The store and instance are dropped when the call returns, whatever happened, which returns
//! the instance's slot (and its memory) to the pool: no state survives from one call to the next.
//! [`Runtime::call_then`] hands the result to the caller before that teardown, so the reply does
//! not wait for the memory reset (about 40% of a microsecond call).

use crate::engine::Runtime;
use crate::error::CallError;
use crate::function::{Entry, Function};
use crate::microtask::MicrotaskState;
use bytes::Bytes;
use mote_types::{Limits, abi};
use std::sync::Arc;
use std::time::Instant;
use wasmtime::{
    Caller, Extern, Instance, Linker, Memory, ModuleExport, ResourceLimiter, Store, Trap,
    TypedFunc, UpdateDeadline, WasmBacktrace, WasmParams, WasmResults,
};
use wasmtime_wasi::I32Exit;
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::p2::pipe::{MemoryInputPipe, MemoryOutputPipe};

/// The longest line `mote.log` records; longer lines are cut.
const MAX_LOG_LINE: usize = 8 << 10;
/// How many log lines one call may write; the rest are dropped.
const MAX_LOG_LINES: u32 = 1000;
/// How much of a WASI guest's stderr is kept (and quoted in errors).
const STDERR_CAPACITY: usize = 64 << 10;
/// The most table elements an instance may grow to.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

/// What a successful call returns.
#[derive(Debug)]
pub struct CallOutput {
    /// The response body.
    pub body: Vec<u8>,
    /// When the guest's entry point was called: the instance was ready and the input copied in.
    pub entered: Instant,
}

/// Per-call state inside the wasmtime `Store`.
pub(crate) struct CallState {
    pub(crate) limiter: CallLimiter,
    pub(crate) deadline: Instant,
    pub(crate) timed_out: bool,
    function: Arc<str>,
    log_lines: u32,
    /// What a WASI command reads on stdin.
    stdin: Bytes,
    max_response_bytes: usize,
    /// Created on the guest's first WASI call: most mote ABI guests import WASI (Rust's standard
    /// library does) but never call it, and building a context costs more than the whole call.
    wasi: Option<(WasiP1Ctx, Stdio)>,
    /// The gate and host I/O of a microtask function's call; `None` on the synchronous engine.
    pub(crate) microtask: Option<MicrotaskState>,
}

impl CallState {
    /// The WASI context, built on first use.
    pub(crate) fn wasi_ctx(&mut self) -> &mut WasiP1Ctx {
        &mut self.wasi().0
    }

    fn wasi(&mut self) -> &mut (WasiP1Ctx, Stdio) {
        self.wasi.get_or_insert_with(|| {
            let io = Stdio {
                stdout: MemoryOutputPipe::new(self.max_response_bytes),
                stderr: MemoryOutputPipe::new(STDERR_CAPACITY),
            };
            let ctx = wasmtime_wasi::WasiCtxBuilder::new()
                .stdin(MemoryInputPipe::new(self.stdin.clone()))
                .stdout(io.stdout.clone())
                .stderr(io.stderr.clone())
                .arg(self.function.as_ref())
                .build_p1();
            (ctx, io)
        })
    }

    fn stdio(&mut self) -> &Stdio {
        &self.wasi().1
    }
}

/// Enforces the memory limit and remembers whether it had to say no, so a trap that follows can
/// be reported as what it is.
pub(crate) struct CallLimiter {
    pub(crate) memory_limit: usize,
    pub(crate) denied: Option<usize>,
}

impl ResourceLimiter for CallLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_limit {
            self.denied = Some(desired);
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

/// The guest's stdio pipes when it uses WASI; read after the call.
struct Stdio {
    stdout: MemoryOutputPipe,
    stderr: MemoryOutputPipe,
}

impl Runtime {
    /// Runs one call of `function` (deployed as `name`) on the current thread, in a fresh
    /// instance, with `input` as the request body.
    pub fn call(
        &self,
        function: &Function,
        name: &Arc<str>,
        limits: Limits,
        input: &[u8],
    ) -> Result<CallOutput, CallError> {
        self.call_then(function, name, limits, Instant::now(), input, |result| {
            result
        })
    }

    /// Like [`Runtime::call`], but gives the result to `finish` before the instance is torn
    /// down, so a reply sent from `finish` does not wait for the memory reset. The budget runs
    /// from `started`, the caller's own reading of when the call began, so the call path reads
    /// the clock once for both.
    pub fn call_then<R>(
        &self,
        function: &Function,
        name: &Arc<str>,
        limits: Limits,
        started: Instant,
        input: &[u8],
        finish: impl FnOnce(Result<CallOutput, CallError>) -> R,
    ) -> R {
        assert!(
            !function.is_microtask(),
            "{name} declares microtasks; run it with Runtime::call_microtask"
        );
        let mut store = self.new_store(function, name, limits, started, input);
        self.arm_deadline(&mut store, limits, false);
        let result = self.run_entry(function, &mut store, input);
        let value = finish(self.finish_call(function, name, limits, &store, result));
        drop(store);
        value
    }

    /// A store for one call of `function`, with its limits; the caller sets up epochs.
    pub(crate) fn new_store(
        &self,
        function: &Function,
        name: &Arc<str>,
        limits: Limits,
        started: Instant,
        input: &[u8],
    ) -> Store<CallState> {
        let stdin = match function.entry {
            Entry::WasiCommand { .. } => Bytes::copy_from_slice(input),
            Entry::MoteAbi { .. } => Bytes::new(),
        };
        let state = CallState {
            limiter: CallLimiter {
                memory_limit: limits.memory_bytes(),
                denied: None,
            },
            deadline: started + limits.timeout(),
            timed_out: false,
            function: name.clone(),
            log_lines: 0,
            stdin,
            max_response_bytes: self.max_response_bytes(),
            wasi: None,
            microtask: None,
        };
        let mut store = Store::new(function.pre.module().engine(), state);
        store.limiter(|s| &mut s.limiter);
        store
    }

    /// Checks the call's wall-clock deadline at every epoch tick and stops the guest past it;
    /// with `yield_each_tick` (microtask calls) the guest also yields to other calls at every
    /// tick.
    pub(crate) fn arm_deadline(
        &self,
        store: &mut Store<CallState>,
        limits: Limits,
        yield_each_tick: bool,
    ) {
        let Some(ticker) = self.ticker() else {
            return;
        };
        ticker.call_starting(limits.timeout());
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |mut ctx| {
            let state = ctx.data_mut();
            if Instant::now() >= state.deadline {
                state.timed_out = true;
                return Err(Trap::Interrupt.into());
            }
            Ok(match yield_each_tick {
                true => UpdateDeadline::Yield(1),
                false => UpdateDeadline::Continue(1),
            })
        });
    }

    /// Logs what the guest wrote to stdio and classifies a failure.
    pub(crate) fn finish_call(
        &self,
        function: &Function,
        name: &str,
        limits: Limits,
        store: &Store<CallState>,
        result: Result<CallOutput, Failure>,
    ) -> Result<CallOutput, CallError> {
        let stderr = match &store.data().wasi {
            Some((_, io)) => {
                let stderr = io.stderr.contents();
                log_output(name, &stderr);
                if matches!(function.entry, Entry::MoteAbi { .. }) {
                    log_output(name, &io.stdout.contents());
                }
                stderr
            }
            None => Bytes::new(),
        };
        result.map_err(|e| match e {
            Failure::Call(e) => classify(e, store.data(), limits, &stderr),
            Failure::Known(e) => e,
        })
    }

    fn run_entry(
        &self,
        function: &Function,
        store: &mut Store<CallState>,
        input: &[u8],
    ) -> Result<CallOutput, Failure> {
        let instantiate = function.pre.instantiate(&mut *store);
        let instance = instantiated(store, instantiate)?;
        match &function.entry {
            Entry::MoteAbi {
                memory,
                alloc,
                handle,
                initialize,
            } => {
                if let Some(initialize) = initialize {
                    // SAFETY: `detect` checked `_initialize`'s type at deploy (see `Entry`).
                    unsafe { typed_export::<(), ()>(store, &instance, initialize) }
                        .call(&mut *store, ())?;
                }
                let memory = instance
                    .get_module_export(&mut *store, memory)
                    .and_then(Extern::into_memory)
                    .expect("deploy checked that `memory` is a memory");
                // SAFETY: `detect` checked `mote_handle`'s type at deploy (see `Entry`).
                let handle = unsafe { typed_export::<(i32, i32), i64>(store, &instance, handle) };
                let (ptr, len) = if input.is_empty() {
                    (0, 0)
                } else {
                    let len = self.input_len(input)?;
                    // SAFETY: `detect` checked `mote_alloc`'s type at deploy (see `Entry`).
                    let ptr = unsafe { typed_export::<i32, i32>(store, &instance, alloc) }
                        .call(&mut *store, len)?;
                    self.write_input(store, memory, ptr, input)?;
                    (ptr, len)
                };
                let entered = Instant::now();
                let packed = handle.call(&mut *store, (ptr, len))?;
                self.abi_output(store, memory, packed, entered)
            }
            Entry::WasiCommand { start } => {
                // SAFETY: `detect` checked `_start`'s type at deploy (see `Entry`).
                let start = unsafe { typed_export::<(), ()>(store, &instance, start) };
                let entered = Instant::now();
                let exit = start.call(&mut *store, ());
                self.wasi_command_output(store, exit, entered)
            }
        }
    }

    /// The request body's length as the guest sees it.
    pub(crate) fn input_len(&self, input: &[u8]) -> Result<i32, Failure> {
        i32::try_from(input.len())
            .map_err(|_| Failure::Known(CallError::Abi("request body exceeds 2 GiB".into())))
    }

    /// Copies the request body into the buffer `mote_alloc` returned.
    pub(crate) fn write_input(
        &self,
        store: &mut Store<CallState>,
        memory: Memory,
        ptr: i32,
        input: &[u8],
    ) -> Result<(), Failure> {
        memory
            .write(&mut *store, ptr as u32 as usize, input)
            .map_err(|_| {
                Failure::Known(CallError::Abi(format!(
                    "mote_alloc({}) returned {ptr}, which leaves no room for {} bytes in a memory of {} bytes",
                    input.len(),
                    input.len(),
                    memory.data_size(&*store)
                )))
            })
    }

    /// The response `mote_handle` returned at `packed`, copied out of guest memory.
    pub(crate) fn abi_output(
        &self,
        store: &Store<CallState>,
        memory: Memory,
        packed: i64,
        entered: Instant,
    ) -> Result<CallOutput, Failure> {
        let (out_ptr, out_len) = abi::unpack_response(packed);
        let (out_ptr, out_len) = (out_ptr as usize, out_len as usize);
        if out_len > self.max_response_bytes() {
            return Err(Failure::Known(CallError::ResponseTooLarge {
                limit: self.max_response_bytes(),
            }));
        }
        let data = memory.data(store);
        let body = data.get(out_ptr..out_ptr + out_len).ok_or_else(|| {
            Failure::Known(CallError::Abi(format!(
                "mote_handle returned a response at {out_ptr}..{}, outside its memory of {} bytes",
                out_ptr + out_len,
                data.len()
            )))
        })?;
        Ok(CallOutput {
            body: body.to_vec(),
            entered,
        })
    }

    /// A WASI command's stdout, once `_start` returned or exited with `exit`.
    pub(crate) fn wasi_command_output(
        &self,
        store: &mut Store<CallState>,
        exit: wasmtime::Result<()>,
        entered: Instant,
    ) -> Result<CallOutput, Failure> {
        if let Err(e) = exit {
            match e.downcast_ref::<I32Exit>() {
                Some(I32Exit(0)) => {}
                Some(I32Exit(code)) => {
                    let stderr = store.data_mut().stdio().stderr.contents();
                    return Err(Failure::Known(CallError::Exit {
                        code: *code,
                        stderr: quote_tail(&stderr),
                    }));
                }
                None => return Err(e.into()),
            }
        }
        let stdout = store.data_mut().stdio().stdout.contents();
        if stdout.len() >= self.max_response_bytes() {
            return Err(Failure::Known(CallError::ResponseTooLarge {
                limit: self.max_response_bytes(),
            }));
        }
        Ok(CallOutput {
            body: stdout.to_vec(),
            entered,
        })
    }
}

/// The instance `instantiate` made, or the call's failure: a limit the limiter refused is
/// classified with the call's state; anything else (an exhausted pool, the OS refusing memory)
/// is the platform's problem.
#[inline]
pub(crate) fn instantiated(
    store: &Store<CallState>,
    instantiate: wasmtime::Result<Instance>,
) -> Result<Instance, Failure> {
    match instantiate {
        Ok(instance) => Ok(instance),
        Err(e) if store.data().limiter.denied.is_some() => Err(e.into()),
        Err(e) => Err(Failure::Known(CallError::Instantiate(format!("{e:#}")))),
    }
}

/// The function `export` of `instance`, typed without wasmtime's check, which builds and drops
/// the function's type on every call (about 5% of a no-op call, measured with perf).
///
/// # Safety
/// `export` must be a function export of the module `instance` was made from, whose type
/// [`Function::link`] checked is exactly `(Params) -> Results`.
pub(crate) unsafe fn typed_export<Params: WasmParams, Results: WasmResults>(
    store: &mut Store<CallState>,
    instance: &Instance,
    export: &ModuleExport,
) -> TypedFunc<Params, Results> {
    let func = instance
        .get_module_export(&mut *store, export)
        .and_then(Extern::into_func)
        .expect("deploy checked that the export is a function");
    // SAFETY: the caller promises `Func::typed` would have accepted this type.
    unsafe { TypedFunc::new_unchecked(&*store, func) }
}

/// A call failed either with a wasmtime error still to be classified, or with a known cause.
pub(crate) enum Failure {
    Call(wasmtime::Error),
    Known(CallError),
}

impl From<wasmtime::Error> for Failure {
    fn from(e: wasmtime::Error) -> Self {
        Self::Call(e)
    }
}

/// Turns a wasmtime error into what happened, in the order that explains it best: a deadline
/// that fired, a memory limit that was hit, then the trap itself.
fn classify(e: wasmtime::Error, state: &CallState, limits: Limits, stderr: &[u8]) -> CallError {
    if state.timed_out {
        return CallError::Timeout {
            timeout_us: limits.timeout_us,
        };
    }
    if let Some(desired) = state.limiter.denied {
        return CallError::MemoryLimit {
            memory_mb: limits.memory_mb,
            detail: format!(
                "it asked for {} MiB, then failed with: {}",
                desired.div_ceil(1 << 20),
                e.root_cause()
            ),
        };
    }
    let mut message = match e.downcast_ref::<Trap>() {
        Some(trap) => format!("function trapped: {trap}"),
        None => format!("function failed: {}", e.root_cause()),
    };
    if let Some(bt) = e.downcast_ref::<WasmBacktrace>() {
        let frames: Vec<String> = bt
            .frames()
            .iter()
            .take(4)
            .map(|f| match f.func_name() {
                Some(n) => n.to_owned(),
                None => format!("func[{}]", f.func_index()),
            })
            .collect();
        if !frames.is_empty() {
            message.push_str(&format!(" (wasm backtrace: {})", frames.join(" <- ")));
        }
    }
    message.push_str(&quote_tail(stderr));
    CallError::Trap { message }
}

/// The last line or so of a guest's stderr, formatted to append to an error message.
fn quote_tail(stderr: &[u8]) -> String {
    const TAIL: usize = 512;
    let text = String::from_utf8_lossy(stderr);
    let text = text.trim_end();
    if text.is_empty() {
        return String::new();
    }
    let start = text.len().saturating_sub(TAIL);
    let start = (start..=text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    format!("; stderr: {}", &text[start..])
}

fn log_output(function: &str, bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    for line in String::from_utf8_lossy(bytes)
        .lines()
        .take(MAX_LOG_LINES as usize)
    {
        tracing::info!(target: "mote::guest", function, "{line}");
    }
}

/// Registers the `mote` host functions and WASI preview1 (synchronous).
pub(crate) fn add_host_functions(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    add_log(linker)?;
    wasmtime_wasi::p1::add_to_linker_sync(linker, CallState::wasi_ctx)?;
    Ok(())
}

/// Registers `mote.log`, which both engines provide.
pub(crate) fn add_log(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    linker.func_wrap(
        abi::IMPORT_MODULE,
        abi::IMPORT_LOG,
        |mut caller: Caller<'_, CallState>, ptr: i32, len: i32| -> wasmtime::Result<()> {
            if caller.data().log_lines >= MAX_LOG_LINES {
                return Ok(());
            }
            let Some(Extern::Memory(memory)) = caller.get_export(abi::EXPORT_MEMORY) else {
                wasmtime::bail!("mote.log needs the module to export its `memory`");
            };
            let (ptr, len) = (ptr as u32 as usize, (len as u32 as usize).min(MAX_LOG_LINE));
            let line = match memory.data(&caller).get(ptr..ptr.saturating_add(len)) {
                Some(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                None => wasmtime::bail!("mote.log({ptr}, {len}) reads outside the guest's memory"),
            };
            let state = caller.data_mut();
            state.log_lines += 1;
            tracing::info!(target: "mote::guest", function = %state.function, "{line}");
            Ok(())
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RuntimeConfig;
    use std::time::Duration;

    fn runtime() -> (Runtime, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        (
            Runtime::new(RuntimeConfig::new(dir.path(), 2)).unwrap(),
            dir,
        )
    }

    fn call(
        rt: &Runtime,
        wat_src: &str,
        limits: Limits,
        input: &[u8],
    ) -> Result<Vec<u8>, CallError> {
        let f = rt.compile(&wat::parse_str(wat_src).unwrap()).unwrap();
        rt.call(&f, &Arc::from("test"), limits, input)
            .map(|o| o.body)
    }

    /// A mote ABI module whose handler body is `body`; memory has one page.
    fn abi(body: &str) -> String {
        format!(
            r#"(module (memory (export "memory") 1)
                (global $calls (mut i32) (i32.const 0))
                (func (export "mote_alloc") (param i32) (result i32) i32.const 1024)
                (func (export "mote_handle") (param i32 i32) (result i64) {body}))"#
        )
    }

    #[test]
    fn echoes_through_guest_memory() {
        let (rt, _d) = runtime();
        let echo = abi(
            "(i64.or (i64.shl (i64.extend_i32_u (local.get 0)) (i64.const 32)) (i64.extend_i32_u (local.get 1)))",
        );
        assert_eq!(
            call(&rt, &echo, Limits::default(), b"ping").unwrap(),
            b"ping"
        );
        assert_eq!(call(&rt, &echo, Limits::default(), b"").unwrap(), b"");
    }

    #[test]
    fn the_result_is_handed_over_before_teardown_with_the_entry_time() {
        // One instance slot: while the call's instance is alive, no other call can start.
        let dir = tempfile::tempdir().unwrap();
        let mut config = RuntimeConfig::new(dir.path(), 1);
        config.instance_slots = 1;
        config.microtask_slots = 0;
        let rt = Runtime::new(config).unwrap();
        let f = rt
            .compile(&wat::parse_str(abi("i64.const 0")).unwrap())
            .unwrap();
        let name = Arc::from("t");
        let before = Instant::now();
        let (entered, finished, second) =
            rt.call_then(&f, &name, Limits::default(), before, b"", |r| {
                let second = rt.call(&f, &name, Limits::default(), b"");
                (r.unwrap().entered, Instant::now(), second)
            });
        assert!(before <= entered && entered <= finished);
        assert!(
            matches!(second, Err(CallError::Instantiate(_))),
            "the instance was already torn down when the result was handed over: {second:?}"
        );
        assert!(rt.call(&f, &name, Limits::default(), b"").is_ok());
    }

    #[test]
    fn an_engine_without_epochs_runs_calls_and_no_ticker() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = RuntimeConfig::new(dir.path(), 1);
        config.epoch_interruption = false;
        let rt = Runtime::new(config).unwrap();
        assert!(rt.ticker().is_none());
        assert_eq!(
            call(&rt, &abi("i64.const 0"), Limits::default(), b"x").unwrap(),
            b""
        );
    }

    #[test]
    fn every_call_gets_a_fresh_instance() {
        // The handler bumps a global and a memory cell and reports both: with a fresh instance
        // per call they are 1 every time.
        let (rt, _d) = runtime();
        let counter = abi(
            r#"(global.set $calls (i32.add (global.get $calls) (i32.const 1)))
               (i32.store8 (i32.const 0) (i32.add (i32.load8_u (i32.const 0)) (i32.const 1)))
               (i32.store8 (i32.const 1) (global.get $calls))
               i64.const 2"#,
        );
        let f = rt.compile(&wat::parse_str(&counter).unwrap()).unwrap();
        for _ in 0..50 {
            let out = rt
                .call(&f, &Arc::from("c"), Limits::default(), b"")
                .unwrap()
                .body;
            assert_eq!(out, [1, 1]);
        }
    }

    #[test]
    fn initialize_runs_before_the_handler() {
        let (rt, _d) = runtime();
        let src = r#"(module (memory (export "memory") 1)
            (func (export "_initialize") (i32.store8 (i32.const 0) (i32.const 42)))
            (func (export "mote_alloc") (param i32) (result i32) i32.const 1024)
            (func (export "mote_handle") (param i32 i32) (result i64) i64.const 1))"#;
        assert_eq!(call(&rt, src, Limits::default(), b"").unwrap(), [42]);
    }

    #[test]
    fn timeouts_stop_loops_within_a_few_ticks() {
        let (rt, _d) = runtime();
        let spin = abi("(loop $l (br $l)) i64.const 0");
        let limits = Limits {
            timeout_us: 20_000,
            ..Limits::default()
        };
        let mut overshoots: Vec<Duration> = (0..5)
            .map(|_| {
                let t = Instant::now();
                let err = call(&rt, &spin, limits, b"").unwrap_err();
                assert!(
                    matches!(err, CallError::Timeout { timeout_us: 20_000 }),
                    "{err}"
                );
                t.elapsed().saturating_sub(Duration::from_millis(20))
            })
            .collect();
        overshoots.sort();
        // The ticker runs every 0.5 ms; allow for a loaded machine, but not for a missed deadline.
        assert!(
            overshoots[2] < Duration::from_millis(5),
            "median overshoot {:?}",
            overshoots[2]
        );
    }

    #[test]
    fn microsecond_budgets_switch_the_ticker_to_fine_ticks() {
        // Coarse ticks of a whole second: a 100 µs budget can only be enforced quickly if the
        // call switches the ticker to its fine period.
        let dir = tempfile::tempdir().unwrap();
        let mut config = RuntimeConfig::new(dir.path(), 1);
        config.epoch_tick = crate::TickerPeriods {
            coarse: Duration::from_secs(1),
            fine: Duration::from_micros(100),
        };
        let rt = Runtime::new(config).unwrap();
        let spin = abi("(loop $l (br $l)) i64.const 0");
        let limits = Limits {
            timeout_us: 100,
            ..Limits::default()
        };
        for _ in 0..20 {
            let t = Instant::now();
            let err = call(&rt, &spin, limits, b"").unwrap_err();
            assert!(
                matches!(err, CallError::Timeout { timeout_us: 100 }),
                "{err}"
            );
            assert!(
                t.elapsed() < Duration::from_millis(300),
                "{:?}",
                t.elapsed()
            );
        }
    }

    #[test]
    fn memory_limit_fails_growth_and_names_itself_on_trap() {
        let (rt, _d) = runtime();
        let limits = Limits {
            memory_mb: 2,
            ..Limits::default()
        };
        // One page plus 31 more is exactly 2 MiB; one more page fails.
        let grow = abi(
            "(drop (memory.grow (i32.const 31))) (i32.store (i32.const 0) (memory.grow (i32.const 1))) i64.const 4",
        );
        assert_eq!(
            call(&rt, &grow, limits, b"").unwrap(),
            (-1i32).to_le_bytes()
        );
        let bomb = abi(
            "(if (i32.lt_s (memory.grow (i32.const 64)) (i32.const 0)) (then unreachable)) i64.const 0",
        );
        let err = call(&rt, &bomb, limits, b"").unwrap_err();
        assert!(
            matches!(err, CallError::MemoryLimit { memory_mb: 2, .. }),
            "{err}"
        );
    }

    #[test]
    fn abi_violations_are_reported() {
        let (rt, _d) = runtime();
        let outside = abi("i64.const 0x0000fff000001000");
        let err = call(&rt, &outside, Limits::default(), b"").unwrap_err();
        assert!(matches!(err, CallError::Abi(_)), "{err}");
        let bad_alloc = r#"(module (memory (export "memory") 1)
            (func (export "mote_alloc") (param i32) (result i32) i32.const 65530)
            (func (export "mote_handle") (param i32 i32) (result i64) i64.const 0))"#;
        let err = call(&rt, bad_alloc, Limits::default(), b"0123456789").unwrap_err();
        assert!(
            err.to_string().contains("mote_alloc(10) returned 65530"),
            "{err}"
        );
    }

    /// A WASI command that reports the results of `probe` (an expression leaving an i32 errno or
    /// count) as one byte on stdout.
    fn wasi_probe(imports: &str, probe: &str) -> String {
        format!(
            r#"(module
                {imports}
                (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
                (memory (export "memory") 1)
                (func (export "_start")
                  (i32.store8 (i32.const 100) {probe})
                  (i32.store (i32.const 0) (i32.const 100))
                  (i32.store (i32.const 4) (i32.const 1))
                  (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))))"#
        )
    }

    #[test]
    fn wasi_guests_get_no_files_and_no_environment() {
        let (rt, _d) = runtime();
        // fd 3 would be the first preopened directory: there is none (EBADF = 8).
        let prestat = wasi_probe(
            r#"(import "wasi_snapshot_preview1" "fd_prestat_get" (func $prestat (param i32 i32) (result i32)))"#,
            "(call $prestat (i32.const 3) (i32.const 200))",
        );
        assert_eq!(call(&rt, &prestat, Limits::default(), b"").unwrap(), [8]);
        let environ = wasi_probe(
            r#"(import "wasi_snapshot_preview1" "environ_sizes_get" (func $sizes (param i32 i32) (result i32)))"#,
            "(block (result i32) (drop (call $sizes (i32.const 200) (i32.const 204))) (i32.load (i32.const 200)))",
        );
        assert_eq!(call(&rt, &environ, Limits::default(), b"").unwrap(), [0]);
    }

    #[test]
    fn wasi_commands_read_stdin_and_exit_codes_are_errors() {
        let (rt, _d) = runtime();
        let cat = r#"(module
            (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
            (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
            (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
            (memory (export "memory") 1)
            (func (export "_start")
              (i32.store (i32.const 0) (i32.const 100))
              (i32.store (i32.const 4) (i32.const 1000))
              (drop (call $fd_read (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 8)))
              (i32.store (i32.const 4) (i32.load (i32.const 8)))
              (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))
              (if (i32.eq (i32.load8_u (i32.const 100)) (i32.const 33)) (then (call $exit (i32.const 7))))))"#;
        assert_eq!(call(&rt, cat, Limits::default(), b"meow").unwrap(), b"meow");
        let err = call(&rt, cat, Limits::default(), b"!").unwrap_err();
        assert!(matches!(err, CallError::Exit { code: 7, .. }), "{err}");
    }

    #[test]
    fn a_cached_artefact_is_loaded_instead_of_compiled() {
        let dir = tempfile::tempdir().unwrap();
        let wasm = wat::parse_str(abi("i64.const 0")).unwrap();
        let sha = {
            let rt = Runtime::new(RuntimeConfig::new(dir.path(), 1)).unwrap();
            rt.compile(&wasm).unwrap().sha256().to_owned()
        };
        let rt = Runtime::new(RuntimeConfig::new(dir.path(), 1)).unwrap();
        let f = rt
            .load(&sha, || {
                panic!("the module was recompiled instead of loaded from the cache")
            })
            .unwrap();
        assert_eq!(f.kind(), mote_types::GuestKind::MoteAbiV1);
        rt.forget(&sha);
        let err = rt
            .load(&sha, || Err(std::io::ErrorKind::NotFound.into()))
            .err()
            .unwrap();
        assert!(err.to_string().contains(&sha), "{err}");
    }
}
