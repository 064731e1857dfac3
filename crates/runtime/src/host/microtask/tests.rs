//! The microtask host functions, through whole calls on a runtime: phases and waits through
//! the gate, object calls on a directory, budgets over waits, logs of stopped calls.

use super::*;
use crate::HostIo;
use crate::error::CallError;
use crate::gate::{GateFuture, PhaseGate};
use crate::{Call, Runtime, RuntimeConfig};
use mote_objects::{Objects, ObjectsConfig};
use mote_types::Limits;
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Instant;

/// A gate that admits at once and records what the call asked of it.
struct RecordingGate(Arc<Mutex<Vec<String>>>);

impl PhaseGate for RecordingGate {
    fn enter(&mut self, permille: u16) -> GateFuture<'_> {
        self.0.lock().push(format!("enter {permille}"));
        Box::pin(async {})
    }
    fn suspend(&mut self) {
        self.0.lock().push("suspend".into());
    }
    fn resume(&mut self) -> GateFuture<'_> {
        self.0.lock().push("resume".into());
        Box::pin(async {})
    }
    fn preempt(&mut self, _now: Instant) -> Option<GateFuture<'static>> {
        None
    }
}

impl Drop for RecordingGate {
    fn drop(&mut self) {
        self.0.lock().push("released".into());
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
    let objects = Objects::new(ObjectsConfig::Directory(objects_dir.path().to_owned())).unwrap();
    Setup {
        rt: Runtime::new(RuntimeConfig::new(artifacts.path(), 2)).unwrap(),
        io: HostIo::new(
            Some(Arc::new(objects)),
            Arc::new(crate::Egress::new(mote_types::OutboundCeiling::none())),
            tokio::runtime::Handle::current(),
            Arc::new(mote_confine::Relay::start("test-relay").unwrap()),
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

async fn run(s: &Setup, wasm: &[u8], limits: Limits) -> (Result<Vec<u8>, CallError>, Vec<String>) {
    let f = s.rt.compile(wasm).unwrap();
    assert!(f.is_microtask());
    let events = Arc::new(Mutex::new(Vec::new()));
    let mut gate = RecordingGate(events.clone());
    let name = Arc::from("t");
    let call = Call {
        function: &f,
        name: &name,
        limits,
        started: Instant::now(),
        input: b"",
    };
    let (result, _log) =
        s.rt.call_async(call, &mut gate, Some(s.io.clone()), |r, log| (r, log))
            .await;
    // The gate was lent for the call: its owner drops it after, which gives back what it held.
    drop(gate);
    let result = result.map(|o| o.body);
    let events = events.lock().clone();
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
