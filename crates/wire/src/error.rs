//! Why a request to a peer got no usable answer, naming the peer: [`WireError`] is the peer
//! and the [`Failure`], whose kind tells a caller whether the request may have taken effect.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

/// The node a request goes to: its name when the sender knows it, and where its API is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer<'a> {
    name: Option<Cow<'a, str>>,
    url: Cow<'a, str>,
}

impl<'a> Peer<'a> {
    /// The node called `name`, whose API is at `url`.
    pub fn named(name: &'a str, url: &'a str) -> Self {
        Self {
            name: Some(Cow::Borrowed(name)),
            url: Cow::Borrowed(url),
        }
    }

    /// The node whose API is at `url`.
    pub fn at(url: &'a str) -> Self {
        Self {
            name: None,
            url: Cow::Borrowed(url),
        }
    }

    /// Its name, if the sender knows it.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Where its API is.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `failure`, at this peer.
    pub(crate) fn failed(&self, failure: Failure) -> WireError {
        WireError {
            peer: Peer {
                name: self.name.as_deref().map(|n| Cow::Owned(n.to_owned())),
                url: Cow::Owned(self.url.clone().into_owned()),
            },
            failure,
        }
    }
}

impl fmt::Display for Peer<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.name {
            Some(name) => write!(f, "node `{name}` at {}", self.url),
            None => write!(f, "the node at {}", self.url),
        }
    }
}

/// A request to a peer that got no usable answer.
#[derive(Debug, thiserror::Error)]
#[error("{peer} {failure}")]
pub struct WireError {
    /// The peer.
    pub peer: Peer<'static>,
    /// What failed.
    pub failure: Failure,
}

impl WireError {
    /// Whether the request surely did not reach the peer, so that sending it elsewhere (or
    /// again) cannot do its work twice.
    pub fn not_sent(&self) -> bool {
        matches!(
            self.failure,
            Failure::BadUrl(_) | Failure::PlainSecret(_) | Failure::Unreachable(_)
        )
    }
}

/// What went wrong with a request to a peer.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// The peer's URL is not one a request can go to; nothing was sent.
    #[error(
        "has a URL mote cannot send to ({0}): a node's URL is http:// or https://, a host and a port (mote up --advertise)"
    )]
    BadUrl(String),
    /// The cluster secret would have travelled in clear; nothing was sent.
    #[error("was not sent the request: {0}")]
    PlainSecret(#[from] mote_types::PlainSecret),
    /// No connection could be made; nothing was sent.
    #[error("cannot be reached: {0}")]
    Unreachable(String),
    /// The connection failed after the request went out and before an answer: the peer may
    /// have acted on it.
    #[error("failed while it held the request, which may have taken effect there: {0}")]
    Lost(String),
    /// No answer within the request's time (its head, or all of it for a fetch).
    #[error("gave no answer within {} ms", .0.as_millis())]
    TimedOut(Duration),
    /// The peer answered, with a status that is not a success.
    #[error("answered {status}: {text}")]
    Status {
        /// The status.
        status: hyper::StatusCode,
        /// The start of the answer's body, which says why.
        text: String,
    },
    /// The answer's body broke off.
    #[error("broke off its answer: {0}")]
    Body(String),
    /// The answer's body was longer than the sender takes.
    #[error("sent an answer longer than {0} bytes; refused")]
    TooLarge(u64),
}
