//! What the task graph costs a task: declaring a stage over ten partitions, popping and
//! completing each task, with no guest code. The worker's scheduling cost per task is this plus
//! the lock and the call into the instance (`mote bench jobs` measures the whole).

use criterion::{Criterion, criterion_group, criterion_main};
use mote_jobs::{
    Cursor, Next, PartitionMap, ProgramBuilder, Stage, StageKind, TaskGraph, WorkerId,
};
use std::hint::black_box;

fn busy_loop(c: &mut Criterion) {
    let mut b = ProgramBuilder::new(10);
    let d = b.dataset("data", true);
    b.repeat(u64::MAX);
    b.stage(Stage {
        kind: StageKind::Compute,
        func: 1,
        reads: vec![d],
        writes: vec![d],
    })
    .expect("a valid stage");
    b.end().expect("closes the repeat");
    let program = b.finish().expect("a valid program");
    let map = PartitionMap::assign(program.groups.sizes(), &[1]);
    let mut graph = TaskGraph::new(&program, &map, WorkerId(0));
    let mut cursor = Cursor::new();
    let mut loads = Vec::new();
    c.bench_function("declare a stage of 10 tasks, run each", |bench| {
        bench.iter(|| {
            let Next::Stage { seq, stage } = cursor.next(&program) else {
                unreachable!("the loop never ends")
            };
            graph.declare(&program, seq, stage, &mut loads);
            while let Some(t) = graph.pop() {
                black_box(graph.view(t));
                graph.complete(t);
            }
        })
    });
}

criterion_group!(benches, busy_loop);
criterion_main!(benches);
