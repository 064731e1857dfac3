//! The control path: deploy (check, write, commit, publish: the registry's), remove, follow
//! records another node wrote, fetch modules from peers, release from quarantine; and what the
//! schedulers learned of a function is dropped when it is replaced or removed.

use super::Node;
use crate::error::DeployError;
use crate::registry::{self, Deployed};
use crate::resident::ModuleSource;
use bytes::Bytes;
use mote_types::{DeployOptions, FunctionName, FunctionRecord, Limits};
use std::sync::Arc;
use std::time::Instant;

/// What [`Node::follow`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Followed {
    /// The node already had what the store holds.
    Unchanged,
    /// The store's record is now the node's.
    Adopted,
    /// The record is gone from the store, so the function is gone from the node.
    Removed,
}

impl Node {
    /// Deploys (or replaces) `name` with the module `wasm`.
    pub async fn deploy(
        &self,
        name: FunctionName,
        wasm: Bytes,
        limits: Limits,
    ) -> Result<FunctionRecord, DeployError> {
        self.deploy_with(name, wasm, limits, DeployOptions::default())
            .await
    }

    /// Deploys (or replaces) `name` with `wasm`; a `wasi:http` component may be mounted on a
    /// route and allowed outbound hosts with `options.http` (within the node's outbound
    /// ceiling, and `*`, addresses and ranges only if `options.grantor` is an admin);
    /// `options.public` lets anyone call it.
    pub async fn deploy_with(
        &self,
        name: FunctionName,
        wasm: Bytes,
        limits: Limits,
        options: DeployOptions,
    ) -> Result<FunctionRecord, DeployError> {
        let ceiling = self.egress.ceiling();
        let (record, replaced) = self
            .registry
            .deploy(name, wasm, limits, options, ceiling)
            .await?;
        if let Some(old) = replaced {
            self.forget(&old);
        }
        Ok(record)
    }

    /// Removes `name`; calls already queued for it still run.
    pub async fn remove(&self, name: &str) -> Result<FunctionRecord, DeployError> {
        let removed = self.registry.remove(name).await?;
        self.forget(&removed);
        self.logs.remove(name);
        Ok(removed.record().clone())
    }

    /// Drops what the schedulers learned of a function that was replaced or removed.
    fn forget(&self, function: &Deployed) {
        self.cores.pending().forget(function.key());
        self.microtasks.forget(function.key());
    }

    /// Brings `name` in line with its record in the state store, which another node of the
    /// cluster may have written or deleted: a new or newer record is adopted (and its code
    /// loaded now, fetched from a peer if needed, when the resident set has room, so that its
    /// first call here is warm), a deleted one is removed. Says what changed.
    pub async fn follow(&self, name: &str) -> Result<Followed, DeployError> {
        Ok(match self.registry.follow(name).await? {
            registry::Followed::Unchanged => Followed::Unchanged,
            registry::Followed::Removed(removed) => {
                self.forget(&removed);
                self.logs.remove(name);
                Followed::Removed
            }
            registry::Followed::Adopted { adopted, replaced } => {
                if let Some(old) = replaced {
                    self.forget(&old);
                }
                if self.registry.has_room()
                    && let Err(e) = self
                        .registry
                        .load_aside(&adopted, Instant::now(), &self.relay, &self.io)
                        .await
                {
                    tracing::warn!(function = name, error = %e, "cannot load an adopted function yet; its first call tries again");
                }
                Followed::Adopted
            }
        })
    }

    /// Fetches the modules of adopted records that this node does not hold from `source`.
    pub fn fetch_modules_from(&self, source: Arc<dyn ModuleSource>) {
        self.registry.fetch_from(source);
    }

    /// The bytes of the module with this sha256, if this node holds them (for peers that
    /// adopted a record and need its module).
    pub fn module(&self, sha256: &str) -> Option<Vec<u8>> {
        self.registry.module(sha256)
    }

    /// The bytes of the module with this sha256: this node's copy, or else fetched from its
    /// module source (its peers, then object storage; `Node::fetch_modules_from`) and checked
    /// against the hash, as a cold load does. Blocks while it fetches.
    pub fn module_or_fetch(&self, sha256: &str) -> Result<Vec<u8>, String> {
        let bytes = self
            .registry
            .module_or_fetch(sha256)
            .map_err(|e| format!("module {sha256}: {e}"))?;
        let found = mote_runtime::ArtifactCache::digest(&bytes);
        if found != sha256 {
            return Err(format!(
                "module {sha256} was fetched, but its bytes hash to {found}"
            ));
        }
        Ok(bytes)
    }

    /// Lets calls of a quarantined function in again; says whether it was quarantined.
    pub fn release(&self, name: &str) -> Result<bool, DeployError> {
        let function = self
            .registry
            .get(name)
            .ok_or_else(|| DeployError::NotFound(name.to_owned()))?;
        let released = function.quarantine().release();
        if released {
            tracing::info!(function = name, "released from quarantine");
        }
        Ok(released)
    }

    /// Whether `name` is quarantined, and after how many budget kills in a row.
    pub fn quarantined(&self, name: &str) -> Option<u32> {
        self.registry.get(name)?.quarantined()
    }
}
