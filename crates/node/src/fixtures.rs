//! Guest modules the node's unit tests share.

/// Folds `n` million numbers, `n` the little-endian u32 request body (about `n` ms; no body: no
/// work), and returns the 8-byte result, so a preempted call's answer can be compared with an
/// unpreempted one's. With `phase`, it first declares a whole-core phase, which makes it a
/// microtask function.
pub(crate) fn fold(phase: bool) -> String {
    let (import, declare) = match phase {
        true => (
            r#"(import "mote" "phase" (func $phase (param i32)))"#,
            "(call $phase (i32.const 1000))",
        ),
        false => ("", ""),
    };
    format!(
        r#"(module {import} (memory (export "memory") 1)
        (func (export "mote_alloc") (param i32) (result i32) i32.const 16)
        (func (export "mote_handle") (param $p i32) (param $n i32) (result i64)
          (local $i i64) (local $end i64) (local $acc i64)
          {declare}
          (if (local.get $n) (then
            (local.set $end (i64.mul (i64.extend_i32_u (i32.load (local.get $p))) (i64.const 1000000)))))
          (local.set $acc (i64.const 1469598103934665603))
          (block $done (loop $l
            (br_if $done (i64.ge_u (local.get $i) (local.get $end)))
            (local.set $acc (i64.mul (i64.xor (local.get $acc) (local.get $i)) (i64.const 1099511628211)))
            (local.set $i (i64.add (local.get $i) (i64.const 1)))
            (br $l)))
          (i64.store (i32.const 0) (local.get $acc))
          i64.const 8))"#
    )
}

/// Runs `calls` on a new thread made a reader as the gateway makes one: its own runtime, then
/// confined by a reader's filter (its own runtime's eventfd allowed) before its first call.
pub(crate) fn on_reader<T: Send + 'static>(
    node: std::sync::Arc<crate::Node>,
    calls: impl AsyncFnOnce(&crate::Node, &crate::Reader) -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let wakes = mote_confine::own_wakers(&runtime).unwrap();
        mote_confine::Filter::reader(&wakes)
            .unwrap()
            .confine_this_thread()
            .unwrap();
        let reader = node.reader().unwrap();
        runtime.block_on(calls(&node, &reader))
    })
}

/// A node started with `config` and `modules` (name, WAT) deployed in order, on an I/O runtime
/// of its own with `workers` threads.
pub(crate) fn node_with(
    config: impl Into<crate::NodeConfig>,
    workers: usize,
    modules: &[(&str, &str)],
) -> (
    std::sync::Arc<crate::Node>,
    tempfile::TempDir,
    tokio::runtime::Runtime,
) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let node = runtime.block_on(async {
        let node = crate::Node::start_embedded(dir.path(), config)
            .await
            .unwrap();
        for (name, wat) in modules {
            let wasm = bytes::Bytes::from(wat::parse_str(wat).unwrap());
            let name = mote_types::FunctionName::new(*name).unwrap();
            node.deploy(name, wasm, mote_types::Limits::default())
                .await
                .unwrap();
        }
        node
    });
    (std::sync::Arc::new(node), dir, runtime)
}
