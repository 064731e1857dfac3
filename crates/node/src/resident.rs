//! Which deployed functions are resident: compiled code mapped and an `InstancePre` linked, ready
//! for a warm call. A memory budget bounds them. Past it, the least recently called functions are
//! evicted, and the next call of an evicted function is a cold start: its precompiled artefact is
//! mapped from disk (mmap), linked, and then instantiated like any call. The load runs on the
//! caller's thread, because executor threads are confined by seccomp and cannot open files.
//!
//! Invariants:
//! - The `mote_resident_bytes` gauge is the sum of [`Function::resident_bytes`] over the
//!   functions whose `code` slot is filled (its atomic is the count itself): it is added to only
//!   by the caller that filled a slot and taken from only by the caller that emptied it (both
//!   with a swap, so no count is lost or doubled).
//! - A removed or replaced function is `retired` before its code is evicted, and a cold load
//!   checks `retired` after filling the slot (both sequentially consistent), so a load racing a
//!   removal either sees the flag and empties the slot again or is emptied by the removal:
//!   nothing stays counted for a function no one can call.
//! - A call takes its own reference to the code before it is queued, so evicting a function never
//!   pulls code from under a queued or running call; the code is unmapped when the last call
//!   that holds it ends.
//!
//! Recency is a timestamp each call stores in its function (one relaxed store, no lock). Eviction
//! is rare (only when a load passes the budget); it scans every function and evicts down to 90%
//! of the budget, so a run of cold starts does not sweep on every call.

use crate::error::InvokeError;
use crate::metrics::NodeMetrics;
use crate::registry::Deployed;
use mote_runtime::{Function, Runtime};
use mote_state::ModuleBlobs;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The resident set and its budget.
pub(crate) struct Residency {
    runtime: Arc<Runtime>,
    blobs: ModuleBlobs,
    budget_bytes: u64,
    origin: Instant,
    sweep: Mutex<()>,
    metrics: Arc<NodeMetrics>,
}

/// A function's code for one call, and how long loading it took if the call was a cold start.
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

    /// The code of `function` for a call arriving at `now`: resident already (a warm start), or
    /// loaded from its artefact now (a cold start). A load may pass the budget; the caller
    /// sweeps after queueing its call and unmaps what it evicted after the reply, so the
    /// eviction is not on the call's path.
    pub(crate) fn code(&self, function: &Deployed, now: Instant) -> Result<Code, InvokeError> {
        function.touch(self.stamp(now));
        if let Some(code) = function.code.load_full() {
            return Ok(Code {
                function: code,
                cold_start: None,
            });
        }
        let sha = &function.record().sha256;
        let loaded = self
            .runtime
            .load(sha, || self.blobs.get(sha))
            .map_err(|e| InvokeError::Load {
                name: function.name().to_string(),
                detail: e.to_string(),
            })?;
        let cold_start = now.elapsed();
        self.metrics.cold_starts.inc();
        // Two callers may load the same function at once; the first to fill the slot wins and
        // the other call runs on the winner's code.
        let previous = function
            .code
            .compare_and_swap(&None::<Arc<Function>>, Some(loaded.clone()));
        let code = match &*previous {
            Some(winner) => winner.clone(),
            None => {
                self.added(&loaded);
                if function.retired.load(Ordering::SeqCst) {
                    self.evict(function);
                }
                loaded
            }
        };
        Ok(Code {
            function: code,
            cold_start: Some(cold_start),
        })
    }

    /// Makes `code` resident for `function` (a deploy or a start-up load).
    pub(crate) fn admit(&self, function: &Deployed, code: Arc<Function>) {
        function.touch(self.stamp(Instant::now()));
        self.added(&code);
        if let Some(old) = function.code.swap(Some(code)) {
            self.removed(&old);
        }
    }

    /// Takes a removed or replaced function out of the resident set for good.
    pub(crate) fn retire(&self, function: &Deployed) {
        function.retired.store(true, Ordering::SeqCst);
        self.evict(function);
    }

    /// Takes `function`'s code out of the resident set (its next call loads it again) and
    /// returns it.
    pub(crate) fn evict(&self, function: &Deployed) -> Option<Arc<Function>> {
        let code = function.code.swap(None)?;
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
        keep: &Deployed,
        everyone: impl Iterator<Item = &'a Arc<Deployed>>,
    ) -> Vec<Arc<Function>> {
        let mut evicted = Vec::new();
        if self.has_room() {
            return evicted;
        }
        // Another caller is sweeping already; it will bring the total down for both.
        let Ok(_sweeping) = self.sweep.try_lock() else {
            return evicted;
        };
        let mut resident: Vec<(u64, &Arc<Deployed>)> = everyone
            .filter(|f| f.is_resident() && !std::ptr::eq(&***f, keep))
            .map(|f| (f.last_used(), f))
            .collect();
        resident.sort_unstable_by_key(|(used, _)| *used);
        let target = self.budget_bytes / 10 * 9;
        for (_, function) in resident {
            if self.resident_bytes() <= target {
                break;
            }
            evicted.extend(self.evict(function));
        }
        evicted
    }

    fn stamp(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.origin).as_nanos() as u64
    }
}

fn bytes_of(code: &Function) -> i64 {
    i64::try_from(code.resident_bytes()).unwrap_or(i64::MAX)
}
