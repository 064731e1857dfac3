//! Calls sent to the peer that placement chose: one HTTP/1.1 client per node, its connections
//! kept alive and reused, the response's body streamed back as it arrives.
//!
//! A forwarded request carries `mote-forwarded-by: NAME` so that the peer runs it whatever its
//! load: a call is forwarded once at most. Peers are reached over https when their URL says so,
//! and every request carries the cluster secret when the node has one; a node that serves TLS
//! sends nothing to a peer with a plain `http://` URL (the secret would travel in clear).

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use mote_types::CLUSTER_SECRET_HEADER;
use std::time::Duration;

/// The header a forwarded call carries, naming the node that forwarded it.
pub const FORWARDED_BY: &str = "mote-forwarded-by";

/// How long a connection to a peer may take to open before the peer counts as unreachable for
/// this call and the next choice is tried. Peers are on the same network; a second is many
/// round trips.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Why a forwarded call got no response.
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
}

/// The client that sends calls to peers.
#[derive(Clone)]
pub struct Forwarder {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    me: HeaderValue,
    access: mote_tls::PeerAccess,
}

impl Forwarder {
    /// A client for the node called `me`, reaching its peers with `access`.
    pub fn new(me: &str, access: &mote_tls::PeerAccess) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(access.trust.https_connector(connector));
        Self {
            client,
            me: HeaderValue::from_str(me).expect("node names are header-safe"),
            access: access.clone(),
        }
    }

    /// `request` to the peer at `url` with the cluster secret, if the node has one; refused if
    /// the secret would travel in clear.
    fn signed<B>(
        &self,
        url: &str,
        mut request: hyper::Request<B>,
    ) -> Result<hyper::Request<B>, mote_types::PlainSecret> {
        if let Some(secret) = self.access.secret_header_for(url)? {
            request.headers_mut().insert(CLUSTER_SECRET_HEADER, secret);
        }
        Ok(request)
    }

    /// Sends a call of `function` with `input` to the node `node` at `url`; the response comes
    /// back with its status, headers (the peer's `mote-node` among them) and streamed body.
    pub async fn invoke(
        &self,
        node: &str,
        url: &str,
        function: &str,
        input: Bytes,
        content_type: Option<&HeaderValue>,
    ) -> Result<hyper::Response<Incoming>, ForwardError> {
        let target = format!("{}/v1/invoke/{function}", url.trim_end_matches('/'));
        let mut request = hyper::Request::post(&target)
            .header(FORWARDED_BY, self.me.clone())
            .body(Full::new(input))
            .map_err(|e| ForwardError::Unreachable {
                node: node.to_owned(),
                url: url.to_owned(),
                detail: format!("not a URL mote can send to: {e}"),
            })?;
        if let Some(content_type) = content_type {
            request
                .headers_mut()
                .insert(CONTENT_TYPE, content_type.clone());
        }
        let request = self
            .signed(url, request)
            .map_err(|e| ForwardError::Unreachable {
                node: node.to_owned(),
                url: url.to_owned(),
                detail: e.to_string(),
            })?;
        self.client.request(request).await.map_err(|e| {
            let detail = error_chain(&e);
            let (node, url) = (node.to_owned(), url.to_owned());
            match e.is_connect() {
                true => ForwardError::Unreachable { node, url, detail },
                false => ForwardError::Lost { node, url, detail },
            }
        })
    }

    /// Sends `GET path_and_query` to the node `node` at `url`: a read of the peer's own state
    /// (its functions' logs), whose response streams back as it arrives.
    pub async fn get(
        &self,
        node: &str,
        url: &str,
        path_and_query: &str,
    ) -> Result<hyper::Response<Incoming>, ForwardError> {
        let target = format!("{}{path_and_query}", url.trim_end_matches('/'));
        let unreachable = |detail: String| ForwardError::Unreachable {
            node: node.to_owned(),
            url: url.to_owned(),
            detail,
        };
        let request = hyper::Request::get(&target)
            .header(FORWARDED_BY, self.me.clone())
            .body(Full::new(Bytes::new()))
            .map_err(|e| unreachable(format!("not a URL mote can send to: {e}")))?;
        let request = self
            .signed(url, request)
            .map_err(|e| unreachable(e.to_string()))?;
        self.client
            .request(request)
            .await
            .map_err(|e| unreachable(error_chain(&e)))
    }

    /// Tells the node at `api` that this node's store replica serves its peers at
    /// `store_peer`, so that its replica pulls from this one (the edge set-up's join).
    pub async fn introduce(&self, api: &str, me: &str, store_peer: &str) -> Result<(), String> {
        let target = format!("{}{}", api.trim_end_matches('/'), crate::STORE_PEERS_PATH);
        let body = serde_json::json!({ "name": me, "url": store_peer }).to_string();
        let request = hyper::Request::post(&target)
            .header(CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let request = self.signed(api, request).map_err(|e| e.to_string())?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| error_chain(&e))?;
        match response.status().is_success() {
            true => Ok(()),
            false => Err(format!("it answered {}", response.status())),
        }
    }
}

/// An error and its causes on one line: hyper's top-level messages ("client error (Connect)")
/// say little alone.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
