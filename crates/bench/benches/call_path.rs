//! Criterion benchmarks of the call path, for regression tracking (`cargo bench -p mote-bench`,
//! with `-- --save-baseline main` and later `-- --baseline main` to compare): a call through the
//! node, from a polling and from an async caller, next to the same call on the runtime alone.

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use mote_bench::Fixture;
use std::time::Duration;

fn call_path(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let fixture = Fixture::start(&rt, 1).unwrap();
    let body = Bytes::from_static(&[b'x'; 64]);
    let mut group = c.benchmark_group("call_path");
    group.bench_function("runtime_only", |b| {
        b.iter(|| fixture.call_runtime(&body).unwrap())
    });
    group.bench_function("node_polling_caller", |b| {
        b.iter(|| {
            let spin = Duration::from_micros(200);
            fixture
                .node
                .invoke_blocking(Fixture::FUNCTION, body.clone(), spin)
                .unwrap()
                .result
                .unwrap()
        })
    });
    group.bench_function("node_async_caller", |b| {
        b.iter(|| rt.block_on(fixture.call_node(body.clone())).unwrap())
    });
    group.finish();
}

criterion_group!(benches, call_path);
criterion_main!(benches);
