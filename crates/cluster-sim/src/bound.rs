//! A lower bound on the p99 response time that any schedule, on any placement, could give a
//! burst on a cluster of a given size ([`p99_floor`]): what the comparisons' p99 column can be
//! held against when a smaller cluster is compared with a larger one.
//!
//! The argument: by time `t` the cluster's `C` cores have done at most `C·t` of work, so at
//! least `W − C·t` of the burst's work `W` is done after it, by calls that end after `t`. Those
//! calls arrived by the burst's last arrival `a`, so each has a response above `t − a`. The
//! fewest calls that can hold that work are the longest ones. So at `P = t − a`, at least
//! `k(P)` calls (the longest, summing to `W − C·(a + P)`) answer later than `P`, and once `k(P)`
//! reaches the calls above the p99's rank, no schedule has a p99 below `P`.
//!
//! Calls that wait without computing (the suite's `sleep`) count no work: under processor
//! sharing they hold no core, so the bound holds for every policy.

use crate::suite::SimFunction;
use std::time::Duration;

/// The least p99 response (seconds, nearest rank over all plans' calls together) that any
/// schedule could give `plans` on `cores` cores in all.
pub(crate) fn p99_floor(
    plans: &[&[(Duration, usize)]],
    suite: &[SimFunction],
    cores: usize,
) -> f64 {
    let calls: usize = plans.iter().map(|p| p.len()).sum();
    if calls == 0 || cores == 0 {
        return 0.0;
    }
    // Calls strictly above the p99's nearest rank.
    let rank = ((0.99 * calls as f64).ceil() as usize).clamp(1, calls);
    let above = calls - rank + 1;
    let burst: Vec<Burst> = plans.iter().map(|p| Burst::of(p, suite)).collect();
    let late = |p: f64| -> usize { burst.iter().map(|b| b.late_calls(p, cores as f64)).sum() };
    // `late` falls as `p` grows; find where it drops below `above`.
    let (mut low, mut high) = (
        0.0f64,
        burst.iter().map(|b| b.work_s).sum::<f64>() / cores as f64,
    );
    if late(low) < above {
        return 0.0;
    }
    for _ in 0..60 {
        let mid = (low + high) / 2.0;
        match late(mid) >= above {
            true => low = mid,
            false => high = mid,
        }
    }
    low
}

/// One seed's burst as the bound sees it.
struct Burst {
    /// The computing calls' work, longest first, seconds.
    longest_first: Vec<f64>,
    work_s: f64,
    last_arrival_s: f64,
}

impl Burst {
    fn of(plan: &[(Duration, usize)], suite: &[SimFunction]) -> Self {
        let mut longest_first: Vec<f64> = plan
            .iter()
            .filter(|(_, f)| !suite[*f].waits)
            .map(|(_, f)| suite[*f].idle.as_secs_f64())
            .collect();
        longest_first.sort_by(|a, b| b.total_cmp(a));
        Self {
            work_s: longest_first.iter().sum(),
            longest_first,
            last_arrival_s: plan
                .iter()
                .map(|(at, _)| at.as_secs_f64())
                .fold(0.0, f64::max),
        }
    }

    /// How many calls at least answer later than `p` seconds on `cores` cores.
    fn late_calls(&self, p: f64, cores: f64) -> usize {
        let mut left = self.work_s - cores * (self.last_arrival_s + p);
        let mut calls = 0;
        for work in &self.longest_first {
            if left <= 0.0 {
                break;
            }
            left -= work;
            calls += 1;
        }
        calls
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUITE: [SimFunction; 2] = [
        SimFunction {
            name: "long",
            idle: Duration::from_secs(10),
            waits: false,
        },
        SimFunction {
            name: "nap",
            idle: Duration::from_secs(10),
            waits: true,
        },
    ];

    #[test]
    fn the_floor_is_where_the_work_left_no_longer_needs_the_p99s_calls() {
        // 100 ten-second calls at once on 10 cores: 1,000 s of work, done at best by 100 s,
        // when the last ten answer. The p99 (nearest rank: the 99th) is above P while at least
        // two calls answer later than P, i.e. while more than 10 s of work is left at P: up to
        // P = 99 s (the true best is 100 s).
        let floor = |plan: &[(Duration, usize)], cores| p99_floor(&[plan], &SUITE, cores);
        let plan = vec![(Duration::ZERO, 0); 100];
        assert!((floor(&plan, 10) - 99.0).abs() < 1e-6);
        // On 100 cores every call runs at once: 10 s, and the bound is just under.
        assert!((floor(&plan, 100) - 9.9).abs() < 1e-6);
        // Calls that only wait add no work but count: three calls must now answer late.
        let mut with_naps = plan.clone();
        with_naps.extend(vec![(Duration::ZERO, 1); 100]);
        assert!((floor(&with_naps, 10) - 98.0).abs() < 1e-6);
        // Arrivals spread over 50 s: the last arrived at 49.995 s, which the bound subtracts.
        let spread: Vec<(Duration, usize)> = (0..100)
            .map(|i| (Duration::from_millis(i * 505), 0))
            .collect();
        assert!((floor(&spread, 10) - 49.005).abs() < 1e-6);
        assert_eq!(floor(&[], 10), 0.0);
    }
}
