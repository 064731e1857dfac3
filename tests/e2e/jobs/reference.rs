//! Sequential reference implementations of the jobs in `crates/guests/wasm/jobs/`, which the
//! end-to-end tests compare the jobs' distributed results with.
//!
//! Each is the textbook loop over all of the data at once, sharing nothing with the jobs'
//! partitioned code but their input: the generators and line formats of the jobs' `data` crate,
//! included here as [`data`], so a test can compute what a job run with `generate=N seed=S` must
//! find. Sums run in another order than the jobs' (per partition, then across partitions in
//! partition order), so results agree to rounding, not bit for bit.

use std::collections::{BTreeMap, BTreeSet};

// The jobs use parts of it (partition shares) that the tests do not.
#[allow(dead_code)]
#[path = "../../../crates/guests/wasm/jobs/data/src/lib.rs"]
pub mod data;

/// The points of a text input, one per line with comma-separated columns, blank lines skipped:
/// `(label, features)` with the first column the label if `labelled` (0 or 1), else label 0 and
/// every column a feature.
///
/// # Panics
///
/// On a malformed line, as the jobs' loads fail.
pub fn parse_points(text: &str, labelled: bool) -> Vec<(f64, Vec<f64>)> {
    if labelled {
        text.lines().filter_map(data::parse_labelled).collect()
    } else {
        text.lines()
            .filter_map(data::parse_features)
            .map(|x| (0.0, x))
            .collect()
    }
}

/// The edges of a text input as SNAP writes graphs, `src dst` per line, `#` starting comments.
pub fn parse_edges(text: &str) -> Vec<(u64, u64)> {
    text.lines().filter_map(data::parse_edge).collect()
}

/// `lr`'s training points for `generate=points seed=seed`.
pub fn generate_labelled_points(points: u64, seed: u64) -> Vec<(f64, Vec<f64>)> {
    (0..points).map(|p| data::labelled_point(seed, p)).collect()
}

/// `kmeans`' points for `generate=points seed=seed`.
pub fn generate_clustered_points(points: u64, seed: u64) -> Vec<Vec<f64>> {
    (0..points)
        .map(|p| data::clustered_point(seed, p))
        .collect()
}

/// `pagerank`'s edges for `generate=vertices seed=seed`, repeats included, as the job generates
/// them before it drops repeats.
pub fn generate_edges(vertices: u64, seed: u64) -> Vec<(u64, u64)> {
    (0..vertices)
        .flat_map(|v| data::out_edges(seed, vertices, v))
        .collect()
}

/// Logistic regression by batch gradient descent from zero weights: `iterations` times,
/// `w <- w - step * (1/n) * sum((sigmoid(w.x) - y) * x)` over all `n` points.
pub fn logistic_regression(points: &[(f64, Vec<f64>)], iterations: u32, step: f64) -> Vec<f64> {
    let n = points.len() as f64;
    let features = points.first().map_or(0, |(_, x)| x.len());
    let mut weights = vec![0.0; features];
    for _ in 0..iterations {
        let mut gradient = vec![0.0; features];
        for (label, x) in points {
            let z: f64 = weights.iter().zip(x).map(|(w, x)| w * x).sum();
            let error = 1.0 / (1.0 + (-z).exp()) - label;
            for (g, x) in gradient.iter_mut().zip(x) {
                *g += error * x;
            }
        }
        for (w, g) in weights.iter_mut().zip(&gradient) {
            *w -= step * (g / n);
        }
    }
    weights
}

/// Lloyd's algorithm from the first `k` points: `iterations` times, every point joins its nearest
/// centroid (squared Euclidean distance, the lowest index on a tie), and every centroid with
/// points moves to their mean; one without stays.
///
/// # Panics
///
/// If there are fewer than `k` points.
pub fn kmeans(points: &[Vec<f64>], k: usize, iterations: u32) -> Vec<Vec<f64>> {
    assert!(
        points.len() >= k,
        "kmeans of {} points into {k}",
        points.len()
    );
    let mut centroids = points[..k].to_vec();
    for _ in 0..iterations {
        let mut sums = vec![vec![0.0; centroids[0].len()]; k];
        let mut counts = vec![0u64; k];
        for point in points {
            let distance =
                |c: &Vec<f64>| -> f64 { c.iter().zip(point).map(|(c, x)| (c - x).powi(2)).sum() };
            let mut nearest = 0;
            for i in 1..k {
                if distance(&centroids[i]) < distance(&centroids[nearest]) {
                    nearest = i;
                }
            }
            counts[nearest] += 1;
            for (s, x) in sums[nearest].iter_mut().zip(point) {
                *s += x;
            }
        }
        for ((centroid, sum), count) in centroids.iter_mut().zip(&sums).zip(&counts) {
            if *count > 0 {
                *centroid = sum.iter().map(|s| s / *count as f64).collect();
            }
        }
    }
    centroids
}

/// Damping of [`pagerank`], networkx's default `alpha`.
pub const DAMPING: f64 = 0.85;

/// PageRank as networkx's `pagerank(G, alpha=0.85)` computes it for `G` a `DiGraph` of `edges`
/// (so repeated edges count once, and a self-loop is an edge: it counts in its vertex's
/// out-degree and passes rank back to it), over the vertices the edges name, by vertex: ranks
/// start at `1/n`, and each of exactly `iterations` steps takes
/// `r'[v] = (1 - d)/n + d * (sum over u->v of r[u]/outdeg(u) + dangling/n)`, where `dangling` is
/// the summed rank of the vertices without out-edges, spread evenly (networkx's default
/// `personalization` and `dangling`). Unlike networkx, it neither stops early on convergence nor
/// fails if `iterations` steps do not converge.
///
/// For edges `0 -> 1`, `1 -> 1`, `1 -> 2` (`n` 3; vertex 2 dangling), one step from `1/3` each:
/// `r'[0] = 0.05 + 0.85 * (1/3)/3 = 0.14444…`,
/// `r'[1] = 0.05 + 0.85 * (1/3 + 1/6 + 1/9) = 0.56944…`,
/// `r'[2] = 0.05 + 0.85 * (1/6 + 1/9) = 0.28611…`, which sum to 1, as networkx's
/// `_pagerank_python` with `max_iter=1` finds.
pub fn pagerank(edges: &[(u64, u64)], iterations: u32) -> Vec<(u64, f64)> {
    let edges: BTreeSet<(u64, u64)> = edges.iter().copied().collect();
    let vertices: BTreeSet<u64> = edges.iter().flat_map(|&(src, dst)| [src, dst]).collect();
    let n = vertices.len() as f64;
    let mut out_degree: BTreeMap<u64, f64> = BTreeMap::new();
    for &(src, _) in &edges {
        *out_degree.entry(src).or_default() += 1.0;
    }
    let mut ranks: BTreeMap<u64, f64> = vertices.iter().map(|&v| (v, 1.0 / n)).collect();
    for _ in 0..iterations {
        let dangling: f64 = ranks
            .iter()
            .filter(|(v, _)| !out_degree.contains_key(v))
            .map(|(_, rank)| rank)
            .sum();
        let mut incoming: BTreeMap<u64, f64> = vertices.iter().map(|&v| (v, 0.0)).collect();
        for &(src, dst) in &edges {
            *incoming.get_mut(&dst).expect("a vertex") += ranks[&src] / out_degree[&src];
        }
        ranks = incoming
            .into_iter()
            .map(|(v, incoming)| {
                let rank = (1.0 - DAMPING) / n + DAMPING * (incoming + dangling / n);
                (v, rank)
            })
            .collect();
    }
    ranks.into_iter().collect()
}
