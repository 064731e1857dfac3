//! Criterion benchmark of handing calls over to a peer that pulled them (`cargo bench -p
//! mote-sched --bench release`): [`CallQueue::release`] sorts the waiting calls under the
//! queue's lock, so this is how long a pull keeps the node's executors from the queue, at
//! 100, 1,000 and 10,000 waiting calls of sixteen functions, SEPT with preemption, asked for
//! two calls (a peer with two free cores).

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use mote_sched::{CallQueue, Policy};
use std::hint::black_box;
use std::time::Duration;

fn queue(waiting: u64) -> CallQueue<u64> {
    let mut q = CallQueue::preemptive(Policy::Sept, Duration::from_secs(60), 4);
    for f in 0..16u64 {
        q.complete(f, Duration::from_micros(100 << f));
    }
    for call in 0..waiting {
        q.push_at(call % 16, call * 1000, call);
    }
    q
}

fn release(c: &mut Criterion) {
    for waiting in [100, 1_000, 10_000] {
        c.bench_function(&format!("release/{waiting}_waiting"), |b| {
            b.iter_batched_ref(
                || queue(waiting),
                |q| black_box(q.release(2, 32, Duration::from_micros(1150), |_| true)),
                BatchSize::LargeInput,
            )
        });
    }
}

criterion_group!(benches, release);
criterion_main!(benches);
