//! The host functions of microtask functions, all asynchronous: `mote.phase`, `mote.sleep_us`
//! and the object storage calls (`docs/abi.md`). Each phase change and wait goes through the
//! call's [`PhaseGate`](crate::PhaseGate); object I/O runs on the node's I/O runtime with the
//! call's share given up meanwhile, and its result reaches the guest through the guest's own
//! `mote_alloc`, with a status code (`mote_types::abi::OBJECT_*`) and, on failure, a message
//! naming the bucket, key or server.

use crate::gate::{HostIo, MicrotaskState};
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
        .expect("microtask functions only run through Runtime::call_microtask")
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
    let HostIo { objects, io, .. } = microtask(caller).io.clone();
    let Some(objects) = objects else {
        let message =
            "this node has no object storage; start it with --objects-dir or --s3-endpoint";
        write_out(caller, import, out, message.as_bytes()).await?;
        return Ok(abi::OBJECT_FAILED);
    };
    microtask(caller).gate.suspend();
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
mod tests {
    use super::*;
    use crate::error::CallError;
    use crate::gate::{GateFuture, PhaseGate};
    use crate::{Call, Runtime, RuntimeConfig};
    use mote_objects::{Objects, ObjectsConfig};
    use mote_types::Limits;
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    /// A gate that admits at once and records what the call asked of it.
    struct RecordingGate(Arc<Mutex<Vec<String>>>);

    impl PhaseGate for RecordingGate {
        fn enter(&mut self, permille: u16) -> GateFuture<'_> {
            self.0.lock().unwrap().push(format!("enter {permille}"));
            Box::pin(async {})
        }
        fn suspend(&mut self) {
            self.0.lock().unwrap().push("suspend".into());
        }
        fn resume(&mut self) -> GateFuture<'_> {
            self.0.lock().unwrap().push("resume".into());
            Box::pin(async {})
        }
        fn preempt(&mut self, _now: Instant) -> Option<GateFuture<'static>> {
            None
        }
    }

    impl Drop for RecordingGate {
        fn drop(&mut self) {
            self.0.lock().unwrap().push("released".into());
        }
    }

    struct Setup {
        rt: Runtime,
        io: HostIo,
        objects_dir: tempfile::TempDir,
        _artifacts: tempfile::TempDir,
    }

    fn setup() -> Setup {
        let artifacts = tempfile::tempdir().unwrap();
        let objects_dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(objects_dir.path().join("bkt")).unwrap();
        let objects =
            Objects::new(ObjectsConfig::Directory(objects_dir.path().to_owned())).unwrap();
        Setup {
            rt: Runtime::new(RuntimeConfig::new(artifacts.path(), 2)).unwrap(),
            io: HostIo::new(
                Some(Arc::new(objects)),
                Arc::new(crate::Egress::new(mote_types::OutboundCeiling::none())),
                tokio::runtime::Handle::current(),
            ),
            objects_dir,
            _artifacts: artifacts,
        }
    }

    /// A mote ABI module importing the microtask functions, whose handler is `body`. Memory
    /// holds "bkt" at 16, "k" at 32, "missing" at 48 and "data" at 64; `mote_alloc` bumps from
    /// 4096; the result location is at 8.
    fn module(body: &str) -> Vec<u8> {
        wat::parse_str(format!(
            r#"(module
              (import "mote" "phase" (func $phase (param i32)))
              (import "mote" "sleep_us" (func $sleep (param i64)))
              (import "mote" "object_get" (func $get (param i32 i32 i32 i32 i32) (result i32)))
              (import "mote" "object_put" (func $put (param i32 i32 i32 i32 i32 i32 i32) (result i32)))
              (import "mote" "object_list" (func $list (param i32 i32 i32 i32 i32 i32) (result i32)))
              (import "mote" "object_list_after"
                (func $list_after (param i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
              (import "mote" "object_delete" (func $delete (param i32 i32 i32 i32 i32) (result i32)))
              (memory (export "memory") 1)
              (data (i32.const 16) "bkt") (data (i32.const 32) "k")
              (data (i32.const 48) "missing") (data (i32.const 64) "data")
              (global $next (mut i32) (i32.const 4096))
              (func (export "mote_alloc") (param i32) (result i32)
                (global.get $next)
                (global.set $next (i32.add (global.get $next) (local.get 0))))
              (func $result (result i64)
                (i64.or (i64.shl (i64.extend_i32_u (i32.load (i32.const 8))) (i64.const 32))
                        (i64.extend_i32_u (i32.load (i32.const 12)))))
              (func (export "mote_handle") (param i32 i32) (result i64) {body}))"#
        ))
        .unwrap()
    }

    async fn run(
        s: &Setup,
        wasm: &[u8],
        limits: Limits,
    ) -> (Result<Vec<u8>, CallError>, Vec<String>) {
        let f = s.rt.compile(wasm).unwrap();
        assert!(f.is_microtask());
        let events = Arc::new(Mutex::new(Vec::new()));
        let gate = Box::new(RecordingGate(events.clone()));
        let name = Arc::from("t");
        let call = Call {
            function: &f,
            name: &name,
            limits,
            started: Instant::now(),
            input: b"",
        };
        let (result, _log) = s.rt.call_microtask(call, gate, s.io.clone()).await;
        let result = result.map(|o| o.body);
        let events = events.lock().unwrap().clone();
        (result, events)
    }

    #[tokio::test]
    async fn phases_and_waits_go_through_the_gate_which_is_released_at_the_end() {
        let s = setup();
        let wasm = module(
            "(call $phase (i32.const 100)) (call $sleep (i64.const 2000))
             (call $phase (i32.const 1000)) i64.const 0",
        );
        let started = Instant::now();
        let (result, events) = run(&s, &wasm, Limits::default()).await;
        assert_eq!(result.unwrap(), b"");
        assert!(started.elapsed() >= Duration::from_micros(2000));
        assert_eq!(
            events,
            ["enter 100", "suspend", "resume", "enter 1000", "released"]
        );
    }

    #[tokio::test]
    async fn a_share_outside_the_range_fails_the_call_and_names_it() {
        let s = setup();
        for share in [0, 1001, -5] {
            let wasm = module(&format!("(call $phase (i32.const {share})) i64.const 0"));
            let (result, events) = run(&s, &wasm, Limits::default()).await;
            let err = result.unwrap_err().to_string();
            assert!(err.contains(&format!("mote.phase({share})")), "{err}");
            assert_eq!(events, ["released"], "a trap releases the call's share");
        }
    }

    #[tokio::test]
    async fn objects_round_trip_and_a_missing_key_is_a_status_with_a_message() {
        let s = setup();
        // put "data" at bkt/k, then get it back and return it.
        let wasm = module(
            "(drop (call $put (i32.const 16) (i32.const 3) (i32.const 32) (i32.const 1)
                               (i32.const 64) (i32.const 4) (i32.const 8)))
             (drop (call $get (i32.const 16) (i32.const 3) (i32.const 32) (i32.const 1) (i32.const 8)))
             (call $result)",
        );
        let (result, events) = run(&s, &wasm, Limits::default()).await;
        assert_eq!(result.unwrap(), b"data");
        assert_eq!(
            std::fs::read(s.objects_dir.path().join("bkt/k")).unwrap(),
            b"data"
        );
        assert_eq!(
            events,
            ["suspend", "resume", "suspend", "resume", "released"],
            "each object call gives the share up while it waits"
        );
        // get "missing": the response is the status, then the message.
        let wasm = module(
            "(i32.store8 (i32.const 0)
               (call $get (i32.const 16) (i32.const 3) (i32.const 48) (i32.const 7) (i32.const 8)))
             (i64.const 1)",
        );
        let (result, _) = run(&s, &wasm, Limits::default()).await;
        assert_eq!(result.unwrap(), [abi::OBJECT_NO_SUCH_KEY as u8]);
        let wasm = module(
            "(drop (call $get (i32.const 16) (i32.const 3) (i32.const 48) (i32.const 7) (i32.const 8)))
             (call $result)",
        );
        let (result, _) = run(&s, &wasm, Limits::default()).await;
        let message = String::from_utf8(result.unwrap()).unwrap();
        assert!(
            message.contains("`missing`") && message.contains("`bkt`"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn a_truncated_listing_continues_after_its_last_key() {
        let s = setup();
        // put "data" at bkt/k and bkt/missing, then list one key, then the keys after "k".
        let puts = "(drop (call $put (i32.const 16) (i32.const 3) (i32.const 32) (i32.const 1)
                                    (i32.const 64) (i32.const 4) (i32.const 8)))
                    (drop (call $put (i32.const 16) (i32.const 3) (i32.const 48) (i32.const 7)
                                    (i32.const 64) (i32.const 4) (i32.const 8)))";
        let first = module(&format!(
            "{puts} (drop (call $list (i32.const 16) (i32.const 3) (i32.const 0) (i32.const 0)
                                      (i32.const 1) (i32.const 8)))
             (call $result)"
        ));
        let (result, _) = run(&s, &first, Limits::default()).await;
        let mut page = vec![1, 1, 0, 0, 0, b'k'];
        page.extend_from_slice(&4u64.to_le_bytes());
        assert_eq!(result.unwrap(), page, "truncated after one key");
        let rest = module(
            "(drop (call $list_after (i32.const 16) (i32.const 3) (i32.const 0) (i32.const 0)
                                     (i32.const 32) (i32.const 1) (i32.const 0) (i32.const 8)))
             (call $result)",
        );
        let (result, _) = run(&s, &rest, Limits::default()).await;
        let mut page = vec![0, 7, 0, 0, 0];
        page.extend_from_slice(b"missing");
        page.extend_from_slice(&4u64.to_le_bytes());
        assert_eq!(result.unwrap(), page, "the key after `k`, and no more");
    }

    #[test]
    fn listings_are_encoded_as_the_abi_says() {
        let listing = mote_objects::Listing {
            entries: vec![mote_objects::ObjectEntry {
                key: "ab".into(),
                size: 7,
            }],
            truncated: true,
        };
        assert_eq!(
            encode_listing(&listing).as_ref(),
            [1, 2, 0, 0, 0, b'a', b'b', 7, 0, 0, 0, 0, 0, 0, 0]
        );
    }

    #[tokio::test]
    async fn the_budget_covers_waits() {
        let s = setup();
        let wasm = module("(call $sleep (i64.const 10000000)) i64.const 0");
        let limits = Limits {
            timeout_us: 20_000,
            ..Limits::default()
        };
        let started = Instant::now();
        let (result, events) = run(&s, &wasm, limits).await;
        assert!(
            matches!(result, Err(CallError::Timeout { timeout_us: 20_000 })),
            "{result:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(events, ["suspend", "released"]);
    }

    /// Collects what the node would log while `run` runs on this thread.
    async fn logged_while<F: std::future::Future>(run: F) -> (F::Output, String) {
        let (captured, _logging) = crate::guest_log::CapturedLog::start();
        let output = run.await;
        (output, captured.text())
    }

    /// The regression of issue 18: a microtask call stopped at its deadline skipped the step
    /// that logs what the guest wrote.
    #[tokio::test]
    async fn a_call_stopped_at_its_deadline_still_logs_what_it_wrote() {
        let s = setup();
        let wasm = wat::parse_str(
            r#"(module
              (import "wasi_snapshot_preview1" "fd_write"
                (func $fd_write (param i32 i32 i32 i32) (result i32)))
              (import "mote" "sleep_us" (func $sleep (param i64)))
              (memory (export "memory") 1)
              (data (i32.const 64) "about to wait\n")
              (func (export "mote_alloc") (param i32) (result i32) i32.const 1024)
              (func (export "mote_handle") (param i32 i32) (result i64)
                (i32.store (i32.const 0) (i32.const 64))
                (i32.store (i32.const 4) (i32.const 14))
                (drop (call $fd_write (i32.const 2) (i32.const 0) (i32.const 1) (i32.const 8)))
                (call $sleep (i64.const 10000000))
                i64.const 0))"#,
        )
        .unwrap();
        let limits = Limits {
            timeout_us: 20_000,
            ..Limits::default()
        };
        let ((result, _), log) = logged_while(run(&s, &wasm, limits)).await;
        assert!(
            matches!(result, Err(CallError::Timeout { timeout_us: 20_000 })),
            "{result:?}"
        );
        assert!(
            log.contains("about to wait"),
            "the guest's stderr was not logged: {log:?}"
        );
    }

    #[tokio::test]
    async fn guests_that_compute_yield_and_still_meet_their_budget() {
        let s = setup();
        let wasm = module("(loop $l (br $l)) i64.const 0");
        let limits = Limits {
            timeout_us: 20_000,
            ..Limits::default()
        };
        let (result, _) = run(&s, &wasm, limits).await;
        assert!(
            matches!(result, Err(CallError::Timeout { .. })),
            "{result:?}"
        );
    }

    #[tokio::test]
    async fn functions_without_microtask_imports_stay_synchronous() {
        let s = setup();
        let plain = wat::parse_str(
            r#"(module (import "mote" "log" (func (param i32 i32))) (memory (export "memory") 1)
                (func (export "mote_alloc") (param i32) (result i32) i32.const 0)
                (func (export "mote_handle") (param i32 i32) (result i64) i64.const 0))"#,
        )
        .unwrap();
        assert!(!s.rt.compile(&plain).unwrap().is_microtask());
    }
}
