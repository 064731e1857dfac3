//! The input of the jobs in `jobs/`: the generators behind `--arg generate=… --arg seed=…` and
//! the text formats jobs load, shared by the job modules and by the end-to-end tests'
//! sequential reference (`tests/e2e/jobs/reference.rs` includes this file as a module), so that a
//! test computes its expected result from exactly the points and edges a job generated.
//!
//! Every generated item (a point, a vertex's out-edges) is a pure function of the seed and the
//! item's global number, and [`share`] gives each partition a contiguous range of the numbers, so
//! a job's data does not depend on its partition count. Generators use only integer arithmetic
//! and the correctly rounded `+ - * / sqrt` where the value matters, so a guest and a native test
//! generate the same bits; the one exception is [`out_edges`]' degree, a rounded `exp` that two
//! math libraries could round differently only on an exact half.
//!
//! Plain `std` and no dependencies, as the tests compile it inside their own crate.

use std::ops::Range;

/// Features of a generated point.
pub const FEATURES: usize = 20;

/// Clusters [`clustered_point`] draws its points around.
pub const CLUSTERS: u64 = 4;

/// The items `[index * total / partitions, (index + 1) * total / partitions)`: partition
/// `index`'s share of `total` generated items.
pub fn share(total: u64, partitions: usize, index: usize) -> Range<u64> {
    let bound = |i: usize| (u128::from(total) * i as u128 / partitions as u128) as u64;
    bound(index)..bound(index + 1)
}

/// Random numbers for one generated item: SplitMix64, seeded from the job's seed, the kind of
/// item (a stream) and the item's number, so items are independent of each other's order.
pub struct Random {
    state: u64,
}

const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Random {
    /// The numbers of item `item` of stream `stream` under `seed`.
    pub fn new(seed: u64, stream: u64, item: u64) -> Self {
        let state = mix(mix(mix(seed.wrapping_add(GOLDEN_GAMMA)) ^ stream) ^ item);
        Self { state }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        mix(self.state)
    }

    /// A uniform number in `[0, 1)`, a multiple of 2^-53.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform number in `[low, high)`.
    pub fn uniform(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.unit()
    }

    /// A standard normal number (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        // 1 - unit is in (0, 1], where ln is finite.
        let radius = (-2.0 * (1.0 - self.unit()).ln()).sqrt();
        radius * (std::f64::consts::TAU * self.unit()).cos()
    }
}

const LABELLED_POINTS: u64 = 1;
const CLUSTERED_POINTS: u64 = 2;
const CLUSTER_CENTRES: u64 = 3;
const OUT_EDGES: u64 = 4;

/// The weights generated labels follow: alternating signs, magnitudes 0.5 to 2, so every feature
/// matters and a model can learn them.
fn hidden_weight(feature: usize) -> f64 {
    let magnitude = (1 + feature % 4) as f64 / 2.0;
    if feature.is_multiple_of(2) {
        magnitude
    } else {
        -magnitude
    }
}

/// Point number `point` of a logistic regression's generated training set: `(label, features)`,
/// [`FEATURES`] features uniform in `[-1, 1)` and the label 1 with probability
/// `1 / (1 + 2^-h)` for `h` the features' product with fixed hidden weights, else 0.
///
/// The probability is a power of two's logistic, computed exactly, so no `exp` differs between
/// the guest's and the host's math library.
pub fn labelled_point(seed: u64, point: u64) -> (f64, Vec<f64>) {
    let mut random = Random::new(seed, LABELLED_POINTS, point);
    let features: Vec<f64> = (0..FEATURES).map(|_| random.uniform(-1.0, 1.0)).collect();
    let h: f64 = features
        .iter()
        .enumerate()
        .map(|(j, x)| hidden_weight(j) * x)
        .sum();
    // 2^-h with h rounded to a whole number: exact, and steep enough to learn from.
    let odds = (-h.round()).clamp(-60.0, 60.0) as i32;
    let probability = 1.0 / (1.0 + 2f64.powi(odds));
    let label = if random.unit() < probability {
        1.0
    } else {
        0.0
    };
    (label, features)
}

/// Point number `point` of k-means' generated input: [`FEATURES`] features around one of
/// [`CLUSTERS`] centres uniform in `[-10, 10)`, off it by about 1 in every feature (the mean of
/// four uniform numbers in `[-2, 2)`: bell-shaped, and exact arithmetic).
pub fn clustered_point(seed: u64, point: u64) -> Vec<f64> {
    let mut random = Random::new(seed, CLUSTERED_POINTS, point);
    let cluster = random.next_u64() % CLUSTERS;
    let mut centre = Random::new(seed, CLUSTER_CENTRES, cluster);
    (0..FEATURES)
        .map(|_| {
            let noise: f64 = (0..4).map(|_| random.uniform(-2.0, 2.0)).sum::<f64>() / 4.0;
            centre.uniform(-10.0, 10.0) + noise
        })
        .collect()
}

/// The out-edges of vertex `vertex` of a generated graph of `vertices` vertices, as the Pregel
/// paper generates its benchmark graphs: a log-normal out-degree (μ 4, σ 1.3: about 127 edges on
/// average, a few vertices with thousands) and uniformly random destinations, which may repeat or
/// be the vertex itself.
pub fn out_edges(seed: u64, vertices: u64, vertex: u64) -> Vec<(u64, u64)> {
    if vertices == 0 {
        return Vec::new();
    }
    let mut random = Random::new(seed, OUT_EDGES, vertex);
    let degree = (4.0 + 1.3 * random.normal()).exp().round() as u64;
    (0..degree)
        .map(|_| (vertex, random.next_u64() % vertices))
        .collect()
}

/// A labelled point's line, `label,feature,feature,…` with label 0 or 1; `None` for a blank line.
///
/// # Panics
///
/// If the line is malformed, naming it.
pub fn parse_labelled(line: &str) -> Option<(f64, Vec<f64>)> {
    let mut values = parse_features(line)?;
    let label = values.remove(0);
    if label != 0.0 && label != 1.0 {
        panic!("the label of point {line:?} is not 0 or 1");
    }
    Some((label, values))
}

/// A point's line, `feature,feature,…`; `None` for a blank line.
///
/// # Panics
///
/// If a column is not a number, naming the line.
pub fn parse_features(line: &str) -> Option<Vec<f64>> {
    let line = line.trim();
    if line.is_empty() {
        return None;
    }
    let values = line
        .split(',')
        .map(|column| column.trim().parse::<f64>())
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_else(|e| panic!("point {line:?} is not comma-separated numbers: {e}"));
    Some(values)
}

/// An edge's line as SNAP writes graphs, `src dst` (whitespace-separated vertex numbers), where
/// `#` starts a comment; `None` for a line that is blank or all comment.
///
/// # Panics
///
/// If the line is neither, naming it.
pub fn parse_edge(line: &str) -> Option<(u64, u64)> {
    let content = line.split('#').next().unwrap_or_default();
    let mut columns = content.split_whitespace();
    let src = columns.next()?;
    let edge = match (src.parse(), columns.next().map(str::parse), columns.next()) {
        (Ok(src), Some(Ok(dst)), None) => Some((src, dst)),
        _ => None,
    };
    Some(edge.unwrap_or_else(|| panic!("edge {line:?} is not `src dst` in vertex numbers")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_cover_every_item_once_in_order() {
        for partitions in 1..9 {
            let mut next = 0;
            for index in 0..partitions {
                let range = share(1000, partitions, index);
                assert_eq!(range.start, next);
                next = range.end;
            }
            assert_eq!(next, 1000);
        }
    }

    #[test]
    fn items_depend_on_the_seed_and_their_number_only() {
        assert_eq!(labelled_point(7, 3), labelled_point(7, 3));
        assert_ne!(labelled_point(7, 3), labelled_point(8, 3));
        assert_ne!(clustered_point(7, 3), clustered_point(7, 4));
        assert_eq!(out_edges(7, 100, 5), out_edges(7, 100, 5));
    }

    #[test]
    fn generated_labels_are_mixed_and_degrees_average_about_127() {
        let ones = (0..1000).filter(|p| labelled_point(1, *p).0 == 1.0).count();
        assert!((300..700).contains(&ones), "{ones} of 1000 labels are 1");
        let edges: usize = (0..2000).map(|v| out_edges(1, 1 << 20, v).len()).sum();
        assert!((100..160).contains(&(edges / 2000)), "{edges} edges");
    }

    #[test]
    fn lines_parse_or_panic_naming_themselves() {
        assert_eq!(parse_labelled("1, 0.5,-2"), Some((1.0, vec![0.5, -2.0])));
        assert_eq!(parse_features("  "), None);
        assert_eq!(parse_edge("# FromNodeId ToNodeId"), None);
        assert_eq!(parse_edge("3\t4 # why"), Some((3, 4)));
        let bad = std::panic::catch_unwind(|| parse_edge("3 4 5")).unwrap_err();
        assert!(bad.downcast_ref::<String>().unwrap().contains("\"3 4 5\""));
        assert!(std::panic::catch_unwind(|| parse_labelled("2,1")).is_err());
        assert!(std::panic::catch_unwind(|| parse_features("1,x")).is_err());
    }
}
