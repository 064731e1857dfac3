//! The node's key and its lease: joining refuses a name another live node holds, writes
//! `/mote/nodes/NAME` under a lease of `--lease-ttl-s` and starts following the cluster; the
//! key is rewritten with the node's load three times a TTL (so that a node that dies leaves the
//! store, and every routing table, a TTL later by itself), says so when the node drains, and is
//! deleted when it leaves.

use crate::config::{JoinError, PeersConfig};
use crate::follow::{follow_functions, follow_nodes, follow_tokens};
use crate::forward::CONNECT_TIMEOUT;
use crate::membership::Peers;
use crate::metrics::PeerMetrics;
use crate::modules::PeerModules;
use crate::name::NodeName;
use crate::node_key::{NodeKey, node_key, now_ms};
use crate::pull::pull;
use crate::shelf::ModuleShelf;
use mote_cluster::{Backlog, Event, Membership, Placement};
use mote_node::{Node, NodeLoad};
use mote_state::{EtcdStore, StateStore};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

impl Peers {
    /// Refuses a name that is not valid or that another live node holds (a node at another
    /// URL, with another instance id, that wrote its key within two TTLs). [`Peers::join`] checks again; this lets a node
    /// refuse before it starts.
    pub async fn check_name(store: &EtcdStore, config: &PeersConfig) -> Result<(), JoinError> {
        NodeName::new(&config.name)?;
        if let Some(value) = store.get(&node_key(&config.name)).await?
            && let Ok(held) = NodeKey::from_json(&value)
            && held.url != config.url
            && held.instance != config.instance
            && held.fresh(now_ms(), config.ttl * 2)
        {
            return Err(JoinError::NameTaken {
                name: config.name.clone(),
                url: held.url,
            });
        }
        Ok(())
    }

    /// Joins the cluster that shares `store`: refuses a name another live node holds, writes
    /// this node's key, reads the members and starts following them and the function records.
    pub async fn join(
        node: Arc<Node>,
        store: EtcdStore,
        config: PeersConfig,
    ) -> Result<Arc<Self>, JoinError> {
        Self::check_name(&store, &config).await?;
        let origin = Instant::now();
        let me = NodeName::new(&config.name)?;
        let first = NodeKey {
            url: config.url.clone(),
            policy: config.policy.clone(),
            cores: node.cores() as u32,
            running: 0,
            queued: 0,
            work_us: 0,
            ranked: false,
            backlog_ns: Vec::new(),
            draining: false,
            store_peer: config.store.as_ref().map(|(url, _)| url.clone()),
            instance: config.instance.clone(),
            written_ms: now_ms(),
        };
        let key = store
            .lease_key(&node_key(&config.name), first.to_json(), config.ttl)
            .await?;
        let view = Membership::new(first.report(&config.name), Duration::ZERO);
        let shelf = config
            .modules
            .as_ref()
            .map(|(objects, bucket)| ModuleShelf {
                objects: objects.clone(),
                bucket: bucket.clone(),
            });
        let peers = Arc::new(Self {
            wire: mote_wire::WireClient::new(&config.access, CONNECT_TIMEOUT),
            placement: Mutex::new(Placement::new(view, config.placement)),
            me_header: me.header(),
            me,
            config,
            node,
            store,
            others: AtomicUsize::new(0),
            draining: AtomicBool::new(false),
            origin,
            key: tokio::sync::Mutex::new(Some(key)),
            store_lost: Mutex::new(None),
            metrics: PeerMetrics::new(),
            shelf: shelf.clone(),
            tasks: Mutex::new(Vec::new()),
        });
        let modules = PeerModules::new(Arc::downgrade(&peers), shelf);
        peers.node.fetch_modules_from(Arc::new(modules));
        let weak = Arc::downgrade(&peers);
        let tasks = vec![
            tokio::spawn(follow_nodes(weak.clone())),
            tokio::spawn(follow_functions(weak.clone())),
            tokio::spawn(follow_tokens(weak.clone())),
            tokio::spawn(pull(weak.clone())),
            tokio::spawn(report(weak)),
        ];
        *peers.tasks.lock() = tasks;
        Ok(peers)
    }

    /// Stops taking calls: the node's key says it is draining, so peers stop sending it calls,
    /// and its own client calls go to its peers.
    pub async fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
        let key = self.current_key(true);
        self.placement.lock().apply(Event::Seen {
            report: key.report(self.me.as_str()),
            at: self.origin.elapsed(),
        });
        if let Some(leased) = self.key.lock().await.as_ref()
            && let Err(e) = leased.update(key.to_json()).await
        {
            tracing::warn!(error = %e, "cannot tell the cluster this node is draining; it leaves when its lease expires");
        }
    }

    /// Leaves the cluster: stops following it and deletes this node's key.
    pub async fn leave(&self) {
        for task in self.tasks.lock().drain(..) {
            task.abort();
        }
        if let Some(leased) = self.key.lock().await.take()
            && let Err(e) = leased.release().await
        {
            tracing::warn!(error = %e, "cannot delete this node's key; it goes when its lease expires");
        }
    }

    /// This node's key as it should read now.
    fn current_key(&self, draining: bool) -> NodeKey {
        let load = self.node.load();
        let backlog = backlog_of(&load);
        NodeKey {
            url: self.config.url.clone(),
            policy: self.config.policy.clone(),
            cores: load.cores as u32,
            running: load.running as u32,
            queued: load.queued as u32,
            work_us: load.work.as_micros() as u64,
            ranked: backlog.is_ranked(),
            backlog_ns: backlog.by_class().to_vec(),
            draining,
            store_peer: self.config.store.as_ref().map(|(url, _)| url.clone()),
            instance: self.config.instance.clone(),
            written_ms: now_ms(),
        }
    }
}

/// The backlog a node reports from its load. Under a ranking policy each waiting call counts
/// its expected remaining time in its class; a running call counts half its node's mean
/// expected time, up to the quantum ahead of every new call (all of it if calls run to their
/// end): the executors do not publish what each running call attained, so the half is what a
/// call found at a random point of its run has left on average. In arrival order everything
/// held is ahead, as calls times the mean.
pub(crate) fn backlog_of(load: &NodeLoad) -> Backlog {
    let Some(waiting) = &load.waiting_work else {
        return Backlog::all_ahead(load.work);
    };
    let mut backlog = Backlog::ranked();
    for &left in waiting {
        backlog.queue(left);
    }
    let half = load.mean_expected / 2;
    for _ in 0..load.running {
        backlog.running(half, half, load.quantum.unwrap_or(Duration::MAX));
    }
    backlog
}

/// Rewrites this node's key with its load three times a TTL.
async fn report(peers: Weak<Peers>) {
    let Some(every) = peers.upgrade().map(|p| p.config.ttl / 3) else {
        return;
    };
    let mut tick = tokio::time::interval(every.max(Duration::from_millis(100)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(p) = peers.upgrade() else { return };
        let key = p.current_key(p.draining.load(Ordering::SeqCst));
        let written = match p.key.lock().await.as_ref() {
            Some(leased) => leased.update(key.to_json()).await,
            None => return,
        };
        match written {
            Ok(()) => p.store_answered(),
            Err(e) => p.store_failed("writing this node's key", &e),
        }
        p.drop_silent();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_ranked_node_reports_its_waiting_calls_by_class_and_its_running_ones_ahead_until_the_quantum()
     {
        let load = NodeLoad {
            cores: 2,
            running: 2,
            queued: 2,
            work: 400 * MS,
            mean_expected: 100 * MS,
            waiting_work: Some(vec![5 * MS, 2000 * MS]),
            quantum: Some(2 * MS),
        };
        let backlog = backlog_of(&load);
        assert!(backlog.is_ranked());
        // Two running calls, 50 ms left each, 2 ms of each before they could yield.
        assert_eq!(backlog.ahead_of(Duration::ZERO), 4 * MS);
        assert_eq!(backlog.ahead_of(5 * MS), 9 * MS);
        assert_eq!(backlog.ahead_of(100 * MS), 105 * MS);
        assert_eq!(backlog.total(), 2105 * MS);
        // Without preemption the running calls are ahead of everything.
        let to_end = backlog_of(&NodeLoad {
            quantum: None,
            ..load.clone()
        });
        assert_eq!(to_end.ahead_of(Duration::ZERO), 100 * MS);
        // In arrival order, all the work is ahead.
        let fifo = backlog_of(&NodeLoad {
            waiting_work: None,
            ..load
        });
        assert!(!fifo.is_ranked());
        assert_eq!(fifo.ahead_of(Duration::ZERO), 400 * MS);
    }
}
