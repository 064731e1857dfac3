//! Every route one node asks of another: as a pattern, the form the gateway's router serves it
//! under (axum 0.8's `{param}` syntax), and as a [`Route`], the one way a node builds the path
//! it sends. Each path is made from its pattern, so the two cannot drift apart; the tests serve
//! every pattern with axum and check that a route built from any value lands on its pattern
//! with that value.
//!
//! A value goes into its path segment percent-encoded (every byte outside RFC 3986's unreserved
//! characters), so that no value adds a segment or a query. Valid names (functions, sha256s,
//! job ids) are unreserved characters only and go as they are, without a copy.

use hyper::Method;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use std::fmt;

/// A call forwarded to the peer placement chose (the public invoke route, with
/// [`FORWARDED_BY`]).
pub const INVOKE: &str = "/v1/invoke/{name}";
/// A module's bytes by their sha256, for a peer that adopted its record.
pub const MODULE: &str = "/v1/internal/modules/{sha256}";
/// A joining node's store replica introducing itself (a `StorePeer`, JSON), in the edge set-up.
pub const STORE_PEERS: &str = "/v1/internal/store-peers";
/// An idle node asks a busy one for calls that would wait there (a `Pull`, JSON); the answer
/// says how many it forwards (a `Pulled`).
pub const PULL: &str = "/v1/internal/pull";
/// A function's log entries on one node, for the node that merges the cluster's.
pub const LOGS: &str = "/v1/internal/logs/{name}";
/// Where the routes of jobs' workers start.
pub const JOBS: &str = "/v1/internal/jobs";
/// `PUT` prepares the node's worker of a job from its spec; `DELETE` stops it.
pub const JOB: &str = "/v1/internal/jobs/{id}";
/// Runs a prepared worker.
pub const JOB_RUN: &str = "/v1/internal/jobs/{id}/run";
/// A message for a job's worker, from another worker or the controller.
pub const JOB_MESSAGES: &str = "/v1/internal/jobs/{id}/messages";
/// A worker's report, for its job's controller.
pub const JOB_REPORTS: &str = "/v1/internal/jobs/{id}/reports";

/// The header a forwarded call (and a peer's read of logs) carries, naming the node that sent
/// it: the peer runs the call whatever its load, so a call is forwarded once at most.
pub const FORWARDED_BY: &str = "mote-forwarded-by";

/// The header of a call a node handed to the peer that pulled it (late correction): the peer
/// runs it whatever its load and never hands it on, so a call moves once at most.
pub const MOVED: &str = "mote-moved";

/// The header of a peer's 404 to a forwarded call of a function the peer has not heard of yet
/// (its store replica lags behind the sender's): the call did not run there, so the sender
/// places it again without that peer.
pub const NOT_DEPLOYED_HERE: &str = "mote-not-deployed-here";

/// What a path segment escapes: all but RFC 3986's unreserved characters.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Which of a function's log entries a peer is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogsFrom {
    /// The newest this many (`?tail=N`).
    Tail(usize),
    /// Every entry numbered above this one, then each as it is written (`?follow=true&after=SEQ`).
    FollowAfter(u64),
}

/// A request's route, with its values: its method is [`Route::method`], its path and query its
/// `Display`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route<'a> {
    /// `POST` [`INVOKE`]: a call of `function`.
    Invoke {
        /// The function.
        function: &'a str,
    },
    /// `GET` [`MODULE`].
    Module {
        /// The module's sha256, in lowercase hex.
        sha256: &'a str,
    },
    /// `POST` [`STORE_PEERS`].
    StorePeers,
    /// `POST` [`PULL`].
    Pull,
    /// `GET` [`LOGS`], with the query that says which entries.
    Logs {
        /// The function.
        function: &'a str,
        /// Which entries.
        from: LogsFrom,
    },
    /// `PUT` [`JOB`].
    JobStart {
        /// The job's id.
        job: &'a str,
    },
    /// `POST` [`JOB_RUN`].
    JobRun {
        /// The job's id.
        job: &'a str,
    },
    /// `POST` [`JOB_MESSAGES`].
    JobMessage {
        /// The job's id.
        job: &'a str,
    },
    /// `POST` [`JOB_REPORTS`].
    JobReport {
        /// The job's id.
        job: &'a str,
    },
    /// `DELETE` [`JOB`].
    JobStop {
        /// The job's id.
        job: &'a str,
    },
}

impl Route<'_> {
    /// The method it is sent with.
    pub fn method(&self) -> Method {
        match self {
            Self::Module { .. } | Self::Logs { .. } => Method::GET,
            Self::JobStart { .. } => Method::PUT,
            Self::JobStop { .. } => Method::DELETE,
            Self::Invoke { .. }
            | Self::StorePeers
            | Self::Pull
            | Self::JobRun { .. }
            | Self::JobMessage { .. }
            | Self::JobReport { .. } => Method::POST,
        }
    }

    /// The pattern the gateway serves it under.
    pub fn pattern(&self) -> &'static str {
        match self {
            Self::Invoke { .. } => INVOKE,
            Self::Module { .. } => MODULE,
            Self::StorePeers => STORE_PEERS,
            Self::Pull => PULL,
            Self::Logs { .. } => LOGS,
            Self::JobStart { .. } | Self::JobStop { .. } => JOB,
            Self::JobRun { .. } => JOB_RUN,
            Self::JobMessage { .. } => JOB_MESSAGES,
            Self::JobReport { .. } => JOB_REPORTS,
        }
    }

    /// The value its pattern's one parameter takes, if it has one.
    fn value(&self) -> Option<&str> {
        match *self {
            Self::StorePeers | Self::Pull => None,
            Self::Invoke { function } | Self::Logs { function, .. } => Some(function),
            Self::Module { sha256 } => Some(sha256),
            Self::JobStart { job }
            | Self::JobRun { job }
            | Self::JobMessage { job }
            | Self::JobReport { job }
            | Self::JobStop { job } => Some(job),
        }
    }

    /// Its URL on the node whose API is at `base` (a trailing `/` of `base` is dropped).
    pub fn url(&self, base: &str) -> String {
        use fmt::Write;
        let base = base.trim_end_matches('/');
        let mut url = String::with_capacity(base.len() + self.pattern().len() + 80);
        url.push_str(base);
        write!(url, "{self}").expect("writing to a String cannot fail");
        url
    }
}

impl fmt::Display for Route<'_> {
    /// The path and query.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pattern = self.pattern();
        match (pattern.split_once('{'), self.value()) {
            (Some((before, rest)), Some(value)) => {
                let after = rest.split_once('}').map_or("", |(_, after)| after);
                write!(f, "{before}{}{after}", utf8_percent_encode(value, SEGMENT))?;
            }
            _ => f.write_str(pattern)?,
        }
        match self {
            Self::Logs {
                from: LogsFrom::Tail(n),
                ..
            } => write!(f, "?tail={n}"),
            Self::Logs {
                from: LogsFrom::FollowAfter(seq),
                ..
            } => write!(f, "?follow=true&after={seq}"),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;
