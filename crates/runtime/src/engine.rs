//! The wasmtime engine, its configuration, and the linker with mote's host functions.

use crate::artifact::ArtifactCache;
use crate::call::{self, CallState};
use crate::error::{CompileError, RuntimeError};
use crate::function::Function;
use crate::microtask;
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
    /// Instance slots in the pooling allocator for calls that run to completion on an executor.
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
}

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
            keep_resident_bytes: 2 << 20,
            microtask_slots: 256,
        }
    }
}

/// The engine, linkers and caches shared by every call on a node.
pub struct Runtime {
    engine: Engine,
    /// Host functions for calls that run to completion on the calling thread.
    linker: Linker<CallState>,
    /// Asynchronous host functions for microtask functions, whose calls are futures.
    microtask_linker: Linker<CallState>,
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
        call::add_host_functions(&mut linker).map_err(engine_error)?;
        let mut microtask_linker = Linker::new(&engine);
        microtask::add_host_functions(&mut microtask_linker).map_err(engine_error)?;
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

    /// Compiles and links `wasm`, detecting its guest kind. The compiled artefact is cached on
    /// disk under the module's sha256, so compiling the same bytes again (a redeploy, a restart)
    /// loads it instead. Nothing is written unless the module is accepted.
    pub fn compile(&self, wasm: &[u8]) -> Result<Arc<Function>, CompileError> {
        let sha256 = ArtifactCache::digest(wasm);
        let module = match self.artifacts.load(&self.engine, &sha256) {
            Some(module) => module,
            None => {
                check_header(wasm)?;
                let module = wasmtime::Module::from_binary(&self.engine, wasm)
                    .map_err(|e| CompileError::Invalid(format!("{e:#}")))?;
                let function = self.link(module.clone(), sha256.clone())?;
                self.artifacts.store(&sha256, &module)?;
                return Ok(Arc::new(function));
            }
        };
        Ok(Arc::new(self.link(module, sha256)?))
    }

    /// Loads a function whose module was accepted before, from its cached artefact if there is
    /// one, otherwise by compiling the bytes `read_wasm` returns.
    pub fn load(
        &self,
        sha256: &str,
        read_wasm: impl FnOnce() -> std::io::Result<Vec<u8>>,
    ) -> Result<Arc<Function>, CompileError> {
        match self.artifacts.load(&self.engine, sha256) {
            Some(module) => Ok(Arc::new(self.link(module, sha256.to_owned())?)),
            None => {
                let wasm = read_wasm().map_err(|e| {
                    CompileError::Invalid(format!("cannot read stored module {sha256}: {e}"))
                })?;
                self.compile(&wasm)
            }
        }
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

/// The engine: a pooling allocator (copy-on-write memory images, pages reset in place, fiber
/// stacks for microtask calls) and epoch interruption.
fn build_engine(config: &RuntimeConfig) -> wasmtime::Result<Engine> {
    let slots = config.instance_slots.saturating_add(config.microtask_slots);
    let mut pool = PoolingAllocationConfig::default();
    pool.total_core_instances(slots)
        .total_memories(slots)
        .total_tables(slots)
        .total_stacks(config.microtask_slots)
        .max_memory_size((config.max_memory_mb as usize) << 20)
        // Between calls, reset only the pages a call dirtied (found with the PAGEMAP_SCAN
        // ioctl on Linux 6.7+) by rewriting them in place, up to this many bytes. Unmapping
        // them instead (madvise) costs a TLB shoot-down on every core and a page fault per
        // page on the next call; measured on the Rust `echo` guest it was 14 µs of a 16 µs
        // call. Without PAGEMAP_SCAN, wasmtime falls back to resetting only the first bytes.
        .pagemap_scan(wasmtime::Enabled::Auto)
        .linear_memory_keep_resident(config.keep_resident_bytes)
        .table_keep_resident(64 << 10);
    let mut wasm = Config::new();
    wasm.epoch_interruption(config.epoch_interruption)
        .memory_init_cow(true)
        // A microtask call's fiber stack holds the deepest wasm stack (wasmtime's default
        // limit, 512 KiB) plus the host functions above it.
        .async_stack_size(1 << 20)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    Engine::new(&wasm)
}

/// Rejects bytes that are not a core WebAssembly module with a message that says what they are.
fn check_header(wasm: &[u8]) -> Result<(), CompileError> {
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
        return Err(CompileError::Component);
    }
    Ok(())
}

/// Names of the host functions, for error messages and docs.
pub(crate) const PROVIDED_MODULES: [&str; 2] = [abi::IMPORT_MODULE, abi::WASI_P1_MODULE];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_check_names_what_it_found() {
        let e = check_header(b"hello world").unwrap_err().to_string();
        assert!(e.contains("68656c6c"), "{e}");
        assert!(check_header(b"").unwrap_err().to_string().contains("empty"));
        let component = [0, b'a', b's', b'm', 0x0d, 0, 1, 0];
        assert!(matches!(
            check_header(&component),
            Err(CompileError::Component)
        ));
        assert!(check_header(&[0, b'a', b's', b'm', 1, 0, 0, 0]).is_ok());
    }
}
