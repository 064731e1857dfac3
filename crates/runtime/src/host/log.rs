//! `mote.log`: a line the guest writes to its log, kept in the call's [`GuestLog`] (and the
//! node's own log). A job's task has its own (`host::job`).
//!
//! [`GuestLog`]: crate::guest_log::GuestLog

use crate::guest_log::{LogStream, MAX_LINE_BYTES};
use crate::state::CallState;
use mote_types::abi;
use wasmtime::{Caller, Extern, Linker};

/// Registers `mote.log`, which both linkers provide.
pub(crate) fn add_log(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    linker.func_wrap(
        abi::IMPORT_MODULE,
        abi::IMPORT_LOG,
        |mut caller: Caller<'_, CallState>, ptr: i32, len: i32| -> wasmtime::Result<()> {
            if caller.data_mut().log.refuse() {
                return Ok(());
            }
            let Some(Extern::Memory(memory)) = caller.get_export(abi::EXPORT_MEMORY) else {
                wasmtime::bail!("mote.log needs the module to export its `memory`");
            };
            let (ptr, len) = (
                ptr as u32 as usize,
                (len as u32 as usize).min(MAX_LINE_BYTES),
            );
            let line = match memory.data(&caller).get(ptr..ptr.saturating_add(len)) {
                Some(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                None => wasmtime::bail!("mote.log({ptr}, {len}) reads outside the guest's memory"),
            };
            let state = caller.data_mut();
            state.log.push(&state.function, LogStream::Log, line);
            Ok(())
        },
    )?;
    Ok(())
}
