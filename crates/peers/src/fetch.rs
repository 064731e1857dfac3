//! Module bytes fetched from peers by content hash, for records this node adopted without the
//! module: `GET /v1/internal/modules/SHA256` on each peer in turn until one has it. A copy whose
//! bytes do not hash to the name asked for is refused (and logged with the peer that sent it),
//! and the next peer is asked.

use mote_node::ModuleSource;
use sha2::{Digest, Sha256};
use std::io::Read;
use std::sync::Weak;
use std::time::Duration;

/// The largest module a peer may send: the largest a deploy accepts is a flag of the peer's,
/// so this only keeps a broken peer from filling this node's memory.
const MAX_MODULE_BYTES: u64 = 1 << 30;

/// How long one peer may take to send a module.
const FETCH_TIMEOUT: Duration = Duration::from_secs(60);

/// Fetches modules from the members of the cluster.
pub(crate) struct PeerModules {
    pub peers: Weak<crate::Peers>,
    pub agent: ureq::Agent,
}

impl PeerModules {
    pub(crate) fn new(peers: Weak<crate::Peers>) -> Self {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(FETCH_TIMEOUT))
            .http_status_as_error(false)
            .build()
            .into();
        Self { peers, agent }
    }

    fn fetch_from(&self, url: &str, sha256: &str) -> Result<Vec<u8>, String> {
        let target = format!("{}/v1/internal/modules/{sha256}", url.trim_end_matches('/'));
        let response = self.agent.get(&target).call().map_err(|e| e.to_string())?;
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
        let found = hex::encode(Sha256::digest(&bytes));
        if found != sha256 {
            return Err(format!(
                "sent {} bytes that hash to {found}, not to {sha256}; refused",
                bytes.len()
            ));
        }
        Ok(bytes)
    }
}

impl ModuleSource for PeerModules {
    fn fetch(&self, sha256: &str) -> Result<Vec<u8>, String> {
        let peers = self
            .peers
            .upgrade()
            .ok_or_else(|| "the node is leaving its cluster".to_owned())?;
        let others = peers.others();
        if others.is_empty() {
            return Err(format!(
                "no peer to fetch module {sha256} from: this node knows no other node"
            ));
        }
        let mut failures = Vec::new();
        for (node, url) in others {
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
        Err(format!(
            "no peer sent module {sha256}: {}",
            failures.join("; ")
        ))
    }
}
