//! A sleep gives the core up. WASI's `poll_oneoff` on clocks only, which is all a guest can wait
//! on here with no files or sockets (`std::thread::sleep` compiles to it), sleeps on the calling
//! thread with the core handed to another call meanwhile when the call was lent a preemption
//! ([`gate::waiting`]); the call then queues for a core like a preempted one.
//!
//! mote sleeps itself rather than through wasmtime-wasi's `poll_oneoff`, which waits on a Tokio
//! timer of a runtime of its own: setting that timer wakes the runtime's driver by writing to
//! its eventfd, which the confined thread the call runs on may not do. A sleep here is a
//! `clock_nanosleep`, cut short at the call's budget (the call then ends for it). A poll that is
//! not clocks alone, or waits on a clock kept by the guest's WASI context (an absolute
//! monotonic time, a CPU-time clock), goes to wasmtime-wasi as before. A reader (the thread that
//! read the request, which serves other connections) never sleeps: such a call is handed to an
//! executor (`node::run`).

use crate::gate::{self, Expired};
use crate::state::CallState;
use mote_types::abi;
use std::time::{Duration, Instant, SystemTime};
use wasmtime::{AsContextMut, Caller, Extern, Linker, Memory, Trap};
use wasmtime_wasi::p1::wasi_snapshot_preview1::{self, WasiSnapshotPreview1};
use wiggle::GuestMemory;

/// The size of a WASI preview1 `subscription`, and where its parts are.
const SUBSCRIPTION_BYTES: usize = 48;
const TAG_OFFSET: usize = 8;
const CLOCK_ID_OFFSET: usize = 16;
const TIMEOUT_OFFSET: usize = 24;
const FLAGS_OFFSET: usize = 40;
/// The size of an `event`, and where its type is.
const EVENT_BYTES: usize = 32;
const EVENT_TYPE_OFFSET: usize = 10;
const CLOCK: u8 = 0;
/// Clock ids, and the flag that makes a timeout absolute.
const REALTIME: u32 = 0;
const MONOTONIC: u32 = 1;
const ABSTIME: u16 = 1;
/// Polls of more subscriptions than this are left as they are: a sleep has one or two.
const MAX_SLEEP_SUBSCRIPTIONS: u32 = 16;

/// Replaces `poll_oneoff` in `linker`, which already has WASI preview1, with one that sleeps
/// on clocks itself, with the core given up while it does.
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
            let Some(wakes) = clock_deadlines(&caller, memory, subscriptions as u32, n as u32)
            else {
                return poll(&mut caller, memory, args);
            };
            assert!(
                mote_confine::role() != Some(mote_confine::Role::Reader),
                "a call that sleeps cannot run on a reader"
            );
            let (deadline, preemption) = (caller.data().deadline, caller.data().preemption);
            let slept = gate::waiting(preemption, deadline, || sleep_until(&wakes, deadline));
            match slept {
                Ok(true) => write_events(&mut caller, memory, &wakes, events, written),
                Ok(false) | Err(Expired) => {
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

/// One clock subscription: its user data, and when it is due.
struct Wake {
    userdata: u64,
    at: Instant,
}

/// The `n` subscriptions at `at` in the guest's memory as deadlines, if they are all clocks mote
/// can time itself (realtime, or relative monotonic); `None` otherwise.
fn clock_deadlines(
    caller: &Caller<'_, CallState>,
    memory: Memory,
    at: u32,
    n: u32,
) -> Option<Vec<Wake>> {
    if n == 0 || n > MAX_SLEEP_SUBSCRIPTIONS {
        return None;
    }
    let data = memory.data(caller);
    let (now, wall) = (Instant::now(), SystemTime::now());
    (0..n as usize)
        .map(|i| {
            let base = (at as usize).checked_add(i * SUBSCRIPTION_BYTES)?;
            let bytes = data.get(base..base + SUBSCRIPTION_BYTES)?;
            let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap());
            let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().unwrap());
            if bytes[TAG_OFFSET] != CLOCK {
                return None;
            }
            let timeout = Duration::from_nanos(u64_at(TIMEOUT_OFFSET));
            let absolute =
                u16::from_le_bytes([bytes[FLAGS_OFFSET], bytes[FLAGS_OFFSET + 1]]) & ABSTIME != 0;
            let due = match (u32_at(CLOCK_ID_OFFSET), absolute) {
                (MONOTONIC | REALTIME, false) => now.checked_add(timeout)?,
                (REALTIME, true) => {
                    let since_epoch = wall.duration_since(SystemTime::UNIX_EPOCH).ok()?;
                    now.checked_add(timeout.saturating_sub(since_epoch))?
                }
                _ => return None,
            };
            Some(Wake {
                userdata: u64_at(0),
                at: due,
            })
        })
        .collect()
}

/// Sleeps until the earliest of `wakes`, or until `deadline` if that comes first (then false).
fn sleep_until(wakes: &[Wake], deadline: Instant) -> bool {
    let earliest = wakes
        .iter()
        .map(|w| w.at)
        .min()
        .unwrap_or_else(Instant::now);
    let until = earliest.min(deadline);
    if let Some(left) = until.checked_duration_since(Instant::now()) {
        std::thread::sleep(left);
    }
    earliest <= deadline
}

/// Writes an event for each of `wakes` that is due to `events` in the guest's memory, and how
/// many to `written`; returns WASI's success.
fn write_events(
    caller: &mut Caller<'_, CallState>,
    memory: Memory,
    wakes: &[Wake],
    events: i32,
    written: i32,
) -> wasmtime::Result<i32> {
    let now = Instant::now();
    let mut count = 0u32;
    for wake in wakes.iter().filter(|w| w.at <= now) {
        let mut event = [0u8; EVENT_BYTES];
        event[..8].copy_from_slice(&wake.userdata.to_le_bytes());
        event[EVENT_TYPE_OFFSET] = CLOCK;
        let at = events as u32 as usize + count as usize * EVENT_BYTES;
        memory.write(&mut *caller, at, &event)?;
        count += 1;
    }
    memory.write(&mut *caller, written as u32 as usize, &count.to_le_bytes())?;
    Ok(0)
}
