//! Average and percentiles of a measured or simulated metric, as the burst's reports give them.

use serde::Serialize;

/// Average and percentiles of a metric.
#[derive(Clone, Debug, Serialize)]
pub struct Distribution {
    /// Mean.
    pub avg: f64,
    /// Median.
    pub p50: f64,
    /// 75th percentile.
    pub p75: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
}

impl Distribution {
    /// The distribution of `values` (nearest-rank percentiles); zeros for no values.
    pub fn of(values: &[f64]) -> Self {
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let pct = |p: f64| match v.len() {
            0 => 0.0,
            n => v[((p * n as f64).ceil() as usize).clamp(1, n) - 1],
        };
        let avg = if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        };
        Self {
            avg,
            p50: pct(0.5),
            p75: pct(0.75),
            p95: pct(0.95),
            p99: pct(0.99),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distribution_uses_nearest_rank_percentiles() {
        let d = Distribution::of(&(1..=100).map(f64::from).collect::<Vec<_>>());
        assert_eq!((d.p50, d.p75, d.p95, d.p99), (50.0, 75.0, 95.0, 99.0));
        assert_eq!(d.avg, 50.5);
        assert_eq!(Distribution::of(&[]).p99, 0.0);
    }
}
