//! Module bytes fetched by content hash, for records this node adopted without the module:
//! `GET /v1/internal/modules/SHA256` ([`mote_wire::route::MODULE`]) on each peer in turn until
//! one has it, then, if the node was given object storage for modules (`mote up
//! --s3-endpoint`), the copy on its [`ModuleShelf`], where the node that took the deploy put
//! it. A copy whose bytes do not hash to the name asked for is refused (and logged with where
//! it came from), and the next source is asked.
//!
//! The node asks for a module from a thread that may block, during a cold load
//! ([`ModuleSource`]); the fetch itself runs on the node's async runtime, over the wire every
//! request between nodes takes, and the asking thread waits for it.

use crate::membership::Peers;
use crate::shelf::{MAX_MODULE_BYTES, ModuleShelf, checked};
use mote_node::ModuleSource;
use mote_wire::{Failure, Peer, PeerRequest, WireClient};
use std::sync::Weak;
use std::time::Duration;

/// How long one peer may take to send a module.
const FETCH_TIMEOUT: Duration = Duration::from_secs(60);

impl Peers {
    /// Puts a copy of a module this node took a deploy of in object storage, if it was given
    /// some, for nodes that adopt the record when no peer holds the module. The deploy stands
    /// without the copy (its peers can fetch the module from this node): a failure is logged.
    pub async fn keep_module(&self, sha256: &str, wasm: bytes::Bytes) {
        let Some(shelf) = &self.shelf else { return };
        if let Err(e) = shelf.keep(sha256, wasm).await {
            tracing::warn!(module = sha256, bucket = %shelf.bucket, error = %e, "cannot copy a deployed module to object storage; peers fetch it from this node");
        }
    }
}

/// Fetches modules from the members of the cluster, then from the shelf.
pub(crate) struct PeerModules {
    peers: Weak<Peers>,
    shelf: Option<ModuleShelf>,
    /// The runtime the fetches run on: they are asked for from threads outside it.
    runtime: tokio::runtime::Handle,
}

impl PeerModules {
    /// Fetches for the node whose side of the cluster is `peers`; must be made on its runtime.
    pub(crate) fn new(peers: Weak<Peers>, shelf: Option<ModuleShelf>) -> Self {
        Self {
            peers,
            shelf,
            runtime: tokio::runtime::Handle::current(),
        }
    }
}

impl ModuleSource for PeerModules {
    fn fetch(&self, sha256: &str) -> Result<Vec<u8>, String> {
        let (peers, shelf, sha256) = (self.peers.clone(), self.shelf.clone(), sha256.to_owned());
        // The answer comes over a std channel, not `block_on`: the asking thread may be inside
        // another runtime (a microtask thread's), where blocking on this one would panic.
        let (answer, answered) = std::sync::mpsc::sync_channel(1);
        self.runtime.spawn(async move {
            let fetched = match members(&peers).await {
                Ok((wire, others)) => fetch(&wire, &others, shelf.as_ref(), &sha256).await,
                Err(e) => Err(e),
            };
            let _ = answer.send(fetched);
        });
        answered
            .recv()
            .map_err(|_| "the node's runtime stopped before the module came".to_owned())?
    }
}

/// How long a fetch waits for this node to learn of any other node. A node that adopted a
/// record from the store learns the members of the cluster it came from in the same pulls, a
/// moment later: a call that arrives in between would otherwise fail for want of a peer to ask.
const MEMBERS_WAIT: Duration = Duration::from_secs(2);

/// The wire and the other members (name and URL), once there are any or [`MEMBERS_WAIT`] has
/// passed.
async fn members(
    peers: &Weak<Peers>,
) -> Result<(WireClient, Vec<(mote_cluster::NodeName, String)>), String> {
    let deadline = tokio::time::Instant::now() + MEMBERS_WAIT;
    loop {
        let peers = peers
            .upgrade()
            .ok_or_else(|| "the node is leaving its cluster".to_owned())?;
        let others = peers.others();
        if !others.is_empty() || tokio::time::Instant::now() >= deadline {
            return Ok((peers.wire.clone(), others));
        }
        drop(peers);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The module whose sha256 is `sha256`, from the first of `others` (name and URL) that sends
/// a good copy, else from `shelf`; the error names every source and what it answered.
async fn fetch(
    wire: &WireClient,
    others: &[(mote_cluster::NodeName, String)],
    shelf: Option<&ModuleShelf>,
    sha256: &str,
) -> Result<Vec<u8>, String> {
    let mut failures = Vec::new();
    for (node, url) in others {
        match fetch_from(wire, &Peer::named(node.as_str(), url), sha256).await {
            Ok(bytes) => {
                tracing::info!(module = sha256, %node, bytes = bytes.len(), "module fetched from a peer");
                return Ok(bytes);
            }
            Err(Fetch::NotThere(why)) => {
                // A peer that has not fetched the module yet answers 404: that is expected
                // while a deploy spreads, and only worth a warning if no peer has it.
                tracing::debug!(module = sha256, %node, "this peer does not hold the module");
                failures.push(why);
            }
            Err(Fetch::Failed(why)) => {
                tracing::warn!(module = sha256, %node, %url, %why, "cannot fetch a module from this peer");
                failures.push(why);
            }
        }
    }
    if failures.is_empty() {
        failures.push("this node knows no other node".to_owned());
    }
    match shelf {
        None => failures.push("no object storage for modules (mote up --s3-endpoint)".into()),
        Some(shelf) => match shelf.fetch(sha256).await {
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

/// Why one peer sent no good copy, said with the peer's name and URL.
enum Fetch {
    /// It does not hold the module.
    NotThere(String),
    /// Anything else.
    Failed(String),
}

async fn fetch_from(wire: &WireClient, peer: &Peer<'_>, sha256: &str) -> Result<Vec<u8>, Fetch> {
    let request = PeerRequest::module(sha256).within(FETCH_TIMEOUT);
    match wire.fetch(peer, request, MAX_MODULE_BYTES).await {
        Ok(bytes) => {
            checked(Vec::from(bytes), sha256).map_err(|why| Fetch::Failed(format!("{peer} {why}")))
        }
        Err(e) => match &e.failure {
            Failure::Status { status, .. } if *status == hyper::StatusCode::NOT_FOUND => {
                Err(Fetch::NotThere(e.to_string()))
            }
            _ => Err(Fetch::Failed(e.to_string())),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::extract::Path;
    use axum::http::StatusCode;
    use axum::response::IntoResponse;

    const WASM: &[u8] = b"\0asm\x01\0\0\0";

    fn sha256(bytes: &[u8]) -> String {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(bytes))
    }

    /// A peer that answers every module with `answer`.
    async fn peer(answer: fn(String) -> axum::response::Response) -> String {
        let router = axum::Router::new().route(
            mote_wire::route::MODULE,
            axum::routing::get(move |Path(sha): Path<String>| async move { answer(sha) }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, router).await });
        url
    }

    fn wire() -> WireClient {
        WireClient::new(&mote_tls::PeerAccess::default(), Duration::from_secs(1))
    }

    fn named(name: &str, url: &str) -> (mote_cluster::NodeName, String) {
        (mote_cluster::NodeName::from(name), url.to_owned())
    }

    #[tokio::test]
    async fn peers_are_asked_in_turn_until_one_sends_a_good_copy() {
        let lacking = peer(|_| (StatusCode::NOT_FOUND, "not here").into_response()).await;
        let holding = peer(|_| WASM.into_response()).await;
        let others = [named("a", &lacking), named("b", &holding)];
        let got = fetch(&wire(), &others, None, &sha256(WASM)).await.unwrap();
        assert_eq!(got, WASM);
    }

    /// A copy that hashes otherwise is refused, and the error names every source and what it
    /// said, the missing object storage too.
    #[tokio::test]
    async fn a_bad_copy_is_refused_and_every_source_is_named() {
        let lacking = peer(|_| (StatusCode::NOT_FOUND, "not here").into_response()).await;
        let lying = peer(|_| b"not the module".as_slice().into_response()).await;
        let others = [named("a", &lacking), named("b", &lying)];
        let sha = sha256(WASM);
        let why = fetch(&wire(), &others, None, &sha).await.unwrap_err();
        assert!(
            why.starts_with(&format!("no source sent module {sha}: ")),
            "{why}"
        );
        assert!(
            why.contains(&format!(
                "node `a` at {lacking} answered 404 Not Found: not here"
            )),
            "{why}"
        );
        assert!(
            why.contains(&format!("node `b` at {lying} sent 14 bytes that hash to")),
            "{why}"
        );
        assert!(why.contains("--s3-endpoint"), "{why}");
        let alone = fetch(&wire(), &[], None, &sha).await.unwrap_err();
        assert!(alone.contains("this node knows no other node"), "{alone}");
    }
}
