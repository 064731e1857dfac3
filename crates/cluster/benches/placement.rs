//! Criterion benchmark of one placement decision (`cargo bench -p mote-cluster --bench
//! placement`), which every call that reaches a node of a cluster pays: at 3 nodes (this
//! machine's tests), 100 and 1,000 (the simulations'), idle, and with every node busy so the
//! decision falls through to its last rule and reads every node's backlog. Calls of expected
//! times from 100 µs to 3 s. Also an idle node's choice of the peer to pull calls from.

use criterion::{Criterion, criterion_group, criterion_main};
use mote_cluster::{Backlog, Event, Load, Membership, Origin, Placement, PlacementConfig, Report};
use std::hint::black_box;
use std::time::Duration;

fn report(i: usize, busy: bool) -> Report {
    // A busy node runs 32 calls and queues 4, of expected times from 1 ms to 2 s.
    let mut backlog = Backlog::ranked();
    if busy {
        for call in 0..36u64 {
            let expected = Duration::from_micros(1000 << ((call + i as u64) % 12));
            match call < 32 {
                true => backlog.running(expected, expected / 2, Duration::from_millis(2)),
                false => backlog.queue(expected),
            }
        }
    }
    Report {
        name: format!("node-{i}").as_str().into(),
        url: format!("http://10.0.0.{i}:8080"),
        load: Load {
            // Idle nodes never run out of cores, however many calls are counted on them.
            cores: if busy { 32 } else { 1 << 30 },
            running: if busy { 32 } else { 0 },
            queued: if busy { 4 } else { 0 },
            backlog,
        },
        draining: false,
    }
}

fn placement(c: &mut Criterion) {
    let functions: Vec<String> = (0..64).map(|i| format!("function-{i}")).collect();
    for nodes in [3, 100, 1000] {
        for busy in [false, true] {
            let mut view = Membership::new(report(0, busy), Duration::ZERO);
            for i in 1..nodes {
                view.apply(Event::Seen {
                    report: report(i, busy),
                    at: Duration::ZERO,
                });
            }
            let mut p = Placement::new(view, PlacementConfig::default());
            let name = format!("{nodes}_nodes_{}", if busy { "busy" } else { "idle" });
            let mut i = 0;
            c.bench_function(&format!("place/{name}"), |b| {
                b.iter(|| {
                    i = (i + 1) % functions.len();
                    let expected = Duration::from_micros(100 << (i % 16));
                    black_box(p.place(&functions[i], expected, Origin::Client, &[]))
                })
            });
            if !busy {
                continue;
            }
            // An idle node choosing the peer to pull calls from: one look at every node, made
            // every `--pull-every-us` while it idles (late correction).
            c.bench_function(&format!("pull_from/{name}"), |b| {
                b.iter(|| black_box(p.pull_from()))
            });
            // A busy cluster's nodes report every second: here a report (still busy) comes
            // between any two decisions, as at 1,000 nodes and 1,000 calls a second.
            let mut n = 0;
            c.bench_function(&format!("place/{name}_reporting"), |b| {
                b.iter(|| {
                    i = (i + 1) % functions.len();
                    n = (n + 1) % nodes;
                    p.apply(Event::Seen {
                        report: report(n, busy),
                        at: Duration::ZERO,
                    });
                    let expected = Duration::from_micros(100 << (i % 16));
                    black_box(p.place(&functions[i], expected, Origin::Client, &[]))
                })
            });
        }
    }
}

criterion_group!(benches, placement);
criterion_main!(benches);
