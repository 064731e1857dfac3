//! The one client a node reaches its peers with: HTTP/1.1, connections kept alive and reused,
//! https to a peer whose URL says so (trusting what [`mote_tls::Trust`] trusts), and the
//! cluster secret on every request when the node has one, except where it would travel in
//! clear: a node that serves TLS sends nothing to a peer with a plain `http://` URL
//! ([`mote_tls::PeerAccess::secret_header_for`]).

use crate::error::{Failure, Peer, WireError};
use crate::request::PeerRequest;
use crate::route::{FORWARDED_BY, MOVED};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::CONTENT_TYPE;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use mote_types::CLUSTER_SECRET_HEADER;
use mote_types::with_causes;
use std::time::Duration;

/// How long an idle kept-alive connection to a peer stays open.
const IDLE: Duration = Duration::from_secs(30);

/// How much of a failed answer's body an error quotes.
const QUOTED: usize = 4096;

/// The client between nodes. Cheap to clone: clones share one connection pool.
#[derive(Clone)]
pub struct WireClient {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    access: mote_tls::PeerAccess,
}

impl WireClient {
    /// A client that reaches peers with `access` (its trust and the cluster secret), and counts
    /// a peer unreachable when a connection takes longer than `connect_timeout` to open.
    pub fn new(access: &mote_tls::PeerAccess, connect_timeout: Duration) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(connect_timeout));
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(IDLE)
            .build(access.trust.https_connector(connector));
        Self {
            client,
            access: access.clone(),
        }
    }

    /// Sends `request` to `to`; the answer comes back whatever its status, its body streamed
    /// as it arrives.
    pub async fn send(
        &self,
        to: &Peer<'_>,
        request: PeerRequest<'_>,
    ) -> Result<hyper::Response<Incoming>, WireError> {
        let timeout = request.timeout;
        let request = self.build(to, request)?;
        let answer = self.client.request(request);
        let answer = match timeout {
            None => answer.await,
            Some(limit) => tokio::time::timeout(limit, answer)
                .await
                .map_err(|_| to.failed(Failure::TimedOut(limit)))?,
        };
        answer.map_err(|e| {
            let detail = with_causes(&e);
            to.failed(match e.is_connect() {
                true => Failure::Unreachable(detail),
                false => Failure::Lost(detail),
            })
        })
    }

    /// Sends `request` to `to` and reads its whole answer, which must be a success and at most
    /// `limit` bytes long; the request's time, if it has one, covers the whole exchange.
    pub async fn fetch(
        &self,
        to: &Peer<'_>,
        mut request: PeerRequest<'_>,
        limit: u64,
    ) -> Result<Bytes, WireError> {
        // The time covers the whole exchange here, not only the answer's head.
        let timeout = request.timeout.take();
        let exchange = async {
            let response = self.send(to, request).await?;
            let status = response.status();
            let read = |limit| read(to, response.into_body(), limit);
            match status.is_success() {
                true => read(limit).await,
                false => {
                    let body = read(QUOTED as u64).await.unwrap_or_default();
                    let text = String::from_utf8_lossy(&body).trim().to_owned();
                    Err(to.failed(Failure::Status { status, text }))
                }
            }
        };
        match timeout {
            None => exchange.await,
            Some(limit) => tokio::time::timeout(limit, exchange)
                .await
                .unwrap_or_else(|_| Err(to.failed(Failure::TimedOut(limit)))),
        }
    }

    /// The HTTP request for `request` to `to`, signed with the cluster secret; refused if the
    /// secret would travel in clear or the peer's URL is not one to send to.
    fn build(
        &self,
        to: &Peer<'_>,
        request: PeerRequest<'_>,
    ) -> Result<hyper::Request<Full<Bytes>>, WireError> {
        let secret = self
            .access
            .secret_header_for(to.url())
            .map_err(|e| to.failed(Failure::PlainSecret(e)))?;
        let mut builder = hyper::Request::builder()
            .method(request.method())
            .uri(request.url(to.url()));
        if let Some(content_type) = request.content_type {
            builder = builder.header(CONTENT_TYPE, content_type);
        }
        if let Some(me) = request.forwarded_by {
            builder = builder.header(FORWARDED_BY, me);
        }
        if request.moved {
            builder = builder.header(MOVED, "1");
        }
        if let Some(secret) = secret {
            builder = builder.header(CLUSTER_SECRET_HEADER, secret);
        }
        builder
            .body(Full::new(request.body))
            .map_err(|e| to.failed(Failure::BadUrl(e.to_string())))
    }
}

/// The whole of `body`, if it is at most `limit` bytes long.
async fn read(to: &Peer<'_>, body: Incoming, limit: u64) -> Result<Bytes, WireError> {
    let limited = Limited::new(body, usize::try_from(limit).unwrap_or(usize::MAX));
    match limited.collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            Err(to.failed(Failure::TooLarge(limit)))
        }
        Err(e) => Err(to.failed(Failure::Body(with_causes(&*e)))),
    }
}

#[cfg(test)]
mod tests;
