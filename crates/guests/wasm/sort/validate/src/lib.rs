//! `sort-validate`: checks one sorted object as valsort does (`sort_records::validate`): reads it
//! (a tenth of a core), then counts its records, sums their checksum and counts the places where
//! keys go down (a whole core). The driver checks the rest: that categories follow each other in
//! key order (each one's last key at most the next one's first) and that the counts and checksums
//! add up to the input's.
//!
//! Request: `{"bucket":"b","key":"sorted/00003"}`. Response: `{"records":n,"checksum":"<32 hex
//! digits>","first_key":"<20 hex digits>","last_key":"…","unordered":k,"first_unordered":i,
//! "timings":{"read":[s,a,e],"validate":[s,a,e]}}`; the keys are `null` for an empty object,
//! `first_unordered` (the index of the first record whose key is smaller than the one before) is
//! `null` when the object is sorted, and the timings are as in `sort_stage::Span` (start,
//! admission to the share, end).

use serde::{Deserialize, Serialize};
use sort_records::Key;
use sort_stage::{COMPUTE_SHARE, IO_SHARE, Span};

const EXAMPLE: &str = r#"{"bucket":"b","key":"sorted/00003"}"#;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Request {
    bucket: String,
    key: String,
}

#[derive(Serialize)]
struct Response {
    records: u64,
    checksum: String,
    first_key: Option<String>,
    last_key: Option<String>,
    unordered: u64,
    first_unordered: Option<u64>,
    timings: Timings,
}

#[derive(Serialize)]
struct Timings {
    read: Span,
    validate: Span,
}

fn validate(body: &[u8]) -> Vec<u8> {
    let request: Request = sort_stage::request(body, EXAMPLE);
    let (read, data) =
        sort_stage::sub_stage(IO_SHARE, || sort_stage::get(&request.bucket, &request.key));
    let (validate, summary) = sort_stage::sub_stage(COMPUTE_SHARE, || {
        sort_records::validate(&data).unwrap_or_else(|e| {
            panic!(
                "object {:?} in bucket {:?}: {e}",
                request.key, request.bucket
            )
        })
    });
    sort_stage::respond(&Response {
        records: summary.records,
        checksum: summary.checksum.to_string(),
        first_key: summary.first_key.as_ref().map(hex),
        last_key: summary.last_key.as_ref().map(hex),
        unordered: summary.unordered,
        first_unordered: summary.first_unordered,
        timings: Timings { read, validate },
    })
}

/// A key as lowercase hexadecimal, which sorts as the key does.
fn hex(key: &Key) -> String {
    key.iter().map(|b| format!("{b:02x}")).collect()
}

mote_sdk::handler!(validate);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_shown_in_hex_that_sorts_like_them() {
        assert_eq!(hex(b"JimGrayRIP"), "4a696d47726179524950");
        assert!(hex(&[0x0f; 10]) < hex(&[0xf0; 10]));
    }
}
