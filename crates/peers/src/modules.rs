//! Module bytes fetched by content hash, for records this node adopted without the module:
//! `GET /v1/internal/modules/SHA256` on each peer in turn until one has it, then, if the node
//! was given object storage for modules (`mote up --s3-endpoint`), the object `SHA256.wasm` of
//! its modules bucket, where the node that took the deploy put it. A copy whose bytes do not
//! hash to the name asked for is refused (and logged with where it came from), and the next
//! source is asked.

use mote_node::ModuleSource;
use mote_objects::Objects;
use sha2::{Digest, Sha256};
use std::io::Read;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// The largest module a peer may send: the largest a deploy accepts is a flag of the peer's,
/// so this only keeps a broken peer from filling this node's memory.
const MAX_MODULE_BYTES: u64 = 1 << 30;

/// How long one peer may take to send a module.
const FETCH_TIMEOUT: Duration = Duration::from_secs(60);

/// Object storage that keeps every deployed module, as `SHA256.wasm` in one bucket.
#[derive(Clone)]
pub(crate) struct ModuleShelf {
    pub objects: Arc<Objects>,
    pub bucket: String,
    /// The runtime the object store's client runs on: fetches are made from threads that may
    /// block, outside it.
    pub runtime: tokio::runtime::Handle,
}

impl ModuleShelf {
    pub(crate) fn key(sha256: &str) -> String {
        format!("{sha256}.wasm")
    }

    fn fetch(&self, sha256: &str) -> Result<Vec<u8>, String> {
        let got = self.runtime.block_on(self.objects.get(
            &self.bucket,
            &Self::key(sha256),
            MAX_MODULE_BYTES,
        ));
        let bytes = got.map_err(|e| e.to_string())?;
        checked(bytes.to_vec(), sha256)
    }
}

/// Fetches modules from the members of the cluster, then from the shelf.
pub(crate) struct PeerModules {
    pub peers: Weak<crate::Peers>,
    pub agent: ureq::Agent,
    pub shelf: Option<ModuleShelf>,
    /// Whom the node trusts, and the cluster secret every request to a peer carries.
    pub access: mote_tls::PeerAccess,
}

/// `bytes` if they hash to `sha256`.
fn checked(bytes: Vec<u8>, sha256: &str) -> Result<Vec<u8>, String> {
    let found = hex::encode(Sha256::digest(&bytes));
    match found == sha256 {
        true => Ok(bytes),
        false => Err(format!(
            "sent {} bytes that hash to {found}, not to {sha256}; refused",
            bytes.len()
        )),
    }
}

impl PeerModules {
    pub(crate) fn new(
        peers: Weak<crate::Peers>,
        shelf: Option<ModuleShelf>,
        access: &mote_tls::PeerAccess,
    ) -> Self {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(FETCH_TIMEOUT))
            .http_status_as_error(false)
            .tls_config(access.trust.ureq())
            .build()
            .into();
        Self {
            peers,
            agent,
            shelf,
            access: access.clone(),
        }
    }

    fn fetch_from(&self, url: &str, sha256: &str) -> Result<Vec<u8>, String> {
        let target = format!("{}/v1/internal/modules/{sha256}", url.trim_end_matches('/'));
        let mut request = self.agent.get(&target);
        if let Some(secret) = self
            .access
            .secret_header_for(url)
            .map_err(|e| e.to_string())?
        {
            request = request.header(mote_types::CLUSTER_SECRET_HEADER, secret);
        }
        let response = request.call().map_err(|e| e.to_string())?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("answered {status}"));
        }
        let mut bytes = Vec::new();
        response
            .into_body()
            .into_reader()
            .take(MAX_MODULE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("the transfer failed: {e}"))?;
        if bytes.len() as u64 > MAX_MODULE_BYTES {
            return Err(format!("sent more than {MAX_MODULE_BYTES} bytes"));
        }
        checked(bytes, sha256)
    }
}

impl ModuleSource for PeerModules {
    fn fetch(&self, sha256: &str) -> Result<Vec<u8>, String> {
        let peers = self
            .peers
            .upgrade()
            .ok_or_else(|| "the node is leaving its cluster".to_owned())?;
        let mut failures = Vec::new();
        for (node, url) in peers.others() {
            match self.fetch_from(&url, sha256) {
                Ok(bytes) => {
                    tracing::info!(module = sha256, %node, bytes = bytes.len(), "module fetched from a peer");
                    return Ok(bytes);
                }
                Err(why) => {
                    // A peer that has not fetched the module yet answers 404: that is expected
                    // while a deploy spreads, and only worth a warning if no peer has it.
                    match why.contains("404") {
                        true => {
                            tracing::debug!(module = sha256, %node, "this peer does not hold the module")
                        }
                        false => {
                            tracing::warn!(module = sha256, %node, %url, %why, "cannot fetch a module from this peer")
                        }
                    }
                    failures.push(format!("node `{node}` ({url}) {why}"));
                }
            }
        }
        if failures.is_empty() {
            failures.push("this node knows no other node".to_owned());
        }
        match &self.shelf {
            None => failures.push("no object storage for modules (mote up --s3-endpoint)".into()),
            Some(shelf) => match shelf.fetch(sha256) {
                Ok(bytes) => {
                    tracing::info!(module = sha256, bucket = %shelf.bucket, "module fetched from object storage");
                    return Ok(bytes);
                }
                Err(why) => {
                    tracing::warn!(module = sha256, bucket = %shelf.bucket, %why, "cannot fetch a module from object storage");
                    failures.push(format!("object storage (bucket `{}`): {why}", shelf.bucket));
                }
            },
        }
        Err(format!(
            "no source sent module {sha256}: {}",
            failures.join("; ")
        ))
    }
}
