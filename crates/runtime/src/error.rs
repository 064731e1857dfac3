//! Typed errors of the runtime, and how a guest's failure becomes one. Every message names the
//! thing that failed and, where there is one, what the user can do about it; the gateway maps
//! each variant to one HTTP status.
//!
//! A guest that fails hands back a `wasmtime::Error`. What it means depends on what the call's
//! store saw meanwhile, so [`explain`] (calls and components) and [`explain_job`] (job tasks)
//! take those facts, not the store: a deadline that fired explains the failure first, then a
//! memory limit the limiter refused, and only then the trap itself, with the top of its wasm
//! backtrace and the end of what the guest wrote to stderr.

use mote_jobs::ProgramError;
use mote_types::{Limits, ShowBudget};
use std::path::PathBuf;
use wasmtime::{Trap, WasmBacktrace};

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
    /// The job stopped on this node while the task waited for a core.
    #[error("the job stopped on this node before the task could run")]
    Stopped,
    /// A task ran past the function's budget.
    #[error("the task exceeded the function's budget of {} of CPU time and was stopped; redeploy with a larger timeout_ms if its partitions need longer", ShowBudget(*timeout_us))]
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

/// What a call's wasmtime error means, given whether its deadline fired (`timed_out`) and the
/// memory size its limiter refused (`denied`), if any; the end of its `stderr` is quoted in a
/// trap's message.
pub(crate) fn explain(
    e: wasmtime::Error,
    timed_out: bool,
    denied: Option<usize>,
    limits: Limits,
    stderr: &[u8],
) -> CallError {
    if timed_out {
        return CallError::Timeout {
            timeout_us: limits.timeout_us,
        };
    }
    if let Some(desired) = denied {
        return CallError::MemoryLimit {
            memory_mb: limits.memory_mb,
            detail: format!(
                "it asked for {} MiB, then failed with: {}",
                desired.div_ceil(1 << 20),
                e.root_cause()
            ),
        };
    }
    let mut message = format!("function {}", trap_message(&e));
    message.push_str(&quote_tail(stderr));
    CallError::Trap { message }
}

/// What a job task's or driver's wasmtime error means, in the same order as a call's: a budget
/// that ran out (`timed_out`), a memory limit its limiter refused (`denied`), then the trap,
/// which quotes the guest's last `mote.log` line (the SDK logs a panic's message there).
pub(crate) fn explain_job(
    e: wasmtime::Error,
    timed_out: bool,
    denied: Option<usize>,
    limits: Limits,
    last_log: Option<&str>,
) -> JobError {
    if timed_out {
        return JobError::Timeout {
            timeout_us: limits.timeout_us,
        };
    }
    if let Some(desired) = denied {
        return JobError::MemoryLimit {
            memory_mb: limits.memory_mb,
            asked_mb: desired.div_ceil(1 << 20),
        };
    }
    let mut message = trap_message(&e);
    if let Some(line) = last_log {
        message.push_str(&format!("; its last log line: {line}"));
    }
    JobError::Trap(message)
}

/// What trapped or failed, and the top of the wasm backtrace when there is one: "trapped:
/// unreachable (wasm backtrace: f <- g)".
fn trap_message(e: &wasmtime::Error) -> String {
    let mut message = match e.downcast_ref::<Trap>() {
        Some(trap) => format!("trapped: {trap}"),
        None => format!("failed: {}", e.root_cause()),
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
    message
}

/// The last line or so of a guest's stderr, formatted to append to an error message.
pub(crate) fn quote_tail(stderr: &[u8]) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        timeout_us: 2_500,
        memory_mb: 4,
    };

    fn unreachable() -> wasmtime::Error {
        wasmtime::Error::from(Trap::UnreachableCodeReached)
    }

    #[test]
    fn a_deadline_that_fired_explains_a_failure_before_memory_or_the_trap() {
        let e = explain(unreachable(), true, Some(8 << 20), LIMITS, b"boom");
        assert!(matches!(e, CallError::Timeout { timeout_us: 2_500 }), "{e}");
        let e = explain_job(unreachable(), true, Some(8 << 20), LIMITS, Some("boom"));
        assert!(matches!(e, JobError::Timeout { timeout_us: 2_500 }), "{e}");
    }

    #[test]
    fn a_refused_memory_explains_a_failure_before_the_trap() {
        let e = explain(unreachable(), false, Some((5 << 20) + 1), LIMITS, b"");
        match &e {
            CallError::MemoryLimit { memory_mb, detail } => {
                assert_eq!(*memory_mb, 4);
                assert!(detail.starts_with("it asked for 6 MiB"), "{detail}");
            }
            _ => panic!("expected a memory limit, got {e}"),
        }
        let e = explain_job(unreachable(), false, Some((5 << 20) + 1), LIMITS, None);
        assert!(
            matches!(
                e,
                JobError::MemoryLimit {
                    memory_mb: 4,
                    asked_mb: 6
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn a_trap_is_named_with_the_end_of_stderr_or_the_last_log_line() {
        let e = explain(
            unreachable(),
            false,
            None,
            LIMITS,
            b"panicked at src/lib.rs\n\n",
        );
        assert_eq!(
            e.to_string(),
            "function trapped: wasm trap: wasm `unreachable` instruction executed; stderr: panicked at src/lib.rs"
        );
        let e = explain(wasmtime::format_err!("no room"), false, None, LIMITS, b"");
        assert_eq!(e.to_string(), "function failed: no room");
        let e = explain_job(unreachable(), false, None, LIMITS, Some("index 9 of 4"));
        assert_eq!(
            e.to_string(),
            "trapped: wasm trap: wasm `unreachable` instruction executed; its last log line: index 9 of 4"
        );
    }

    #[test]
    fn the_quoted_stderr_is_its_end_cut_on_a_character() {
        assert_eq!(quote_tail(b""), "");
        assert_eq!(quote_tail(b" \n"), "");
        // 200 three-byte characters: the last 512 bytes would start inside one.
        let long = "€".repeat(200);
        assert_eq!(
            quote_tail(long.as_bytes()),
            format!("; stderr: {}", "€".repeat(170))
        );
    }
}
