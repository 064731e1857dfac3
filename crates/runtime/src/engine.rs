//! The wasmtime engine and its configuration, the linkers with mote's host functions (two for
//! core modules, one for `wasi:http` components), and turning module or component bytes into a
//! [`Function`]: compiled, or loaded from its cached artefact.

use crate::artifact::ArtifactCache;
use crate::component::{self, ProxyState};
use crate::error::{CompileError, RuntimeError};
use crate::function::Code;
use crate::function::Function;
use crate::host;
use crate::state::CallState;
use crate::ticker::{EpochTicker, TickerPeriods};
use mote_types::abi;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, Linker, PoolingAllocationConfig};

/// How the runtime is set up. [`RuntimeConfig::new`] gives production defaults.
#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    /// Where compiled artefacts are cached.
    pub artifact_dir: PathBuf,
    /// Instance slots in the pooling allocator for calls of modules without phases, blocking or
    /// run as futures where they were read.
    pub instance_slots: u32,
    /// The most memory any function may be given, in MiB; the pool reserves address space for it.
    pub max_memory_mb: u32,
    /// The epoch ticker's periods, which bound how far a call can overrun its budget.
    pub epoch_tick: TickerPeriods,
    /// Compile epoch checks into guest code and run the ticker. Only a benchmark's baseline
    /// turns this off, to measure what the checks cost: without them budgets are not enforced.
    pub epoch_interruption: bool,
    /// The largest response a call may return, in bytes.
    pub max_response_bytes: usize,
    /// How many dirtied bytes of an instance's memory are reset in place between calls rather
    /// than unmapped.
    pub keep_resident_bytes: usize,
    /// Further instance slots, with fiber stacks, for calls of microtask functions: the most
    /// such calls alive at once (a call waiting on storage counts).
    pub microtask_slots: u32,
    /// Component instance slots, with fiber stacks, for requests to `wasi:http` components: the
    /// most such requests alive at once (one waiting on a body counts).
    pub proxy_slots: u32,
}

/// What the pool reserves per component slot: a proxy component built with the preview1
/// adapter is several core instances (the guest, the adapter, and the shims between them),
/// each with its tables, and up to two memories.
const CORE_INSTANCES_PER_PROXY: u32 = 8;
const MEMORIES_PER_PROXY: u32 = 2;

impl RuntimeConfig {
    /// Defaults sized for `executors` concurrent calls, caching artefacts under `artifact_dir`.
    pub fn new(artifact_dir: impl Into<PathBuf>, executors: usize) -> Self {
        Self {
            artifact_dir: artifact_dir.into(),
            // Spare slots beyond one per executor let the pool keep recently used modules' memory
            // images mapped (slot affinity), which makes re-instantiation cheaper.
            instance_slots: (executors as u32).saturating_mul(16).clamp(64, 1000),
            max_memory_mb: mote_types::Limits::MAX_MEMORY_MB,
            epoch_tick: TickerPeriods {
                coarse: Duration::from_micros(500),
                fine: Duration::from_micros(25),
            },
            epoch_interruption: true,
            max_response_bytes: 16 << 20,
            keep_resident_bytes: KEEP_RESIDENT_BYTES,
            microtask_slots: 256,
            proxy_slots: 256,
        }
    }
}

/// The engine, linkers and caches shared by every call on a node.
pub struct Runtime {
    pub(crate) engine: Engine,
    /// Host functions for calls that run to completion on the calling thread.
    linker: Linker<CallState>,
    /// Asynchronous host functions for microtask functions, whose calls are futures.
    microtask_linker: Linker<CallState>,
    /// WASI 0.2 and `wasi:http` for proxy components.
    proxy_linker: wasmtime::component::Linker<ProxyState>,
    artifacts: ArtifactCache,
    config: RuntimeConfig,
    /// `None` only when `epoch_interruption` is off.
    ticker: Option<EpochTicker>,
}

impl Runtime {
    /// Builds the engine and starts the epoch ticker.
    pub fn new(config: RuntimeConfig) -> Result<Self, RuntimeError> {
        let engine_error = |e: wasmtime::Error| RuntimeError::Engine(format!("{e:#}"));
        let engine = build_engine(&config).map_err(engine_error)?;
        let mut linker = Linker::new(&engine);
        host::add_blocking(&mut linker).map_err(engine_error)?;
        let mut microtask_linker = Linker::new(&engine);
        host::add_async(&mut microtask_linker).map_err(engine_error)?;
        let proxy_linker = component::linker(&engine).map_err(engine_error)?;
        let artifacts = ArtifactCache::open(&config.artifact_dir, &engine)?;
        let ticker = config
            .epoch_interruption
            .then(|| EpochTicker::start(engine.clone(), config.epoch_tick));
        // WASI preview1's synchronous host functions run on a Tokio runtime that wasmtime-wasi
        // builds on first use. Build it now, on a thread outside any Tokio context, so that the
        // first use is not on an executor thread, where seccomp forbids the threads and
        // descriptors a runtime needs.
        std::thread::spawn(|| wasmtime_wasi::runtime::in_tokio(async {}))
            .join()
            .map_err(|_| RuntimeError::Engine("cannot start WASI's runtime".into()))?;
        Ok(Self {
            engine,
            linker,
            microtask_linker,
            proxy_linker,
            artifacts,
            config,
            ticker,
        })
    }

    /// Links `module` with the host functions its imports call for: a module that imports a
    /// microtask function gets the asynchronous linker (its calls are futures, which costs
    /// about 0.25 µs a call, so only these modules pay it), any other the synchronous one.
    fn link(&self, module: wasmtime::Module, sha256: String) -> Result<Function, CompileError> {
        let microtask = module
            .imports()
            .any(|i| abi::is_microtask_import(i.module(), i.name()));
        let linker = match microtask {
            true => &self.microtask_linker,
            false => &self.linker,
        };
        Function::link(linker, module, sha256, microtask)
    }

    /// Compiles and links `wasm`, detecting its guest kind; if a whole artefact of the same
    /// bytes is cached (a redeploy, a restart), it is loaded instead. Writes nothing: a deploy
    /// that accepts the function calls [`Runtime::keep`] once it has checked everything else.
    pub fn compile(&self, wasm: &[u8]) -> Result<Arc<Function>, CompileError> {
        let sha256 = ArtifactCache::digest(wasm);
        if check_header(wasm)? == Layer::Component {
            let component = match self.artifacts.load_component(&self.engine, &sha256) {
                Some(component) => component,
                None => component::compile(&self.engine, wasm)?,
            };
            return Ok(Arc::new(Function::link_component(
                &self.proxy_linker,
                component,
                sha256,
            )?));
        }
        let module = match self.artifacts.load(&self.engine, &sha256) {
            Some(module) => module,
            None => self.compile_module(wasm)?,
        };
        Ok(Arc::new(self.link(module, sha256)?))
    }

    /// Compiles and links bytes not seen before: a module or a component, by their header.
    fn compile_bytes(&self, wasm: &[u8], sha256: String) -> Result<Function, CompileError> {
        match check_header(wasm)? {
            Layer::Module => self.link(self.compile_module(wasm)?, sha256),
            Layer::Component => Function::link_component(
                &self.proxy_linker,
                component::compile(&self.engine, wasm)?,
                sha256,
            ),
        }
    }

    fn compile_module(&self, wasm: &[u8]) -> Result<wasmtime::Module, CompileError> {
        wasmtime::Module::from_binary(&self.engine, wasm)
            .map_err(|e| CompileError::Invalid(format!("{e:#}")))
    }

    /// Makes sure `function`'s compiled artefact is on disk, whole, so that later loads map it
    /// instead of compiling; writes it (synced) unless it is there already.
    pub fn keep(&self, function: &Function) -> Result<(), CompileError> {
        match &function.code {
            Code::Module { pre, .. } => match self.artifacts.is_stored(function.sha256()) {
                true => Ok(()),
                false => self.artifacts.store(function.sha256(), pre.module()),
            },
            Code::Proxy(code) => match self.artifacts.is_stored_component(function.sha256()) {
                true => Ok(()),
                false => self
                    .artifacts
                    .store_component(function.sha256(), code.pre.instance_pre().component()),
            },
        }
    }

    /// Loads a function whose module was accepted before, from its cached artefact if there is
    /// a whole one; otherwise compiles the bytes `read_wasm` returns (the artefact is missing,
    /// damaged or from another engine) and caches the artefact again. This blocks for as long as
    /// a compile takes: call it where blocking is allowed.
    pub fn load(
        &self,
        sha256: &str,
        read_wasm: impl FnOnce() -> std::io::Result<Vec<u8>>,
    ) -> Result<Arc<Function>, CompileError> {
        if let Some(module) = self.artifacts.load(&self.engine, sha256) {
            return Ok(Arc::new(self.link(module, sha256.to_owned())?));
        }
        // Only a component's cold start, or a module whose artefact is gone, gets here.
        if let Some(component) = self.artifacts.load_component(&self.engine, sha256) {
            return Ok(Arc::new(Function::link_component(
                &self.proxy_linker,
                component,
                sha256.to_owned(),
            )?));
        }
        let wasm = read_wasm().map_err(|e| {
            CompileError::Invalid(format!("cannot read stored module {sha256}: {e}"))
        })?;
        let found = ArtifactCache::digest(&wasm);
        if found != sha256 {
            return Err(CompileError::Invalid(format!(
                "stored module {sha256} is damaged: its bytes hash to {found}"
            )));
        }
        let function = Arc::new(self.compile_bytes(&wasm, found)?);
        if let Err(e) = self.keep(&function) {
            // The function still runs; its next cold start compiles again.
            tracing::warn!(error = %e, "cannot cache the compiled artefact");
        }
        Ok(function)
    }

    /// Removes the cached artefact of a module no function uses any more.
    pub fn forget(&self, sha256: &str) {
        self.artifacts.remove(sha256);
    }

    /// The largest response a call may return.
    pub fn max_response_bytes(&self) -> usize {
        self.config.max_response_bytes
    }

    pub(crate) fn ticker(&self) -> Option<&EpochTicker> {
        self.ticker.as_ref()
    }
}

/// The dirtied bytes of an instance's memory reset in place between calls by default
/// ([`RuntimeConfig::keep_resident_bytes`]).
pub const KEEP_RESIDENT_BYTES: usize = 2 << 20;

/// The bytes of an instance's tables reset in place between calls.
pub const TABLE_KEEP_RESIDENT_BYTES: usize = 64 << 10;

/// The engine: a pooling allocator (copy-on-write memory images, pages reset in place, fiber
/// stacks for microtask calls) and epoch interruption.
fn build_engine(config: &RuntimeConfig) -> wasmtime::Result<Engine> {
    let slots = config.instance_slots.saturating_add(config.microtask_slots);
    let proxies = config.proxy_slots;
    let mut pool = PoolingAllocationConfig::default();
    pool.total_core_instances(
        slots.saturating_add(proxies.saturating_mul(CORE_INSTANCES_PER_PROXY)),
    )
    .total_memories(slots.saturating_add(proxies.saturating_mul(MEMORIES_PER_PROXY)))
    .total_tables(slots.saturating_add(proxies.saturating_mul(CORE_INSTANCES_PER_PROXY)))
    .total_component_instances(proxies)
    // Every call may run as a future on a fiber: one run where it was read, a microtask
    // function's, a request to a component.
    .total_stacks(slots.saturating_add(proxies))
    .max_memory_size((config.max_memory_mb as usize) << 20)
    // Between calls, reset only the pages a call dirtied (found with the PAGEMAP_SCAN
    // ioctl on Linux 6.7+) by rewriting them in place, up to this many bytes. Unmapping
    // them instead (madvise) costs a TLB shoot-down on every core and a page fault per
    // page on the next call; measured on the Rust `echo` guest it was 14 µs of a 16 µs
    // call. Without PAGEMAP_SCAN, wasmtime falls back to resetting only the first bytes.
    .pagemap_scan(wasmtime::Enabled::Auto)
    .linear_memory_keep_resident(config.keep_resident_bytes)
    .table_keep_resident(TABLE_KEEP_RESIDENT_BYTES);
    let mut wasm = Config::new();
    wasm.epoch_interruption(config.epoch_interruption)
        .memory_init_cow(true)
        // A microtask call's fiber stack holds the deepest wasm stack (wasmtime's default
        // limit, 512 KiB) plus the host functions above it.
        .async_stack_size(1 << 20)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    Engine::new(&wasm)
}

/// Which layer of WebAssembly a binary is.
#[derive(Debug, PartialEq, Eq)]
enum Layer {
    Module,
    Component,
}

/// Rejects bytes that are not WebAssembly with a message that says what they are, and tells a
/// core module from a component.
fn check_header(wasm: &[u8]) -> Result<Layer, CompileError> {
    const MAGIC: &[u8] = b"\0asm";
    if !wasm.starts_with(MAGIC) {
        let shown: String = wasm.iter().take(4).map(|b| format!("{b:02x}")).collect();
        return Err(CompileError::NotWasm(if wasm.is_empty() {
            "the body is empty; send the module's bytes".to_owned()
        } else {
            format!("expected the magic bytes 0061736d (\"\\0asm\"), found {shown}")
        }));
    }
    // Bytes 4..8 are the version; components set the layer field (bytes 6..8) to 1.
    if wasm.len() >= 8 && wasm[6..8] == [1, 0] {
        return Ok(Layer::Component);
    }
    Ok(Layer::Module)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mote_types::Limits;

    /// A mote ABI module that answers "ok".
    fn ok_module() -> Vec<u8> {
        wat::parse_str(
            r#"(module (memory (export "memory") 1) (data (i32.const 16) "ok")
                (func (export "mote_alloc") (param i32) (result i32) i32.const 1024)
                (func (export "mote_handle") (param i32 i32) (result i64) i64.const 0x1000000002))"#,
        )
        .unwrap()
    }

    /// Compiles `wasm` in a runtime on `dir` and keeps its artefact; returns its sha256.
    fn compiled(dir: &std::path::Path, wasm: &[u8]) -> String {
        let rt = Runtime::new(RuntimeConfig::new(dir, 1)).unwrap();
        let f = rt.compile(wasm).unwrap();
        rt.keep(&f).unwrap();
        f.sha256().to_owned()
    }

    #[test]
    fn a_cached_artefact_is_loaded_instead_of_compiled() {
        let dir = tempfile::tempdir().unwrap();
        let sha = compiled(dir.path(), &ok_module());
        let rt = Runtime::new(RuntimeConfig::new(dir.path(), 1)).unwrap();
        let f = rt
            .load(&sha, || {
                panic!("the module was recompiled instead of loaded from the cache")
            })
            .unwrap();
        assert_eq!(f.kind(), mote_types::GuestKind::MoteAbiV1);
        rt.forget(&sha);
        let err = rt
            .load(&sha, || Err(std::io::ErrorKind::NotFound.into()))
            .err()
            .unwrap();
        assert!(err.to_string().contains(&sha), "{err}");
    }

    #[test]
    fn compiling_writes_nothing_until_the_function_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let rt = Runtime::new(RuntimeConfig::new(dir.path(), 1)).unwrap();
        let f = rt.compile(&ok_module()).unwrap();
        let files = || std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(files(), 0, "compile wrote to the artefact cache");
        rt.keep(&f).unwrap();
        assert_eq!(files(), 1);
    }

    /// The regression of issue 18: bytes flipped in a cached artefact's machine code were
    /// mapped and run after a restart.
    #[test]
    fn a_damaged_artefact_is_compiled_again_and_never_run() {
        let dir = tempfile::tempdir().unwrap();
        let wasm = ok_module();
        let sha = compiled(dir.path(), &wasm);
        let rt = Runtime::new(RuntimeConfig::new(dir.path(), 1)).unwrap();
        let path = rt.artifacts.path(&sha);
        let mut bytes = std::fs::read(&path).unwrap();
        // Flip bytes in the middle of the function bodies, where nothing but a checksum looks.
        let loaded = rt.load(&sha, || unreachable!()).unwrap();
        let Code::Module { pre, .. } = &loaded.code else {
            unreachable!("a module was deployed")
        };
        let text = pre.module().text().to_vec();
        let at = bytes
            .windows(text.len())
            .position(|w| w == text)
            .expect("the artefact holds the text section")
            + text.len() / 2;
        bytes[at] ^= 0xff;
        bytes[at + 1] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        drop(rt);

        let rt = Runtime::new(RuntimeConfig::new(dir.path(), 1)).unwrap();
        let mut recompiled = false;
        let f = rt
            .load(&sha, || {
                recompiled = true;
                Ok(wasm.clone())
            })
            .unwrap();
        assert!(recompiled, "the damaged artefact was mapped as code");
        let out = rt
            .call(&f, &Arc::from("ok"), Limits::default(), b"")
            .unwrap();
        assert_eq!(out.body, b"ok");
        // The artefact was written whole again: the next start maps it.
        let rt = Runtime::new(RuntimeConfig::new(dir.path(), 1)).unwrap();
        rt.load(&sha, || panic!("the artefact was not repaired"))
            .unwrap();
    }

    #[test]
    fn a_damaged_module_blob_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let rt = Runtime::new(RuntimeConfig::new(dir.path(), 1)).unwrap();
        let sha = ArtifactCache::digest(&ok_module());
        let err = rt.load(&sha, || Ok(b"\0asm garbage".to_vec())).unwrap_err();
        let err = err.to_string();
        assert!(err.contains(&sha) && err.contains("damaged"), "{err}");
    }

    #[test]
    fn header_check_names_what_it_found() {
        let e = check_header(b"hello world").unwrap_err().to_string();
        assert!(e.contains("68656c6c"), "{e}");
        assert!(check_header(b"").unwrap_err().to_string().contains("empty"));
        let component = [0, b'a', b's', b'm', 0x0d, 0, 1, 0];
        assert_eq!(check_header(&component).unwrap(), Layer::Component);
        assert_eq!(
            check_header(&[0, b'a', b's', b'm', 1, 0, 0, 0]).unwrap(),
            Layer::Module
        );
    }
}
