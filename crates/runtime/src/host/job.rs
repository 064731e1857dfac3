//! The `mote_job` host functions (`docs/jobs.md`), on the job engine's linker: the driver's
//! (`dataset`, the stages, the loops on signals, `arg`, `partitions`) build its program; a
//! task's (`input_*`, `emit`, `task_dataset`) read its inputs, emit to partitions and name the
//! datasets its stage reads and writes. Each checks which of the
//! two the instance is doing ([`JobState`]), so a task that declares a stage, or a driver that
//! reads an input, traps with a message that says so. `mote.log` lines are kept for the job
//! function's log (cut at [`MAX_LINE_BYTES`], as a call's are), and the last is quoted, up to
//! [`MAX_QUOTED`] bytes, if the task then traps: the SDK logs a panic's message there.

use crate::guest_log::{LogStream, MAX_LINE_BYTES, cut_line};
use crate::state::JobState;
use mote_jobs::{DatasetId, Stage, StageKind};
use mote_types::abi;
use wasmtime::{Caller, Extern, Linker, Memory};

/// The most one task may emit, in bytes: pieces and outputs are held in host memory until sent.
const MAX_EMIT_BYTES: usize = 1 << 30;
/// The longest job argument value or dataset name read from the guest.
const MAX_NAME: usize = 64 << 10;
/// The most of a log line a trap's error quotes.
const MAX_QUOTED: usize = 64 << 10;

fn memory(caller: &mut Caller<'_, JobState>) -> wasmtime::Result<Memory> {
    match caller.get_export(abi::EXPORT_MEMORY) {
        Some(Extern::Memory(m)) => Ok(m),
        _ => wasmtime::bail!("a job module must export its `memory`"),
    }
}

fn read_bytes(
    caller: &mut Caller<'_, JobState>,
    ptr: i32,
    len: i32,
    max: usize,
) -> wasmtime::Result<Vec<u8>> {
    let m = memory(caller)?;
    let (ptr, len) = (ptr as u32 as usize, len as u32 as usize);
    if len > max {
        wasmtime::bail!("a {len}-byte argument is longer than the {max} bytes allowed");
    }
    match m.data(&*caller).get(ptr..ptr + len) {
        Some(b) => Ok(b.to_vec()),
        None => wasmtime::bail!("({ptr}, {len}) lies outside the guest's memory"),
    }
}

/// The first `max` bytes of the guest's `(ptr, len)`, which must lie in its memory, and how
/// many bytes were left out.
fn read_start(
    caller: &mut Caller<'_, JobState>,
    ptr: i32,
    len: i32,
    max: usize,
) -> wasmtime::Result<(Vec<u8>, usize)> {
    let m = memory(caller)?;
    let (ptr, len) = (ptr as u32 as usize, len as u32 as usize);
    let data = m.data(&*caller);
    if ptr.checked_add(len).is_none_or(|end| end > data.len()) {
        wasmtime::bail!("({ptr}, {len}) lies outside the guest's memory");
    }
    let kept = len.min(max);
    Ok((data[ptr..ptr + kept].to_vec(), len - kept))
}

fn read_str(caller: &mut Caller<'_, JobState>, ptr: i32, len: i32) -> wasmtime::Result<String> {
    String::from_utf8(read_bytes(caller, ptr, len, MAX_NAME)?)
        .map_err(|_| wasmtime::format_err!("a name or argument is not UTF-8"))
}

fn read_ids(
    caller: &mut Caller<'_, JobState>,
    ptr: i32,
    len: i32,
) -> wasmtime::Result<Vec<DatasetId>> {
    let bytes = read_bytes(caller, ptr, len.saturating_mul(4), MAX_NAME)?;
    Ok(bytes
        .chunks_exact(4)
        .map(|c| DatasetId(u32::from_le_bytes([c[0], c[1], c[2], c[3]])))
        .collect())
}

fn declare(caller: &mut Caller<'_, JobState>, call: &str, stage: Stage) -> wasmtime::Result<()> {
    caller
        .data_mut()
        .builder(call)?
        .stage(stage)
        .map(|_| ())
        .map_err(wasmtime::Error::from)
}

/// Registers the `mote_job` functions and `mote.log`.
pub(crate) fn add_job_functions(linker: &mut Linker<JobState>) -> wasmtime::Result<()> {
    let m = abi::JOB_MODULE;
    linker.func_wrap(
        abi::IMPORT_MODULE,
        abi::IMPORT_LOG,
        |mut c: Caller<'_, JobState>, ptr: i32, len: i32| -> wasmtime::Result<()> {
            let (bytes, cut) = read_start(&mut c, ptr, len, MAX_QUOTED)?;
            let mut quoted = String::from_utf8_lossy(&bytes).into_owned();
            let mut line = quoted.clone();
            cut_line(&mut line, MAX_LINE_BYTES);
            if cut > 0 {
                quoted.push_str(&format!(" ... ({cut} more bytes)"));
            }
            let state = c.data_mut();
            state.log.push(&state.ctx.function, LogStream::Log, line);
            state.last_log = Some(quoted);
            Ok(())
        },
    )?;
    linker.func_wrap(
        m,
        abi::JOB_DATASET,
        |mut c: Caller<'_, JobState>, ptr: i32, len: i32, partitioned: i32| {
            let name = read_str(&mut c, ptr, len)?;
            Ok(c.data_mut()
                .builder("dataset")?
                .dataset(&name, partitioned != 0)
                .0 as i32)
        },
    )?;
    linker.func_wrap(
        m,
        abi::JOB_COMPUTE,
        |mut c: Caller<'_, JobState>, func: i32, rp: i32, rl: i32, wp: i32, wl: i32| {
            let (reads, writes) = (read_ids(&mut c, rp, rl)?, read_ids(&mut c, wp, wl)?);
            let stage = Stage {
                kind: StageKind::Compute,
                func: func as u32,
                reads,
                writes,
            };
            declare(&mut c, "compute", stage)
        },
    )?;
    linker.func_wrap(
        m,
        abi::JOB_SCATTER,
        |mut c: Caller<'_, JobState>,
         func: i32,
         rp: i32,
         rl: i32,
         gather: i32,
         wp: i32,
         wl: i32| {
            let (reads, writes) = (read_ids(&mut c, rp, rl)?, read_ids(&mut c, wp, wl)?);
            let stage = Stage {
                kind: StageKind::Scatter {
                    gather: gather as u32,
                },
                func: func as u32,
                reads,
                writes,
            };
            declare(&mut c, "scatter", stage)
        },
    )?;
    linker.func_wrap(
        m,
        abi::JOB_LOAD,
        |mut c: Caller<'_, JobState>, func: i32, dataset: i32, ap: i32, al: i32| {
            let arg = read_str(&mut c, ap, al)?;
            let stage = Stage {
                kind: StageKind::Load { arg },
                func: func as u32,
                reads: Vec::new(),
                writes: vec![DatasetId(dataset as u32)],
            };
            declare(&mut c, "load", stage)
        },
    )?;
    linker.func_wrap(
        m,
        abi::JOB_STORE,
        |mut c: Caller<'_, JobState>, func: i32, dataset: i32, ap: i32, al: i32| {
            let arg = read_str(&mut c, ap, al)?;
            let stage = Stage {
                kind: StageKind::Store { arg },
                func: func as u32,
                reads: vec![DatasetId(dataset as u32)],
                writes: Vec::new(),
            };
            declare(&mut c, "store", stage)
        },
    )?;
    linker.func_wrap(
        m,
        abi::JOB_REPEAT,
        |mut c: Caller<'_, JobState>, times: i32| -> wasmtime::Result<()> {
            c.data_mut().builder("repeat")?.repeat(times.max(0) as u64);
            Ok(())
        },
    )?;
    linker.func_wrap(
        m,
        abi::JOB_WHILE,
        |mut c: Caller<'_, JobState>, func: i32, dataset: i32| -> wasmtime::Result<()> {
            let b = c.data_mut().builder("while_signal")?;
            Ok(b.while_signal(func as u32, DatasetId(dataset as u32))?)
        },
    )?;
    linker.func_wrap(
        m,
        abi::JOB_IF,
        |mut c: Caller<'_, JobState>, func: i32, dataset: i32| -> wasmtime::Result<()> {
            let b = c.data_mut().builder("if_signal")?;
            Ok(b.if_signal(func as u32, DatasetId(dataset as u32))?)
        },
    )?;
    linker.func_wrap(
        m,
        abi::JOB_ELSE,
        |mut c: Caller<'_, JobState>| -> wasmtime::Result<()> {
            Ok(c.data_mut().builder("else_branch")?.otherwise()?)
        },
    )?;
    linker.func_wrap(
        m,
        abi::JOB_END,
        |mut c: Caller<'_, JobState>| -> wasmtime::Result<()> {
            Ok(c.data_mut().builder("end")?.end()?)
        },
    )?;
    linker.func_wrap(m, abi::JOB_PARTITIONS, |c: Caller<'_, JobState>| {
        c.data().ctx.partitions as i32
    })?;
    linker.func_wrap(
        m,
        abi::JOB_ARG,
        |mut c: Caller<'_, JobState>, kp: i32, kl: i32, out: i32, cap: i32| {
            let key = read_str(&mut c, kp, kl)?;
            let args = c.data().ctx.args.clone();
            let Some(value) = mote_jobs::arg(&args, &key) else {
                return Ok(-1);
            };
            if value.len() <= cap as u32 as usize {
                let mem = memory(&mut c)?;
                mem.write(&mut c, out as u32 as usize, value.as_bytes())
                    .map_err(|_| {
                        wasmtime::format_err!("`arg` writes outside the guest's memory")
                    })?;
            }
            Ok(value.len() as i32)
        },
    )?;
    linker.func_wrap(
        m,
        abi::JOB_INPUT_COUNT,
        |mut c: Caller<'_, JobState>| -> wasmtime::Result<i32> {
            Ok(c.data_mut().task_io("input_count")?.inputs.len() as i32)
        },
    )?;
    linker.func_wrap(
        m,
        abi::JOB_INPUT_LEN,
        |mut c: Caller<'_, JobState>, k: i32| -> wasmtime::Result<i32> {
            let io = c.data_mut().task_io("input_len")?;
            match io.inputs.get(k as u32 as usize) {
                Some(i) => Ok(i.data.len() as i32),
                None => {
                    wasmtime::bail!("`input_len({k})`: the task has {} inputs", io.inputs.len())
                }
            }
        },
    )?;
    linker.func_wrap(
        m,
        abi::JOB_INPUT_READ,
        |mut c: Caller<'_, JobState>, k: i32, ptr: i32| -> wasmtime::Result<()> {
            let io = c.data_mut().task_io("input_read")?;
            let Some(data) = io.inputs.get(k as u32 as usize).map(|i| i.data.clone()) else {
                wasmtime::bail!("`input_read({k})`: the task has {} inputs", io.inputs.len());
            };
            let mem = memory(&mut c)?;
            mem.write(&mut c, ptr as u32 as usize, &data).map_err(|_| {
                wasmtime::format_err!("`input_read` writes outside the guest's memory")
            })
        },
    )?;
    linker.func_wrap(
        m,
        abi::JOB_TASK_DATASET,
        |mut c: Caller<'_, JobState>, which: i32, k: i32, out: i32, cap: i32| {
            let mem = memory(&mut c)?;
            // The guest's memory and the names at once, so the name is copied only into it.
            let (data, state) = mem.data_and_store_mut(&mut c);
            let io = state.task_io("task_dataset")?;
            let ids = match which {
                0 => &io.reads,
                1 => &io.writes,
                _ => wasmtime::bail!(
                    "`task_dataset({which}, {k}, ..)`: give 0 for the datasets read, 1 for those \
                     written"
                ),
            };
            let Some(&id) = usize::try_from(k).ok().and_then(|k| ids.get(k)) else {
                return Ok(-1);
            };
            let Some(name) = state.ctx.datasets.get(id.0 as usize) else {
                wasmtime::bail!("dataset {} has no name in this instance's job", id.0)
            };
            if name.len() <= cap as u32 as usize {
                let start = out as u32 as usize;
                data.get_mut(start..start + name.len())
                    .ok_or_else(|| {
                        wasmtime::format_err!("`task_dataset` writes outside the guest's memory")
                    })?
                    .copy_from_slice(name.as_bytes());
            }
            Ok(name.len() as i32)
        },
    )?;
    linker.func_wrap(
        m,
        abi::JOB_EMIT,
        |mut c: Caller<'_, JobState>, dest: i32, ptr: i32, len: i32| -> wasmtime::Result<()> {
            let bytes = read_bytes(&mut c, ptr, len, MAX_EMIT_BYTES)?;
            let io = c.data_mut().task_io("emit")?;
            let dest = dest as u32;
            if dest >= io.emit_to {
                match io.emit_to {
                    0 => wasmtime::bail!(
                        "`emit`: this task emits nothing (only scatter and store tasks do)"
                    ),
                    n => wasmtime::bail!(
                        "`emit({dest}, ..)`: the datasets written have {n} partitions"
                    ),
                }
            }
            io.emitted_bytes += bytes.len();
            if io.emitted_bytes > MAX_EMIT_BYTES {
                wasmtime::bail!("a task emitted more than {MAX_EMIT_BYTES} bytes");
            }
            match io.emitted.iter_mut().find(|(d, _)| *d == dest) {
                Some((_, piece)) => piece.extend_from_slice(&bytes),
                None => io.emitted.push((dest, bytes)),
            }
            Ok(())
        },
    )?;
    Ok(())
}
