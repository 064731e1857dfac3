//! One call: a fresh `Store` and instance, the guest's entry point, the response copied out, and
//! every failure classified into a [`CallError`]. Also the host functions guests may import.
//!
//! The store and instance are dropped when the call returns, whatever happened, which returns
//! the instance's slot (and its memory) to the pool: no state survives from one call to the next.

use crate::engine::Runtime;
use crate::error::CallError;
use crate::function::{Entry, Function};
use bytes::Bytes;
use mote_types::{Limits, abi};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wasmtime::{
    Caller, Extern, Linker, ResourceLimiter, Store, Trap, UpdateDeadline, WasmBacktrace,
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
}

/// Per-call state inside the wasmtime `Store`.
pub(crate) struct CallState {
    limiter: CallLimiter,
    deadline: Instant,
    timed_out: bool,
    function: Arc<str>,
    log_lines: u32,
    wasi: Option<WasiP1Ctx>,
}

/// Enforces the memory limit and remembers whether it had to say no, so a trap that follows can
/// be reported as what it is.
struct CallLimiter {
    memory_limit: usize,
    denied: Option<usize>,
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
        let stdio = function.imports_wasi.then(|| Stdio {
            stdout: MemoryOutputPipe::new(self.max_response_bytes()),
            stderr: MemoryOutputPipe::new(STDERR_CAPACITY),
        });
        let wasi = stdio.as_ref().map(|io| {
            let stdin = match function.entry {
                Entry::WasiCommand { .. } => Bytes::copy_from_slice(input),
                Entry::MoteAbi { .. } => Bytes::new(),
            };
            wasmtime_wasi::WasiCtxBuilder::new()
                .stdin(MemoryInputPipe::new(stdin))
                .stdout(io.stdout.clone())
                .stderr(io.stderr.clone())
                .arg(name.as_ref())
                .build_p1()
        });
        let state = CallState {
            limiter: CallLimiter {
                memory_limit: limits.memory_bytes(),
                denied: None,
            },
            deadline: Instant::now() + Duration::from_millis(limits.timeout_ms),
            timed_out: false,
            function: name.clone(),
            log_lines: 0,
            wasi,
        };
        let mut store = Store::new(self.engine(), state);
        store.limiter(|s| &mut s.limiter);
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|mut ctx| {
            let state = ctx.data_mut();
            if Instant::now() >= state.deadline {
                state.timed_out = true;
                return Err(Trap::Interrupt.into());
            }
            Ok(UpdateDeadline::Continue(1))
        });

        let result = self.run_entry(function, &mut store, input, stdio.as_ref());
        let stderr = stdio
            .as_ref()
            .map(|io| io.stderr.contents())
            .unwrap_or_default();
        if let Some(io) = &stdio {
            log_output(name, &io.stderr.contents());
            if matches!(function.entry, Entry::MoteAbi { .. }) {
                log_output(name, &io.stdout.contents());
            }
        }
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
        stdio: Option<&Stdio>,
    ) -> Result<CallOutput, Failure> {
        let instance = match function.pre.instantiate(&mut *store) {
            Ok(instance) => instance,
            // A limit the limiter refused is classified with the call's state; anything else
            // (an exhausted pool, the OS refusing memory) is the platform's problem.
            Err(e) if store.data().limiter.denied.is_some() => return Err(e.into()),
            Err(e) => return Err(Failure::Known(CallError::Instantiate(format!("{e:#}")))),
        };
        match &function.entry {
            Entry::MoteAbi {
                memory,
                alloc,
                handle,
                initialize,
            } => {
                if let Some(initialize) = initialize {
                    instance
                        .get_module_export(&mut *store, initialize)
                        .and_then(Extern::into_func)
                        .expect("deploy checked that `_initialize` is a function")
                        .typed::<(), ()>(&*store)?
                        .call(&mut *store, ())?;
                }
                let memory = instance
                    .get_module_export(&mut *store, memory)
                    .and_then(Extern::into_memory)
                    .expect("deploy checked that `memory` is a memory");
                let alloc = instance
                    .get_module_export(&mut *store, alloc)
                    .and_then(Extern::into_func)
                    .expect("deploy checked that `mote_alloc` is a function")
                    .typed::<i32, i32>(&*store)?;
                let handle = instance
                    .get_module_export(&mut *store, handle)
                    .and_then(Extern::into_func)
                    .expect("deploy checked that `mote_handle` is a function")
                    .typed::<(i32, i32), i64>(&*store)?;
                let (ptr, len) = if input.is_empty() {
                    (0, 0)
                } else {
                    let len = i32::try_from(input.len()).map_err(|_| {
                        Failure::Known(CallError::Abi("request body exceeds 2 GiB".into()))
                    })?;
                    let ptr = alloc.call(&mut *store, len)?;
                    memory.write(&mut *store, ptr as u32 as usize, input).map_err(|_| {
                        Failure::Known(CallError::Abi(format!(
                            "mote_alloc({len}) returned {ptr}, which leaves no room for {len} bytes in a memory of {} bytes",
                            memory.data_size(&*store)
                        )))
                    })?;
                    (ptr, len)
                };
                let (out_ptr, out_len) =
                    abi::unpack_response(handle.call(&mut *store, (ptr, len))?);
                let (out_ptr, out_len) = (out_ptr as usize, out_len as usize);
                if out_len > self.max_response_bytes() {
                    return Err(Failure::Known(CallError::ResponseTooLarge {
                        limit: self.max_response_bytes(),
                    }));
                }
                let data = memory.data(&*store);
                let body = data.get(out_ptr..out_ptr + out_len).ok_or_else(|| {
                    Failure::Known(CallError::Abi(format!(
                        "mote_handle returned a response at {out_ptr}..{}, outside its memory of {} bytes",
                        out_ptr + out_len,
                        data.len()
                    )))
                })?;
                Ok(CallOutput {
                    body: body.to_vec(),
                })
            }
            Entry::WasiCommand { start } => {
                let start = instance
                    .get_module_export(&mut *store, start)
                    .and_then(Extern::into_func)
                    .expect("deploy checked that `_start` is a function")
                    .typed::<(), ()>(&*store)?;
                if let Err(e) = start.call(&mut *store, ()) {
                    match e.downcast_ref::<I32Exit>() {
                        Some(I32Exit(0)) => {}
                        Some(I32Exit(code)) => {
                            let stderr = stdio.map(|io| io.stderr.contents()).unwrap_or_default();
                            return Err(Failure::Known(CallError::Exit {
                                code: *code,
                                stderr: quote_tail(&stderr),
                            }));
                        }
                        None => return Err(e.into()),
                    }
                }
                let stdout = stdio
                    .expect("a WASI command imports WASI")
                    .stdout
                    .contents();
                if stdout.len() >= self.max_response_bytes() {
                    return Err(Failure::Known(CallError::ResponseTooLarge {
                        limit: self.max_response_bytes(),
                    }));
                }
                Ok(CallOutput {
                    body: stdout.to_vec(),
                })
            }
        }
    }
}

/// A call failed either with a wasmtime error still to be classified, or with a known cause.
enum Failure {
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
            timeout_ms: limits.timeout_ms,
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

/// Registers the `mote` host functions and WASI preview1.
pub(crate) fn add_host_functions(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
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
    wasmtime_wasi::p1::add_to_linker_sync(linker, |s: &mut CallState| {
        s.wasi
            .as_mut()
            .expect("a WASI context is created for every module that imports WASI")
    })?;
    Ok(())
}
