//! `sort-gen`: writes one input object of the sort: gensort records `first..first + records`
//! (`sort_records::gensort`), generated on a whole core, then written with a tenth of one.
//!
//! Request: `{"bucket":"b","key":"input/00000","first":0,"records":1000}`. Response:
//! `{"records":1000,"checksum":"<32 hex digits>","timings":{"generate":[s,a,e],"write":[s,a,e]}}`,
//! the checksum being valsort's over the records written (the sum over all inputs must equal the
//! sum over all sorted outputs), the timings as in `sort_stage::Span` (start, admission, end).

use serde::{Deserialize, Serialize};
use sort_records::{Checksum, RECORD_LEN, gensort, records};
use sort_stage::{COMPUTE_SHARE, IO_SHARE, Span};

const EXAMPLE: &str = r#"{"bucket":"b","key":"input/00000","first":0,"records":1000}"#;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Request {
    bucket: String,
    key: String,
    /// The number of the first record; slices of one data set start where the last one ended.
    first: u64,
    records: u64,
}

#[derive(Serialize)]
struct Response {
    records: u64,
    checksum: String,
    timings: Timings,
}

#[derive(Serialize)]
struct Timings {
    generate: Span,
    write: Span,
}

fn generate_input(body: &[u8]) -> Vec<u8> {
    let request: Request = sort_stage::request(body, EXAMPLE);
    let count = record_count(request.records);
    let (generate, (data, checksum)) = sort_stage::sub_stage(COMPUTE_SHARE, || {
        let data = gensort::generate(request.first, count);
        let checksum = Checksum::of(records(&data).expect("whole records were generated"));
        (data, checksum)
    });
    let (write, ()) = sort_stage::sub_stage(IO_SHARE, || {
        sort_stage::put(&request.bucket, &request.key, &data)
    });
    sort_stage::respond(&Response {
        records: request.records,
        checksum: checksum.to_string(),
        timings: Timings { generate, write },
    })
}

/// `records` as a count this guest can hold, or a panic saying it cannot: a 32-bit guest
/// addresses at most 4 GiB, and every record is written from memory at once.
fn record_count(records: u64) -> usize {
    usize::try_from(records)
        .ok()
        .filter(|n| n.checked_mul(RECORD_LEN).is_some())
        .unwrap_or_else(|| {
            panic!(
                "bad request body: field `records`: {records} records of {RECORD_LEN} bytes do \
                 not fit in a guest's memory; write them as several objects"
            )
        })
}

mote_sdk::handler!(generate_input);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_that_fit_in_memory_are_taken() {
        assert_eq!(record_count(1000), 1000);
        assert_eq!(record_count(0), 0);
    }

    #[test]
    #[should_panic(expected = "field `records`")]
    fn counts_past_the_address_space_are_refused() {
        record_count(u64::MAX);
    }

    #[test]
    #[should_panic(expected = "bad request body: field `first`")]
    fn a_bad_field_is_named() {
        generate_input(br#"{"bucket":"b","key":"k","first":-1,"records":1}"#);
    }
}
