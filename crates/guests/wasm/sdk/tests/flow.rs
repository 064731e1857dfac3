//! The typed operators (`mote_sdk::job::flow`) run whole jobs natively (`job::local`), for any
//! data, partition count and split of the input into objects, against a sequential reference.

use mote_sdk::job::local::{LocalError, LocalJob};
use mote_sdk::job::{Dataset, Job, Text};
use proptest::prelude::*;
use std::collections::BTreeMap;

/// Runs `driver` on `objects` (input `data/in`, or `data/a` and `data/b`) with `partitions`;
/// the lines of output `out/x`.
fn run(driver: fn(&mut Job), partitions: usize, objects: &[(String, String)]) -> Vec<String> {
    local(driver, partitions, objects)
        .run()
        .unwrap_or_else(|e| panic!("{e}"))
        .lines("out/x")
}

/// [`run`]'s job, not yet run.
fn local(driver: fn(&mut Job), partitions: usize, objects: &[(String, String)]) -> LocalJob {
    let mut job = LocalJob::new(driver)
        .partitions(partitions)
        .arg("input", "data/in")
        .arg("a", "data/a")
        .arg("b", "data/b")
        .arg("output", "out/x");
    for (key, text) in objects {
        job = job.object(key, text.as_bytes().to_vec());
    }
    job
}

/// `lines` as the objects `prefix/0`, `prefix/1`, ... cut at `cuts` (line positions).
fn objects(prefix: &str, lines: &[String], cuts: &[usize]) -> Vec<(String, String)> {
    let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (lines.len() + 1)).collect();
    bounds.extend([0, lines.len()]);
    bounds.sort();
    bounds
        .windows(2)
        .enumerate()
        .map(|(i, w)| {
            let text: String = lines[w[0]..w[1]].iter().map(|l| format!("{l}\n")).collect();
            (format!("{prefix}/{i:03}"), text)
        })
        .collect()
}

fn sorted(mut lines: Vec<String>) -> Vec<String> {
    lines.sort();
    lines
}

fn word_count(job: &mut Job) {
    job.lines("input")
        .flat_map(|line| line.words())
        .map(|word| (word, 1u64))
        .reduce_by_key(|a, b| a + b)
        .save_lines("output", |(word, n)| format!("{word} {n}"));
}

/// `k v` lines grouped by `k`, values in order, keys with an odd sum left out.
fn grouped(job: &mut Job) {
    job.lines("input")
        .try_map(pair)
        .group_by_key()
        .filter(|(_, vs): &(u32, Vec<u32>)| vs.iter().sum::<u32>() % 2 == 0)
        .save_lines("output", |(k, mut vs): (u32, Vec<u32>)| {
            vs.sort();
            format!("{k} {vs:?}")
        });
}

/// `k v` lines' pairs as JSON, unchanged.
fn as_json(job: &mut Job) {
    job.lines("input").try_map(pair).save_json("output");
}

/// Keys of `k v` lines in ranges of four: the partitioner the `_partitioned` operators are given.
fn by_range(k: &u32, partitions: usize) -> usize {
    (*k as usize / 4) % partitions
}

/// `k v` lines summed by key, each key in [`by_range`]'s partition.
fn summed_by_range(job: &mut Job) {
    job.lines("input")
        .try_map(pair)
        .reduce_by_key_partitioned(by_range, |a, b| a + b)
        .save_lines("output", |(k, v)| format!("{k} {v}"));
}

/// [`joined`], each key in [`by_range`]'s partition.
fn joined_by_range(job: &mut Job) {
    let right = job.lines("b").try_map(pair);
    job.lines("a")
        .try_map(pair)
        .join_partitioned(right, by_range)
        .save_lines("output", |(k, (v, w))| format!("{k} {v} {w}"));
}

/// A partitioner that names a partition the job does not have.
fn past_the_end(job: &mut Job) {
    job.lines("input")
        .try_map(pair)
        .group_by_key_partitioned(|_: &u32, partitions| partitions)
        .save_lines("output", |(k, vs)| format!("{k} {vs:?}"));
}

/// Every line of every part of output `out/x` has as its first field a key that `by_range`
/// puts in that part's partition.
fn in_their_ranges(
    stored: &BTreeMap<String, Vec<u8>>,
    partitions: usize,
) -> Result<(), TestCaseError> {
    for (key, bytes) in stored.range("out/x/part-".to_owned()..="out/x/part-~".to_owned()) {
        let part: usize = key["out/x/part-".len()..].parse().unwrap();
        for line in std::str::from_utf8(bytes).unwrap().lines() {
            let k: u32 = line.split(' ').next().unwrap().parse().unwrap();
            prop_assert_eq!(by_range(&k, partitions), part, "{} in {}", line, key);
        }
    }
    Ok(())
}

fn joined(job: &mut Job) {
    let right = job.lines("b").try_map(pair);
    job.lines("a")
        .try_map(pair)
        .join(right)
        .save_lines("output", |(k, (v, w))| format!("{k} {v} {w}"));
}

/// Each number with how many of all the numbers are smaller: a broadcast of the whole input.
fn ranked(job: &mut Job) {
    let numbers = job.lines("input").try_map(|line| number(&line));
    let all = job.lines("input").try_map(|line| number(&line)).broadcast();
    numbers
        .map_with(&all, |x, all: &Vec<u32>| {
            (x, all.iter().filter(|&&y| y < x).count())
        })
        .save_lines("output", |(x, below)| format!("{x} {below}"));
}

const CACHED_SUMS: Dataset<Vec<(u32, u32)>> = Dataset::single("cached_sums");
const EARLIER_SUMS: Dataset<Vec<(u32, u32)>> = Dataset::single("earlier_sums");

/// Sums by key, three times, of a cached input and of a flow made before the loop and consumed
/// in it, each collected into one partition; then the two joined. Each run must see all of both.
fn in_a_loop(job: &mut Job) {
    let cached = job.lines("input").try_map(pair).cache();
    let earlier = job.lines("input").try_map(pair);
    job.repeat(3, |_| {
        cached
            .flow()
            .reduce_by_key(|a, b| a + b)
            .collect_into(&CACHED_SUMS);
        earlier
            .map(|(k, v)| (k + 1000, v))
            .reduce_by_key(|a, b| a + b)
            .collect_into(&EARLIER_SUMS);
    });
    let earlier = job.read(&EARLIER_SUMS).map(|(k, v)| (k - 1000, v));
    job.read(&CACHED_SUMS)
        .join(earlier)
        .save_lines("output", |(k, (a, b))| format!("{k} {a} {b}"));
}

fn pair(line: Text) -> Result<(u32, u32), String> {
    let (k, v) = line
        .split_once(' ')
        .ok_or_else(|| format!("{line:?} is not `k v`"))?;
    Ok((number(k)?, number(v)?))
}

fn number(field: &str) -> Result<u32, String> {
    field
        .parse()
        .map_err(|_| format!("{field:?} is not a number"))
}

fn pair_lines(pairs: &[(u32, u32)]) -> Vec<String> {
    pairs.iter().map(|(k, v)| format!("{k} {v}")).collect()
}

fn words() -> impl Strategy<Value = Vec<String>> {
    let word = prop::sample::select(vec!["a", "bb", "ccc", "λ", "the", "of", "x1"]);
    let line = prop::collection::vec((word, prop::sample::select(vec![" ", "  ", "\t"])), 0..8)
        .prop_map(|ws| {
            ws.into_iter()
                .map(|(w, s)| format!("{w}{s}"))
                .collect::<String>()
        });
    prop::collection::vec(line, 0..60)
}

fn pairs(keys: u32) -> impl Strategy<Value = Vec<(u32, u32)>> {
    prop::collection::vec((0..keys, 0..100u32), 0..80)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn reduce_by_key_counts_as_a_sequential_count(
        lines in words(), partitions in 1..9usize, cuts in prop::collection::vec(0..100usize, 0..4)
    ) {
        let mut want = BTreeMap::<String, u64>::new();
        for w in lines.iter().flat_map(|l| l.split_whitespace()) {
            *want.entry(w.to_owned()).or_default() += 1;
        }
        let want: Vec<String> = want.into_iter().map(|(w, n)| format!("{w} {n}")).collect();
        let got = run(word_count, partitions, &objects("data/in", &lines, &cuts));
        prop_assert_eq!(sorted(got), want);
    }

    #[test]
    fn group_by_key_and_filter_match_a_sequential_grouping(
        input in pairs(12), partitions in 1..9usize, cuts in prop::collection::vec(0..100usize, 0..4)
    ) {
        let mut groups = BTreeMap::<u32, Vec<u32>>::new();
        for (k, v) in &input {
            groups.entry(*k).or_default().push(*v);
        }
        let want: Vec<String> = groups
            .into_iter()
            .filter(|(_, vs)| vs.iter().sum::<u32>() % 2 == 0)
            .map(|(k, mut vs)| {
                vs.sort();
                format!("{k} {vs:?}")
            })
            .collect();
        let got = run(grouped, partitions, &objects("data/in", &pair_lines(&input), &cuts));
        prop_assert_eq!(sorted(got), sorted(want));
    }

    #[test]
    fn save_json_writes_each_item_as_a_line_of_json(
        input in pairs(1000), partitions in 1..9usize
    ) {
        let want: Vec<String> = input.iter().map(|(k, v)| format!("[{k},{v}]")).collect();
        let got = run(as_json, partitions, &objects("data/in", &pair_lines(&input), &[]));
        prop_assert_eq!(got, want);
    }

    #[test]
    fn join_matches_a_nested_loop(
        a in pairs(10), b in pairs(10), partitions in 1..9usize,
        cuts in prop::collection::vec(0..100usize, 0..3)
    ) {
        let mut want = Vec::new();
        for (k, v) in &a {
            for (j, w) in &b {
                if k == j {
                    want.push(format!("{k} {v} {w}"));
                }
            }
        }
        let mut objs = objects("data/a", &pair_lines(&a), &cuts);
        objs.extend(objects("data/b", &pair_lines(&b), &[]));
        let got = run(joined, partitions, &objs);
        prop_assert_eq!(sorted(got), sorted(want));
    }

    #[test]
    fn a_given_partitioner_places_every_key_and_the_sums_stay_right(
        input in pairs(40), partitions in 1..9usize, cuts in prop::collection::vec(0..100usize, 0..3)
    ) {
        let mut sums = BTreeMap::<u32, u32>::new();
        for (k, v) in &input {
            *sums.entry(*k).or_default() += v;
        }
        let want: Vec<String> = sums.into_iter().map(|(k, v)| format!("{k} {v}")).collect();
        let out = local(summed_by_range, partitions, &objects("data/in", &pair_lines(&input), &cuts))
            .run()
            .unwrap_or_else(|e| panic!("{e}"));
        in_their_ranges(out.stored(), partitions)?;
        prop_assert_eq!(sorted(out.lines("out/x")), sorted(want));
    }

    #[test]
    fn a_join_with_a_given_partitioner_matches_a_nested_loop(
        a in pairs(10), b in pairs(10), partitions in 1..9usize
    ) {
        let mut want = Vec::new();
        for (k, v) in &a {
            for (j, w) in &b {
                if k == j {
                    want.push(format!("{k} {v} {w}"));
                }
            }
        }
        let mut objs = objects("data/a", &pair_lines(&a), &[]);
        objs.extend(objects("data/b", &pair_lines(&b), &[]));
        let out = local(joined_by_range, partitions, &objs).run().unwrap_or_else(|e| panic!("{e}"));
        in_their_ranges(out.stored(), partitions)?;
        prop_assert_eq!(sorted(out.lines("out/x")), sorted(want));
    }

    #[test]
    fn a_broadcast_reaches_every_partition_whole(
        input in prop::collection::vec(0..50u32, 0..40), partitions in 1..9usize
    ) {
        let lines: Vec<String> = input.iter().map(u32::to_string).collect();
        let want: Vec<String> = input
            .iter()
            .map(|x| format!("{x} {}", input.iter().filter(|&&y| y < *x).count()))
            .collect();
        let got = run(ranked, partitions, &objects("data/in", &lines, &[]));
        prop_assert_eq!(sorted(got), sorted(want));
    }

    #[test]
    fn a_loop_reads_cached_and_earlier_flows_on_every_run(
        input in pairs(6), partitions in 1..9usize
    ) {
        let mut sums = BTreeMap::<u32, u32>::new();
        for (k, v) in &input {
            *sums.entry(*k).or_default() += v;
        }
        let want: Vec<String> = sums.into_iter().map(|(k, v)| format!("{k} {v} {v}")).collect();
        let got = run(in_a_loop, partitions, &objects("data/in", &pair_lines(&input), &[]));
        prop_assert_eq!(sorted(got), want);
    }
}

#[test]
fn an_operator_error_fails_the_job_naming_the_function_the_stage_and_the_partition() {
    let err = LocalJob::new(grouped)
        .partitions(3)
        .arg("input", "data/in")
        .arg("output", "out/x")
        .object("data/in/a", "1 2\n3 three\n")
        .run()
        .unwrap_err();
    let LocalError::Task {
        kind,
        partition,
        message,
        ..
    } = &err
    else {
        panic!("{err}")
    };
    assert_eq!(*kind, "scatter");
    assert!(*partition < 3);
    assert!(
        message.contains("flow::pair returned an error: \"three\" is not a number"),
        "{err}"
    );
}

#[test]
fn a_partitioner_that_names_a_partition_past_the_last_fails_the_job_saying_so() {
    let err = LocalJob::new(past_the_end)
        .partitions(3)
        .arg("input", "data/in")
        .arg("output", "out/x")
        .object("data/in/a", "1 2\n3 4\n")
        .run()
        .unwrap_err();
    let LocalError::Task { kind, message, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(*kind, "scatter");
    assert!(
        message.contains("sent a key to partition 3, but the job's partitions are 0 to 2"),
        "{err}"
    );
    assert!(message.contains("past_the_end"), "{err}");
}
