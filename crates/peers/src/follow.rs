//! Following the store: the node keys under `/mote/nodes/` into the membership, the function
//! records into the node (`Node::follow`: adopt a record another node wrote, drop one it
//! deleted), and the token records into the node's live tokens. Each follower lists its prefix,
//! then watches it; after a failure of the store it says so and lists again a second later.

use crate::membership::Peers;
use crate::name::NodeName;
use crate::node_key::NODES_PREFIX;
use mote_cluster::Event;
use mote_node::Node;
use mote_state::Change;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// How long to wait before listing and watching again after the store failed.
const RETRY: Duration = Duration::from_secs(1);

/// Lists `prefix`, then hands every change after the listing to `changed`; after a failure of
/// the store, says so (`what` was being followed) and lists again a second later. Each call
/// gets this node's `Peers` for its own duration only, so that following never keeps a node
/// that left alive; it ends once the node is gone.
async fn follow_prefix(
    peers: Weak<Peers>,
    prefix: &str,
    what: &str,
    mut listed: impl AsyncFnMut(&Arc<Peers>, Vec<(String, Vec<u8>)>),
    mut changed: impl AsyncFnMut(&Arc<Peers>, Change),
) {
    loop {
        let Some(store) = peers.upgrade().map(|p| p.store.clone()) else {
            return;
        };
        let failed = match store.watch_prefix(prefix).await {
            Ok((listing, mut watch)) => {
                let Some(p) = peers.upgrade() else { return };
                listed(&p, listing).await;
                drop(p);
                loop {
                    let change = watch.next().await;
                    let Some(p) = peers.upgrade() else { return };
                    match change {
                        Ok(change) => changed(&p, change).await,
                        Err(e) => break e,
                    }
                }
            }
            Err(e) => e,
        };
        match peers.upgrade() {
            Some(p) => p.store_failed(what, &failed),
            None => return,
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// Follows the token records into the node's live tokens: a token made or revoked through any
/// node takes effect here as soon as the watch delivers the change.
pub(crate) async fn follow_tokens(peers: Weak<Peers>) {
    follow_prefix(
        peers,
        mote_access::TOKEN_PREFIX,
        "following the tokens",
        async |p, listing| p.config.tokens.relist(listing),
        async |p, change| p.config.tokens.apply(change),
    )
    .await;
}

/// Follows `/mote/nodes/` into the placement's view.
pub(crate) async fn follow_nodes(peers: Weak<Peers>) {
    follow_prefix(
        peers,
        NODES_PREFIX,
        "following the nodes",
        async |p, listing| p.relist(listing),
        async |p, change| match change {
            Change::Put { key, value } => p.seen(&key, &value),
            Change::Delete { key } => {
                if let Some(name) = key.strip_prefix(NODES_PREFIX)
                    && let Ok(name) = NodeName::new(name)
                {
                    tracing::info!(node = %name, "a node left the cluster");
                    p.apply(Event::Gone(name.into()));
                }
            }
        },
    )
    .await;
}

/// Follows the function records: every record listed or changed, and every function the node
/// has (one may have been deleted while nobody watched), is one the node follows.
pub(crate) async fn follow_functions(peers: Weak<Peers>) {
    follow_prefix(
        peers,
        mote_node::RECORD_PREFIX,
        "following the function records",
        async |p, listing| {
            let mut names: Vec<String> = listing
                .iter()
                .filter_map(|(key, _)| record_name(key))
                .collect();
            names.extend(p.node.list().into_iter().map(|r| r.name.to_string()));
            names.sort();
            names.dedup();
            for name in names {
                follow(&p.node, &name).await;
            }
        },
        async |p, change| {
            let (Change::Put { key, .. } | Change::Delete { key }) = change;
            if let Some(name) = record_name(&key) {
                follow(&p.node, &name).await;
            }
        },
    )
    .await;
}

fn record_name(key: &str) -> Option<String> {
    key.strip_prefix(mote_node::RECORD_PREFIX)
        .map(str::to_owned)
}

async fn follow(node: &Node, name: &str) {
    match node.follow(name).await {
        Ok(mote_node::Followed::Unchanged) => {}
        Ok(followed) => tracing::info!(function = name, ?followed, "followed the store"),
        Err(e) => {
            tracing::warn!(function = name, error = %e, "cannot follow a function record; the next change or relisting tries again")
        }
    }
}
