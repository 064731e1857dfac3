//! A sleep gives the core up. WASI's `poll_oneoff` on clocks only, which is all a guest can wait
//! on here with no files or sockets (`std::thread::sleep` compiles to it), runs with the
//! executor's core handed to another call meanwhile when the thread's calls are preemptible
//! ([`gate::waiting`]); the call then queues for a core like a preempted one. The poll itself is
//! wasmtime-wasi's, called as its own linker function calls it: mote only decides whether to give
//! the core up around it.

use crate::gate::{self, Expired};
use crate::state::CallState;
use mote_types::abi;
use wasmtime::{AsContextMut, Caller, Extern, Linker, Memory, Trap};
use wasmtime_wasi::p1::wasi_snapshot_preview1::{self, WasiSnapshotPreview1};
use wiggle::GuestMemory;

/// The size of a WASI preview1 `subscription`, and where its tag is (0: a clock).
const SUBSCRIPTION_BYTES: usize = 48;
const TAG_OFFSET: usize = 8;
const CLOCK: u8 = 0;
/// Polls of more subscriptions than this are left as they are: a sleep has one or two.
const MAX_SLEEP_SUBSCRIPTIONS: u32 = 16;

/// Replaces `poll_oneoff` in `linker`, which already has WASI preview1, with one that gives the
/// core up while it waits on clocks.
pub(crate) fn wrap_poll_oneoff(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    linker.func_wrap(
        abi::WASI_P1_MODULE,
        "poll_oneoff",
        |mut caller: Caller<'_, CallState>,
         subscriptions: i32,
         events: i32,
         n: i32,
         written: i32|
         -> wasmtime::Result<i32> {
            let Some(memory) = caller.get_export("memory").and_then(Extern::into_memory) else {
                return Err(wasmtime::Error::msg("missing required memory export"));
            };
            let args = [subscriptions, events, n, written];
            if !only_clocks(&caller, memory, subscriptions as u32, n as u32) {
                return poll(&mut caller, memory, args);
            }
            let deadline = caller.data().deadline;
            match gate::waiting(deadline, || poll(&mut caller, memory, args)) {
                Ok(polled) => polled,
                Err(Expired) => {
                    caller.data_mut().timed_out = true;
                    Err(Trap::Interrupt.into())
                }
            }
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// wasmtime-wasi's `poll_oneoff` with `[subscriptions, events, n, written]`, called as its own
/// linker function calls it.
fn poll(
    caller: &mut Caller<'_, CallState>,
    memory: Memory,
    [subscriptions, events, n, written]: [i32; 4],
) -> wasmtime::Result<i32> {
    let fuel = caller.as_context_mut().hostcall_fuel();
    let (bytes, state) = memory.data_and_store_mut(&mut *caller);
    let ctx = state.wasi_ctx();
    ctx.set_hostcall_fuel(fuel);
    let mut guest = GuestMemory::Unshared(bytes);
    wasmtime_wasi::runtime::in_tokio(wasi_snapshot_preview1::poll_oneoff(
        ctx,
        &mut guest,
        subscriptions,
        events,
        n,
        written,
    ))
}

/// Whether the `n` subscriptions at `at` in the guest's memory are all clocks: a poll that can
/// only end by waiting.
fn only_clocks(caller: &Caller<'_, CallState>, memory: Memory, at: u32, n: u32) -> bool {
    if n == 0 || n > MAX_SLEEP_SUBSCRIPTIONS {
        return false;
    }
    let data = memory.data(caller);
    let (at, n) = (at as usize, n as usize);
    (0..n).all(|i| {
        let tag = at + i * SUBSCRIPTION_BYTES + TAG_OFFSET;
        data.get(tag) == Some(&CLOCK)
    })
}
