//! The guest's log: `mote.log` lines, and after the call what a WASI guest wrote to stderr (and
//! a mote ABI guest to stdout, where it has no response to give). Both go to the node's log under
//! the target `mote::guest`, tagged with the function's name.

use crate::state::CallState;
use mote_types::abi;
use wasmtime::{Caller, Extern, Linker};

/// The longest line `mote.log` records; longer lines are cut.
const MAX_LOG_LINE: usize = 8 << 10;
/// How many log lines one call may write; the rest are dropped.
const MAX_LOG_LINES: u32 = 1000;

/// Registers `mote.log`, which both linkers provide.
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

/// Logs what a guest wrote to one of its standard streams, a line at a time, up to the same
/// number of lines `mote.log` allows.
pub(crate) fn log_output(function: &str, bytes: &[u8]) {
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
