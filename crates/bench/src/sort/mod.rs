//! The microtask paper's experiment (`000_…`, §IV): a distributed sort of gensort records
//! through the platform, task-based against microtask-based scheduling on the same machine and
//! the same data.
//!
//! The data is generated once (`sort-gen`, one call per input part). Each repetition then runs
//! stage 1 (`sort-partition`: every input part read, split into categories by the key's first
//! byte, the category parts written) and stage 2 (`sort-category`: every category's parts read,
//! sorted, written), each stage as one fan-out of concurrent calls, and validates every output
//! (`sort-validate`: order, count, checksum, and order across categories).
//!
//! The guests report when each of their sub-stages began (just before declaring its phase, so
//! a wait for the core share counts) and ended. A sub-stage's duration in a repetition is the
//! application's: from the first call entering it to the last call leaving it, as the paper's
//! Figure 7 plots; per-call durations are kept as well. Makespan runs from the first stage-1
//! call to the last stage-2 reply. Repetitions alternate the modes, so drift on a shared
//! machine falls on both.
//!
//! This file owns the runs through the platform: the nodes, the fan-outs, the timings and the
//! validation. `experiment` owns what `mote bench sort` asks for ([`SortOptions`]), the object
//! server it runs against and the files it writes ([`run`]); `report` owns the floors, the plots
//! and the report.

mod experiment;
mod report;

pub use experiment::{ObjectServer, SortOptions, modes, run};

use bytes::Bytes;
use mote_node::{MicrotaskConfig, MicrotaskMode, Node, NodeConfig};
use mote_objects::{Objects, ObjectsConfig};
use mote_types::{FunctionName, Limits, Timeout};
use serde::Serialize;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// Bytes in one gensort record.
pub const RECORD_BYTES: u64 = 100;

/// What to sort and how.
#[derive(Clone, Debug)]
pub struct SortConfig {
    /// Bytes of records in all.
    pub size_bytes: u64,
    /// Input parts: stage 1's calls.
    pub parts: usize,
    /// Categories: stage 2's calls.
    pub categories: usize,
    /// Executor cores.
    pub cores: usize,
    /// Where the objects live.
    pub objects: ObjectsConfig,
    /// The bucket (it must exist).
    pub bucket: String,
    /// Memory limit of every call, MiB.
    pub memory_mb: u32,
}

/// One stage-1 or stage-2 call's sub-stages, `[start, admitted, end]` in ns since the Unix epoch
/// (the guests' `sort_stage::Span`: admitted is when the node granted the sub-stage's share).
#[derive(Clone, Debug, Serialize)]
pub struct CallTimings {
    /// Sub-stage name → `[start, admitted, end]`.
    pub sub_stages: Vec<(String, [u64; 3])>,
}

/// Where a per-call duration of a sub-stage starts.
#[derive(Clone, Copy, Debug)]
enum DurationFrom {
    /// From its start, so waiting for the share counts: what the call saw.
    Start,
    /// From its admission to the share: the work alone, as slowed by whatever shares the cores.
    Admitted,
}

/// One repetition of the sort in one mode.
#[derive(Clone, Debug, Serialize)]
pub struct SortRun {
    /// `on` (microtask-based) or `off` (task-based).
    pub microtasks: &'static str,
    /// The repetition, from 0.
    pub rep: usize,
    /// First stage-1 call to the last stage-2 reply, seconds.
    pub makespan_s: f64,
    /// Stage 1's fan-out, first call to last reply, seconds.
    pub stage1_s: f64,
    /// Stage 2's fan-out, seconds.
    pub stage2_s: f64,
    /// Application sub-stage spans, seconds: stage 1's read, partition, write; stage 2's read,
    /// sort, write.
    pub spans_s: Vec<(String, f64)>,
    /// Per-call durations of the write-categorized-partitions sub-stage, seconds.
    pub write_calls_s: Vec<f64>,
    /// Per-call durations of the sort-category sub-stage, seconds.
    pub sort_calls_s: Vec<f64>,
    /// Per-call durations of the sort-category sub-stage from admission to its whole core:
    /// sorting alone, without the wait for the core, seconds.
    pub sort_admitted_s: Vec<f64>,
    /// Every output validated: ordered, all records, checksum equal to the input's.
    pub valid: bool,
    /// Records sorted.
    pub records: u64,
}

impl SortRun {
    /// The span of `sub_stage` (e.g. `stage1.write`), seconds.
    pub fn span(&self, sub_stage: &str) -> f64 {
        self.spans_s
            .iter()
            .find(|(name, _)| name == sub_stage)
            .map_or(f64::NAN, |(_, s)| *s)
    }
}

/// The generated input: how many records and their checksum (valsort's: the sum of every
/// record's CRC-32, as 128 bits).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Input {
    /// Records in all parts.
    pub records: u64,
    /// Sum of the records' CRC-32s.
    pub checksum: u128,
}

/// Starts a node for `mode` in `dir`, with the sort's guests deployed.
pub async fn start(
    dir: &Path,
    config: &SortConfig,
    mode: MicrotaskMode,
) -> anyhow::Result<Arc<Node>> {
    // Arrival order inside each class, as the microtask paper's sort is measured.
    let mut node_config = NodeConfig::from(mote_node::ExecutorsConfig {
        policy: mote_sched::Policy::Fifo,
        ..mote_node::ExecutorsConfig::new(config.cores)
    });
    node_config.microtasks = MicrotaskConfig {
        mode,
        objects: Some(Arc::new(Objects::new(config.objects.clone())?)),
        ..MicrotaskConfig::default()
    };
    let node = Node::start_embedded(dir, node_config).await?;
    let limits = Limits::new(
        Some(Timeout::Ms(Limits::MAX_TIMEOUT_MS)),
        Some(config.memory_mb),
    )?;
    for guest in mote_guests::SORT {
        node.deploy(
            FunctionName::new(guest.name)?,
            Bytes::from_static(guest.wasm),
            limits,
        )
        .await?;
    }
    Ok(Arc::new(node))
}

/// Runs `name` once per request, all at once, and returns the parsed replies in request order.
async fn fan_out(node: &Arc<Node>, name: &str, requests: Vec<Value>) -> anyhow::Result<Vec<Value>> {
    let mut calls = tokio::task::JoinSet::new();
    for (i, request) in requests.into_iter().enumerate() {
        let node = node.clone();
        let name = name.to_owned();
        calls.spawn(async move {
            let reply = node
                .invoke(&name, Bytes::from(request.to_string()))
                .await
                .map_err(|e| anyhow::anyhow!("{name} failed on {request}: {e}"))?;
            let reply: Value = serde_json::from_slice(&reply)
                .map_err(|e| anyhow::anyhow!("{name} answered something that is not JSON: {e}"))?;
            anyhow::Ok((i, reply))
        });
    }
    let mut replies = vec![Value::Null; calls.len()];
    while let Some(joined) = calls.join_next().await {
        let (i, reply) = joined??;
        replies[i] = reply;
    }
    Ok(replies)
}

fn part_key(prefix: &str, i: usize) -> String {
    format!("{prefix}{i:05}")
}

/// Generates the input parts.
pub async fn generate(node: &Arc<Node>, config: &SortConfig) -> anyhow::Result<Input> {
    let total = config.size_bytes / RECORD_BYTES;
    let parts = config.parts as u64;
    let requests = (0..parts)
        .map(|p| {
            let first = p * total / parts;
            let records = (p + 1) * total / parts - first;
            json!({"bucket": config.bucket, "key": part_key("input/", p as usize),
                   "first": first, "records": records})
        })
        .collect();
    let replies = fan_out(node, "sort-gen", requests).await?;
    let mut input = Input {
        records: 0,
        checksum: 0,
    };
    for reply in &replies {
        input.records += field_u64(reply, "records")?;
        input.checksum = input.checksum.wrapping_add(field_checksum(reply)?);
    }
    anyhow::ensure!(
        input.records == total,
        "the generator made {} records of {total}",
        input.records
    );
    Ok(input)
}

fn field_u64(reply: &Value, field: &str) -> anyhow::Result<u64> {
    reply[field]
        .as_u64()
        .ok_or_else(|| anyhow::anyhow!("reply {reply} has no number `{field}`"))
}

fn field_checksum(reply: &Value) -> anyhow::Result<u128> {
    let hex = reply["checksum"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("reply {reply} has no `checksum`"))?;
    u128::from_str_radix(hex, 16).map_err(|e| anyhow::anyhow!("checksum `{hex}`: {e}"))
}

fn timings(reply: &Value) -> anyhow::Result<CallTimings> {
    let map = reply["timings"]
        .as_object()
        .ok_or_else(|| anyhow::anyhow!("reply {reply} has no `timings`"))?;
    let sub_stages = map
        .iter()
        .map(|(name, span)| {
            let at = |i: usize| span[i].as_u64();
            match (at(0), at(1), at(2), span.as_array().map(Vec::len)) {
                (Some(s), Some(a), Some(e), Some(3)) if s <= a && a <= e => {
                    Ok((name.clone(), [s, a, e]))
                }
                _ => Err(anyhow::anyhow!(
                    "timing `{name}` is not [start, admitted, end] in order: {span}"
                )),
            }
        })
        .collect::<anyhow::Result<_>>()?;
    Ok(CallTimings { sub_stages })
}

/// From the first call entering `sub_stage` to the last leaving it, seconds.
fn span(calls: &[CallTimings], sub_stage: &str) -> f64 {
    let spans = calls
        .iter()
        .flat_map(|c| c.sub_stages.iter().filter(|(n, _)| n == sub_stage));
    let (mut first, mut last) = (u64::MAX, 0);
    for (_, [s, _, e]) in spans {
        first = first.min(*s);
        last = last.max(*e);
    }
    if first > last {
        return f64::NAN;
    }
    (last - first) as f64 / 1e9
}

fn per_call(calls: &[CallTimings], sub_stage: &str, from: DurationFrom) -> Vec<f64> {
    calls
        .iter()
        .flat_map(|c| c.sub_stages.iter().filter(|(n, _)| n == sub_stage))
        .map(|(_, [s, a, e])| {
            let start = match from {
                DurationFrom::Start => s,
                DurationFrom::Admitted => a,
            };
            (e - start) as f64 / 1e9
        })
        .collect()
}

/// One repetition: both stages, then validation of every output.
pub async fn sort_once(
    node: &Arc<Node>,
    config: &SortConfig,
    input: Input,
    mode: MicrotaskMode,
    rep: usize,
) -> anyhow::Result<SortRun> {
    let bucket = &config.bucket;
    let started = Instant::now();
    let stage1 = (0..config.parts)
        .map(|p| {
            json!({"bucket": bucket, "input": part_key("input/", p), "output": "parts/",
                   "part": p, "categories": config.categories})
        })
        .collect();
    let stage1 = fan_out(node, "sort-partition", stage1).await?;
    let stage1_s = started.elapsed().as_secs_f64();
    let stage2_started = Instant::now();
    let stage2 = (0..config.categories)
        .map(|c| {
            json!({"bucket": bucket, "input": format!("parts/{c:05}/"), "parts": config.parts,
                   "output": part_key("sorted/", c)})
        })
        .collect();
    let stage2 = fan_out(node, "sort-category", stage2).await?;
    let stage2_s = stage2_started.elapsed().as_secs_f64();
    let makespan_s = started.elapsed().as_secs_f64();

    let stage1: Vec<CallTimings> = stage1.iter().map(timings).collect::<Result<_, _>>()?;
    let stage2: Vec<CallTimings> = stage2.iter().map(timings).collect::<Result<_, _>>()?;
    let mut spans_s = Vec::new();
    for sub in ["read", "partition", "write"] {
        spans_s.push((format!("stage1.{sub}"), span(&stage1, sub)));
    }
    for sub in ["read", "sort", "write"] {
        spans_s.push((format!("stage2.{sub}"), span(&stage2, sub)));
    }
    let (valid, records) = validate(node, config, input).await?;
    Ok(SortRun {
        microtasks: mode.as_str(),
        rep,
        makespan_s,
        stage1_s,
        stage2_s,
        spans_s,
        write_calls_s: per_call(&stage1, "write", DurationFrom::Start),
        sort_calls_s: per_call(&stage2, "sort", DurationFrom::Start),
        sort_admitted_s: per_call(&stage2, "sort", DurationFrom::Admitted),
        valid,
        records,
    })
}

/// Validates every category's output and the order across them; returns whether all is well
/// and how many records the outputs hold. What is wrong is printed.
async fn validate(
    node: &Arc<Node>,
    config: &SortConfig,
    input: Input,
) -> anyhow::Result<(bool, u64)> {
    let requests = (0..config.categories)
        .map(|c| json!({"bucket": config.bucket, "key": part_key("sorted/", c)}))
        .collect();
    let replies = fan_out(node, "sort-validate", requests).await?;
    let mut valid = true;
    let mut records = 0;
    let mut checksum: u128 = 0;
    let mut previous_last: Option<String> = None;
    for (c, reply) in replies.iter().enumerate() {
        let n = field_u64(reply, "records")?;
        records += n;
        checksum = checksum.wrapping_add(field_checksum(reply)?);
        if field_u64(reply, "unordered")? != 0 {
            eprintln!("category {c} is out of order: {reply}");
            valid = false;
        }
        if n == 0 {
            continue;
        }
        let first = reply["first_key"].as_str().unwrap_or_default().to_owned();
        if let Some(last) = &previous_last
            && *last > first
        {
            eprintln!("category {c} starts at {first}, before the previous one's end {last}");
            valid = false;
        }
        previous_last = reply["last_key"].as_str().map(str::to_owned);
    }
    if records != input.records || checksum != input.checksum {
        eprintln!(
            "the outputs hold {records} records with checksum {checksum:032x}; the input had {} with {:032x}",
            input.records, input.checksum
        );
        valid = false;
    }
    Ok((valid, records))
}

/// The measurements: a node per mode, the input generated once, then `reps` repetitions of the
/// sort in each mode, the modes alternating; `progress` sees each run as it ends.
async fn measure(
    config: &SortConfig,
    modes: &[MicrotaskMode],
    reps: usize,
    mut progress: impl FnMut(&SortRun),
) -> anyhow::Result<Vec<SortRun>> {
    anyhow::ensure!(!modes.is_empty(), "no scheduling mode to run");
    let work = tempfile::tempdir()?;
    let mut nodes = Vec::new();
    for &mode in modes {
        let dir = work.path().join(mode.as_str());
        nodes.push((mode, start(&dir, config, mode).await?));
    }
    let input = generate(&nodes[0].1, config).await?;
    let mut runs = Vec::new();
    for rep in 0..reps {
        for (mode, node) in &nodes {
            let run = sort_once(node, config, input, *mode, rep).await?;
            progress(&run);
            runs.push(run);
        }
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(stages: &[(&str, u64, u64, u64)]) -> CallTimings {
        CallTimings {
            sub_stages: stages
                .iter()
                .map(|(n, s, a, e)| (n.to_string(), [*s, *a, *e]))
                .collect(),
        }
    }

    #[test]
    fn a_sub_stage_spans_from_its_first_start_to_its_last_end() {
        let calls = [
            call(&[("read", 0, 0, 10), ("write", 10, 10, 3_000_000_010)]),
            call(&[
                ("read", 5, 6, 20),
                ("write", 1_000_000_000, 1_500_000_000, 2_000_000_000),
            ]),
        ];
        assert_eq!(span(&calls, "write"), 3.0);
        assert_eq!(per_call(&calls, "write", DurationFrom::Start), [3.0, 1.0]);
        assert_eq!(
            per_call(&calls, "write", DurationFrom::Admitted),
            [3.0, 0.5]
        );
        assert!(span(&calls, "sort").is_nan());
    }

    #[test]
    fn malformed_timings_are_errors_that_quote_them() {
        for reply in [
            json!({}),
            json!({"timings": {"read": [5, 5, 1]}}),
            json!({"timings": {"read": [1, 6, 5]}}),
            json!({"timings": {"read": [1, 5]}}),
            json!({"timings": {"read": [1, 2, 5, 6]}}),
            json!({"timings": {"read": "x"}}),
        ] {
            assert!(timings(&reply).is_err(), "{reply}");
        }
        let ok = timings(&json!({"timings": {"read": [1, 2, 5]}})).unwrap();
        assert_eq!(ok.sub_stages, [("read".to_owned(), [1, 2, 5])]);
    }
}
