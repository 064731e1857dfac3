//! The functions deployed on a node: persisted in the state store, and (within a memory budget,
//! see [`crate::resident`]) resident in memory.
//!
//! Invariants:
//! - A function is in the table only after its module blob and its record are durable, so
//!   anything a caller can invoke survives a restart.
//! - Changes (deploy, remove) are serialised by `changes`; the table is replaced wholesale
//!   (copy-on-write) so the call path reads it without a lock.
//! - A module blob and its compiled artefact are deleted only when no record refers to them.

use crate::error::{DeployError, InvokeError};
use crate::metrics::{FunctionLabels, InvocationLabels, NodeMetrics, Outcome, SecondsGauge};
use crate::resident::{Code, Residency};
use arc_swap::{ArcSwap, ArcSwapOption};
use bytes::Bytes;
use mote_runtime::{Function, Runtime};
use mote_sched::FunctionKey;
use mote_state::{ModuleBlobs, StateStore};
use mote_types::{FunctionName, FunctionRecord, Limits};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// Where function records live in the state store.
const RECORD_PREFIX: &str = "/mote/functions/";

/// A deployed function: its record, its code while resident, and its call statistics.
pub struct Deployed {
    key: FunctionKey,
    record: FunctionRecord,
    name: Arc<str>,
    /// The compiled, linked code while the function is resident; see [`crate::resident`].
    pub(crate) code: ArcSwapOption<Function>,
    /// When it was last called, in nanoseconds since the node started (for eviction).
    last_used: AtomicU64,
    /// Set once it is removed or replaced: its code must not become resident again.
    pub(crate) retired: AtomicBool,
    outcomes: [Counter; Outcome::ALL.len()],
    duration: Histogram,
    expected: SecondsGauge,
    /// Calls in a row killed for running past their budget; any other ending resets it.
    budget_kills: AtomicU32,
    /// Set when `budget_kills` reaches the node's threshold; cleared by a release. A redeploy
    /// makes a new `Deployed`, which starts clear.
    quarantined: AtomicBool,
}

impl Deployed {
    fn new(key: FunctionKey, record: FunctionRecord, metrics: &NodeMetrics) -> Self {
        let function_label = record.name.to_string();
        let outcomes = Outcome::ALL.map(|outcome| {
            let labels = InvocationLabels {
                function: function_label.clone(),
                outcome,
            };
            metrics.invocations.get_or_create(&labels).clone()
        });
        let labels = FunctionLabels {
            function: function_label,
        };
        let duration = metrics.duration.get_or_create(&labels).clone();
        let expected = metrics.expected.get_or_create(&labels).clone();
        expected.set(0.0);
        Self {
            key,
            expected,
            name: record.name.as_str().into(),
            record,
            code: ArcSwapOption::empty(),
            last_used: AtomicU64::new(0),
            retired: AtomicBool::new(false),
            outcomes,
            duration,
            budget_kills: AtomicU32::new(0),
            quarantined: AtomicBool::new(false),
        }
    }

    /// The stored record.
    pub fn record(&self) -> &FunctionRecord {
        &self.record
    }

    /// The function's name.
    pub fn name(&self) -> &Arc<str> {
        &self.name
    }

    /// Identifies this deployment to the scheduler; a redeploy gets a new key.
    pub fn key(&self) -> FunctionKey {
        self.key
    }

    /// Whether its code is resident, so that a call is a warm start.
    pub fn is_resident(&self) -> bool {
        self.code.load().is_some()
    }

    /// Records a call at `stamp`. Recency only needs to be right to a millisecond, and writing
    /// the shared line on every call would make each executor that reads this function miss.
    pub(crate) fn touch(&self, stamp: u64) {
        if stamp.saturating_sub(self.last_used.load(Ordering::Relaxed)) > 1_000_000 {
            self.last_used.store(stamp, Ordering::Relaxed);
        }
    }

    pub(crate) fn last_used(&self) -> u64 {
        self.last_used.load(Ordering::Relaxed)
    }

    pub(crate) fn count(&self, outcome: Outcome) {
        self.outcomes[outcome as usize].inc();
    }

    pub(crate) fn set_expected(&self, expected: Duration) {
        self.expected.set(expected.as_secs_f64());
    }

    pub(crate) fn observe_duration(&self, elapsed: Duration) {
        self.duration.observe(elapsed.as_secs_f64());
    }

    /// Whether the function is quarantined, and if so after how many budget kills in a row.
    pub fn quarantined(&self) -> Option<u32> {
        self.quarantined
            .load(Ordering::Acquire)
            .then(|| self.budget_kills.load(Ordering::Relaxed))
    }

    /// Counts how a call ended; returns true if this call put the function in quarantine
    /// (`after` budget kills in a row; 0 never quarantines).
    pub(crate) fn note_budget(&self, killed: bool, after: u32) -> bool {
        if !killed {
            // Most calls end well: read before writing, so they leave the cache line shared.
            if self.budget_kills.load(Ordering::Relaxed) != 0 {
                self.budget_kills.store(0, Ordering::Relaxed);
            }
            return false;
        }
        let kills = self.budget_kills.fetch_add(1, Ordering::Relaxed) + 1;
        after != 0 && kills >= after && !self.quarantined.swap(true, Ordering::AcqRel)
    }

    /// Lets calls in again; returns whether it was quarantined.
    pub(crate) fn release(&self) -> bool {
        self.budget_kills.store(0, Ordering::Relaxed);
        self.quarantined.swap(false, Ordering::AcqRel)
    }
}

type Table = HashMap<FunctionName, Arc<Deployed>>;

/// The node's deployed functions.
pub struct Registry {
    runtime: Arc<Runtime>,
    store: Arc<dyn StateStore>,
    blobs: ModuleBlobs,
    metrics: Arc<NodeMetrics>,
    residency: Residency,
    table: ArcSwap<Table>,
    changes: tokio::sync::Mutex<()>,
    next_key: AtomicU64,
}

impl Registry {
    pub(crate) fn new(
        runtime: Arc<Runtime>,
        store: Arc<dyn StateStore>,
        blobs: ModuleBlobs,
        metrics: Arc<NodeMetrics>,
        resident_budget_bytes: u64,
    ) -> Self {
        Self {
            residency: Residency::new(
                runtime.clone(),
                blobs.clone(),
                resident_budget_bytes,
                metrics.clone(),
            ),
            runtime,
            store,
            blobs,
            metrics,
            table: ArcSwap::from_pointee(Table::new()),
            changes: tokio::sync::Mutex::new(()),
            next_key: AtomicU64::new(1),
        }
    }

    /// Looks up a deployed function without locking.
    pub fn get(&self, name: &str) -> Option<Arc<Deployed>> {
        self.table.load().get(name).cloned()
    }

    /// The code of `function` for a call arriving at `now`, loading it from its artefact if it
    /// is not resident (a cold start).
    pub(crate) fn code(&self, function: &Deployed, now: Instant) -> Result<Code, InvokeError> {
        self.residency.code(function, now)
    }

    /// Evicts the least recently called functions if the resident set is over its budget;
    /// `keep` stays. Returns the evicted code, unmapped when the caller drops it.
    pub(crate) fn sweep(&self, keep: &Deployed) -> Vec<Arc<Function>> {
        self.residency.sweep(keep, self.table.load().values())
    }

    /// Every deployed function, by name.
    pub fn functions(&self) -> Vec<Arc<Deployed>> {
        let mut functions: Vec<_> = self.table.load().values().cloned().collect();
        functions.sort_by(|a, b| a.record.name.cmp(&b.record.name));
        functions
    }

    /// Every deployed function's record, by name.
    pub fn list(&self) -> Vec<FunctionRecord> {
        let mut records: Vec<_> = self
            .table
            .load()
            .values()
            .map(|f| f.record.clone())
            .collect();
        records.sort_by(|a, b| a.name.cmp(&b.name));
        records
    }

    /// Reads every stored function and makes as many resident as the budget holds; the rest
    /// load on their first call. A record that cannot be decoded, or a function that cannot be
    /// loaded, is logged and left out, so one bad entry cannot keep the node down; the record
    /// stays in the store untouched for the operator to inspect.
    pub(crate) async fn load_all(&self) -> Result<(), DeployError> {
        let _changes = self.changes.lock().await;
        let mut table = Table::new();
        for (key, value) in self.store.list(RECORD_PREFIX).await? {
            let record: FunctionRecord = match serde_json::from_slice(&value) {
                Ok(record) => record,
                Err(e) => {
                    tracing::error!(%key, error = %e, "stored function record is corrupt; it stays stored but is not loaded");
                    continue;
                }
            };
            let deployed = Arc::new(Deployed::new(self.new_key(), record, &self.metrics));
            if self.residency.has_room() {
                let (runtime, blobs, sha) = (
                    self.runtime.clone(),
                    self.blobs.clone(),
                    deployed.record.sha256.clone(),
                );
                let loaded =
                    tokio::task::spawn_blocking(move || runtime.load(&sha, || blobs.get(&sha)))
                        .await
                        .map_err(|e| DeployError::Internal(e.to_string()))?;
                match loaded {
                    Ok(code) => self.residency.admit(&deployed, code),
                    Err(e) => {
                        tracing::error!(function = %deployed.record.name, error = %e, "cannot load function; it stays stored but is not callable");
                        continue;
                    }
                }
            }
            table.insert(deployed.record.name.clone(), deployed);
        }
        self.metrics.functions.set(table.len() as i64);
        self.table.store(Arc::new(table));
        Ok(())
    }

    pub(crate) async fn deploy(
        &self,
        name: FunctionName,
        wasm: Bytes,
        limits: Limits,
    ) -> Result<(FunctionRecord, Option<Arc<Deployed>>), DeployError> {
        let _changes = self.changes.lock().await;
        let (runtime, bytes) = (self.runtime.clone(), wasm.clone());
        let function = tokio::task::spawn_blocking(move || runtime.compile(&bytes))
            .await
            .map_err(|e| DeployError::Internal(e.to_string()))??;
        let needed = function.min_memory_bytes();
        if needed > limits.memory_bytes() as u64 {
            return Err(DeployError::MemoryTooSmall {
                needed_mb: needed.div_ceil(1 << 20),
                limit_mb: limits.memory_mb,
            });
        }
        let size_bytes = wasm.len() as u64;
        let blobs = self.blobs.clone();
        tokio::task::spawn_blocking(move || blobs.put(&wasm))
            .await
            .map_err(|e| DeployError::Internal(e.to_string()))??;
        let record = FunctionRecord {
            name: name.clone(),
            sha256: function.sha256().to_owned(),
            kind: function.kind(),
            limits,
            size_bytes,
            deployed_at_ms: SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
        };
        let json = serde_json::to_vec(&record).expect("a record always serialises");
        self.store.put(&record_key(&name), json).await?;
        let deployed = Arc::new(Deployed::new(self.new_key(), record.clone(), &self.metrics));
        self.residency.admit(&deployed, function);
        let mut table = Table::clone(&self.table.load());
        let replaced = table.insert(name, deployed.clone());
        self.publish(table);
        drop(self.sweep(&deployed));
        if let Some(old) = &replaced {
            self.residency.retire(old);
            self.collect_unused(&old.record.sha256);
        }
        Ok((record, replaced))
    }

    pub(crate) async fn remove(&self, name: &str) -> Result<Arc<Deployed>, DeployError> {
        let _changes = self.changes.lock().await;
        let Some(deployed) = self.get(name) else {
            return Err(DeployError::NotFound(name.to_owned()));
        };
        self.store
            .delete(&record_key(&deployed.record.name))
            .await?;
        let mut table = Table::clone(&self.table.load());
        table.remove(name);
        self.publish(table);
        self.residency.retire(&deployed);
        let labels = FunctionLabels {
            function: name.to_owned(),
        };
        self.metrics.duration.remove(&labels);
        self.metrics.expected.remove(&labels);
        for outcome in Outcome::ALL {
            self.metrics.invocations.remove(&InvocationLabels {
                function: name.to_owned(),
                outcome,
            });
        }
        self.collect_unused(&deployed.record.sha256);
        Ok(deployed)
    }

    fn new_key(&self) -> FunctionKey {
        self.next_key.fetch_add(1, Ordering::Relaxed)
    }

    fn publish(&self, table: Table) {
        self.metrics.functions.set(table.len() as i64);
        self.table.store(Arc::new(table));
    }

    /// Deletes a module's blob and artefact if no deployed function uses it any more.
    fn collect_unused(&self, sha256: &str) {
        if self
            .table
            .load()
            .values()
            .all(|f| f.record.sha256 != sha256)
        {
            self.blobs.remove(sha256);
            self.runtime.forget(sha256);
        }
    }
}

fn record_key(name: &FunctionName) -> String {
    format!("{RECORD_PREFIX}{name}")
}
