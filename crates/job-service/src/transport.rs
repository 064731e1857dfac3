//! How workers and controllers reach each other: the node's internal HTTP service (the one the
//! cluster forwards calls and fetches modules over), behind [`Transport`] so tests can wire
//! workers together in one process.
//!
//! Worker messages travel in their wire form (`mote_jobs::message`: postcard); specs and reports
//! are JSON. A message that cannot be delivered is retried with backoff
//! before the controller is told the peer is unreachable: signals are a reliable broadcast, and
//! a piece lost is a gather that never runs, so the controller restores the job without that
//! peer or fails it.

use crate::worker::Worker;
use async_trait::async_trait;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use mote_jobs::WorkerId;
use mote_jobs::message::{Envelope, JobSpec, Report, encode_envelope};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::mpsc;

/// The internal routes, under a job's id.
pub const INTERNAL_JOBS: &str = "/v1/internal/jobs";

/// Attempts to deliver one message before the controller is told the peer is unreachable:
/// with the backoff below, about 0.6 s of failures. The peers are a cluster's nodes, so a peer
/// that refuses connections that long is down, and the sooner the controller knows, the sooner
/// the job runs again (a slow answer is not a failure: a request may take 30 s).
const ATTEMPTS: u32 = 6;

/// A transport failure, naming the peer.
#[derive(Debug, thiserror::Error)]
#[error("{url}: {detail}")]
pub struct TransportError {
    /// Where it was going.
    pub url: String,
    /// What went wrong.
    pub detail: String,
    /// The peer answered with a client error (4xx): retrying will not help.
    pub refused: bool,
}

/// Node-to-node traffic of jobs.
#[async_trait]
pub trait Transport: Send + Sync + 'static {
    /// Starts a worker on the node at `url`.
    async fn start(&self, url: &str, spec: &JobSpec) -> Result<(), TransportError>;
    /// Runs the prepared worker of `job` at `url`.
    async fn run(&self, url: &str, job: &str) -> Result<(), TransportError>;
    /// Stops the worker of `job` at `url`.
    async fn stop(&self, url: &str, job: &str) -> Result<(), TransportError>;
    /// A message for the worker of `job` at `url`.
    async fn message(&self, url: &str, job: &str, m: &Envelope) -> Result<(), TransportError>;
    /// A report for the controller of `job` at `url`.
    async fn report(&self, url: &str, job: &str, r: &Report) -> Result<(), TransportError>;
}

/// What a worker's outbox carries.
pub(crate) enum Outgoing {
    /// To another worker; acknowledged to the sender when taken.
    Worker {
        to: String,
        peer: WorkerId,
        envelope: Envelope,
    },
    /// To the controller.
    Report {
        controller: String,
        job: String,
        report: Report,
    },
}

impl Outgoing {
    pub(crate) fn report(spec: &JobSpec, report: Report) -> Self {
        Self::Report {
            controller: spec.controller.clone(),
            job: spec.id.clone(),
            report,
        }
    }
}

/// Sends what the worker's executors put in its outbox, each message on its own task so one
/// slow peer delays nobody else. It holds the worker weakly: the worker owns the outbox's
/// sender, so the loop ends when the worker is dropped.
pub(crate) fn drain_outbox(
    worker: Weak<Worker>,
    mut outbox: mpsc::UnboundedReceiver<Outgoing>,
    transport: Arc<dyn Transport>,
) {
    tokio::spawn(async move {
        while let Some(out) = outbox.recv().await {
            let Some(worker) = worker.upgrade() else {
                return;
            };
            let transport = transport.clone();
            tokio::spawn(async move {
                let job = worker.spec().id.clone();
                match out {
                    Outgoing::Worker { to, peer, envelope } => {
                        let generation = envelope.generation;
                        match retry(|| transport.message(&to, &job, &envelope)).await {
                            Ok(()) => worker.acknowledged(generation),
                            Err(e) => worker.unreachable(generation, peer, e.to_string()),
                        }
                    }
                    Outgoing::Report {
                        controller,
                        job,
                        report,
                    } => {
                        if let Err(e) = retry(|| transport.report(&controller, &job, &report)).await
                        {
                            tracing::warn!(job, error = %e, "cannot report to the job's controller");
                            worker.stop();
                        }
                    }
                }
            });
        }
    });
}

/// Tells the controller how far the worker is, four times a second, until it ends. A worker
/// whose controller has not taken a report for [`CONTROLLER_SILENCE`] stops: its job is over
/// or lost, and nobody else would stop it.
pub(crate) fn report_progress(worker: Weak<Worker>, transport: Arc<dyn Transport>) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        tick.tick().await;
        let mut taken = tokio::time::Instant::now();
        loop {
            tick.tick().await;
            let Some(worker) = worker.upgrade() else {
                return;
            };
            if worker.ended() {
                return;
            }
            let spec = worker.spec();
            let report = Report::Progress(worker.progress());
            match transport.report(&spec.controller, &spec.id, &report).await {
                Ok(()) => taken = tokio::time::Instant::now(),
                Err(e) if taken.elapsed() > CONTROLLER_SILENCE => {
                    tracing::warn!(job = spec.id, error = %e, "the job's controller is gone; stopping its worker here");
                    worker.stop();
                    return;
                }
                Err(e) => {
                    tracing::debug!(job = spec.id, error = %e, "a progress report was not taken")
                }
            }
        }
    });
}

/// How long a worker goes on without its controller taking a report.
const CONTROLLER_SILENCE: Duration = Duration::from_secs(10);

/// Runs `send` until it succeeds, the peer refuses, or the attempts run out.
pub(crate) async fn retry<F, Fut>(mut send: F) -> Result<(), TransportError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), TransportError>>,
{
    let mut wait = Duration::from_millis(20);
    let mut attempt = 1;
    loop {
        match send().await {
            Ok(()) => return Ok(()),
            Err(e) if e.refused || attempt == ATTEMPTS => return Err(e),
            Err(_) => {
                tokio::time::sleep(wait).await;
                wait *= 2;
                attempt += 1;
            }
        }
    }
}

/// [`Transport`] over HTTP/1.1 (https when a worker's URL says so) with kept-alive
/// connections; every request carries the cluster secret when the node has one (and goes only
/// over https when the node serves TLS).
pub struct HttpTransport {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    access: mote_tls::PeerAccess,
}

impl HttpTransport {
    /// A client with its own connection pool, reaching the workers with `access`.
    pub fn new(access: &mote_tls::PeerAccess) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(Duration::from_secs(2)));
        Self {
            client: Client::builder(TokioExecutor::new())
                .build(access.trust.https_connector(connector)),
            access: access.clone(),
        }
    }

    async fn request(
        &self,
        method: hyper::Method,
        url: String,
        content_type: &str,
        body: Vec<u8>,
    ) -> Result<Bytes, TransportError> {
        let error = |detail: String, refused| TransportError {
            url: url.clone(),
            detail,
            refused,
        };
        let mut request = hyper::Request::builder()
            .method(method)
            .uri(&url)
            .header(hyper::header::CONTENT_TYPE, content_type)
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| error(e.to_string(), true))?;
        if let Some(secret) = self
            .access
            .secret_header_for(&url)
            .map_err(|e| error(e.to_string(), true))?
        {
            request
                .headers_mut()
                .insert(mote_types::CLUSTER_SECRET_HEADER, secret);
        }
        let response = tokio::time::timeout(Duration::from_secs(30), self.client.request(request))
            .await
            .map_err(|_| error("no answer in 30 s".into(), false))?
            .map_err(|e| error(format!("{e}"), false))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| error(format!("reading the answer: {e}"), false))?
            .to_bytes();
        if !status.is_success() {
            let text = String::from_utf8_lossy(&body).trim().to_owned();
            return Err(error(format!("{status}: {text}"), status.is_client_error()));
        }
        Ok(body)
    }
}

#[async_trait]
impl Transport for HttpTransport {
    async fn start(&self, url: &str, spec: &JobSpec) -> Result<(), TransportError> {
        let body = serde_json::to_vec(spec).expect("a spec serializes");
        let url = format!("{url}{INTERNAL_JOBS}/{}", spec.id);
        self.request(hyper::Method::PUT, url, "application/json", body)
            .await
            .map(drop)
    }

    async fn run(&self, url: &str, job: &str) -> Result<(), TransportError> {
        let url = format!("{url}{INTERNAL_JOBS}/{job}/run");
        self.request(hyper::Method::POST, url, "text/plain", Vec::new())
            .await
            .map(drop)
    }

    async fn stop(&self, url: &str, job: &str) -> Result<(), TransportError> {
        let url = format!("{url}{INTERNAL_JOBS}/{job}");
        self.request(hyper::Method::DELETE, url, "text/plain", Vec::new())
            .await
            .map(drop)
    }

    async fn message(&self, url: &str, job: &str, m: &Envelope) -> Result<(), TransportError> {
        let body = encode_envelope(m);
        let url = format!("{url}{INTERNAL_JOBS}/{job}/messages");
        self.request(hyper::Method::POST, url, "application/octet-stream", body)
            .await
            .map(drop)
    }

    async fn report(&self, url: &str, job: &str, r: &Report) -> Result<(), TransportError> {
        let body = serde_json::to_vec(r).expect("a report serializes");
        let url = format!("{url}{INTERNAL_JOBS}/{job}/reports");
        self.request(hyper::Method::POST, url, "application/json", body)
            .await
            .map(drop)
    }
}
