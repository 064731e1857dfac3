//! The host functions guests may import, on two linkers: the blocking one for calls that run to
//! completion on the calling thread, and the asynchronous one for microtask functions, whose
//! calls are futures. Both provide `mote.log` and WASI preview1 (without files, sockets or
//! environment); only the asynchronous one provides `mote.phase`, `mote.sleep_us` and the object
//! storage calls, since those may wait. On the blocking one a sleep may give the core up
//! (`sleep`). The job engine's linker has a third set: `mote_job` (`job`), `mote.log` and WASI
//! preview1.

mod job;
mod log;
mod microtask;
mod sleep;

use crate::state::{CallState, JobState};
use mote_types::abi;
use wasmtime::Linker;

/// The import modules mote provides; a module importing from any other is refused at deploy.
pub(crate) const PROVIDED_MODULES: [&str; 2] = [abi::IMPORT_MODULE, abi::WASI_P1_MODULE];

/// Registers the host functions of calls that run to completion on the calling thread.
pub(crate) fn add_blocking(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    log::add_log(linker)?;
    wasmtime_wasi::p1::add_to_linker_sync(linker, CallState::wasi_ctx)?;
    sleep::wrap_poll_oneoff(linker)?;
    Ok(())
}

/// Registers the host functions of microtask functions, whose calls are futures.
pub(crate) fn add_async(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    log::add_log(linker)?;
    microtask::add_microtask_functions(linker)?;
    wasmtime_wasi::p1::add_to_linker_async(linker, CallState::wasi_ctx)?;
    Ok(())
}

/// Registers the host functions of job instances, on the job engine's linker.
pub(crate) fn add_job(linker: &mut Linker<JobState>) -> wasmtime::Result<()> {
    job::add_job_functions(linker)?;
    wasmtime_wasi::p1::add_to_linker_sync(linker, JobState::wasi_ctx)?;
    Ok(())
}
