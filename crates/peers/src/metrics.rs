//! The cluster's metrics: calls forwarded to each peer by outcome, the time a forwarded call
//! takes to its response's head, waiting calls handed over and pulled (late correction), and
//! the nodes this node sees.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// How a forwarded call went: `answered`, `unreachable` (not sent) or `lost` (sent, no answer).
pub(crate) type Outcome = &'static str;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ForwardLabels {
    peer: String,
    outcome: Outcome,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PullLabels {
    /// `moved` (calls came) or `dry` (none did, or no answer).
    outcome: &'static str,
}

/// The cluster's metrics, and the registry that writes them.
pub(crate) struct PeerMetrics {
    forwarded: Family<ForwardLabels, Counter>,
    handed_over: Counter,
    pulls: Family<PullLabels, Counter>,
    pulled_calls: Counter,
    forward_seconds: Histogram,
    nodes: Gauge,
    registry: Registry,
}

impl PeerMetrics {
    /// The metrics of a node that sees only itself.
    pub(crate) fn new() -> Self {
        let forwarded = Family::default();
        let forward_seconds = Histogram::new(
            prometheus_client::metrics::histogram::exponential_buckets(2e-5, 2.0, 16),
        );
        let nodes = Gauge::default();
        nodes.set(1);
        let (handed_over, pulls, pulled_calls) =
            (Counter::default(), Family::default(), Counter::default());
        let mut registry = Registry::with_prefix("mote");
        registry.register(
            "forwarded_calls",
            "Calls this node sent to a peer, by peer and outcome (answered; unreachable: not sent; lost: sent, no answer)",
            forwarded.clone(),
        );
        registry.register(
            "forward_seconds",
            "Time from sending a call to a peer to its response's headers",
            forward_seconds.clone(),
        );
        registry.register(
            "handed_over_calls",
            "Waiting calls this node handed to a peer that asked for them, before they started",
            handed_over.clone(),
        );
        registry.register(
            "pulls",
            "Requests for waiting calls this node sent a peer, by outcome (moved: calls came; dry: none did)",
            pulls.clone(),
        );
        registry.register(
            "pulled_calls",
            "Calls peers handed to this node when it asked",
            pulled_calls.clone(),
        );
        registry.register(
            "cluster_nodes",
            "Nodes this node sees in its cluster, itself included",
            nodes.clone(),
        );
        Self {
            forwarded,
            handed_over,
            pulls,
            pulled_calls,
            forward_seconds,
            nodes,
            registry,
        }
    }

    /// Counts a call forwarded to `peer` that went as `outcome`.
    pub(crate) fn forwarded(&self, peer: &str, outcome: Outcome) {
        let labels = ForwardLabels {
            peer: peer.to_owned(),
            outcome,
        };
        self.forwarded.get_or_create(&labels).inc();
    }

    /// The calls forwarded to `peer` that went as `outcome`.
    pub(crate) fn count(&self, peer: &str, outcome: Outcome) -> u64 {
        let labels = ForwardLabels {
            peer: peer.to_owned(),
            outcome,
        };
        self.forwarded.get(&labels).map_or(0, |c| c.get())
    }

    /// This node handed `calls` waiting calls to a peer that asked.
    pub(crate) fn handed_over(&self, calls: u32) {
        self.handed_over.inc_by(u64::from(calls));
    }

    /// This node asked a peer for calls and `calls` came.
    pub(crate) fn pulled(&self, calls: u32) {
        let outcome = match calls {
            0 => "dry",
            _ => "moved",
        };
        self.pulls.get_or_create(&PullLabels { outcome }).inc();
        self.pulled_calls.inc_by(u64::from(calls));
    }

    /// A forwarded call answered after `seconds`.
    pub(crate) fn answered_after(&self, seconds: f64) {
        self.forward_seconds.observe(seconds);
    }

    /// This node sees `members` nodes, itself included.
    pub(crate) fn members(&self, members: usize) {
        self.nodes.set(members as i64);
    }

    /// Writes them in the Prometheus text format, without an end marker.
    pub(crate) fn encode(&self, out: &mut String) {
        prometheus_client::encoding::text::encode_registry(out, &self.registry)
            .expect("writing to a String cannot fail");
    }
}
