//! The functions deployed on a node: persisted in the state store, and (within a memory budget,
//! see [`crate::resident`]) resident in memory.
//!
//! Invariants:
//! - A function is in the table only after its module blob and its record are durable, so
//!   anything a caller can invoke survives a restart.
//! - Changes (deploy, remove, and following the store's changes made by other nodes) are
//!   serialised by `changes`; the table is replaced wholesale
//!   (copy-on-write) so the call path reads it without a lock.
//! - A module blob and its compiled artefact are deleted only when no record refers to them.

use crate::activity::CallStats;
use crate::error::{DeployError, InvokeError};
use crate::logs::{FunctionLogs, LogRing};
use crate::metrics::{FunctionLabels, InvocationLabels, NodeMetrics, Outcome, SecondsGauge};
use crate::quarantine::Quarantine;
use crate::resident::{Code, Residency, Slot};
use arc_swap::ArcSwap;
use bytes::Bytes;
use mote_runtime::{Function, Runtime};
use mote_sched::FunctionKey;
use mote_state::{ModuleBlobs, StateStore};
use mote_types::{
    DeployOptions, FunctionName, FunctionRecord, Grantor, GuestKind, HttpSettings, Limits,
    OutboundCeiling,
};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// Where function records live in the state store (their keys: this and the name).
pub const RECORD_PREFIX: &str = "/mote/functions/";

/// A deployed function: its record, its place in the resident set, its quarantine, its call
/// statistics and its log.
pub struct Deployed {
    key: FunctionKey,
    record: FunctionRecord,
    name: Arc<str>,
    /// The record's HTTP settings, shared with each of its calls.
    http: Arc<HttpSettings>,
    resident: Slot,
    quarantine: Quarantine,
    outcomes: [Counter; Outcome::ALL.len()],
    duration: Histogram,
    expected: SecondsGauge,
    stats: CallStats,
    /// Shared with the deployments before it of the same name.
    logs: Arc<LogRing>,
    /// Whether its calls may run on the reader that read them: cleared once one could not (its
    /// guest called WASI preview1, whose synchronous host functions block on an async runtime,
    /// which a reader's own thread may not do).
    on_readers: std::sync::atomic::AtomicBool,
}

impl Deployed {
    fn new(
        key: FunctionKey,
        record: FunctionRecord,
        metrics: &NodeMetrics,
        quarantine_after: u32,
        logs: Arc<LogRing>,
    ) -> Self {
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
            http: Arc::new(record.http.clone()),
            record,
            resident: Slot::default(),
            quarantine: Quarantine::new(quarantine_after, metrics.quarantined.clone()),
            outcomes,
            duration,
            stats: CallStats::default(),
            logs,
            on_readers: std::sync::atomic::AtomicBool::new(true),
        }
    }

    /// Whether its calls may run on the reader that read them (see `crate::run`).
    #[inline]
    pub(crate) fn runs_on_readers(&self) -> bool {
        self.on_readers.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Its calls may not run on readers: one called WASI's synchronous host functions there.
    pub(crate) fn keep_off_readers(&self) {
        self.on_readers
            .store(false, std::sync::atomic::Ordering::Relaxed);
    }

    /// Its log: what its calls wrote and how failing calls failed.
    pub fn logs(&self) -> &Arc<LogRing> {
        &self.logs
    }

    /// A `wasi:http` component's route and allowed outbound hosts.
    pub fn http(&self) -> &Arc<HttpSettings> {
        &self.http
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
        self.resident.is_resident()
    }

    /// Whether the function is quarantined, and if so after how many budget kills in a row.
    pub fn quarantined(&self) -> Option<u32> {
        self.quarantine.refuses()
    }

    pub(crate) fn quarantine(&self) -> &Quarantine {
        &self.quarantine
    }

    /// Refuses (and counts) a call while the function is quarantined.
    #[inline]
    pub(crate) fn admit(&self) -> Result<(), InvokeError> {
        match self.quarantine.refuses() {
            None => Ok(()),
            Some(kills) => {
                self.count(Outcome::Rejected);
                Err(InvokeError::Quarantined {
                    name: self.name.to_string(),
                    kills,
                    budget_us: self.record.limits.timeout_us,
                })
            }
        }
    }

    pub(crate) fn count(&self, outcome: Outcome) {
        self.outcomes[outcome as usize].inc();
    }

    /// Its calls so far, by outcome, in [`Outcome::ALL`]'s order.
    pub fn outcomes(&self) -> [u64; Outcome::ALL.len()] {
        std::array::from_fn(|i| self.outcomes[i].get())
    }

    /// Its calls' response times and stretches.
    pub fn call_stats(&self) -> &CallStats {
        &self.stats
    }

    /// Its expected processing time in seconds, as last settled (zero before its first call).
    pub fn expected_s(&self) -> f64 {
        self.expected.get()
    }

    pub(crate) fn set_expected(&self, expected: Duration) {
        self.expected.set(expected.as_secs_f64());
    }

    pub(crate) fn observe_duration(&self, elapsed: Duration) {
        self.duration.observe(elapsed.as_secs_f64());
    }
}

type Table = HashMap<FunctionName, Arc<Deployed>>;

/// What [`Registry::follow`] did.
pub(crate) enum Followed {
    /// The node already had what the store holds.
    Unchanged,
    /// The store's record is now the node's; it replaced `replaced`.
    Adopted {
        adopted: Arc<Deployed>,
        replaced: Option<Arc<Deployed>>,
    },
    /// The record is gone from the store, so the function is gone from the node.
    Removed(Arc<Deployed>),
}

/// The node's deployed functions.
pub struct Registry {
    runtime: Arc<Runtime>,
    store: Arc<dyn StateStore>,
    blobs: ModuleBlobs,
    metrics: Arc<NodeMetrics>,
    residency: Arc<Residency>,
    quarantine_after: u32,
    logs: Arc<FunctionLogs>,
    table: ArcSwap<Table>,
    /// The functions mounted on a route, most specific route first; rebuilt with the table.
    routes: ArcSwap<Vec<Arc<Deployed>>>,
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
        quarantine_after: u32,
        logs: Arc<FunctionLogs>,
    ) -> Self {
        Self {
            residency: Arc::new(Residency::new(
                runtime.clone(),
                blobs.clone(),
                resident_budget_bytes,
                metrics.clone(),
            )),
            runtime,
            store,
            blobs,
            metrics,
            quarantine_after,
            logs,
            table: ArcSwap::from_pointee(Table::new()),
            routes: ArcSwap::from_pointee(Vec::new()),
            changes: tokio::sync::Mutex::new(()),
            next_key: AtomicU64::new(1),
        }
    }

    /// Looks up a deployed function without locking.
    #[inline]
    pub fn get(&self, name: &str) -> Option<Arc<Deployed>> {
        self.table.load().get(name).cloned()
    }

    /// The kind of the function deployed as `name`, without locking or cloning it.
    #[inline]
    pub fn kind(&self, name: &str) -> Option<GuestKind> {
        self.table.load().get(name).map(|f| f.record.kind)
    }

    /// Whether `name` may be called without a token, without locking or cloning it.
    #[inline]
    pub fn is_public(&self, name: &str) -> bool {
        self.table.load().get(name).is_some_and(|f| f.record.public)
    }

    /// The component mounted on the most specific route that serves `path`, if any.
    pub fn route(&self, path: &str) -> Option<Arc<Deployed>> {
        self.routes
            .load()
            .iter()
            .find(|f| f.http.route.as_ref().is_some_and(|r| r.matches(path)))
            .cloned()
    }

    /// The resident code of `function` for a call arriving at `now`, if it is resident.
    #[inline]
    pub(crate) fn warm(&self, function: &Deployed, now: Instant) -> Option<Arc<Function>> {
        self.residency.warm(&function.resident, now)
    }

    /// Loads the code of `function`, which was not resident when a call arrived at `arrival`,
    /// on this thread: it blocks for as long as the load (or a compile) takes.
    pub(crate) fn load_here(
        &self,
        function: &Deployed,
        arrival: Instant,
    ) -> Result<Code, InvokeError> {
        load(&self.residency, function, arrival)
    }

    /// Loads the code of `function`, which was not resident when a call arrived at `arrival`,
    /// on a thread of `io`'s blocking pool, started through `relay`: the caller's thread stays
    /// free, and may be one that opens no files (a reader).
    pub(crate) async fn load_aside(
        &self,
        function: &Arc<Deployed>,
        arrival: Instant,
        relay: &mote_confine::Relay,
        io: &tokio::runtime::Handle,
    ) -> Result<Code, InvokeError> {
        let (residency, function) = (self.residency.clone(), function.clone());
        // Started on `io`, by the relay's thread: `spawn_blocking` starts a thread.
        let load = async move {
            tokio::task::spawn_blocking(move || load(&residency, &function, arrival)).await
        };
        let lost = |e: &dyn std::fmt::Display| {
            InvokeError::Internal(format!("the code loader failed: {e}"))
        };
        relay
            .spawn(io, load)
            .await
            .map_err(|e| lost(&e))?
            .map_err(|e| lost(&e))?
    }

    /// Evicts the least recently called functions if the resident set is over its budget;
    /// `keep` stays. Returns the evicted code, unmapped when the caller drops it.
    pub(crate) fn sweep(&self, keep: &Deployed) -> Vec<Arc<Function>> {
        let table = self.table.load();
        self.residency
            .sweep(&keep.resident, table.values().map(|f| &f.resident))
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
    /// (and those whose module this node does not hold) load on their first call. A record that cannot be decoded, or a function that cannot be
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
            let deployed = Arc::new(self.deployed(record));
            // A record another node of the cluster wrote may name a module this node never
            // held: it is fetched from a peer on its first call.
            let held = self.blobs.contains(&deployed.record.sha256);
            if held && self.residency.has_room() {
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
                    Ok(code) => self.residency.admit(&deployed.resident, code),
                    Err(e) => {
                        tracing::error!(function = %deployed.record.name, error = %e, "cannot load function; it stays stored but is not callable");
                        continue;
                    }
                }
            }
            table.insert(deployed.record.name.clone(), deployed);
        }
        self.publish(table);
        Ok(())
    }

    /// Deploys `wasm` as `name`: compile and check it (nothing written yet; its outbound
    /// grants against `ceiling` and what the grantor may grant), write the module blob and the
    /// compiled artefact (both synced), then commit the record, which makes the function
    /// durable; only then is it published. A deploy that fails after writing removes what it
    /// wrote, unless a deployed function uses the same module.
    pub(crate) async fn deploy(
        &self,
        name: FunctionName,
        wasm: Bytes,
        limits: Limits,
        options: DeployOptions,
        ceiling: &OutboundCeiling,
    ) -> Result<(FunctionRecord, Option<Arc<Deployed>>), DeployError> {
        let DeployOptions {
            http,
            public,
            grantor,
        } = options;
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
        self.check_http(&name, function.kind(), &http)?;
        check_outbound(&http, grantor, ceiling)?;
        let record = FunctionRecord {
            name: name.clone(),
            sha256: function.sha256().to_owned(),
            kind: function.kind(),
            limits,
            size_bytes: wasm.len() as u64,
            deployed_at_ms: SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            http,
            public,
        };
        if let Err(e) = self.write(wasm, &function, &record).await {
            self.collect_unused(&record.sha256);
            return Err(e);
        }
        let deployed = Arc::new(self.deployed(record.clone()));
        self.residency.admit(&deployed.resident, function);
        let mut table = Table::clone(&self.table.load());
        let replaced = table.insert(name, deployed.clone());
        self.publish(table);
        drop(self.sweep(&deployed));
        if let Some(old) = &replaced {
            self.retire(old);
            self.collect_unused(&old.record.sha256);
        }
        Ok((record, replaced))
    }

    /// Writes what a deploy stores: the module blob and the artefact, then the record.
    async fn write(
        &self,
        wasm: Bytes,
        function: &Arc<Function>,
        record: &FunctionRecord,
    ) -> Result<(), DeployError> {
        let (runtime, blobs, function) =
            (self.runtime.clone(), self.blobs.clone(), function.clone());
        tokio::task::spawn_blocking(move || -> Result<(), DeployError> {
            blobs.put(&wasm)?;
            runtime.keep(&function)?;
            Ok(())
        })
        .await
        .map_err(|e| DeployError::Internal(e.to_string()))??;
        let json = serde_json::to_vec(record).expect("a record always serialises");
        self.store.put(&record_key(&record.name), json).await?;
        Ok(())
    }

    pub(crate) async fn remove(&self, name: &str) -> Result<Arc<Deployed>, DeployError> {
        let _changes = self.changes.lock().await;
        let Some(deployed) = self.get(name) else {
            return Err(DeployError::NotFound(name.to_owned()));
        };
        self.store
            .delete(&record_key(&deployed.record.name))
            .await?;
        self.unpublish(&deployed);
        Ok(deployed)
    }

    /// Brings `name` in line with its record in the store, which another node may have written
    /// or deleted: adopts a record this node does not have (a new function, or a newer
    /// deployment), drops a function whose record is gone. The store is read under the same
    /// lock as this node's own deploys, so a change seen late can never undo a newer one. An
    /// adopted function is not resident: its first call loads it, fetching the module from a
    /// peer if this node does not hold it.
    pub(crate) async fn follow(&self, name: &str) -> Result<Followed, DeployError> {
        let _changes = self.changes.lock().await;
        let current = self.get(name);
        let Ok(key) = FunctionName::new(name.to_owned()) else {
            return Ok(Followed::Unchanged);
        };
        let stored = match self.store.get(&record_key(&key)).await? {
            None => None,
            Some(value) => match serde_json::from_slice::<FunctionRecord>(&value) {
                Ok(record) => Some(record),
                Err(e) => {
                    tracing::error!(function = name, error = %e, "stored function record is corrupt; it is not adopted");
                    return Ok(Followed::Unchanged);
                }
            },
        };
        match (stored, current) {
            (None, None) => Ok(Followed::Unchanged),
            (None, Some(current)) => {
                self.unpublish(&current);
                Ok(Followed::Removed(current))
            }
            (Some(record), Some(current)) if *current.record() == record => Ok(Followed::Unchanged),
            (Some(record), current) => {
                let deployed = Arc::new(self.deployed(record));
                let mut table = Table::clone(&self.table.load());
                table.insert(key, deployed.clone());
                self.publish(table);
                if let Some(old) = &current {
                    self.retire(old);
                    self.collect_unused(&old.record.sha256);
                }
                Ok(Followed::Adopted {
                    adopted: deployed,
                    replaced: current,
                })
            }
        }
    }

    /// Takes `deployed` out of the table and forgets what the node kept for it.
    fn unpublish(&self, deployed: &Deployed) {
        let name = deployed.record.name.as_str();
        let mut table = Table::clone(&self.table.load());
        table.remove(name);
        self.publish(table);
        self.retire(deployed);
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
    }

    /// The stored bytes of the module with this sha256, if this node holds them.
    pub(crate) fn module(&self, sha256: &str) -> Option<Vec<u8>> {
        self.blobs.get(sha256).ok()
    }

    /// The bytes of the module with this sha256: the stored blob, or else what the module
    /// source fetched (unchecked).
    pub(crate) fn module_or_fetch(&self, sha256: &str) -> std::io::Result<Vec<u8>> {
        self.residency.module_bytes(sha256).map(|(bytes, _)| bytes)
    }

    /// Fetches modules this node does not hold from `source`.
    pub(crate) fn fetch_from(&self, source: Arc<dyn crate::ModuleSource>) {
        self.residency.fetch_from(source);
    }

    /// Whether the resident set has room for another function.
    pub(crate) fn has_room(&self) -> bool {
        self.residency.has_room()
    }

    fn deployed(&self, record: FunctionRecord) -> Deployed {
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let logs = self.logs.ring(&record.name.as_str().into());
        Deployed::new(key, record, &self.metrics, self.quarantine_after, logs)
    }

    /// Takes a removed or replaced function out of the resident set and out of the quarantine
    /// count for good.
    fn retire(&self, function: &Deployed) {
        self.residency.retire(&function.resident);
        function.quarantine.retire();
    }

    /// Refuses HTTP settings on a function that is not a component, and a route another
    /// function is mounted on already.
    fn check_http(
        &self,
        name: &FunctionName,
        kind: GuestKind,
        http: &HttpSettings,
    ) -> Result<(), DeployError> {
        if kind != GuestKind::WasiHttp && !http.is_empty() {
            return Err(DeployError::NotHttp { kind });
        }
        let Some(route) = &http.route else {
            return Ok(());
        };
        let table = self.table.load();
        let owner = table
            .values()
            .find(|f| f.record.name != *name && f.http.route.as_ref() == Some(route));
        match owner {
            Some(owner) => Err(DeployError::RouteTaken {
                route: route.to_string(),
                owner: owner.record.name.to_string(),
            }),
            None => Ok(()),
        }
    }

    fn publish(&self, table: Table) {
        self.metrics.functions.set(table.len() as i64);
        let mut routes: Vec<Arc<Deployed>> = table
            .values()
            .filter(|f| f.http.route.is_some())
            .cloned()
            .collect();
        // Most specific first; the name breaks ties, so two nodes that both accepted the same
        // route (deployed on each at once) serve it from the same function.
        routes.sort_by(|a, b| {
            let specificity = |f: &Deployed| f.http.route.as_ref().map(|r| r.specificity());
            specificity(b)
                .cmp(&specificity(a))
                .then_with(|| a.record.name.cmp(&b.record.name))
        });
        self.routes.store(Arc::new(routes));
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

/// Loads `function`'s code for a call that arrived at `arrival` and found it not resident.
fn load(residency: &Residency, function: &Deployed, arrival: Instant) -> Result<Code, InvokeError> {
    residency
        .load(&function.resident, &function.record.sha256, arrival)
        .map_err(|e| InvokeError::Load {
            name: function.name.to_string(),
            detail: e.to_string(),
        })
}

fn record_key(name: &FunctionName) -> String {
    format!("{RECORD_PREFIX}{name}")
}

/// Refuses outbound grants the grantor may not give (`*`, addresses and ranges need an admin)
/// and grants beyond the node's ceiling. The ceiling is checked again at every connection,
/// which is what holds: records written by other nodes, or before a restart under another
/// ceiling, are never checked here.
fn check_outbound(
    http: &HttpSettings,
    grantor: Grantor,
    ceiling: &OutboundCeiling,
) -> Result<(), DeployError> {
    if grantor == Grantor::Deployer
        && let Some(entry) = http.allow_outbound.iter().find(|e| e.needs_admin())
    {
        return Err(DeployError::OutboundNeedsAdmin {
            entry: entry.to_string(),
        });
    }
    match ceiling.first_uncovered(&http.allow_outbound) {
        Some(entry) => Err(DeployError::OutboundAboveCeiling {
            entry: entry.to_string(),
            ceiling: ceiling.to_string(),
        }),
        None => Ok(()),
    }
}
