//! Criterion benchmark of one placement decision (`cargo bench -p mote-cluster --bench
//! placement`), which every call that reaches a node of a cluster pays: at 3 nodes (this
//! machine's tests), 100 and 1,000 (the simulations'), with every node busy so the decision
//! falls through to its last rule and looks at every node.

use criterion::{Criterion, criterion_group, criterion_main};
use mote_cluster::{Event, Load, Membership, Origin, Placement, PlacementConfig, Report};
use std::hint::black_box;
use std::time::Duration;

fn report(i: usize, busy: bool) -> Report {
    Report {
        name: format!("node-{i}").as_str().into(),
        url: format!("http://10.0.0.{i}:8080"),
        load: Load {
            // Idle nodes never run out of cores, however many calls are counted on them.
            cores: if busy { 32 } else { 1 << 30 },
            running: if busy { 32 } else { 0 },
            queued: if busy { 4 } else { 0 },
            work: Duration::from_millis(if busy { 40 + i as u64 % 17 } else { 0 }),
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
                    black_box(p.place(&functions[i], Duration::ZERO, Origin::Client, &[]))
                })
            });
        }
    }
}

criterion_group!(benches, placement);
criterion_main!(benches);
