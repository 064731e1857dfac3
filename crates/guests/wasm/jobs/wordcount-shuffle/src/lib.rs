//! `wordcount-shuffle`: `wordcount`'s job written by hand on the SDK's stages, with no typed
//! operator: the reference `mote bench jobs --wordcount` holds `reduce_by_key` to. Same
//! arguments (`input=BUCKET/PREFIX`, `output=BUCKET/PREFIX`), same words (what
//! `split_whitespace` splits), same output (lines `word<TAB>count`, in no particular order).
//!
//! Three stages, as `wordcount`'s: the load counts its share of the text by word, line by line
//! as `wordcount` reads it (the map-side combine); a scatter sends each word's count to the partition its hash picks, one piece per
//! destination, whose gather adds the counts up; the store writes each partition's words.

use mote_sdk::job::codec::{self, DecodeError};
use mote_sdk::job::flow::{KeyMap, partition_of};
use mote_sdk::job::{Dataset, Job, Task};
use std::fmt::Write;
use std::str::Utf8Error;

/// Counts by word, in the map the SDK's keyed operators use (FNV-1a), and sent to partitions by
/// their hash function, so that the benchmark compares the operators and not two hashes.
type Counts = KeyMap<String, u64>;

/// Each partition's counts of its share of the text.
const LOCAL: Dataset<Counts> = Dataset::partitioned("local");
/// The counts of the words whose hash picks this partition, over the whole text.
const TOTAL: Dataset<Counts> = Dataset::partitioned("total");

fn driver(job: &mut Job) {
    job.load(count_words, &LOCAL, "input");
    job.scatter(send_counts, &[&LOCAL], add_counts, &[&TOTAL]);
    job.store(write_counts, &TOTAL, "output");
}

fn count_words(task: &mut Task) -> Result<(), Utf8Error> {
    let text = task.inputs().next().unwrap_or_default();
    let mut counts = task.get_mut(&LOCAL);
    for word in std::str::from_utf8(&text)?
        .lines()
        .flat_map(str::split_whitespace)
    {
        // Look the word up before allocating it: most words of a text were seen before.
        match counts.get_mut(word) {
            Some(count) => *count += 1,
            None => {
                counts.insert(word.to_owned(), 1);
            }
        }
    }
    Ok(())
}

fn send_counts(task: &mut Task) {
    let counts = std::mem::take(&mut *task.get_mut(&LOCAL));
    // A piece per destination, emitted once: a host call per destination, not per word.
    let partitions = task.partitions();
    let mut pieces = vec![Vec::new(); partitions];
    for pair in &counts {
        codec::encode_into(&pair, &mut pieces[partition_of(pair.0, partitions)]);
    }
    for (dest, piece) in pieces.iter().enumerate() {
        if !piece.is_empty() {
            task.emit(dest, piece);
        }
    }
}

fn add_counts(task: &mut Task) -> Result<(), DecodeError> {
    let mut total = task.get_mut(&TOTAL);
    for piece in task.inputs() {
        codec::decode_each(&piece, |(word, count): (String, u64)| {
            *total.entry(word).or_default() += count;
        })?;
    }
    Ok(())
}

fn write_counts(task: &mut Task) {
    let total = std::mem::take(&mut *task.get_mut(&TOTAL));
    let mut lines = String::new();
    for (word, count) in &total {
        writeln!(lines, "{word}\t{count}").expect("a String takes any text");
    }
    if !lines.is_empty() {
        task.emit(0, lines.as_bytes());
    }
}

mote_sdk::job!(driver);
