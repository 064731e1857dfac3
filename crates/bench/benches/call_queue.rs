//! Criterion benchmark of the scheduler's queue: one push and one pop with tens of thousands of
//! calls already waiting, under every policy (`cargo bench -p mote-bench --bench call_queue`).
//! The scheduling issue asks for microseconds per operation, not a scan.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use mote_sched::{CallQueue, Policy};
use std::time::Duration;

const WAITING: u64 = 50_000;
const FUNCTIONS: u64 = 100;

fn push_pop(c: &mut Criterion) {
    let mut group = c.benchmark_group("call_queue_push_pop_50k_waiting");
    for policy in Policy::ALL {
        let mut queue = CallQueue::new(policy, Duration::from_secs(60));
        for f in 0..FUNCTIONS {
            queue.complete(f, Duration::from_micros(f * 97 % 1000));
        }
        let mut now = 0;
        for i in 0..WAITING {
            now += 1_000;
            queue.push_at(i % FUNCTIONS, now, i);
        }
        group.bench_function(BenchmarkId::from_parameter(policy), |b| {
            let mut i = WAITING;
            b.iter(|| {
                now += 1_000;
                i += 1;
                queue.push_at(i % FUNCTIONS, now, i);
                queue.pop()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, push_pop);
criterion_main!(benches);
