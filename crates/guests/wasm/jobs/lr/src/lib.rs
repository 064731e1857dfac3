//! `lr`: logistic regression by batch gradient descent, as a job shaped like the Canary paper's
//! Figure 2. From `w = 0`, each iteration takes
//! `w <- w - step * (1/n) * sum((sigmoid(w.x) - y) * x)` over all `n` training points.
//!
//! Arguments: `input=BUCKET/PREFIX` (text, a point per line: the label 0 or 1, then the features,
//! comma-separated) or `generate=N` and `seed=S` ([`job_data::labelled_point`] `0..N`);
//! `iterations=K` (10), `step=S` (1.0), and `output=BUCKET/PREFIX` to store the weights, one per
//! line in `part-00000`.
//!
//! Datasets: the training data and each partition's copy of the weights and its gradient, of the
//! job's `P` partitions, and the global weights with the iteration counter, of one. An iteration is
//! the loop's signal (1 task), the gradient stage (`P`), the gradient's scatter and the gather that
//! sums the pieces in partition order and takes the step (`P + 1`), and the weights' broadcast
//! (`1 + P`): `3P + 3` tasks.

use job_data::{labelled_point, parse_labelled, share};
use mote_sdk::job::{Dataset, Job, Task, decode_f64s, encode_f64s};

/// A partition's training points: `(label, features)`.
const TRAINING_DATA: Dataset<Vec<(f64, Vec<f64>)>> = Dataset::partitioned("training_data");
/// A partition's copy of the weights, empty (meaning zeros) until the first broadcast.
const LOCAL_WEIGHT: Dataset<Vec<f64>> = Dataset::partitioned("local_weight");
/// A partition's gradient: its point count, then the sum of its points' gradients.
const LOCAL_GRADIENT: Dataset<Vec<f64>> = Dataset::partitioned("local_gradient");
/// The weights and the iterations taken.
const GLOBAL: Dataset<Model> = Dataset::single("global_weight");

#[derive(Default)]
struct Model {
    weights: Vec<f64>,
    iterations: u32,
}

fn driver(job: &mut Job) {
    if job.arg("input").is_some() {
        job.load(parse, &TRAINING_DATA, "input");
    } else if job.arg("generate").is_some() {
        job.compute(generate, &[], &[&TRAINING_DATA]);
    } else {
        panic!("lr needs --arg input=BUCKET/PREFIX or --arg generate=POINTS");
    }
    job.while_signal(more, &GLOBAL, |job| {
        job.compute(
            gradient,
            &[&TRAINING_DATA, &LOCAL_WEIGHT],
            &[&LOCAL_GRADIENT],
        );
        job.scatter(send_gradient, &[&LOCAL_GRADIENT], descend, &[&GLOBAL]);
        job.scatter(broadcast, &[&GLOBAL], receive_weights, &[&LOCAL_WEIGHT]);
    });
    if job.arg("output").is_some() {
        job.store(write_weights, &GLOBAL, "output");
    }
}

fn parse(task: &mut Task) {
    let text = task.inputs().next().unwrap_or_default();
    let text = String::from_utf8(text).expect("the training data is UTF-8 text");
    let mut points = task.get_mut(&TRAINING_DATA);
    *points = text.lines().filter_map(parse_labelled).collect();
    if let Some((_, first)) = points.first()
        && let Some((_, other)) = points.iter().find(|(_, x)| x.len() != first.len())
    {
        panic!(
            "training points have {} and {} features",
            first.len(),
            other.len()
        );
    }
}

fn generate(task: &mut Task) {
    let total: u64 = task.arg_or("generate", 0);
    let seed: u64 = task.arg_or("seed", 0);
    let range = share(total, task.partitions(), task.index());
    *task.get_mut(&TRAINING_DATA) = range.map(|p| labelled_point(seed, p)).collect();
}

fn more(task: &mut Task) -> bool {
    task.get(&GLOBAL).iterations < task.arg_or("iterations", 10)
}

fn gradient(task: &mut Task) {
    let points = task.get(&TRAINING_DATA);
    let weights = task.get(&LOCAL_WEIGHT);
    let features = points.first().map_or(0, |(_, x)| x.len());
    let mut gradient = vec![0.0; 1 + features];
    gradient[0] = points.len() as f64;
    for (label, x) in points.iter() {
        let error = sigmoid(dot(&weights, x)) - label;
        for (g, x) in gradient[1..].iter_mut().zip(x) {
            *g += error * x;
        }
    }
    *task.get_mut(&LOCAL_GRADIENT) = gradient;
}

fn send_gradient(task: &mut Task) {
    let bytes = encode_f64s(&task.get(&LOCAL_GRADIENT));
    task.emit(0, &bytes);
}

fn descend(task: &mut Task) {
    let step: f64 = task.arg_or("step", 1.0);
    let mut points = 0.0;
    let mut sum: Vec<f64> = Vec::new();
    for piece in task.inputs() {
        let gradient = decode_f64s(&piece);
        let (count, partial) = (gradient[0], &gradient[1..]);
        // A partition without points knows no feature count, and adds nothing.
        if count == 0.0 {
            continue;
        }
        if sum.is_empty() {
            sum = vec![0.0; partial.len()];
        }
        assert_eq!(
            partial.len(),
            sum.len(),
            "training points have different feature counts"
        );
        points += count;
        for (s, g) in sum.iter_mut().zip(partial) {
            *s += g;
        }
    }
    assert!(points > 0.0, "lr: the training data has no points");
    let mut model = task.get_mut(&GLOBAL);
    if model.weights.is_empty() {
        model.weights = vec![0.0; sum.len()];
    }
    for (w, s) in model.weights.iter_mut().zip(&sum) {
        *w -= step * (s / points);
    }
    model.iterations += 1;
}

fn broadcast(task: &mut Task) {
    let bytes = encode_f64s(&task.get(&GLOBAL).weights);
    for dest in 0..task.partitions() {
        task.emit(dest, &bytes);
    }
}

fn receive_weights(task: &mut Task) {
    let weights = task.inputs().next().unwrap_or_default();
    *task.get_mut(&LOCAL_WEIGHT) = decode_f64s(&weights);
}

fn write_weights(task: &mut Task) {
    let text: String = task
        .get(&GLOBAL)
        .weights
        .iter()
        .map(|w| format!("{w}\n"))
        .collect();
    task.emit(0, text.as_bytes());
}

fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

/// `w.x`, with no weights yet meaning zeros.
fn dot(weights: &[f64], x: &[f64]) -> f64 {
    if weights.is_empty() {
        return 0.0;
    }
    assert_eq!(
        weights.len(),
        x.len(),
        "a point's feature count differs from the model's"
    );
    weights.iter().zip(x).map(|(w, x)| w * x).sum()
}

mote_sdk::job!(driver);
