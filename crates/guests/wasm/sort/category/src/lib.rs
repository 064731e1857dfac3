//! `sort-category`: stage 2 of the sort. Reads every part of one category that stage 1 wrote,
//! `{input}{part:05}` for each of `parts` inputs (a tenth of a core), sorts the category's records
//! by key (a whole core, `sort_records::sort`), and writes them as one object (a tenth of a core).
//!
//! Request: `{"bucket":"b","input":"parts/00003/","parts":8,"output":"sorted/00003"}`. Response:
//! `{"records":n,"timings":{"read":[s,a,e],"sort":[s,a,e],"write":[s,a,e]}}`, each timing the
//! sub-stage's start, admission to its share and end (`sort_stage::Span`), in nanoseconds since
//! the Unix epoch.

use serde::{Deserialize, Serialize};
use sort_records::RECORD_LEN;
use sort_stage::{COMPUTE_SHARE, IO_SHARE, Span};

const EXAMPLE: &str = r#"{"bucket":"b","input":"parts/00003/","parts":8,"output":"sorted/00003"}"#;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Request {
    bucket: String,
    /// The prefix of the category's parts' keys.
    input: String,
    /// How many inputs stage 1 partitioned, each leaving one part here.
    parts: u32,
    output: String,
}

#[derive(Serialize)]
struct Response {
    records: u64,
    timings: Timings,
}

#[derive(Serialize)]
struct Timings {
    read: Span,
    sort: Span,
    write: Span,
}

fn category(body: &[u8]) -> Vec<u8> {
    let request: Request = sort_stage::request(body, EXAMPLE);
    if request.parts == 0 {
        panic!("bad request body: field `parts` is 0; a category has a part from every input");
    }
    let (read, parts) = sort_stage::sub_stage(IO_SHARE, || {
        (0..request.parts)
            .map(|part| {
                let key = part_key(&request.input, part);
                let data = sort_stage::get(&request.bucket, &key);
                if let Err(e) = sort_records::records(&data) {
                    panic!("object {key:?} in bucket {:?}: {e}", request.bucket);
                }
                data
            })
            .collect::<Vec<_>>()
    });
    let (sort, data) = sort_stage::sub_stage(COMPUTE_SHARE, || {
        let mut data = concat(parts);
        sort_records::sort(&mut data).expect("every part held whole records");
        data
    });
    let (write, ()) = sort_stage::sub_stage(IO_SHARE, || {
        sort_stage::put(&request.bucket, &request.output, &data)
    });
    sort_stage::respond(&Response {
        records: (data.len() / RECORD_LEN) as u64,
        timings: Timings { read, sort, write },
    })
}

/// Where stage 1 wrote input `part`'s records of this category.
fn part_key(input: &str, part: u32) -> String {
    format!("{input}{part:05}")
}

/// The parts one after another, in one allocation of their total size; each part is freed once
/// copied, so this never holds more than twice the category.
fn concat(parts: Vec<Vec<u8>>) -> Vec<u8> {
    let mut all = Vec::with_capacity(parts.iter().map(Vec::len).sum());
    for part in parts {
        all.extend_from_slice(&part);
    }
    all
}

mote_sdk::handler!(category);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_read_where_stage_1_wrote_them() {
        assert_eq!(part_key("parts/00003/", 7), "parts/00003/00007");
    }

    #[test]
    fn parts_are_joined_in_order() {
        let all = concat(vec![vec![1, 2], vec![], vec![3]]);
        assert_eq!((all.as_slice(), all.capacity()), (&[1, 2, 3][..], 3));
    }

    #[test]
    #[should_panic(expected = "field `parts` is 0")]
    fn a_category_without_parts_is_refused() {
        category(br#"{"bucket":"b","input":"p/","parts":0,"output":"s"}"#);
    }
}
