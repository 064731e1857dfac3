//! Each request a node sends another, whole: its route, its body in the route's encoding, the
//! headers it needs and how long its answer may take. A request is made here or not at all, so
//! the sender and the gateway's handler agree on one encoding per route: worker messages are
//! postcard (`mote_jobs::message`), specs, reports and store introductions JSON, modules and
//! calls bytes as they are.

use crate::route::{LogsFrom, Route};
use bytes::Bytes;
use hyper::header::HeaderValue;
use mote_jobs::message::{Envelope, JobSpec, Report, encode_envelope};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A store replica introducing itself to a node (`POST` [`STORE_PEERS`](crate::route::STORE_PEERS), JSON):
/// the node's replica starts pulling from it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorePeer {
    /// The replica's name: its node's.
    pub name: String,
    /// Where the replica serves its peers.
    pub url: String,
}

/// An idle node's request for calls that wait on the node it asks (`POST`
/// [`PULL`](crate::route::PULL), JSON, by the node its `mote-forwarded-by` names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pull {
    /// The most calls it takes: its free cores.
    pub calls: u32,
}

/// The answer to a [`Pull`] (JSON): how many calls the asked node forwards to the one that
/// asked, each once; zero if none would wait long enough there to be worth the trip.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pulled {
    /// Calls it forwards.
    pub moved: u32,
}

/// One request to a peer.
#[derive(Debug)]
pub struct PeerRequest<'a> {
    pub(crate) route: Route<'a>,
    pub(crate) body: Bytes,
    pub(crate) content_type: Option<HeaderValue>,
    pub(crate) forwarded_by: Option<HeaderValue>,
    pub(crate) timeout: Option<Duration>,
    /// A call handed to the peer that pulled it ([`MOVED`](crate::route::MOVED)).
    pub(crate) moved: bool,
}

const JSON: HeaderValue = HeaderValue::from_static("application/json");
const TEXT: HeaderValue = HeaderValue::from_static("text/plain");
const BYTES: HeaderValue = HeaderValue::from_static("application/octet-stream");

impl<'a> PeerRequest<'a> {
    fn new(route: Route<'a>, body: impl Into<Bytes>, content_type: HeaderValue) -> Self {
        Self {
            route,
            body: body.into(),
            content_type: Some(content_type),
            forwarded_by: None,
            timeout: None,
            moved: false,
        }
    }

    fn json(route: Route<'a>, value: &impl Serialize) -> Self {
        let body = serde_json::to_vec(value).expect("a request's JSON always serializes");
        Self::new(route, body, JSON)
    }

    /// A call of `function` with `input` (of `content_type`, if the client named one),
    /// forwarded by the node whose name is `forwarded_by`.
    pub fn invoke(
        function: &'a str,
        input: Bytes,
        content_type: Option<&HeaderValue>,
        forwarded_by: &HeaderValue,
    ) -> Self {
        Self {
            route: Route::Invoke { function },
            body: input,
            content_type: content_type.cloned(),
            forwarded_by: Some(forwarded_by.clone()),
            timeout: None,
            moved: false,
        }
    }

    /// The same call, handed to the peer that pulled it: it runs there and moves no more.
    pub fn moved(mut self) -> Self {
        self.moved = true;
        self
    }

    /// The bytes of the module whose sha256 is `sha256`.
    pub fn module(sha256: &'a str) -> Self {
        Self {
            route: Route::Module { sha256 },
            body: Bytes::new(),
            content_type: None,
            forwarded_by: None,
            timeout: None,
            moved: false,
        }
    }

    /// Introduces the store replica of node `name`, which serves its peers at `url`.
    pub fn store_peer(name: &str, url: &str) -> Self {
        let peer = StorePeer {
            name: name.to_owned(),
            url: url.to_owned(),
        };
        Self::json(Route::StorePeers, &peer)
    }

    /// A read of `function`'s log entries (those `from` says), by the node whose name is
    /// `forwarded_by`.
    pub fn logs(function: &'a str, from: LogsFrom, forwarded_by: &HeaderValue) -> Self {
        Self {
            route: Route::Logs { function, from },
            body: Bytes::new(),
            content_type: None,
            forwarded_by: Some(forwarded_by.clone()),
            timeout: None,
            moved: false,
        }
    }

    /// Asks for up to `calls` waiting calls, for the node whose name is `by`.
    pub fn pull(calls: u32, by: &HeaderValue) -> Self {
        Self {
            forwarded_by: Some(by.clone()),
            ..Self::json(Route::Pull, &Pull { calls })
        }
    }

    /// Prepares the worker of the job `spec` describes.
    pub fn job_start(spec: &'a JobSpec) -> Self {
        Self::json(Route::JobStart { job: &spec.id }, spec)
    }

    /// Runs the prepared worker of `job`.
    pub fn job_run(job: &'a str) -> Self {
        Self::new(Route::JobRun { job }, Bytes::new(), TEXT)
    }

    /// Stops the worker of `job`.
    pub fn job_stop(job: &'a str) -> Self {
        Self::new(Route::JobStop { job }, Bytes::new(), TEXT)
    }

    /// A message for the worker of `job`.
    pub fn job_message(job: &'a str, envelope: &Envelope) -> Self {
        Self::new(Route::JobMessage { job }, encode_envelope(envelope), BYTES)
    }

    /// A report for the controller of `job`.
    pub fn job_report(job: &'a str, report: &Report) -> Self {
        Self::json(Route::JobReport { job }, report)
    }

    /// The same request, failed if its answer takes longer than `timeout` (its head for
    /// `WireClient::send`, the whole of it for `WireClient::fetch`).
    pub fn within(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Its URL on the node whose API is at `base`.
    pub(crate) fn url(&self, base: &str) -> String {
        self.route.url(base)
    }

    pub(crate) fn method(&self) -> hyper::Method {
        self.route.method()
    }

    /// The route it goes to.
    pub fn route(&self) -> Route<'a> {
        self.route
    }

    /// Its body.
    pub fn body(&self) -> &Bytes {
        &self.body
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::{JOB, JOB_MESSAGES, JOB_REPORTS, JOB_RUN, STORE_PEERS};

    #[test]
    fn each_job_request_goes_to_its_route_in_its_encoding() {
        let envelope = Envelope {
            generation: 3,
            message: mote_jobs::message::WorkerMessage::Signal {
                signal: 4,
                value: true,
            },
        };
        let message = PeerRequest::job_message("j1", &envelope);
        assert_eq!(message.route().pattern(), JOB_MESSAGES);
        assert_eq!(
            mote_jobs::message::decode_envelope(message.body()).unwrap(),
            envelope
        );
        assert_eq!(message.content_type, Some(BYTES));
        let report = Report::Failed {
            progress: Default::default(),
            error: "boom".into(),
        };
        let sent = PeerRequest::job_report("j1", &report);
        assert_eq!(sent.route().pattern(), JOB_REPORTS);
        let read: Report = serde_json::from_slice(sent.body()).unwrap();
        assert_eq!(read, report);
        assert_eq!(PeerRequest::job_run("j1").route().pattern(), JOB_RUN);
        let stop = PeerRequest::job_stop("j1").route();
        assert_eq!(
            (stop.pattern(), stop.method()),
            (JOB, hyper::Method::DELETE)
        );
    }

    #[test]
    fn a_store_introduction_is_the_json_the_gateway_reads() {
        let request = PeerRequest::store_peer("n2", "http://127.0.0.1:2480");
        assert_eq!(request.route().pattern(), STORE_PEERS);
        let peer: StorePeer = serde_json::from_slice(request.body()).unwrap();
        assert_eq!(peer.name, "n2");
        assert_eq!(
            String::from_utf8_lossy(request.body()),
            r#"{"name":"n2","url":"http://127.0.0.1:2480"}"#
        );
    }

    #[test]
    fn a_read_of_logs_carries_its_query_and_the_senders_name() {
        let me = HeaderValue::from_static("n1");
        let request = PeerRequest::logs("f", LogsFrom::FollowAfter(9), &me);
        assert_eq!(
            request.url("http://n2:1/"),
            "http://n2:1/v1/internal/logs/f?follow=true&after=9"
        );
        assert_eq!(request.method(), hyper::Method::GET);
        assert_eq!(request.forwarded_by, Some(me));
    }
}
