//! Criterion benchmark of what a cold start pays for its artefact (`cargo bench -p mote-runtime
//! --bench artifact`): checking the checksum, checking and mapping (what a load does), and
//! mapping unchecked (what wasmtime alone would do), side by side, for an artefact of a one-line
//! function (the size of `mote bench micro`'s cold functions) and one the size of the example
//! Rust guests' (116 to 178 KB).

use criterion::{Criterion, criterion_group, criterion_main};
use mote_runtime::ArtifactCache;
use wasmtime::{Engine, Module};

/// A module of `functions` small functions, whose compiled artefact grows with their number.
fn module(functions: usize) -> String {
    let mut wat = String::from("(module");
    for i in 0..functions {
        wat.push_str(&format!(
            "(func (export \"f{i}\") (param i64) (result i64) local.get 0 i64.const {i} i64.mul)"
        ));
    }
    wat.push(')');
    wat
}

fn artifact(c: &mut Criterion) {
    for functions in [1, 400] {
        sized(c, functions);
    }
}

fn sized(c: &mut Criterion, functions: usize) {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::default();
    let cache = ArtifactCache::open(dir.path(), &engine).unwrap();
    let wasm = wat::parse_str(module(functions)).unwrap();
    let sha = ArtifactCache::digest(&wasm);
    cache
        .store(&sha, &Module::new(&engine, &wasm).unwrap())
        .unwrap();
    let path = cache.path(&sha);
    let size = std::fs::metadata(&path).unwrap().len();
    let mut group = c.benchmark_group(format!("artifact_{}kb", size / 1000));
    group.bench_function("check", |b| b.iter(|| assert!(cache.is_stored(&sha))));
    group.bench_function("check_and_map", |b| {
        b.iter(|| cache.load(&engine, &sha).unwrap())
    });
    group.bench_function("map_unchecked", |b| {
        // SAFETY: the file was written just now by `store` from a module of this engine.
        b.iter(|| unsafe { Module::deserialize_file(&engine, &path) }.unwrap())
    });
    group.finish();
}

criterion_group!(benches, artifact);
criterion_main!(benches);
