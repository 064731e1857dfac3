//! `kmeans`: k-means clustering by Lloyd's algorithm. The first `k` points of the input are the
//! initial centroids; each iteration assigns every point to its nearest centroid (by Euclidean
//! distance, the lowest-numbered on a tie) and moves each centroid to the mean of its points, or
//! leaves it where it is if it has none.
//!
//! Arguments: `input=BUCKET/PREFIX` (text, a point per line, its features comma-separated) or
//! `generate=N` and `seed=S` ([`job_data::clustered_point`] `0..N`); `k=K` (4), `iterations=I`
//! (10), and `output=BUCKET/PREFIX` to store the centroids, one per line with comma-separated
//! features, in `part-00000`.
//!
//! Datasets: the points and each partition's copy of the centroids and its sums, of the job's `P`
//! partitions, and the centroids with the iteration counter, of one. Before the loop, a scatter
//! sends each partition's first `k` points to the gather that keeps the first `k` overall (`P + 1`
//! tasks). An iteration is the loop's signal (1 task), the centroids' broadcast (`1 + P`), the
//! assignment (`P`), and the sums' scatter and the gather that adds them in partition order and
//! moves the centroids (`P + 1`): `3P + 3` tasks.

use job_data::{clustered_point, parse_features, share};
use mote_sdk::job::{Dataset, Job, Task, decode_f64s, encode_f64s};

/// A partition's points.
const POINTS: Dataset<Vec<Vec<f64>>> = Dataset::partitioned("points");
/// A partition's copy of the centroids.
const LOCAL_CENTROIDS: Dataset<Vec<Vec<f64>>> = Dataset::partitioned("local_centroids");
/// A partition's sums: for each centroid, how many of the partition's points are nearest to it,
/// then the sum of those points.
const LOCAL_SUMS: Dataset<Vec<f64>> = Dataset::partitioned("local_sums");
/// The centroids and the iterations taken.
const GLOBAL: Dataset<Model> = Dataset::single("centroids");

#[derive(Default)]
struct Model {
    centroids: Vec<Vec<f64>>,
    iterations: u32,
}

fn driver(job: &mut Job) {
    if job.arg("input").is_some() {
        job.load(parse, &POINTS, "input");
    } else if job.arg("generate").is_some() {
        job.compute(generate, &[], &[&POINTS]);
    } else {
        panic!("kmeans needs --arg input=BUCKET/PREFIX or --arg generate=POINTS");
    }
    job.scatter(send_first_points, &[&POINTS], choose_centroids, &[&GLOBAL]);
    job.while_signal(more, &GLOBAL, |job| {
        job.scatter(
            broadcast,
            &[&GLOBAL],
            receive_centroids,
            &[&LOCAL_CENTROIDS],
        );
        job.compute(assign, &[&POINTS, &LOCAL_CENTROIDS], &[&LOCAL_SUMS]);
        job.scatter(send_sums, &[&LOCAL_SUMS], update, &[&GLOBAL]);
    });
    if job.arg("output").is_some() {
        job.store(write_centroids, &GLOBAL, "output");
    }
}

fn k(task: &Task) -> usize {
    let k = task.arg_or("k", 4);
    assert!(k > 0, "kmeans needs k of at least 1");
    k
}

fn parse(task: &mut Task) {
    let text = task.inputs().next().unwrap_or_default();
    let text = String::from_utf8(text).expect("the points are UTF-8 text");
    *task.get_mut(&POINTS) = text.lines().filter_map(parse_features).collect();
}

fn generate(task: &mut Task) {
    let total: u64 = task.arg_or("generate", 0);
    let seed: u64 = task.arg_or("seed", 0);
    let range = share(total, task.partitions(), task.index());
    *task.get_mut(&POINTS) = range.map(|p| clustered_point(seed, p)).collect();
}

/// Sends the partition's first `k` points, as their feature count and then their features.
fn send_first_points(task: &mut Task) {
    let points = task.get(&POINTS);
    let Some(first) = points.first() else {
        return;
    };
    let mut piece = vec![first.len() as f64];
    for point in points.iter().take(k(task)) {
        piece.extend(point);
    }
    task.emit(0, &encode_f64s(&piece));
}

fn choose_centroids(task: &mut Task) {
    let k = k(task);
    let mut centroids = Vec::with_capacity(k);
    for piece in task.inputs() {
        let piece = decode_f64s(&piece);
        let features = piece[0] as usize;
        centroids.extend(piece[1..].chunks(features).map(<[f64]>::to_vec));
    }
    assert!(
        centroids.len() >= k,
        "kmeans: k is {k} but the input has {} points",
        centroids.len()
    );
    centroids.truncate(k);
    task.get_mut(&GLOBAL).centroids = centroids;
}

fn more(task: &mut Task) -> bool {
    task.get(&GLOBAL).iterations < task.arg_or("iterations", 10)
}

/// Sends every partition the centroids, as their feature count and then their features.
fn broadcast(task: &mut Task) {
    let centroids = &task.get(&GLOBAL).centroids;
    let mut piece = vec![centroids[0].len() as f64];
    piece.extend(centroids.concat());
    let bytes = encode_f64s(&piece);
    for dest in 0..task.partitions() {
        task.emit(dest, &bytes);
    }
}

fn receive_centroids(task: &mut Task) {
    let piece = decode_f64s(&task.inputs().next().unwrap_or_default());
    let features = piece[0] as usize;
    *task.get_mut(&LOCAL_CENTROIDS) = piece[1..].chunks(features).map(<[f64]>::to_vec).collect();
}

fn assign(task: &mut Task) {
    let points = task.get(&POINTS);
    let centroids = task.get(&LOCAL_CENTROIDS);
    let features = centroids[0].len();
    let mut sums = vec![0.0; centroids.len() * (1 + features)];
    for point in points.iter() {
        assert_eq!(
            point.len(),
            features,
            "a point's feature count differs from the first point's"
        );
        let nearest = nearest(&centroids, point);
        let sum = &mut sums[nearest * (1 + features)..(nearest + 1) * (1 + features)];
        sum[0] += 1.0;
        for (s, x) in sum[1..].iter_mut().zip(point) {
            *s += x;
        }
    }
    *task.get_mut(&LOCAL_SUMS) = sums;
}

/// The index of the centroid nearest to `point`, the first of equally near ones.
fn nearest(centroids: &[Vec<f64>], point: &[f64]) -> usize {
    let distance =
        |c: &Vec<f64>| -> f64 { c.iter().zip(point).map(|(c, x)| (c - x) * (c - x)).sum() };
    let mut best = (0, distance(&centroids[0]));
    for (i, centroid) in centroids.iter().enumerate().skip(1) {
        let d = distance(centroid);
        if d < best.1 {
            best = (i, d);
        }
    }
    best.0
}

fn send_sums(task: &mut Task) {
    let bytes = encode_f64s(&task.get(&LOCAL_SUMS));
    task.emit(0, &bytes);
}

fn update(task: &mut Task) {
    let mut model = task.get_mut(&GLOBAL);
    let features = model.centroids[0].len();
    let mut total = vec![0.0; model.centroids.len() * (1 + features)];
    for piece in task.inputs() {
        for (t, s) in total.iter_mut().zip(decode_f64s(&piece)) {
            *t += s;
        }
    }
    for (centroid, sum) in model.centroids.iter_mut().zip(total.chunks(1 + features)) {
        let count = sum[0];
        if count > 0.0 {
            for (c, s) in centroid.iter_mut().zip(&sum[1..]) {
                *c = s / count;
            }
        }
    }
    model.iterations += 1;
}

fn write_centroids(task: &mut Task) {
    let text: String = task
        .get(&GLOBAL)
        .centroids
        .iter()
        .map(|c| {
            let features: Vec<String> = c.iter().map(f64::to_string).collect();
            features.join(",") + "\n"
        })
        .collect();
    task.emit(0, text.as_bytes());
}

mote_sdk::job!(driver);
