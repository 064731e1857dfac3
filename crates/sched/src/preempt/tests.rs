//! Preemptive ranks: the rules, and schedules simulated on a preemptive `CallQueue`.

use super::*;
use crate::CallQueue;
use proptest::prelude::*;
use std::time::Duration;

const MS: u64 = 1_000_000;

#[test]
fn the_remaining_time_falls_then_attained_service_takes_over() {
    assert_eq!(remaining_ns(10, 0), 10);
    assert_eq!(remaining_ns(10, 4), 6);
    assert_eq!(remaining_ns(10, 10), 0);
    assert_eq!(remaining_ns(10, 11), 11);
    assert_eq!(
        remaining_ns(0, 3),
        3,
        "an unknown function ranks by attained service"
    );
}

#[test]
fn a_call_that_outruns_its_estimate_is_demoted_below_a_later_one() {
    let long = RankBasis::new(Policy::Sept, 0, 0, 5 * MS, 1, DEFAULT_AGING);
    let later = RankBasis::new(Policy::Sept, 40 * MS, 40 * MS, 5 * MS, 1, DEFAULT_AGING);
    // Close to its end, the first call outranks the later one...
    assert!(long.rank(4 * MS) < later.rank(0));
    // ...but once it has run 10 ms against an estimate of 5, it goes behind.
    assert!(later.rank(0) < long.rank(10 * MS));
    assert!(should_yield(long.rank(10 * MS), later.rank(0), 2 * MS, MS));
}

#[test]
fn equal_ranks_and_short_slices_never_preempt() {
    assert!(!should_yield(100, 100, u64::MAX, MS));
    assert!(!should_yield(100, 99, MS - 1, MS));
    assert!(should_yield(100, 99, MS, MS));
}

#[test]
fn fair_choice_weighs_the_remaining_time_by_recent_calls() {
    let often = RankBasis::new(Policy::Fc, 0, 0, 10 * MS, 8, DEFAULT_AGING);
    let rare = RankBasis::new(Policy::Fc, 0, 0, 50 * MS, 1, DEFAULT_AGING);
    assert!(rare.rank(0) < often.rank(0));
    assert_eq!(often.rank(0), DEFAULT_AGING * 8 * 10 * MS);
}

#[test]
fn time_ranked_policies_keep_their_anchor() {
    let b = RankBasis::new(Policy::Eect, 7 * MS, 3 * MS, 10 * MS, 4, DEFAULT_AGING);
    assert_eq!(b.rank(4 * MS), 13 * MS);
    let b = RankBasis::new(Policy::Rect, 7 * MS, 3 * MS, 10 * MS, 4, DEFAULT_AGING);
    assert_eq!(b.rank(4 * MS), 9 * MS);
    let b = RankBasis::new(Policy::Fifo, 7 * MS, 3 * MS, 10 * MS, 4, DEFAULT_AGING);
    assert_eq!(b.rank(99 * MS), 7 * MS);
}

/// A call of the simulation: its function, arrival and true length, in ticks.
#[derive(Clone, Copy, Debug)]
struct Job {
    function: u64,
    arrival: u64,
    length: u64,
}

/// What the simulation saw.
struct Trace {
    /// Each call's completion tick, in call order (`None`: never completed).
    completed: Vec<Option<u64>>,
    /// How many times each call completed.
    completions: Vec<u32>,
    /// Every violation of the rules found while running.
    violations: Vec<String>,
    preemptions: usize,
}

const TICK: u64 = MS;

/// A preemptive queue and the calls it holds, checking every call it hands out.
struct Checked<'a> {
    policy: Policy,
    jobs: &'a [Job],
    queue: CallQueue<usize>,
    /// The rank of every waiting call, as the queue gave it.
    waiting: Vec<Option<u64>>,
    /// Per waiting call: (function, call) of those that arrived after its rank and overtook
    /// it in this wait.
    overtaken_by: Vec<Vec<(u64, usize)>>,
    trace: Trace,
}

impl Checked<'_> {
    /// Takes the best waiting call, checking that it is the best and that it overtakes
    /// no call whose rank it arrived after.
    fn take(&mut self, now: u64) -> Option<(usize, RankBasis, u64)> {
        let taken = self.queue.pop_ranked()?;
        let i = taken.call;
        if self.waiting[i] != Some(taken.rank) {
            self.trace
                .violations
                .push(format!("t={now}: {i} left at another rank"));
        }
        self.waiting[i] = None;
        for (j, rank) in self.waiting.iter().enumerate() {
            let Some(r) = *rank else {
                continue;
            };
            if r < taken.rank {
                self.trace
                    .violations
                    .push(format!("t={now}: took {i} before better {j}"));
            }
            if self.jobs[i].arrival * TICK > r {
                // Ranks anchored at the call's own arrival admit no such overtaking;
                // RECT's, anchored at its function's previous call, admit one call per
                // function, since that function's next call is anchored after `r`.
                let function = self.jobs[i].function;
                let again = self.overtaken_by[j]
                    .iter()
                    .any(|&(f, c)| f == function && c != i);
                if self.policy != Policy::Rect || again {
                    self.trace.violations.push(format!(
                        "t={now}: {i} (arrived {}) overtook {j}, waiting at rank {r}",
                        self.jobs[i].arrival
                    ));
                }
                self.overtaken_by[j].push((function, i));
            }
        }
        self.overtaken_by[i].clear();
        Some((i, taken.basis, taken.attained_ns / TICK))
    }
}

/// Runs `jobs` on `cores` cores under preemptive `policy`, one tick at a time, the queue
/// ranking from function estimates (`estimates[f]` ticks, which may be wrong), and checks
/// the rules at every decision. As on a node, free cores take waiting calls before any
/// running call is considered for preemption, and a preemption swaps the running call with
/// the best waiting one in one step.
fn simulate(
    policy: Policy,
    jobs: &[Job],
    estimates: &[u64],
    cores: usize,
    quantum: u64,
    aging: u64,
) -> Trace {
    let mut q = Checked {
        policy,
        jobs,
        queue: CallQueue::preemptive(policy, Duration::from_secs(60), aging),
        waiting: vec![None; jobs.len()],
        overtaken_by: vec![Vec::new(); jobs.len()],
        trace: Trace {
            completed: vec![None; jobs.len()],
            completions: vec![0; jobs.len()],
            violations: Vec::new(),
            preemptions: 0,
        },
    };
    for (f, &e) in estimates.iter().enumerate() {
        q.queue.complete(f as u64, Duration::from_nanos(e * TICK));
    }
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&i| jobs[i].arrival);
    let mut arrivals = order.into_iter().peekable();
    // Per core: (call, its basis, ticks attained, ticks in this slice).
    let mut running: Vec<Option<(usize, RankBasis, u64, u64)>> = vec![None; cores];
    let mut now = 0u64;
    loop {
        while let Some(&i) = arrivals.peek()
            && jobs[i].arrival <= now
        {
            let rank = q.queue.push_at(jobs[i].function, jobs[i].arrival * TICK, i);
            q.waiting[i] = Some(rank);
            arrivals.next();
        }
        for core in running.iter_mut().filter(|c| c.is_none()) {
            *core = q.take(now).map(|(i, basis, ran)| (i, basis, ran, 0));
        }
        for core in running.iter_mut() {
            let Some((i, basis, ran, slice)) = *core else {
                continue;
            };
            let rank = basis.rank(ran * TICK);
            let best = q.queue.best_rank().unwrap_or(u64::MAX);
            if !should_yield(rank, best, slice * TICK, quantum * TICK) {
                continue;
            }
            q.waiting[i] = Some(q.queue.requeue(basis, ran * TICK, i));
            if q.waiting[i] != Some(rank) {
                q.trace
                    .violations
                    .push(format!("t={now}: {i} requeued at another rank"));
            }
            q.trace.preemptions += 1;
            *core = q.take(now).map(|(j, basis, ran)| (j, basis, ran, 0));
            match *core {
                Some((_, basis, ran, _)) if basis.rank(ran * TICK) < rank => {}
                other => q.trace.violations.push(format!(
                    "t={now}: {i} of rank {rank} was preempted for {other:?}"
                )),
            }
        }
        if running.iter().all(Option::is_none) && arrivals.peek().is_none() {
            break;
        }
        now += 1;
        for core in running.iter_mut() {
            let Some((i, basis, ran, slice)) = *core else {
                continue;
            };
            let ran = ran + 1;
            *core = Some((i, basis, ran, slice + 1));
            if ran >= jobs[i].length {
                q.trace.completions[i] += 1;
                q.trace.completed[i] = Some(now);
                q.queue
                    .complete(jobs[i].function, Duration::from_nanos(ran * TICK));
                *core = None;
            }
        }
    }
    q.trace
}

fn jobs() -> impl Strategy<Value = Vec<Job>> {
    prop::collection::vec(
        (0u64..4, 0u64..60, 1u64..40).prop_map(|(function, arrival, length)| Job {
            function,
            arrival,
            length,
        }),
        1..40,
    )
}

proptest! {
    /// Under every policy and any estimates: each call completes exactly once, a running
    /// call only ever gives its core to a strictly better call, the call taken is always
    /// the best waiting, and no call is overtaken by one that arrived after its rank (under
    /// RECT, by more than one call per function): no call starves.
    #[test]
    fn preemptive_schedules_keep_their_rules(
        jobs in jobs(),
        estimates in prop::collection::vec(0u64..40, 4),
        cores in 1usize..3,
        quantum in 1u64..5,
        aging in 1u64..100,
    ) {
        for policy in [Policy::Sept, Policy::Fc, Policy::Eect, Policy::Rect, Policy::Fifo] {
            let trace = simulate(policy, &jobs, &estimates, cores, quantum, aging);
            prop_assert!(trace.violations.is_empty(), "{policy}: {:?}", trace.violations);
            prop_assert!(trace.completions.iter().all(|&n| n == 1), "{policy}: {:?}", trace.completions);
            if policy == Policy::Fifo {
                prop_assert_eq!(trace.preemptions, 0, "FIFO never has a better call waiting");
            }
        }
    }
}

#[test]
fn with_exact_estimates_calls_arriving_together_finish_shortest_first() {
    let lengths = [30, 5, 20, 1, 12];
    let jobs: Vec<Job> = lengths
        .iter()
        .enumerate()
        .map(|(f, &length)| Job {
            function: f as u64,
            arrival: 0,
            length,
        })
        .collect();
    let trace = simulate(Policy::Sept, &jobs, &lengths, 1, 1, DEFAULT_AGING);
    let mut by_end: Vec<usize> = (0..jobs.len()).collect();
    by_end.sort_by_key(|&i| trace.completed[i]);
    assert_eq!(by_end, [3, 1, 4, 2, 0]);
    assert_eq!(trace.preemptions, 0, "nothing better arrives later");
}

#[test]
fn a_short_call_preempts_a_long_one_after_a_quantum() {
    // Function 0 takes 100 ticks, function 1 takes 2; a call of 1 arrives while 0 runs.
    let jobs = [
        Job {
            function: 0,
            arrival: 0,
            length: 100,
        },
        Job {
            function: 1,
            arrival: 10,
            length: 2,
        },
    ];
    let trace = simulate(Policy::Sept, &jobs, &[100, 2], 1, 3, DEFAULT_AGING);
    assert_eq!(trace.preemptions, 1);
    assert_eq!(trace.completed[1], Some(12), "it took the core on arrival");
    assert_eq!(trace.completed[0], Some(102));
}
