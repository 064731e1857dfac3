//! The one table from errors to HTTP responses. Every error body is `{"error": "..."}` with a
//! message that names the thing and the fix.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use mote_access::TokenStoreError;
use mote_job_service::{ErrorKind as JobErrorKind, JobServiceError};
use mote_node::{DeployError, InvokeError};
use mote_runtime::CallError;
use mote_types::{Escaped, LimitsError, NameError};

/// An error the API returns.
#[derive(Debug)]
pub enum ApiError {
    /// A malformed request: bad name, bad parameters, unreadable body.
    BadRequest(String),
    /// No such route.
    NoRoute,
    /// The path exists, not for this method.
    MethodNotAllowed(String),
    /// No such function.
    FunctionNotFound(String),
    /// A body over its limit.
    TooLarge {
        /// What was too large.
        what: &'static str,
        /// The limit in bytes.
        limit: usize,
    },
    /// This node does not hold the module with this sha256.
    ModuleNotHere(String),
    /// No node of the cluster can take the call; says which were unreachable.
    NoNodeTakes(String),
    /// The peer a call was forwarded to failed while it held the call.
    PeerFailed(mote_peers::ForwardError),
    /// Deploying failed.
    Deploy(DeployError),
    /// Invoking failed.
    Invoke(InvokeError),
    /// A job request failed.
    Job(JobServiceError),
    /// No credentials, or ones that are not valid: says what is needed.
    Unauthorized(String),
    /// Valid credentials without the scope: says which is needed.
    Forbidden(String),
    /// The client's address failed to authenticate too often.
    TooManyFailures {
        /// Seconds until it may try again.
        retry_after_s: u64,
    },
    /// Making, listing or revoking a token failed.
    Token(TokenStoreError),
    /// A `Host` the node does not answer to: a page that renamed itself (DNS rebinding), or a
    /// name the operator has not allowed.
    HostNotAllowed(String),
    /// A body of a type the route does not take.
    UnsupportedMediaType(String),
    /// A path the dashboard's own listener does not serve (it serves nothing but the dashboard).
    NotOnDashboard(String),
}

impl ApiError {
    fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            Self::NoRoute
            | Self::FunctionNotFound(_)
            | Self::ModuleNotHere(_)
            | Self::NotOnDashboard(_) => StatusCode::NOT_FOUND,
            Self::NoNodeTakes(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::HostNotAllowed(_) => StatusCode::MISDIRECTED_REQUEST,
            Self::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::TooManyFailures { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::Token(e) => match e {
                TokenStoreError::Taken(_) => StatusCode::CONFLICT,
                TokenStoreError::NotFound(_) => StatusCode::NOT_FOUND,
                TokenStoreError::NoScopes => StatusCode::BAD_REQUEST,
                TokenStoreError::State(_) => StatusCode::SERVICE_UNAVAILABLE,
                TokenStoreError::Damaged { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            },
            Self::PeerFailed(_) => StatusCode::BAD_GATEWAY,
            Self::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Job(e) => match e.kind() {
                JobErrorKind::NotFound => StatusCode::NOT_FOUND,
                JobErrorKind::Invalid => StatusCode::BAD_REQUEST,
                JobErrorKind::Conflict => StatusCode::CONFLICT,
                JobErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            },
            Self::Deploy(e) => match e {
                DeployError::Compile(_) | DeployError::MemoryTooSmall { .. } => {
                    StatusCode::BAD_REQUEST
                }
                DeployError::NotHttp { .. } | DeployError::OutboundAboveCeiling { .. } => {
                    StatusCode::BAD_REQUEST
                }
                DeployError::OutboundNeedsAdmin { .. } => StatusCode::FORBIDDEN,
                DeployError::RouteTaken { .. } => StatusCode::CONFLICT,
                DeployError::NotFound(_) => StatusCode::NOT_FOUND,
                DeployError::State(_)
                | DeployError::Runtime(_)
                | DeployError::Confine(_)
                | DeployError::Internal(_)
                | DeployError::Config(_) => StatusCode::INTERNAL_SERVER_ERROR,
            },
            Self::Invoke(e) => match e {
                InvokeError::NotFound(_) => StatusCode::NOT_FOUND,
                InvokeError::Quarantined { .. } => StatusCode::CONFLICT,
                InvokeError::QueueFull { .. } | InvokeError::ShuttingDown => {
                    StatusCode::SERVICE_UNAVAILABLE
                }
                InvokeError::Call(CallError::Timeout { .. }) => StatusCode::GATEWAY_TIMEOUT,
                InvokeError::Call(CallError::Instantiate(_)) => StatusCode::SERVICE_UNAVAILABLE,
                InvokeError::Call(
                    CallError::IsJob
                    | CallError::IsProxy
                    | CallError::NotProxy
                    | CallError::BadRequest(_),
                ) => StatusCode::BAD_REQUEST,
                InvokeError::Call(CallError::Answered(_) | CallError::NoResponse) => {
                    StatusCode::BAD_GATEWAY
                }
                InvokeError::Call(_)
                | InvokeError::Load { .. }
                | InvokeError::Internal(_)
                | InvokeError::Moved { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            },
        }
    }

    fn message(&self) -> String {
        match self {
            Self::BadRequest(m)
            | Self::MethodNotAllowed(m)
            | Self::Unauthorized(m)
            | Self::Forbidden(m)
            | Self::UnsupportedMediaType(m) => m.clone(),
            Self::HostNotAllowed(host) => format!(
                "this node does not answer to the host `{host}`: it answers to its loopback names, the address it listens on and its advertised host; start it with --allow-host {host} if that name is its own"
            ),
            Self::TooManyFailures { retry_after_s } => format!(
                "too many failed authentications from this address; try again in {retry_after_s} s"
            ),
            Self::Token(e) => e.to_string(),
            Self::NotOnDashboard(path) => format!(
                "`{path}` is not served here: this listener serves only mote's dashboard (/ui) and its data (/v1/dashboard, /v1/dashboard/events); the API and functions are on the node's --listen address"
            ),
            Self::NoRoute => {
                "no such route; the API is under /v1/functions, /v1/invoke and /v1/jobs, plus /healthz, /metrics and the dashboard at /ui, and no component is mounted on this path (GET /v1/functions lists routes)".into()
            }
            Self::FunctionNotFound(name) => {
                format!("function `{name}` is not deployed; list functions with GET /v1/functions")
            }
            Self::TooLarge { what, limit } => {
                format!("{what} is larger than the limit of {limit} bytes")
            }
            Self::ModuleNotHere(sha256) => {
                format!("this node does not hold module {sha256}; ask another node of the cluster")
            }
            Self::NoNodeTakes(unreachable) => format!(
                "no node of the cluster can take the call now: every node is stopping or could not be reached ({unreachable}); retry shortly"
            ),
            Self::PeerFailed(e) => e.to_string(),
            Self::Deploy(e) => e.to_string(),
            Self::Invoke(e) => e.to_string(),
            Self::Job(e) => e.to_string(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            // Escaped: a failed call's message may quote its guest's stderr.
            tracing::warn!(status = status.as_u16(), error = %Escaped(&self.message()), "request failed");
        }
        let mut response = (
            status,
            axum::Json(mote_api::ErrorBody {
                error: self.message(),
            }),
        )
            .into_response();
        let headers = response.headers_mut();
        match self {
            Self::TooManyFailures { retry_after_s } => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after_s));
            }
            Self::Unauthorized(_) => {
                headers.insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"mote\""),
                );
            }
            _ if status == StatusCode::SERVICE_UNAVAILABLE => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            _ => {}
        }
        response
    }
}

impl From<NameError> for ApiError {
    fn from(e: NameError) -> Self {
        Self::BadRequest(e.to_string())
    }
}

impl From<LimitsError> for ApiError {
    fn from(e: LimitsError) -> Self {
        Self::BadRequest(e.to_string())
    }
}

impl From<DeployError> for ApiError {
    fn from(e: DeployError) -> Self {
        Self::Deploy(e)
    }
}

impl From<TokenStoreError> for ApiError {
    fn from(e: TokenStoreError) -> Self {
        Self::Token(e)
    }
}

impl From<JobServiceError> for ApiError {
    fn from(e: JobServiceError) -> Self {
        Self::Job(e)
    }
}

impl From<InvokeError> for ApiError {
    fn from(e: InvokeError) -> Self {
        Self::Invoke(e)
    }
}
