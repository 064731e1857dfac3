//! `busy`: the Canary paper's scheduling micro-benchmark (Figure 4), stages of tasks whose length
//! the job chooses, to measure what scheduling a task costs against how long tasks run.
//!
//! One dataset of the job's `P` partitions, each a checksum; `stages` compute stages in a
//! `repeat`, each one task per partition (`P` tasks a stage) that steps its partition's checksum
//! `work` times through a xorshift-multiply, a chain of dependent instructions no compiler
//! shortens.
//!
//! Arguments: `stages=S` (1000), `work=W` (2000 steps, a few microseconds; 0 makes a task next to
//! empty, to measure scheduling alone), and `output=BUCKET/PREFIX` to store each partition's
//! checksum as a line of its own object, `part-{k:05}`.

use std::sync::OnceLock;

use mote_sdk::job::{Dataset, Job, Task};

/// Steps of a task when the job does not say.
const DEFAULT_WORK: u64 = 2000;

/// A partition's checksum of the work done on it.
const BLOCKS: Dataset<u64> = Dataset::partitioned("blocks");

fn driver(job: &mut Job) {
    job.repeat(job.arg_or("stages", 1000), |job| {
        job.compute(spin, &[&BLOCKS], &[&BLOCKS]);
    });
    if job.arg("output").is_some() {
        job.store(write_checksum, &BLOCKS, "output");
    }
}

fn spin(task: &mut Task) {
    // Parsed once per instance, so that a task of no work is next to no work.
    static WORK: OnceLock<u64> = OnceLock::new();
    let work = *WORK.get_or_init(|| task.arg_or("work", DEFAULT_WORK));
    let mut checksum = task.get_mut(&BLOCKS);
    let mut x = checksum.wrapping_add(1);
    for _ in 0..work {
        // A xorshift-multiply: unlike a linear step, which compilers turn into a closed form,
        // it has to run step by step.
        x = (x ^ (x >> 31))
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .wrapping_add(1);
    }
    *checksum = x;
}

fn write_checksum(task: &mut Task) {
    let line = format!("{}\n", task.get(&BLOCKS));
    task.emit(0, line.as_bytes());
}

mote_sdk::job!(driver);
