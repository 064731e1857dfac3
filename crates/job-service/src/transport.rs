//! How workers and controllers reach each other: the node's internal HTTP service, over the
//! wire every node-to-node request takes (`mote_wire`: the routes, their encodings and the
//! client), behind [`Transport`] so tests can wire workers together in one process.
//!
//! Worker messages travel in their wire form (`mote_jobs::message`: postcard); specs and reports
//! are JSON; [`mote_wire::PeerRequest`] encodes each. A message that cannot be delivered is retried with backoff
//! before the controller is told the peer is unreachable: signals are a reliable broadcast, and
//! a piece lost is a gather that never runs, so the controller restores the job without that
//! peer or fails it.

use crate::worker::Worker;
use async_trait::async_trait;
use mote_jobs::WorkerId;
use mote_jobs::message::{Envelope, JobSpec, Report};
use mote_wire::{Failure, PeerRequest};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::mpsc;

/// The internal routes, under a job's id.
pub use mote_wire::route::JOBS as INTERNAL_JOBS;

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
    relay: &mote_confine::Relay,
) {
    tokio::spawn(relay.relayed(async move {
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
    }));
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

/// How long a connection to a worker may take to open before the attempt counts as failed.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a worker may take to answer a request (a slow answer is not a dead peer: a spec
/// takes its worker's set-up).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// The most of an answer a job request reads: answers are a status and at most an error's text.
const ANSWER_BYTES: u64 = 1 << 20;

/// [`Transport`] over the wire between nodes ([`mote_wire::WireClient`]): HTTP/1.1, https when
/// a worker's URL says so, kept-alive connections, and the cluster secret on every request
/// when the node has one (over https only when the node serves TLS).
pub struct HttpTransport {
    wire: mote_wire::WireClient,
}

impl HttpTransport {
    /// A client with its own connection pool, reaching the workers with `access`.
    pub fn new(access: &mote_tls::PeerAccess) -> Self {
        Self {
            wire: mote_wire::WireClient::new(access, CONNECT_TIMEOUT),
        }
    }

    async fn request(&self, url: &str, request: PeerRequest<'_>) -> Result<(), TransportError> {
        let to = mote_wire::Peer::at(url);
        match self
            .wire
            .fetch(&to, request.within(ANSWER_TIMEOUT), ANSWER_BYTES)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => Err(TransportError::from(e)),
        }
    }
}

impl From<mote_wire::WireError> for TransportError {
    fn from(e: mote_wire::WireError) -> Self {
        // Retrying cannot help a request that could never be sent, nor one the peer refused as
        // a client error.
        let refused = match &e.failure {
            Failure::BadUrl(_) | Failure::PlainSecret(_) => true,
            Failure::Status { status, .. } => status.is_client_error(),
            _ => false,
        };
        Self {
            url: e.peer.url().to_owned(),
            detail: e.failure.to_string(),
            refused,
        }
    }
}

#[async_trait]
impl Transport for HttpTransport {
    async fn start(&self, url: &str, spec: &JobSpec) -> Result<(), TransportError> {
        self.request(url, PeerRequest::job_start(spec)).await
    }

    async fn run(&self, url: &str, job: &str) -> Result<(), TransportError> {
        self.request(url, PeerRequest::job_run(job)).await
    }

    async fn stop(&self, url: &str, job: &str) -> Result<(), TransportError> {
        self.request(url, PeerRequest::job_stop(job)).await
    }

    async fn message(&self, url: &str, job: &str, m: &Envelope) -> Result<(), TransportError> {
        self.request(url, PeerRequest::job_message(job, m)).await
    }

    async fn report(&self, url: &str, job: &str, r: &Report) -> Result<(), TransportError> {
        self.request(url, PeerRequest::job_report(job, r)).await
    }
}
