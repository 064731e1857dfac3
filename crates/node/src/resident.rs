//! Which deployed functions are resident: compiled code mapped and an `InstancePre` linked, ready
//! for a warm call. A memory budget bounds them. Past it, the least recently called functions are
//! evicted, and the next call of an evicted function is a cold start: its precompiled artefact is
//! checked and mapped from disk, linked, and then instantiated like any call (or, if the artefact
//! is missing or damaged, the module is compiled again). Loading never runs on an executor
//! (seccomp forbids opening files there) nor on an async runtime's threads (a compile takes
//! milliseconds to seconds): [`Residency::load`] blocks, and the node calls it from a thread that
//! may block.
//!
//! Each function's residency is a [`Slot`], owned by this module: its code, when it was last
//! called, whether it was retired, and the lock that lets one load run per function at a time.
//!
//! Invariants:
//! - The `mote_resident_bytes` gauge is the sum of [`Function::resident_bytes`] over the filled
//!   slots (its atomic is the count itself): it is added to only by the caller that filled a slot
//!   and taken from only by the caller that emptied it (both with a swap, so no count is lost or
//!   doubled).
//! - A removed or replaced function is retired before its code is evicted, and a cold load
//!   checks `retired` after filling the slot (both sequentially consistent), so a load racing a
//!   removal either sees the flag and empties the slot again or is emptied by the removal:
//!   nothing stays counted for a function no one can call.
//! - Loads of one function are serialised by its slot's `loading` lock, and a load that gets the
//!   lock first looks whether the code became resident meanwhile: concurrent cold calls of one
//!   function wait for one load rather than each compiling.
//! - A call takes its own reference to the code before it is queued, so evicting a function never
//!   pulls code from under a queued or running call; the code is unmapped when the last call
//!   that holds it ends.
//!
//! A module whose blob this node does not hold (its record came from another node of the
//! cluster) is fetched from the [`ModuleSource`] the node was given, checked against its sha256
//! by the runtime before it is compiled, and stored as a blob only once it compiled.
//!
//! Recency is a timestamp each call stores in its slot (one relaxed store, no lock). Eviction is
//! rare (only when a load passes the budget); it scans every function and evicts down to 90% of
//! the budget, so a run of cold starts does not sweep on every call.

use crate::metrics::NodeMetrics;
use arc_swap::ArcSwapOption;
use mote_runtime::{CompileError, Function, Runtime};
use mote_state::ModuleBlobs;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Where a node gets the bytes of a module it was told of but does not hold: its peers. Called
/// on a thread that may block, during a cold load.
pub trait ModuleSource: Send + Sync + 'static {
    /// The module whose bytes hash to `sha256`. The bytes are checked by the caller too; a
    /// source should still skip a copy that does not match, so that one bad copy does not hide
    /// a good one elsewhere. The error says where it looked and what failed.
    fn fetch(&self, sha256: &str) -> Result<Vec<u8>, String>;
}

/// One function's place in the resident set.
#[derive(Default)]
pub(crate) struct Slot {
    /// The compiled, linked code while the function is resident.
    code: ArcSwapOption<Function>,
    /// When it was last called, in nanoseconds since the node started (for eviction).
    last_used: AtomicU64,
    /// Set once it is removed or replaced: its code must not become resident again.
    retired: AtomicBool,
    /// Held while its code is loaded, so one load runs at a time.
    loading: Mutex<()>,
}

impl Slot {
    /// Whether its code is resident, so that a call is a warm start.
    pub(crate) fn is_resident(&self) -> bool {
        self.code.load().is_some()
    }
}

/// The resident set and its budget.
pub(crate) struct Residency {
    runtime: Arc<Runtime>,
    blobs: ModuleBlobs,
    budget_bytes: u64,
    origin: Instant,
    sweep: Mutex<()>,
    metrics: Arc<NodeMetrics>,
    source: OnceLock<Arc<dyn ModuleSource>>,
}

/// A function's code for one call, and how long the call waited for it if it was a cold start.
pub(crate) struct Code {
    pub function: Arc<Function>,
    pub cold_start: Option<Duration>,
}

impl Residency {
    pub(crate) fn new(
        runtime: Arc<Runtime>,
        blobs: ModuleBlobs,
        budget_bytes: u64,
        metrics: Arc<NodeMetrics>,
    ) -> Self {
        Self {
            runtime,
            blobs,
            budget_bytes,
            origin: Instant::now(),
            sweep: Mutex::new(()),
            metrics,
            source: OnceLock::new(),
        }
    }

    /// Makes `source` where modules this node does not hold are fetched from; the first
    /// source given stays.
    pub(crate) fn fetch_from(&self, source: Arc<dyn ModuleSource>) {
        let _ = self.source.set(source);
    }

    /// The bytes of the module with this sha256, from its blob or, failing that, from the
    /// source; the second element says whether they were fetched (and so are not stored yet).
    pub(crate) fn module_bytes(&self, sha256: &str) -> std::io::Result<(Vec<u8>, bool)> {
        match (self.blobs.get(sha256), self.source.get()) {
            (Ok(bytes), _) => Ok((bytes, false)),
            (Err(e), Some(source)) if e.kind() == std::io::ErrorKind::NotFound => source
                .fetch(sha256)
                .map(|bytes| (bytes, true))
                .map_err(|why| std::io::Error::other(format!("not on this node, and {why}"))),
            (Err(e), _) => Err(e),
        }
    }

    /// Whether the resident set is within its budget, so another function may be loaded.
    pub(crate) fn has_room(&self) -> bool {
        self.resident_bytes() <= self.budget_bytes
    }

    fn resident_bytes(&self) -> u64 {
        let bytes = self.metrics.resident_bytes.inner().load(Ordering::Relaxed);
        u64::try_from(bytes).unwrap_or(0)
    }

    /// The resident code of `slot` for a call arriving at `now`, if it is resident (a warm start).
    #[inline]
    pub(crate) fn warm(&self, slot: &Slot, now: Instant) -> Option<Arc<Function>> {
        self.touch(slot, now);
        slot.code.load_full()
    }

    /// Loads the code of `slot` (the module with this sha256) for a call that arrived at
    /// `arrival` and found it not resident: maps its artefact, or compiles the module if the
    /// artefact is missing or damaged. Blocks; one load per function runs at a time, and a call
    /// that waited for another's load takes its code. A load may pass the budget; the caller
    /// sweeps after queueing its call and unmaps what it evicted after the reply, so the eviction
    /// is not on the call's path.
    pub(crate) fn load(
        &self,
        slot: &Slot,
        sha256: &str,
        arrival: Instant,
    ) -> Result<Code, CompileError> {
        let _loading = slot.loading.lock();
        if let Some(code) = slot.code.load_full() {
            return Ok(Code {
                function: code,
                cold_start: Some(arrival.elapsed()),
            });
        }
        let mut fetched = None;
        let loaded = self.runtime.load(sha256, || {
            let (bytes, was_fetched) = self.module_bytes(sha256)?;
            if was_fetched {
                fetched = Some(bytes.clone());
            }
            Ok(bytes)
        })?;
        // The runtime compiled them, so they hash to `sha256`: keep them for restarts and for
        // the peers that will ask this node.
        if let Some(bytes) = fetched
            && let Err(e) = self.blobs.put(&bytes)
        {
            tracing::warn!(module = sha256, error = %e, "cannot store a fetched module");
        }
        self.metrics.cold_starts.inc();
        self.added(&loaded);
        let previous = slot.code.swap(Some(loaded.clone()));
        debug_assert!(
            previous.is_none(),
            "only the holder of `loading` fills a slot"
        );
        if slot.retired.load(Ordering::SeqCst) {
            self.evict(slot);
        }
        Ok(Code {
            function: loaded,
            cold_start: Some(arrival.elapsed()),
        })
    }

    /// Makes `code` resident in `slot` (a deploy or a start-up load).
    pub(crate) fn admit(&self, slot: &Slot, code: Arc<Function>) {
        self.touch(slot, Instant::now());
        self.added(&code);
        if let Some(old) = slot.code.swap(Some(code)) {
            self.removed(&old);
        }
    }

    /// Takes a removed or replaced function out of the resident set for good.
    pub(crate) fn retire(&self, slot: &Slot) {
        slot.retired.store(true, Ordering::SeqCst);
        self.evict(slot);
    }

    /// Takes `slot`'s code out of the resident set (its next call loads it again) and returns it.
    fn evict(&self, slot: &Slot) -> Option<Arc<Function>> {
        let code = slot.code.swap(None)?;
        self.removed(&code);
        Some(code)
    }

    fn added(&self, code: &Function) {
        self.metrics.resident_bytes.inc_by(bytes_of(code));
        self.metrics.resident.inc();
    }

    fn removed(&self, code: &Function) {
        self.metrics.resident_bytes.dec_by(bytes_of(code));
        self.metrics.resident.dec();
    }

    /// If the resident set is over budget, evicts the least recently called of `everyone` until
    /// it is back under 90% of the budget; `keep` (the function just loaded) stays. Returns the
    /// evicted code, for the caller to drop when it suits: unmapping code makes the kernel
    /// flush the TLB of every core running this process, which stalls a running call.
    pub(crate) fn sweep<'a>(
        &self,
        keep: &Slot,
        everyone: impl Iterator<Item = &'a Slot>,
    ) -> Vec<Arc<Function>> {
        let mut evicted = Vec::new();
        if self.has_room() {
            return evicted;
        }
        // Another caller is sweeping already; it will bring the total down for both.
        let Some(_sweeping) = self.sweep.try_lock() else {
            return evicted;
        };
        let mut resident: Vec<(u64, &Slot)> = everyone
            .filter(|slot| slot.is_resident() && !std::ptr::eq(*slot, keep))
            .map(|slot| (slot.last_used.load(Ordering::Relaxed), slot))
            .collect();
        resident.sort_unstable_by_key(|(used, _)| *used);
        let target = self.budget_bytes / 10 * 9;
        for (_, slot) in resident {
            if self.resident_bytes() <= target {
                break;
            }
            evicted.extend(self.evict(slot));
        }
        evicted
    }

    /// Records a call at `now`. Recency only needs to be right to a millisecond, and writing the
    /// shared line on every call would make each executor that reads this function miss.
    #[inline]
    fn touch(&self, slot: &Slot, now: Instant) {
        let stamp = now.saturating_duration_since(self.origin).as_nanos() as u64;
        if stamp.saturating_sub(slot.last_used.load(Ordering::Relaxed)) > 1_000_000 {
            slot.last_used.store(stamp, Ordering::Relaxed);
        }
    }
}

fn bytes_of(code: &Function) -> i64 {
    i64::try_from(code.resident_bytes()).unwrap_or(i64::MAX)
}
