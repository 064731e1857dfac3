//! What every function of the sort does around its work, so each function reads as its stage:
//! parse the JSON request ([`request`]), run sub-stages that declare their share of a core and are
//! timed for the driver ([`sub_stage`], [`Span`]), read and write objects ([`get`], [`put`]), and
//! answer in JSON ([`respond`]).
//!
//! A function that cannot do its job panics with a message naming what is wrong (the request's
//! field, or the bucket, key and storage error): guests are built with `panic = "abort"`, so the
//! call traps and mote reports the trap with the guest's stderr, where the message went.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The share a sub-stage that waits on object storage declares: reading and writing barely use
/// the CPU, so ten of them can share a core.
pub const IO_SHARE: u16 = 100;
/// The share a sub-stage that computes declares: all of a core.
pub const COMPUTE_SHARE: u16 = 1000;

/// When a sub-stage started, when the node admitted it to its share of a core, and when it ended,
/// in nanoseconds since the Unix epoch; serialised as `[start, admitted, end]`. `admitted - start`
/// is the wait for the share (none under task-based scheduling, where the call holds its core
/// throughout) and `end - admitted` the work itself, so the driver can tell queueing from
/// slower work. Wall-clock time, so the driver can line up sub-stages of different calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Span(pub u64, pub u64, pub u64);

/// Parses the request body as `T`, or panics naming the field that is wrong and showing
/// `example`, a valid request.
pub fn request<T: DeserializeOwned>(body: &[u8], example: &str) -> T {
    let mut json = serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(&mut json).unwrap_or_else(|e| {
        let path = e.path().to_string();
        let at = if path == "." {
            String::new()
        } else {
            format!(" field `{path}`:")
        };
        panic!(
            "bad request body:{at} {}; a valid request is {example}",
            e.inner()
        )
    })
}

/// Runs `work` as a sub-stage needing `cpu_permille` of a core and times it. The span starts
/// before the share is declared, so it includes any wait for the share, as a caller sees it;
/// `phase` returns once the share is granted, which is the admission time.
pub fn sub_stage<T>(cpu_permille: u16, work: impl FnOnce() -> T) -> (Span, T) {
    let start = now();
    mote_sdk::phase(cpu_permille);
    let admitted = now();
    let result = work();
    (Span(start, admitted, now()), result)
}

/// Reads the object at `bucket`/`key`, or panics naming it and the storage error.
pub fn get(bucket: &str, key: &str) -> Vec<u8> {
    mote_sdk::object::get(bucket, key)
        .unwrap_or_else(|e| panic!("reading object {key:?} from bucket {bucket:?}: {e}"))
}

/// Writes `data` as the object at `bucket`/`key`, or panics naming it and the storage error.
pub fn put(bucket: &str, key: &str, data: &[u8]) {
    mote_sdk::object::put(bucket, key, data).unwrap_or_else(|e| {
        panic!(
            "writing object {key:?} ({} bytes) to bucket {bucket:?}: {e}",
            data.len()
        )
    })
}

/// The response body: `response` as JSON.
pub fn respond(response: &impl Serialize) -> Vec<u8> {
    serde_json::to_vec(response).expect("responses are plain structs of numbers and strings")
}

/// Nanoseconds since the Unix epoch (WASI's realtime clock); 0 on a clock set before 1970, which
/// is broken anyway.
fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Request {
        bucket: String,
        records: u64,
    }

    const EXAMPLE: &str = r#"{"bucket":"b","records":1}"#;

    fn panic_message(body: &str) -> String {
        let caught = std::panic::catch_unwind(|| request::<Request>(body.as_bytes(), EXAMPLE));
        let payload = caught.expect_err("a bad request was accepted");
        payload
            .downcast_ref::<String>()
            .cloned()
            .expect("a formatted message")
    }

    #[test]
    fn good_requests_parse() {
        let r: Request = request(EXAMPLE.as_bytes(), EXAMPLE);
        assert_eq!((r.bucket.as_str(), r.records), ("b", 1));
    }

    #[test]
    fn bad_requests_name_the_field() {
        let message = panic_message(r#"{"bucket":"b","records":"ten"}"#);
        assert!(
            message.starts_with("bad request body: field `records`: invalid type: string"),
            "{message}"
        );
        assert!(message.ends_with(&format!("a valid request is {EXAMPLE}")));
        let message = panic_message(r#"{"bucket":"b"}"#);
        assert!(message.contains("missing field `records`"), "{message}");
        let message = panic_message(r#"{"bucket":"b","records":1,"recrods":2}"#);
        assert!(message.contains("unknown field `recrods`"), "{message}");
        let message = panic_message("records=1");
        assert!(
            message.starts_with("bad request body: expected value"),
            "{message}"
        );
    }

    #[test]
    fn sub_stages_are_timed_around_their_work() {
        let (span, out) = sub_stage(IO_SHARE, || {
            std::thread::sleep(std::time::Duration::from_millis(2));
            7
        });
        assert_eq!(out, 7);
        // Admitted once `phase` returned, and the work after it.
        assert!(span.1 >= span.0, "{span:?}");
        assert!(span.2 >= span.1 + 2_000_000, "{span:?}");
        // After 2001 and before 2200.
        assert!((1_000_000_000_000_000_000..7_258_118_400_000_000_000).contains(&span.0));
        assert_eq!(
            String::from_utf8(respond(&Span(1, 2, 3))).unwrap(),
            "[1,2,3]"
        );
    }
}
