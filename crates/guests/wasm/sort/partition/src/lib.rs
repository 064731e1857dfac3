//! `sort-partition`: stage 1 of the sort. Reads one input object (a tenth of a core), splits its
//! records into categories by their first key byte (a whole core, `sort_records::partition`), and
//! writes each category's records, in input order, to `{output}{category:05}/{part:05}` (a tenth
//! of a core), every category even when empty, so stage 2 finds all its parts.
//!
//! Request: `{"bucket":"b","input":"input/00000","output":"parts/","part":0,"categories":16}`.
//! Response: `{"records":n,"timings":{"read":[s,a,e],"partition":[s,a,e],"write":[s,a,e]}}`, the
//! timings as in `sort_stage::Span`: start, admission to the share, end, in ns since the epoch.

use serde::{Deserialize, Serialize};
use sort_records::{MAX_CATEGORIES, RECORD_LEN};
use sort_stage::{COMPUTE_SHARE, IO_SHARE, Span};

const EXAMPLE: &str =
    r#"{"bucket":"b","input":"input/00000","output":"parts/","part":0,"categories":16}"#;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Request {
    bucket: String,
    input: String,
    /// The prefix of the parts' keys.
    output: String,
    /// Which input this is, naming its parts in every category.
    part: u32,
    categories: usize,
}

#[derive(Serialize)]
struct Response {
    records: u64,
    timings: Timings,
}

#[derive(Serialize)]
struct Timings {
    read: Span,
    partition: Span,
    write: Span,
}

fn partition(body: &[u8]) -> Vec<u8> {
    let request: Request = sort_stage::request(body, EXAMPLE);
    // Checked before reading, so a bad request costs no I/O.
    if !(1..=MAX_CATEGORIES).contains(&request.categories) {
        panic!(
            "bad request body: field `categories` is {}; it must be 1 to {MAX_CATEGORIES}",
            request.categories
        );
    }
    let (read, input) = sort_stage::sub_stage(IO_SHARE, || {
        sort_stage::get(&request.bucket, &request.input)
    });
    let records = (input.len() / RECORD_LEN) as u64;
    let (partition, parts) = sort_stage::sub_stage(COMPUTE_SHARE, || {
        sort_records::partition(&input, request.categories).unwrap_or_else(|e| {
            panic!(
                "object {:?} in bucket {:?}: {e}",
                request.input, request.bucket
            )
        })
    });
    // The input is all in the parts now; only they need the memory while they are written.
    drop(input);
    let (write, ()) = sort_stage::sub_stage(IO_SHARE, || {
        for (category, data) in parts.iter().enumerate() {
            let key = part_key(&request.output, category, request.part);
            sort_stage::put(&request.bucket, &key, data);
        }
    });
    sort_stage::respond(&Response {
        records,
        timings: Timings {
            read,
            partition,
            write,
        },
    })
}

/// Where input `part`'s records of `category` go; stage 2 reads `{output}{category:05}/` for
/// every part.
fn part_key(output: &str, category: usize, part: u32) -> String {
    format!("{output}{category:05}/{part:05}")
}

mote_sdk::handler!(partition);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_named_by_category_then_input() {
        assert_eq!(part_key("parts/", 3, 12), "parts/00003/00012");
        assert_eq!(part_key("", 255, 0), "00255/00000");
    }

    #[test]
    #[should_panic(expected = "field `categories` is 0")]
    fn zero_categories_are_refused_before_reading() {
        partition(br#"{"bucket":"b","input":"i","output":"o/","part":0,"categories":0}"#);
    }
}
