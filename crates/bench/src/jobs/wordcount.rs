//! `mote bench jobs --wordcount`: word count over Zipf-distributed text (docs/benchmarks/jobs.md,
//! "Word count"), mote's typed operators against a hand-written shuffle and against the peers.
//!
//! The bench writes the text ([`text`], from a fixed seed) as [`OBJECTS`] objects into the object
//! storage of one `mote up` node of every core, and counts it itself: the reference [`Digest`]
//! every result must equal. On the node it runs `wordcount` (the SDK's `reduce_by_key`, or the
//! job `--wordcount-job` names) and `wordcount-shuffle` (the same job by hand on the stages), an
//! untimed run of each first, then `reps` of each, alternated. With the node stopped, the peers
//! count the same objects (`scripts/bench-jobs-peers --text`), each its fastest way.
//!
//! A mote run's time is from sending the job to seeing it succeeded, its output written (the
//! bench polls every 10 ms); a peer's, from reading the text to the counts in its driver, without
//! the interpreter's, the JVM's or the cluster's start. The floors: the fastest peer at least
//! [`FLOOR_WORDCOUNT_OVER_PEERS`] times the job's time, and the job within
//! [`CEILING_WORDCOUNT_OVER_SHUFFLE`] of the shuffle's (the median of the repetitions' ratios).
//!
//! [`FLOOR_WORDCOUNT_OVER_PEERS`]: super::FLOOR_WORDCOUNT_OVER_PEERS
//! [`CEILING_WORDCOUNT_OVER_SHUFFLE`]: super::CEILING_WORDCOUNT_OVER_SHUFFLE

use super::figures::{Digest, Machine, PeerWordcount, SHUFFLE, WordcountReport, WordcountRun};
use super::nodes::{Up, job, run_job, up};
use super::{median, report, run_script, text};
use crate::results::load_average;
use anyhow::{Context, bail};
use mote_api::{DeployParams, JobStatus};
use sha2::{Digest as _, Sha256};
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

/// Objects the text is written as.
pub const OBJECTS: usize = 16;
/// The text's seed.
pub const SEED: u64 = 1;
/// The jobs' partitions per core: the default of `mote job run`, the paper's setting.
const PARTITIONS_PER_CORE: u32 = 10;
/// The node's bucket; the text is under `text/`, outputs under `out/`.
const BUCKET: &str = "bench";

/// How the benchmark runs.
#[derive(Clone, Debug)]
pub struct WordcountConfig {
    /// The `mote` binary whose `mote up` is measured.
    pub mote: PathBuf,
    /// `scripts/bench-jobs-peers`, or `None` to skip the peers.
    pub peers: Option<PathBuf>,
    /// Bytes of text.
    pub bytes: u64,
    /// Timed runs of each job (and of each peer's methods); medians are reported.
    pub reps: usize,
    /// The job measured against [`SHUFFLE`]: a deployed job with `wordcount`'s arguments and
    /// output, `wordcount` unless told.
    pub job: String,
    /// A smoke run.
    pub smoke: bool,
    /// The command line, for the report.
    pub command: String,
}

/// Runs the benchmark, writes `wordcount.json` and `wordcount.md` to `out`, and returns the
/// report; an error, after writing them, if any result differs from the reference.
pub fn run(
    config: &WordcountConfig,
    out: &Path,
    progress: &mut dyn FnMut(&str),
) -> anyhow::Result<WordcountReport> {
    let started = Instant::now();
    let date = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let load_at_start = load_average();
    let nproc = std::thread::available_parallelism().map_or(1, |n| n.get());
    let reps = config.reps.max(1);
    let dir = tempfile::tempdir()?;
    let node = up(&config.mote, dir.path(), "wc", nproc, None)?;
    node.api()
        .deploy(
            SHUFFLE,
            mote_guests::WORDCOUNT_SHUFFLE.wasm,
            &DeployParams::default(),
        )
        .with_context(|| format!("deploying {SHUFFLE}"))?;
    let text_dir = node.data.join("objects").join(BUCKET).join("text");
    std::fs::create_dir_all(&text_dir)?;
    let generating = Instant::now();
    let paths = text::write(&text_dir, config.bytes, OBJECTS, SEED)?;
    let generate_s = generating.elapsed().as_secs_f64();
    let reference = reference(&paths)?;
    progress(&format!(
        "wordcount: {} bytes of text in {generate_s:.1} s: {} words, {} distinct",
        config.bytes, reference.total, reference.distinct
    ));

    // Each job with whether it is the hand-written one: `--wordcount-job wordcount-shuffle` has
    // the same job in both places.
    let jobs = [(config.job.as_str(), false), (SHUFFLE, true)];
    let mut runs = Vec::new();
    let mut partitions = 0;
    // An untimed run of each first: the text into the page cache, the modules' first instances.
    for (job, shuffle) in jobs {
        let (_, _, digest) = once(&node, job, &format!("first-{}", role(shuffle)))?;
        if digest != reference {
            bail!(
                "{job}'s output differs from the bench's own count: {digest:?} against {reference:?}"
            );
        }
    }
    for rep in 0..reps {
        // Alternated, so that whatever the second run of a repetition pays falls on both.
        let mut order = jobs;
        if rep % 2 == 1 {
            order.reverse();
        }
        for (job, shuffle) in order {
            let (wall_s, status, digest) = once(&node, job, &format!("{rep}-{}", role(shuffle)))?;
            let run = WordcountRun {
                job: job.to_owned(),
                shuffle,
                rep,
                wall_s,
                job_s: status.elapsed_ms as f64 / 1e3,
                tasks: status.tasks,
                equal: digest == reference,
            };
            progress(&format!(
                "wordcount: {job}: {:.3} s ({:.3} s in the job), output {}",
                run.wall_s,
                run.job_s,
                if run.equal { "equal" } else { "NOT equal" }
            ));
            partitions = status.partitions;
            runs.push(run);
        }
    }
    drop(node);

    let times = |shuffle: bool| -> Vec<f64> {
        runs.iter()
            .filter(|r| r.shuffle == shuffle)
            .map(|r| r.wall_s)
            .collect()
    };
    let (job_times, shuffle_times) = (times(false), times(true));
    let ratios: Vec<f64> = job_times
        .iter()
        .zip(&shuffle_times)
        .map(|(j, s)| j / s)
        .collect();
    let job_s = median(&job_times);

    let peers_output = config.peers.as_ref().map(|script| {
        progress(&format!("peers: {} --text (minutes)", script.display()));
        let mut args: Vec<OsString> = vec!["--text".into(), text_dir.clone().into()];
        args.extend(
            [
                "--partitions".into(),
                (nproc * PARTITIONS_PER_CORE as usize).to_string(),
                "--reps".into(),
                reps.to_string(),
            ]
            .map(OsString::from),
        );
        run_script(script, &args).unwrap_or_else(|e| {
            progress(&format!("peers failed: {e:#}"));
            serde_json::json!({ "error": format!("{e:#}") })
        })
    });
    let peers: Vec<PeerWordcount> = ["ray", "dask", "spark"]
        .into_iter()
        .filter_map(|system| peer(peers_output.as_ref()?, system, &reference))
        .collect();
    let fastest = peers.iter().min_by(|a, b| a.seconds.total_cmp(&b.seconds));

    let report = WordcountReport {
        command: config.command.clone(),
        date,
        machine: Machine::at_end(nproc, load_at_start),
        smoke: config.smoke,
        bytes: paths
            .iter()
            .map(|p| std::fs::metadata(p).map(|m| m.len()))
            .sum::<std::io::Result<u64>>()?,
        objects: OBJECTS,
        seed: SEED,
        vocabulary: text::VOCABULARY,
        exponent: text::EXPONENT,
        generate_s,
        reference,
        job: config.job.clone(),
        cores: nproc,
        partitions,
        reps,
        outputs_equal: runs.iter().all(|r| r.equal),
        runs,
        job_s,
        shuffle_s: median(&shuffle_times),
        job_over_shuffle: median(&ratios),
        job_over_shuffle_runs: ratios,
        fastest_peer: fastest.map(|p| p.system.clone()),
        fastest_peer_over_job: fastest.map(|p| p.seconds / job_s),
        peers,
        peers_output,
        bench_s: started.elapsed().as_secs_f64(),
    };
    report::write_wordcount(&report, out)?;
    if !report.outputs_equal {
        bail!("a word count on mote differs from the bench's own count (wordcount.json)");
    }
    if let Some(p) = report.peers.iter().find(|p| !p.equal) {
        bail!(
            "{}'s word count differs from the bench's own count (wordcount.json)",
            p.system
        );
    }
    Ok(report)
}

/// A run's place, for its output's name: the job measured, or the hand-written reference.
fn role(shuffle: bool) -> &'static str {
    if shuffle { "reference" } else { "measured" }
}

/// Runs `function` over the text once, its output under `out/FUNCTION-LABEL` (removed after;
/// a label used once keeps outputs apart):
/// its wall time, s, its status and its output's digest.
fn once(node: &Up, function: &str, label: &str) -> anyhow::Result<(f64, JobStatus, Digest)> {
    let output = format!("{BUCKET}/out/{function}-{label}");
    let args = vec![
        ("input".to_owned(), format!("{BUCKET}/text")),
        ("output".to_owned(), output.clone()),
    ];
    let request = job(function, None, PARTITIONS_PER_CORE, args);
    let sent = Instant::now();
    let status = run_job(node.api(), &request)
        .with_context(|| format!("{function}: {}", node.log_tail()))?;
    let wall_s = sent.elapsed().as_secs_f64();
    let dir = node.data.join("objects").join(&output);
    let digest = output_digest(&dir)?;
    std::fs::remove_dir_all(&dir)?;
    Ok((wall_s, status, digest))
}

impl Digest {
    /// The digest of a word count's `(word, count)` pairs, in any order.
    pub(super) fn of(mut counts: Vec<(String, u64)>) -> Self {
        counts.sort_unstable();
        let mut hash = Sha256::new();
        for (word, count) in &counts {
            hash.update(format!("{word}\t{count}\n"));
        }
        Self {
            distinct: counts.len() as u64,
            total: counts.iter().map(|(_, c)| c).sum(),
            sha256: hash.finalize().iter().map(|b| format!("{b:02x}")).collect(),
        }
    }
}

/// The bench's own count of the text in `paths`, words as `split_whitespace` splits them.
fn reference(paths: &[PathBuf]) -> anyhow::Result<Digest> {
    let mut counts: HashMap<String, u64> = HashMap::new();
    for path in paths {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        for word in text.split_whitespace() {
            match counts.get_mut(word) {
                Some(count) => *count += 1,
                None => {
                    counts.insert(word.to_owned(), 1);
                }
            }
        }
    }
    Ok(Digest::of(counts.into_iter().collect()))
}

/// The digest of a job's output in `dir`: its `part-*` objects' lines `word<TAB>count`, once
/// `_SUCCESS` says they are whole.
fn output_digest(dir: &Path) -> anyhow::Result<Digest> {
    if !dir.join("_SUCCESS").is_file() {
        bail!("{} has no _SUCCESS: the output is not whole", dir.display());
    }
    let mut counts = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let is_part = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("part-"));
        if !is_part {
            continue;
        }
        let text = std::fs::read_to_string(&path)?;
        for line in text.lines() {
            let parsed = line
                .split_once('\t')
                .and_then(|(word, count)| Some((word.to_owned(), count.parse().ok()?)));
            let Some(pair) = parsed else {
                bail!("{}: {line:?} is not word<TAB>count", path.display());
            };
            counts.push(pair);
        }
    }
    Ok(Digest::of(counts))
}

/// `system`'s word count in the peers' output: its fastest method, and whether every method that
/// ran gave `reference`'s digest. `None` if it did not run.
fn peer(output: &serde_json::Value, system: &str, reference: &Digest) -> Option<PeerWordcount> {
    let key = |k: &str| &output[format!("{system}_wordcount_{k}")];
    let methods = key("methods").as_object()?;
    let digest = |m: &serde_json::Value| {
        Some(Digest {
            distinct: m["distinct"].as_u64()?,
            total: m["total"].as_u64()?,
            sha256: m["sha256"].as_str()?.to_owned(),
        })
    };
    Some(PeerWordcount {
        system: system.to_owned(),
        method: key("method").as_str()?.to_owned(),
        seconds: key("s").as_f64()?,
        equal: methods
            .values()
            .filter(|m| m.get("error").is_none())
            .all(|m| digest(m).as_ref() == Some(reference)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_does_not_depend_on_the_order_and_sees_every_count() {
        let pairs = |p: &[(&str, u64)]| p.iter().map(|(w, c)| (w.to_string(), *c)).collect();
        let a = Digest::of(pairs(&[("b", 2), ("a", 1), ("é", 5)]));
        assert_eq!(a, Digest::of(pairs(&[("é", 5), ("a", 1), ("b", 2)])));
        assert_eq!((a.distinct, a.total), (3, 8));
        // Python: hashlib.sha256("a\t1\nb\t2\né\t5\n".encode()).hexdigest()
        assert_eq!(
            a.sha256,
            "09d652be3209586291ea70020d889df5deb0626989ccada19cefa5730640478b"
        );
        assert_ne!(a, Digest::of(pairs(&[("a", 1), ("b", 3), ("é", 4)])));
    }

    #[test]
    fn an_output_is_read_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("part-00000"), "b\t2\na\t1\n").unwrap();
        std::fs::write(dir.path().join("part-00001"), "").unwrap();
        std::fs::write(dir.path().join("part-00002"), "é\t5\n").unwrap();
        assert!(output_digest(dir.path()).is_err(), "no _SUCCESS yet");
        std::fs::write(dir.path().join("_SUCCESS"), "").unwrap();
        let pairs = vec![("a".into(), 1), ("b".into(), 2), ("é".into(), 5)];
        assert_eq!(output_digest(dir.path()).unwrap(), Digest::of(pairs));
        std::fs::write(dir.path().join("part-00003"), "c 1\n").unwrap();
        assert!(output_digest(dir.path()).is_err());
    }

    #[test]
    fn the_reference_counts_what_split_whitespace_splits() {
        let dir = tempfile::tempdir().unwrap();
        let paths = text::write(dir.path(), 64 << 10, 2, 4).unwrap();
        let digest = reference(&paths).unwrap();
        let all: String = paths
            .iter()
            .map(|p| std::fs::read_to_string(p).unwrap())
            .collect();
        assert_eq!(digest.total, all.split_whitespace().count() as u64);
        assert!(digest.distinct > 100 && digest.distinct < digest.total);
    }
}
