//! `ls`: lists a bucket of the node's object storage (`mote up --objects-dir`, or an S3 server).
//! The request body is `bucket` or `bucket/prefix`; the answer is one line per object whose key
//! starts with the prefix, `key size`, in key order, however many there are: the SDK's
//! `object::list_all` pages through them a thousand at a time. Listing waits on storage, so
//! the function declares a tenth of a core while it does.
//!
//! A body that is not UTF-8, a missing bucket or storage that fails stop the call with a
//! message naming it (the call answers 500 with that message).

use mote_sdk::object;
use std::fmt::Write;

fn ls(body: &[u8]) -> Vec<u8> {
    let Ok(path) = std::str::from_utf8(body).map(str::trim) else {
        panic!("the request body must be `bucket` or `bucket/prefix` in UTF-8");
    };
    let (bucket, prefix) = split(path);
    mote_sdk::phase(100);
    let entries = object::list_all(bucket, prefix)
        .unwrap_or_else(|e| panic!("listing bucket {bucket:?} from {prefix:?}: {e}"));
    let mut out = String::new();
    for entry in entries {
        writeln!(out, "{} {}", entry.key, entry.size).expect("a String takes any text");
    }
    out.into_bytes()
}

/// `bucket/some/prefix` → (`bucket`, `some/prefix`); a bare bucket lists all of it.
fn split(path: &str) -> (&str, &str) {
    path.split_once('/').unwrap_or((path, ""))
}

mote_sdk::handler!(ls);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_segment_is_the_bucket_and_the_rest_the_prefix() {
        assert_eq!(split("data"), ("data", ""));
        assert_eq!(split("data/in/part-"), ("data", "in/part-"));
        assert_eq!(split("data/"), ("data", ""));
    }
}
