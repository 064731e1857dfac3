//! The host functions of microtask functions, all asynchronous: `mote.phase`, `mote.sleep_us`
//! and the object storage calls (`docs/abi.md`). Each phase change and wait goes through the
//! call's [`PhaseGate`](crate::PhaseGate); object I/O runs on the node's I/O runtime with the
//! call's share given up meanwhile, and its result reaches the guest through the guest's own
//! `mote_alloc`, with a status code (`mote_types::abi::OBJECT_*`) and, on failure, a message
//! naming the bucket, key or server.

use crate::gate::MicrotaskState;
use crate::state::CallState;
use bytes::Bytes;
use mote_objects::ObjectError;
use mote_types::abi;
use std::time::Duration;
use wasmtime::{Caller, Extern, Linker, Memory};

/// Object calls' status codes, as `docs/abi.md` lists them.
fn status_of(error: &ObjectError) -> i32 {
    match error {
        ObjectError::NoSuchKey { .. } => abi::OBJECT_NO_SUCH_KEY,
        ObjectError::NoSuchBucket { .. } => abi::OBJECT_NO_SUCH_BUCKET,
        ObjectError::TooLarge { .. } => abi::OBJECT_TOO_LARGE,
        ObjectError::InvalidBucket { .. } | ObjectError::InvalidKey { .. } => {
            abi::OBJECT_INVALID_NAME
        }
        ObjectError::Unreachable { .. } => abi::OBJECT_UNREACHABLE,
        ObjectError::Denied { .. } => abi::OBJECT_DENIED,
        ObjectError::Config(_) | ObjectError::Backend { .. } => abi::OBJECT_FAILED,
    }
}

/// The guest's exported memory, which every microtask host function reads or writes.
fn guest_memory(caller: &mut Caller<'_, CallState>, import: &str) -> wasmtime::Result<Memory> {
    match caller.get_export(abi::EXPORT_MEMORY) {
        Some(Extern::Memory(memory)) => Ok(memory),
        _ => wasmtime::bail!("mote.{import} needs the module to export its `memory`"),
    }
}

/// Copies `len` bytes at `ptr` out of guest memory, or fails naming the argument.
fn read_guest(
    caller: &mut Caller<'_, CallState>,
    import: &str,
    what: &str,
    ptr: i32,
    len: i32,
) -> wasmtime::Result<Vec<u8>> {
    let memory = guest_memory(caller, import)?;
    let (start, len) = (ptr as u32 as usize, len as u32 as usize);
    match memory.data(&*caller).get(start..start.saturating_add(len)) {
        Some(bytes) => Ok(bytes.to_vec()),
        None => wasmtime::bail!(
            "mote.{import}: the {what} at {start}..{} is outside the guest's memory of {} bytes",
            start.saturating_add(len),
            memory.data_size(&*caller)
        ),
    }
}

fn read_name(
    caller: &mut Caller<'_, CallState>,
    import: &str,
    what: &str,
    ptr: i32,
    len: i32,
) -> wasmtime::Result<String> {
    String::from_utf8(read_guest(caller, import, what, ptr, len)?)
        .map_err(|_| wasmtime::format_err!("mote.{import}: the {what} is not UTF-8"))
}

/// Hands `bytes` to the guest: a buffer from its `mote_alloc`, filled, and `(ptr, len)` written
/// at `out`. Nothing is allocated for an empty result.
async fn write_out(
    caller: &mut Caller<'_, CallState>,
    import: &str,
    out: i32,
    bytes: &[u8],
) -> wasmtime::Result<()> {
    let memory = guest_memory(caller, import)?;
    let len = u32::try_from(bytes.len()).map_err(|_| {
        wasmtime::format_err!(
            "mote.{import}: a result of {} bytes cannot be addressed by a 32-bit guest",
            bytes.len()
        )
    })?;
    let ptr = if len == 0 {
        0
    } else {
        let Some(Extern::Func(alloc)) = caller.get_export(abi::EXPORT_ALLOC) else {
            wasmtime::bail!("mote.{import} needs the module to export `mote_alloc`");
        };
        let ptr = alloc
            .typed::<i32, i32>(&*caller)?
            .call_async(&mut *caller, len as i32)
            .await? as u32;
        memory
            .write(&mut *caller, ptr as usize, bytes)
            .map_err(|_| {
                wasmtime::format_err!(
                    "mote.{import}: mote_alloc({len}) returned {ptr}, which leaves no room for {len} bytes"
                )
            })?;
        ptr
    };
    let mut location = [0u8; 8];
    location[..4].copy_from_slice(&ptr.to_le_bytes());
    location[4..].copy_from_slice(&len.to_le_bytes());
    memory
        .write(&mut *caller, out as u32 as usize, &location)
        .map_err(|_| {
            wasmtime::format_err!(
                "mote.{import}: the result location {out} is outside the guest's memory"
            )
        })
}

fn microtask<'a>(caller: &'a mut Caller<'_, CallState>) -> &'a mut MicrotaskState {
    caller
        .data_mut()
        .microtask
        .as_mut()
        .expect("microtask functions only run through Runtime::call_async")
}

/// What an object call does once its arguments are read, run on the I/O runtime.
enum ObjectOp {
    Get {
        max_bytes: u64,
    },
    Put(Bytes),
    List {
        prefix: String,
        after: String,
        limit: usize,
    },
    Delete,
}

/// Runs `op` on `bucket`/`key` with the call's share given up meanwhile, then hands the result
/// (or the error's message) to the guest; returns the status.
async fn object_call(
    caller: &mut Caller<'_, CallState>,
    import: &'static str,
    bucket: String,
    key: String,
    op: ObjectOp,
    out: i32,
) -> wasmtime::Result<i32> {
    let io = microtask(caller).io.clone();
    let Some((io, objects)) = io.and_then(|io| io.objects.clone().map(|objects| (io, objects)))
    else {
        let message =
            "this node has no object storage; start it with --objects-dir or --s3-endpoint";
        write_out(caller, import, out, message.as_bytes()).await?;
        return Ok(abi::OBJECT_FAILED);
    };
    microtask(caller).gate.suspend();
    // The call runs on a confined thread: the relay starts the transfer where sockets are.
    let task = io.spawn(async move {
        match op {
            ObjectOp::Get { max_bytes } => objects.get(&bucket, &key, max_bytes).await,
            ObjectOp::Put(body) => objects
                .put(&bucket, &key, body)
                .await
                .map(|()| Bytes::new()),
            ObjectOp::List {
                prefix,
                after,
                limit,
            } => objects
                .list_after(&bucket, &prefix, &after, limit)
                .await
                .map(|listing| encode_listing(&listing)),
            ObjectOp::Delete => objects.delete(&bucket, &key).await.map(|()| Bytes::new()),
        }
    });
    let result = task.await;
    microtask(caller).gate.resume().await;
    match result {
        Ok(Ok(bytes)) => {
            write_out(caller, import, out, &bytes).await?;
            Ok(abi::OBJECT_OK)
        }
        Ok(Err(e)) => {
            write_out(caller, import, out, e.to_string().as_bytes()).await?;
            Ok(status_of(&e))
        }
        Err(e) => {
            let message = format!("object storage task failed: {e}");
            write_out(caller, import, out, message.as_bytes()).await?;
            Ok(abi::OBJECT_FAILED)
        }
    }
}

/// A listing as `docs/abi.md` encodes it: a truncated flag, then per entry the key's length
/// (u32 LE), the key, the size (u64 LE).
fn encode_listing(listing: &mote_objects::Listing) -> Bytes {
    let size: usize = listing.entries.iter().map(|e| 12 + e.key.len()).sum();
    let mut out = Vec::with_capacity(1 + size);
    out.push(u8::from(listing.truncated));
    for entry in &listing.entries {
        out.extend_from_slice(&(entry.key.len() as u32).to_le_bytes());
        out.extend_from_slice(entry.key.as_bytes());
        out.extend_from_slice(&entry.size.to_le_bytes());
    }
    Bytes::from(out)
}

/// The most entries one `object_list` returns, and what a limit of 0 or less means.
const LIST_LIMIT: usize = 1000;

/// `object_list` and `object_list_after`: lists `bucket` from the prefix at `pp..pp+pl`, after
/// `after`, at most `limit` entries (see [`LIST_LIMIT`]).
async fn list_call(
    caller: &mut Caller<'_, CallState>,
    import: &'static str,
    (bp, bl): (i32, i32),
    (pp, pl): (i32, i32),
    after: String,
    limit: i32,
    out: i32,
) -> wasmtime::Result<i32> {
    let bucket = read_name(caller, import, "bucket", bp, bl)?;
    let prefix = read_name(caller, import, "prefix", pp, pl)?;
    let limit = match usize::try_from(limit) {
        Ok(0) | Err(_) => LIST_LIMIT,
        Ok(n) => n.min(LIST_LIMIT),
    };
    let op = ObjectOp::List {
        prefix,
        after,
        limit,
    };
    object_call(caller, import, bucket, String::new(), op, out).await
}

/// Registers `phase`, `sleep_us` and the object functions, all asynchronous.
pub(crate) fn add_microtask_functions(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    linker.func_wrap_async(
        abi::IMPORT_MODULE,
        abi::IMPORT_PHASE,
        |mut caller: Caller<'_, CallState>, (permille,): (i32,)| {
            Box::new(async move {
                let permille = match u16::try_from(permille) {
                    Ok(p @ 1..=1000) => p,
                    _ => wasmtime::bail!(
                        "mote.phase({permille}): a phase declares 1 to 1000 permille of a core (1000 is a whole core)"
                    ),
                };
                microtask(&mut caller).gate.enter(permille).await;
                Ok(())
            })
        },
    )?;
    linker.func_wrap_async(
        abi::IMPORT_MODULE,
        abi::IMPORT_SLEEP_US,
        |mut caller: Caller<'_, CallState>, (us,): (i64,)| {
            Box::new(async move {
                let Ok(us) = u64::try_from(us) else {
                    wasmtime::bail!("mote.sleep_us({us}): the time must not be negative");
                };
                microtask(&mut caller).gate.suspend();
                tokio::time::sleep(Duration::from_micros(us)).await;
                microtask(&mut caller).gate.resume().await;
                Ok(())
            })
        },
    )?;
    linker.func_wrap_async(
        abi::IMPORT_MODULE,
        abi::IMPORT_OBJECT_GET,
        |mut caller: Caller<'_, CallState>, (bp, bl, kp, kl, out): (i32, i32, i32, i32, i32)| {
            Box::new(async move {
                let import = abi::IMPORT_OBJECT_GET;
                let bucket = read_name(&mut caller, import, "bucket", bp, bl)?;
                let key = read_name(&mut caller, import, "key", kp, kl)?;
                // An object larger than the call's memory limit could never be handed over.
                let max_bytes = caller.data().limiter.memory_limit.min(u32::MAX as usize) as u64;
                object_call(
                    &mut caller,
                    import,
                    bucket,
                    key,
                    ObjectOp::Get { max_bytes },
                    out,
                )
                .await
            })
        },
    )?;
    linker.func_wrap_async(
        abi::IMPORT_MODULE,
        abi::IMPORT_OBJECT_PUT,
        |mut caller: Caller<'_, CallState>,
         (bp, bl, kp, kl, dp, dl, out): (i32, i32, i32, i32, i32, i32, i32)| {
            Box::new(async move {
                let import = abi::IMPORT_OBJECT_PUT;
                let bucket = read_name(&mut caller, import, "bucket", bp, bl)?;
                let key = read_name(&mut caller, import, "key", kp, kl)?;
                let body = Bytes::from(read_guest(&mut caller, import, "object", dp, dl)?);
                object_call(&mut caller, import, bucket, key, ObjectOp::Put(body), out).await
            })
        },
    )?;
    linker.func_wrap_async(
        abi::IMPORT_MODULE,
        abi::IMPORT_OBJECT_LIST,
        |mut caller: Caller<'_, CallState>,
         (bp, bl, pp, pl, limit, out): (i32, i32, i32, i32, i32, i32)| {
            Box::new(async move {
                let import = abi::IMPORT_OBJECT_LIST;
                let (bucket, prefix, after) = ((bp, bl), (pp, pl), String::new());
                list_call(&mut caller, import, bucket, prefix, after, limit, out).await
            })
        },
    )?;
    linker.func_wrap_async(
        abi::IMPORT_MODULE,
        abi::IMPORT_OBJECT_LIST_AFTER,
        |mut caller: Caller<'_, CallState>,
         (bp, bl, pp, pl, ap, al, limit, out): (i32, i32, i32, i32, i32, i32, i32, i32)| {
            Box::new(async move {
                let import = abi::IMPORT_OBJECT_LIST_AFTER;
                let after = read_name(&mut caller, import, "key to list after", ap, al)?;
                list_call(&mut caller, import, (bp, bl), (pp, pl), after, limit, out).await
            })
        },
    )?;
    linker.func_wrap_async(
        abi::IMPORT_MODULE,
        abi::IMPORT_OBJECT_DELETE,
        |mut caller: Caller<'_, CallState>, (bp, bl, kp, kl, out): (i32, i32, i32, i32, i32)| {
            Box::new(async move {
                let import = abi::IMPORT_OBJECT_DELETE;
                let bucket = read_name(&mut caller, import, "bucket", bp, bl)?;
                let key = read_name(&mut caller, import, "key", kp, kl)?;
                object_call(&mut caller, import, bucket, key, ObjectOp::Delete, out).await
            })
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests;
