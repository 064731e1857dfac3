//! What goes wrong between a client and the API: the body of every error answer
//! ([`ErrorBody`]) and the client's errors ([`ApiError`]).

use hyper::StatusCode;
use mote_types::Escaped;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// The body of every error the API answers: `{"error": "..."}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What went wrong, and what to do about it.
    pub error: String,
}

/// Why a request to the API did not give what its route answers.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The server's URL is not one to send a request to.
    #[error(
        "`{server}` is not a URL of a mote server ({detail}); give one such as http://127.0.0.1:8080"
    )]
    BadUrl {
        /// The URL as given.
        server: String,
        /// Why it is not one.
        detail: String,
    },
    /// No connection could be made (nothing listens, a name does not resolve, TLS refused).
    #[error("cannot reach mote at {server}: {detail}; is `mote up` running there?")]
    Unreachable {
        /// The server's URL as given.
        server: String,
        /// The connection's error, with its causes.
        detail: String,
    },
    /// The connection broke before the answer was read whole.
    #[error("the answer of {route} from {server} was cut short: {detail}")]
    Lost {
        /// The server's URL as given.
        server: String,
        /// The route asked (`GET /v1/functions`).
        route: String,
        /// What broke, with its causes.
        detail: String,
    },
    /// No answer within the client's time limit.
    #[error("{route} at {server} did not answer within {} s", .after.as_secs())]
    TimedOut {
        /// The server's URL as given.
        server: String,
        /// The route asked.
        route: String,
        /// The limit.
        after: Duration,
    },
    /// The server answered an error status.
    #[error(transparent)]
    Status(#[from] ErrorStatus),
    /// The answer is not what the route answers.
    #[error("unexpected answer to {route}: {detail}")]
    Unexpected {
        /// The route asked.
        route: String,
        /// Why it could not be read.
        detail: String,
    },
}

impl ApiError {
    /// The status the server answered, if this is an error status.
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            Self::Status(answer) => Some(answer.status),
            _ => None,
        }
    }
}

/// An error status the server answered. Shown as a human reads it: the server's message
/// escaped for the terminal (it may quote what a guest wrote to its stderr), else the body it
/// sent.
#[derive(Debug, thiserror::Error)]
pub struct ErrorStatus {
    /// The route asked (`GET /v1/functions`).
    pub route: String,
    /// The status.
    pub status: StatusCode,
    /// The server's message (the `error` of its [`ErrorBody`]), if its body was one.
    pub message: Option<String>,
    /// The body, when it was not an [`ErrorBody`] (at most a few KiB of it).
    pub body: String,
}

impl fmt::Display for ErrorStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.message {
            Some(message) => write!(f, "{} ({})", Escaped(message), self.status),
            None => write!(
                f,
                "server answered {}: {}",
                self.status,
                Escaped(&self.body)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_status_shows_the_server_s_message_escaped_or_else_its_body() {
        let with_message = ErrorStatus {
            route: "POST /v1/invoke/f".into(),
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: Some("trapped:\n\x1b[31mfake".into()),
            body: String::new(),
        };
        assert_eq!(
            with_message.to_string(),
            r"trapped:\n\u{1b}[31mfake (500 Internal Server Error)"
        );
        let without = ErrorStatus {
            route: "GET /v1/cluster".into(),
            status: StatusCode::BAD_GATEWAY,
            message: None,
            body: "<html>bad gateway</html>".into(),
        };
        assert_eq!(
            without.to_string(),
            "server answered 502 Bad Gateway: <html>bad gateway</html>"
        );
        assert_eq!(
            ApiError::from(without).status(),
            Some(StatusCode::BAD_GATEWAY)
        );
    }
}
