//! Typed errors of the runtime. Every message names the thing that failed and, where there is
//! one, what the user can do about it; the gateway maps each variant to one HTTP status.

use mote_types::ShowBudget;
use std::path::PathBuf;

/// The runtime could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// wasmtime rejected the engine configuration.
    #[error("cannot configure the WebAssembly engine: {0}")]
    Engine(String),
    /// The artifact cache directory is unusable.
    #[error("cannot use artifact cache directory {path}: {source}")]
    CacheDir {
        /// The directory.
        path: PathBuf,
        /// The underlying I/O error.
        source: std::io::Error,
    },
}

/// A module was rejected at deploy time. Nothing is stored when this is returned.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// The bytes are not a WebAssembly binary at all.
    #[error("not a WebAssembly module: {0}")]
    NotWasm(String),
    /// The bytes are a WebAssembly component that does not export an HTTP handler.
    #[error(
        "this component exports [{exports}], not `wasi:http/incoming-handler@0.2.x`; mote runs components of the wasi:http/proxy world (what `wasmtime serve` and Spin 2+ run) and core modules (mote ABI, WASI preview1 commands, jobs){}",
        if *p3 { ". Its `wasi:http/handler@0.3` is WASIp3 (spin-sdk 6 and later), which mote does not run yet: build it with spin-sdk 5.x or the `wasip2` crate" } else { "" }
    )]
    NotProxy {
        /// The component's exports, comma-separated.
        exports: String,
        /// Whether it exports the WASIp3 handler instead.
        p3: bool,
    },
    /// A component imports something the platform does not provide.
    #[error(
        "component imports `{name}`, which mote does not provide; components may import wasi:http (types, outgoing-handler) and the rest of WASI 0.2 (io, clocks, random, cli, filesystem and sockets with nothing granted) (docs/abi.md)"
    )]
    UnknownComponentImport {
        /// The import's name, as in `wasi:keyvalue/store@0.2.0`.
        name: String,
    },
    /// The module failed validation or compilation.
    #[error("invalid WebAssembly module: {0}")]
    Invalid(String),
    /// The module exports neither guest kind's entry points.
    #[error(
        "module exports none of `mote_handle` (mote ABI v1, with `mote_alloc` and `memory`), `_start` (WASI command) or `mote_job_driver` (a job, with `mote_job_task` and `memory`); found exports: [{found}]"
    )]
    NoEntryPoint {
        /// The module's exports, comma-separated.
        found: String,
    },
    /// A mote ABI export is missing or has the wrong type.
    #[error("export `{name}` {problem}; expected {expected}")]
    BadExport {
        /// The export's name.
        name: &'static str,
        /// What is wrong with it.
        problem: String,
        /// The expected type.
        expected: &'static str,
    },
    /// The module imports something the platform does not provide.
    #[error(
        "module imports `{module}`.`{name}`, which mote does not provide; mote provides `mote`.`log`, `phase`, `sleep_us`, `object_get`, `object_put`, `object_list`, `object_list_after`, `object_delete` (docs/abi.md) and WASI preview1 (`wasi_snapshot_preview1`)"
    )]
    UnknownImport {
        /// The import's module.
        module: String,
        /// The import's name.
        name: String,
    },
    /// The module's imports exist but do not link (for example a type mismatch).
    #[error("module does not link: {0}")]
    Link(String),
    /// The compiled artefact could not be written to the cache.
    #[error("cannot write compiled artefact {path}: {source}")]
    Cache {
        /// The artefact path.
        path: PathBuf,
        /// The underlying I/O error.
        source: std::io::Error,
    },
}

/// A call failed. The platform and other calls are unaffected; the instance is gone.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The guest trapped (unreachable, out-of-bounds access, stack overflow, ...).
    #[error("{message}")]
    Trap {
        /// The trap and the top of the wasm backtrace.
        message: String,
    },
    /// The call ran past its wall-clock limit and was stopped.
    #[error("call exceeded its timeout of {} and was stopped", ShowBudget(*timeout_us))]
    Timeout {
        /// The limit that was exceeded, in microseconds.
        timeout_us: u64,
    },
    /// The guest hit its memory limit and could not continue.
    #[error(
        "function exceeded its memory limit of {memory_mb} MiB ({detail}); redeploy with a larger memory_mb if it needs more"
    )]
    MemoryLimit {
        /// The limit.
        memory_mb: u32,
        /// What failed when the limit was hit.
        detail: String,
    },
    /// A WASI command exited with a non-zero status.
    #[error("function exited with status {code}{stderr}")]
    Exit {
        /// The exit status.
        code: i32,
        /// The tail of stderr, prefixed with `: ` when there is any.
        stderr: String,
    },
    /// The guest broke the mote ABI (for example returned a response outside its memory).
    #[error("function broke the mote ABI: {0}")]
    Abi(String),
    /// The response was larger than the platform allows.
    #[error("function's response is larger than the {limit} byte limit")]
    ResponseTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The function is a job, which runs with `mote job run`, not as a call.
    #[error(
        "this function is a job: run it with `mote job run NAME` (POST /v1/jobs); it cannot be invoked"
    )]
    IsJob,
    /// The function is a `wasi:http` component, which takes whole HTTP requests.
    #[error(
        "this function is a wasi:http component: send it HTTP requests at /v1/invoke/NAME/PATH (any method) or on its route; it has no request-body-in, body-out call"
    )]
    IsProxy,
    /// The function is not a `wasi:http` component but was given an HTTP request to serve.
    #[error("this function is not a wasi:http component")]
    NotProxy,
    /// A `wasi:http` component answered with an error code instead of a response.
    #[error("function answered with the error code {0} instead of a response")]
    Answered(String),
    /// A `wasi:http` component returned without setting its response.
    #[error(
        "function returned without a response: its handler must call response-outparam.set before it returns"
    )]
    NoResponse,
    /// The request could not be handed to the component.
    #[error("the request cannot be handed to the function: {0}")]
    BadRequest(String),
    /// No instance could be created (the instance pool is exhausted or the OS refused memory).
    #[error("cannot instantiate function: {0}")]
    Instantiate(String),
}
