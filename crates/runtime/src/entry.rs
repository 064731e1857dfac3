//! The entry path every guest kind takes, written once: instantiate from the pool, hand the
//! request to the entry point, call it, copy the response out, and classify a failure.
//!
//! It runs in two ways, chosen by an [`Invoke`] implementation: [`Blocking`] calls the guest on
//! the calling thread (an executor), [`Fiber`] calls it as a future on a wasmtime fiber (a
//! microtask function, whose host functions may wait). The path is an `async fn` generic over
//! the two; under [`Blocking`] every step is a ready future, so [`run_blocking`] polls it once on
//! the calling thread, with no executor, allocation or waker behind it.
//!
//! The entry points were checked at deploy (`Function::link` -> `detect`) to have exactly the
//! types the ABI requires, so calls here type them without wasmtime's per-call check.

use crate::error::{CallError, explain, quote_tail};
use crate::function::{Code, Entry, Function};
use crate::guest_log::{GuestLog, LogStream};
use crate::state::CallState;
use bytes::Bytes;
use mote_types::{Limits, abi};
use std::future::Future;
use std::task::{Context, Poll, Waker};
use std::time::Instant;
use wasmtime::{
    Extern, Instance, InstancePre, Memory, ModuleExport, Store, TypedFunc, WasmParams, WasmResults,
};
use wasmtime_wasi::I32Exit;

/// What a successful call returns.
#[derive(Debug)]
pub struct CallOutput {
    /// The response body.
    pub body: Vec<u8>,
    /// When the guest's entry point was called: the instance was ready and the input copied in.
    pub entered: Instant,
}

/// How the entry path calls into the guest.
pub(crate) trait Invoke {
    /// A fresh instance of `pre` in `store`.
    fn instantiate<'a>(
        pre: &'a InstancePre<CallState>,
        store: &'a mut Store<CallState>,
    ) -> impl Future<Output = wasmtime::Result<Instance>> + Send + 'a;

    /// Calls `func` with `params`. The parameters and results are plain numbers, hence
    /// `'static`: bounded by `'a` instead, the compiler cannot prove the entry path's future
    /// `Send` for every lifetime, and the node could not spawn it (rust-lang/rust#100013).
    fn call<'a, P, R>(
        func: TypedFunc<P, R>,
        store: &'a mut Store<CallState>,
        params: P,
    ) -> impl Future<Output = wasmtime::Result<R>> + Send + 'a
    where
        P: WasmParams + Send + Sync + 'static,
        R: WasmResults + Send + Sync + 'static;
}

/// Calls the guest on the calling thread; each step is done by the time its future exists.
pub(crate) enum Blocking {}

impl Invoke for Blocking {
    fn instantiate<'a>(
        pre: &'a InstancePre<CallState>,
        store: &'a mut Store<CallState>,
    ) -> impl Future<Output = wasmtime::Result<Instance>> + Send + 'a {
        std::future::ready(pre.instantiate(store))
    }

    fn call<'a, P, R>(
        func: TypedFunc<P, R>,
        store: &'a mut Store<CallState>,
        params: P,
    ) -> impl Future<Output = wasmtime::Result<R>> + Send + 'a
    where
        P: WasmParams + Send + Sync + 'static,
        R: WasmResults + Send + Sync + 'static,
    {
        std::future::ready(func.call(store, params))
    }
}

/// Calls the guest on a fiber, so that its asynchronous host functions can suspend it.
pub(crate) enum Fiber {}

impl Invoke for Fiber {
    fn instantiate<'a>(
        pre: &'a InstancePre<CallState>,
        store: &'a mut Store<CallState>,
    ) -> impl Future<Output = wasmtime::Result<Instance>> + Send + 'a {
        pre.instantiate_async(store)
    }

    async fn call<P, R>(
        func: TypedFunc<P, R>,
        store: &mut Store<CallState>,
        params: P,
    ) -> wasmtime::Result<R>
    where
        P: WasmParams + Send + Sync + 'static,
        R: WasmResults + Send + Sync + 'static,
    {
        func.call_async(store, params).await
    }
}

/// Runs the entry path on the calling thread.
#[inline]
pub(crate) fn run_blocking(
    function: &Function,
    store: &mut Store<CallState>,
    input: &[u8],
) -> Result<CallOutput, Failure> {
    let run = std::pin::pin!(run::<Blocking>(function, store, input));
    match run.poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(result) => result,
        Poll::Pending => unreachable!("the blocking entry path never waits"),
    }
}

/// Instantiates `function` in `store` and calls its entry point with `input`.
pub(crate) async fn run<I: Invoke>(
    function: &Function,
    store: &mut Store<CallState>,
    input: &[u8],
) -> Result<CallOutput, Failure> {
    let Code::Module { pre, entry } = &function.code else {
        return Err(Failure::Known(CallError::IsProxy));
    };
    let instantiate = I::instantiate(pre, store).await;
    let instance = instantiated(store, instantiate)?;
    match entry {
        Entry::MoteAbi {
            memory,
            alloc,
            handle,
            initialize,
        } => {
            if let Some(initialize) = initialize {
                // SAFETY: `detect` checked `_initialize`'s type at deploy (see `Entry`).
                let initialize = unsafe { typed_export::<(), ()>(store, &instance, initialize) };
                I::call(initialize, store, ()).await?;
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
                let len = input_len(input)?;
                // SAFETY: `detect` checked `mote_alloc`'s type at deploy (see `Entry`).
                let alloc = unsafe { typed_export::<i32, i32>(store, &instance, alloc) };
                let ptr = I::call(alloc, store, len).await?;
                write_input(store, memory, ptr, input)?;
                (ptr, len)
            };
            let entered = Instant::now();
            let packed = I::call(handle, store, (ptr, len)).await?;
            abi_output(store, memory, packed, entered)
        }
        Entry::WasiCommand { start } => {
            // SAFETY: `detect` checked `_start`'s type at deploy (see `Entry`).
            let start = unsafe { typed_export::<(), ()>(store, &instance, start) };
            let entered = Instant::now();
            let exit = I::call(start, store, ()).await;
            wasi_command_output(store, exit, entered)
        }
        Entry::Job => Err(Failure::Known(CallError::IsJob)),
    }
}

/// How a call failed: a wasmtime error still to be classified, or a known cause.
pub(crate) enum Failure {
    Call(wasmtime::Error),
    Known(CallError),
}

impl From<wasmtime::Error> for Failure {
    fn from(e: wasmtime::Error) -> Self {
        Self::Call(e)
    }
}

/// Keeps what the guest wrote to its standard streams in its log, classifies a failure, and
/// hands the log over with the result. Every call ends here, however it ended (a timeout
/// included), so nothing a guest wrote is lost.
pub(crate) fn finish(
    function: &Function,
    limits: Limits,
    store: &mut Store<CallState>,
    result: Result<CallOutput, Failure>,
) -> (Result<CallOutput, CallError>, GuestLog) {
    let state = store.data_mut();
    let stderr = match state.stdio_if_used() {
        Some(io) => {
            let stderr = io.stderr.contents();
            let stdout = match function.entry() {
                Some(Entry::MoteAbi { .. }) => io.stdout.contents(),
                _ => Bytes::new(),
            };
            state
                .log
                .push_output(&state.function, LogStream::Stderr, &stderr);
            state
                .log
                .push_output(&state.function, LogStream::Stdout, &stdout);
            stderr
        }
        None => Bytes::new(),
    };
    let result = result.map_err(|e| match e {
        Failure::Call(e) => classify(e, state, limits, &stderr),
        Failure::Known(e) => e,
    });
    (result, std::mem::take(&mut state.log))
}

/// The instance `instantiate` made, or the call's failure: a limit the limiter refused is
/// classified with the call's state; anything else (an exhausted pool, the OS refusing memory)
/// is the platform's problem.
#[inline]
fn instantiated(
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
/// `Function::link` checked is exactly `(Params) -> Results`.
unsafe fn typed_export<Params: WasmParams, Results: WasmResults>(
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

/// The request body's length as the guest sees it.
fn input_len(input: &[u8]) -> Result<i32, Failure> {
    i32::try_from(input.len())
        .map_err(|_| Failure::Known(CallError::Abi("request body exceeds 2 GiB".into())))
}

/// Copies the request body into the buffer `mote_alloc` returned.
fn write_input(
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
fn abi_output(
    store: &Store<CallState>,
    memory: Memory,
    packed: i64,
    entered: Instant,
) -> Result<CallOutput, Failure> {
    let data = memory.data(store);
    let range =
        abi::response_range(packed, data.len(), store.data().max_response_bytes).map_err(|e| {
            Failure::Known(match e {
                abi::ResponseError::TooLarge { limit, .. } => CallError::ResponseTooLarge { limit },
                abi::ResponseError::OutsideMemory { .. } => CallError::Abi(e.to_string()),
            })
        })?;
    Ok(CallOutput {
        body: data[range].to_vec(),
        entered,
    })
}

/// A WASI command's stdout, once `_start` returned or exited with `exit`.
fn wasi_command_output(
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
    let limit = store.data().max_response_bytes;
    let stdout = store.data_mut().stdio().stdout.contents();
    if stdout.len() >= limit {
        return Err(Failure::Known(CallError::ResponseTooLarge { limit }));
    }
    Ok(CallOutput {
        body: stdout.to_vec(),
        entered,
    })
}

/// Turns a wasmtime error into what happened, in the order that explains it best: a deadline
/// that fired, a memory limit that was hit, then the trap itself.
fn classify(e: wasmtime::Error, state: &CallState, limits: Limits, stderr: &[u8]) -> CallError {
    explain(e, state.timed_out, state.limiter.denied, limits, stderr)
}
