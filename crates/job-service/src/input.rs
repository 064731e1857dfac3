//! A job's input: what a load stage reads from the node's object storage (a directory, or an
//! S3 server in production).
//!
//! `BUCKET/PREFIX` names an object, or a directory: every object under `PREFIX/` whose name
//! below it has no part starting with `_` or `.` (Hadoop's convention: a committed output's
//! `_SUCCESS`, a running job's `_temporary/`), in key order, read as one stream of lines (each
//! object ends its last line). `words` never reads `words-old/`. Partition `i` of `n` takes the
//! lines that start in the `i`-th `n`-th of the stream's bytes, so the split needs only the
//! listing's sizes, every worker reads only the objects its partitions overlap, and every line
//! goes to exactly one partition. Where output goes is `crate::output`'s.

use bytes::Bytes;
use mote_objects::{ObjectError, Objects};

/// The largest input object read.
const MAX_OBJECT_BYTES: u64 = 8 << 30;

/// Splits `BUCKET/PREFIX`; the prefix may be empty.
pub fn bucket_and_prefix(value: &str) -> Option<(&str, &str)> {
    let (bucket, prefix) = value.split_once('/').unwrap_or((value, ""));
    (!bucket.is_empty()).then_some((bucket, prefix))
}

/// `prefix` as a directory: `out/counts` and `out/counts/` are `out/counts/`; the empty prefix
/// is the whole bucket.
pub fn directory(prefix: &str) -> String {
    match prefix.trim_end_matches('/') {
        "" => String::new(),
        p => format!("{p}/"),
    }
}

/// Whether `name`, a key below an input directory, is read: no part of it is hidden.
fn visible(name: &str) -> bool {
    name.split('/')
        .all(|part| !part.starts_with('_') && !part.starts_with('.'))
}

/// The objects input `prefix` names, in key order, with their sizes: the object of that name,
/// and the visible objects under it as a directory.
pub async fn list_input(
    objects: &Objects,
    bucket: &str,
    prefix: &str,
) -> Result<Vec<(String, u64)>, ObjectError> {
    let exact = prefix.trim_end_matches('/');
    let dir = directory(prefix);
    let listed = list_all(objects, bucket, exact).await?;
    Ok(listed
        .into_iter()
        .filter(|(key, _)| {
            (!exact.is_empty() && key == exact)
                || key.strip_prefix(dir.as_str()).is_some_and(visible)
        })
        .collect())
}

/// Every object under `prefix`, in key order, with its size.
pub async fn list_all(
    objects: &Objects,
    bucket: &str,
    prefix: &str,
) -> Result<Vec<(String, u64)>, ObjectError> {
    let mut all = Vec::new();
    let mut after = String::new();
    loop {
        let page = objects.list_after(bucket, prefix, &after, 1000).await?;
        all.extend(page.entries.iter().map(|e| (e.key.clone(), e.size)));
        match (page.truncated, page.entries.last()) {
            (true, Some(last)) => after = last.key.clone(),
            _ => return Ok(all),
        }
    }
}

/// The bytes of the lines that start in `[lo, hi)` of `object`, which starts at stream offset
/// `at`.
fn lines_starting_in(object: &[u8], at: u64, lo: u64, hi: u64) -> &[u8] {
    let len = object.len() as u64;
    let a = lo.saturating_sub(at).min(len) as usize;
    let b = hi.saturating_sub(at).min(len) as usize;
    let line_start = |p: usize| -> usize {
        if p == 0 {
            return 0;
        }
        match object[p - 1..].iter().position(|&c| c == b'\n') {
            Some(n) => p + n,
            None => object.len(),
        }
    };
    let (start, end) = (line_start(a), line_start(b));
    &object[start..end.max(start)]
}

/// The byte range of the stream partition `index` of `partitions` takes.
fn share(total: u64, index: u32, partitions: u32) -> (u64, u64) {
    let n = u128::from(partitions.max(1));
    let bound = |i: u32| (u128::from(total) * u128::from(i) / n) as u64;
    (bound(index), bound(index + 1))
}

/// A load's input could not be read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The input is not named `BUCKET/PREFIX`.
    #[error("`{value}` is not BUCKET/PREFIX")]
    NotBucketPrefix {
        /// What was given.
        value: String,
    },
    /// The objects under the prefix could not be listed.
    #[error("cannot list {value}: {source}")]
    List {
        /// `BUCKET/PREFIX`.
        value: String,
        /// Why.
        source: Box<ObjectError>,
    },
    /// An object could not be read.
    #[error("cannot read {bucket}/{key}: {source}")]
    Read {
        /// Its bucket.
        bucket: String,
        /// Its key.
        key: String,
        /// Why.
        source: Box<ObjectError>,
    },
}

/// Reads the inputs of the load tasks `tasks`, each a partition index of `partitions`.
pub async fn read_shares(
    objects: &Objects,
    value: &str,
    tasks: &[u32],
    partitions: u32,
) -> Result<Vec<Bytes>, InputError> {
    let Some((bucket, prefix)) = bucket_and_prefix(value) else {
        return Err(InputError::NotBucketPrefix {
            value: value.to_owned(),
        });
    };
    let listing = list_input(objects, bucket, prefix)
        .await
        .map_err(|source| InputError::List {
            value: value.to_owned(),
            source: Box::new(source),
        })?;
    let total: u64 = listing.iter().map(|(_, s)| s).sum();
    let mut outputs = vec![Vec::new(); tasks.len()];
    let mut at = 0u64;
    for (key, size) in &listing {
        let (from, to) = (at, at + size);
        at = to;
        let wanted: Vec<usize> = (0..tasks.len())
            .filter(|&t| {
                let (lo, hi) = share(total, tasks[t], partitions);
                lo < to && from < hi
            })
            .collect();
        if wanted.is_empty() {
            continue;
        }
        let object = objects
            .get(bucket, key, MAX_OBJECT_BYTES)
            .await
            .map_err(|source| InputError::Read {
                bucket: bucket.to_owned(),
                key: key.clone(),
                source: Box::new(source),
            })?;
        for t in wanted {
            let (lo, hi) = share(total, tasks[t], partitions);
            let lines = lines_starting_in(&object, from, lo, hi);
            let out = &mut outputs[t];
            out.extend_from_slice(lines);
            if !lines.is_empty() && !lines.ends_with(b"\n") {
                out.push(b'\n');
            }
        }
    }
    Ok(outputs.into_iter().map(Bytes::from).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_goes_to_exactly_one_partition() {
        let objects: [&[u8]; 3] = [b"a1\nb22\nc333\n", b"d4\ne", b"f666666\ng\n"];
        let total: u64 = objects.iter().map(|o| o.len() as u64).sum();
        for partitions in 1..9 {
            let mut all = Vec::new();
            for i in 0..partitions {
                let (lo, hi) = share(total, i, partitions);
                let mut at = 0;
                for o in objects {
                    let lines = lines_starting_in(o, at, lo, hi);
                    all.extend(
                        String::from_utf8_lossy(lines)
                            .lines()
                            .map(str::to_owned)
                            .collect::<Vec<_>>(),
                    );
                    at += o.len() as u64;
                }
            }
            assert_eq!(
                all,
                ["a1", "b22", "c333", "d4", "e", "f666666", "g"],
                "{partitions}"
            );
        }
    }

    #[test]
    fn names_split_and_join() {
        assert_eq!(bucket_and_prefix("data/points/"), Some(("data", "points/")));
        assert_eq!(bucket_and_prefix("data"), Some(("data", "")));
        assert_eq!(bucket_and_prefix("/x"), None);
        assert_eq!(directory("out/lr"), "out/lr/");
        assert_eq!(directory("out/lr//"), "out/lr/");
        assert_eq!(directory(""), "");
    }

    #[test]
    fn hidden_names_are_not_input() {
        assert!(visible("part-00000"));
        assert!(visible("2026/11/a.txt"));
        for hidden in ["_SUCCESS", "_temporary/7/part-00000", "a/.b", ".c"] {
            assert!(!visible(hidden), "{hidden}");
        }
    }
}
