//! Calls sent to the peer that placement chose, over the wire between nodes
//! ([`mote_wire::WireClient`]: one kept-alive connection pool per node), the response's body
//! streamed back as it arrives.
//!
//! A forwarded request carries [`FORWARDED_BY`] so that the peer runs it whatever its load: a
//! call is forwarded once at most. The wire reaches peers over https when their URL says so,
//! and adds the cluster secret when the node has one; a node that serves TLS sends nothing to a
//! peer with a plain `http://` URL (the secret would travel in clear).

use mote_wire::{Failure, WireError};
use std::time::Duration;

pub use mote_wire::{FORWARDED_BY, NOT_DEPLOYED_HERE};

/// How long a connection to a peer may take to open before the peer counts as unreachable for
/// this call and the next choice is tried. Peers are on the same network; a second is many
/// round trips.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Why a forwarded call (or a read of a peer's logs) got no response.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    /// The peer could not be reached: the call was not sent, so another node may run it.
    #[error("node `{node}` at {url} cannot be reached: {detail}")]
    Unreachable {
        /// The peer.
        node: String,
        /// Where it was looked for.
        url: String,
        /// What failed.
        detail: String,
    },
    /// The call was sent and the connection failed before a response: it may have run.
    #[error(
        "node `{node}` at {url} failed while it held the call, which may have run there (mote does not retry it): {detail}"
    )]
    Lost {
        /// The peer.
        node: String,
        /// Where it was.
        url: String,
        /// What failed.
        detail: String,
    },
    /// The peer has not heard of the function yet (its store replica lags behind this node's)
    /// and said so with [`NOT_DEPLOYED_HERE`]: the call did not run there, so another node
    /// may run it.
    #[error("node `{node}` at {url} has not heard of function `{function}` yet")]
    NotDeployed {
        /// The peer.
        node: String,
        /// Where it was.
        url: String,
        /// The function called.
        function: String,
    },
}

impl From<WireError> for ForwardError {
    fn from(e: WireError) -> Self {
        let node = e.peer.name().unwrap_or_default().to_owned();
        let url = e.peer.url().to_owned();
        // A peer that gave no answer in time is passed over like one that cannot be reached:
        // only reads (of logs) have a time, and a read has no effect to repeat.
        let unreachable = e.not_sent() || matches!(e.failure, Failure::TimedOut(_));
        let detail = match e.failure {
            Failure::BadUrl(detail) => format!("not a URL mote can send to: {detail}"),
            Failure::PlainSecret(refused) => refused.to_string(),
            Failure::Unreachable(detail) | Failure::Lost(detail) => detail,
            Failure::TimedOut(limit) => format!("no answer within {} ms", limit.as_millis()),
            other => other.to_string(),
        };
        match unreachable {
            true => Self::Unreachable { node, url, detail },
            false => Self::Lost { node, url, detail },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mote_wire::{Peer, PeerRequest, WireClient};
    use tokio::io::AsyncReadExt;

    fn wire() -> WireClient {
        WireClient::new(&mote_tls::PeerAccess::default(), CONNECT_TIMEOUT)
    }

    fn call<'a>(me: &'a hyper::header::HeaderValue) -> PeerRequest<'a> {
        PeerRequest::invoke("f", bytes::Bytes::from_static(b"in"), None, me)
    }

    /// The gateway places a call elsewhere only when it surely did not run: a peer that cannot
    /// be reached, or (for reads) did not answer in time, is `Unreachable`; one that took the
    /// request and dropped the connection is `Lost`.
    #[tokio::test]
    async fn a_call_not_sent_is_unreachable_and_one_dropped_is_lost() {
        let me = hyper::header::HeaderValue::from_static("n1");
        let dead = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let url = format!("http://{dead}");
        let e = ForwardError::from(
            wire()
                .send(&Peer::named("n2", &url), call(&me))
                .await
                .unwrap_err(),
        );
        assert!(
            matches!(&e, ForwardError::Unreachable { node, .. } if node == "n2"),
            "{e}"
        );
        assert!(
            e.to_string()
                .starts_with(&format!("node `n2` at {url} cannot be reached: ")),
            "{e}"
        );

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let (mut tcp, _) = listener.accept().await.unwrap();
            let mut head = [0u8; 64];
            let _ = tcp.read(&mut head).await;
            drop(tcp);
        });
        let e = ForwardError::from(
            wire()
                .send(&Peer::named("n3", &url), call(&me))
                .await
                .unwrap_err(),
        );
        assert!(
            matches!(&e, ForwardError::Lost { node, .. } if node == "n3"),
            "{e}"
        );
        assert!(e.to_string().contains("may have run there"), "{e}");
    }

    #[tokio::test]
    async fn a_read_without_an_answer_in_time_is_unreachable() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let held = tokio::spawn(async move { listener.accept().await });
        let me = hyper::header::HeaderValue::from_static("n1");
        let request = PeerRequest::logs("f", mote_wire::LogsFrom::Tail(1), &me)
            .within(Duration::from_millis(50));
        let e = ForwardError::from(
            wire()
                .send(&Peer::named("n2", &url), request)
                .await
                .unwrap_err(),
        );
        assert!(
            matches!(&e, ForwardError::Unreachable { detail, .. } if detail == "no answer within 50 ms"),
            "{e}"
        );
        drop(held);
    }

    #[tokio::test]
    async fn a_plain_peer_of_a_tls_node_is_unreachable_with_the_fix() {
        let access = mote_tls::PeerAccess {
            trust: mote_tls::Trust::default(),
            secret: Some(mote_types::ClusterSecret::new("sixteen-characters-or-more").unwrap()),
            serves_tls: true,
        };
        let wire = WireClient::new(&access, CONNECT_TIMEOUT);
        let me = hyper::header::HeaderValue::from_static("n1");
        let e = wire
            .send(&Peer::named("n2", "http://127.0.0.1:9"), call(&me))
            .await
            .unwrap_err();
        let e = ForwardError::from(e);
        assert!(matches!(&e, ForwardError::Unreachable { .. }), "{e}");
        assert!(e.to_string().contains("https://"), "{e}");
    }
}
