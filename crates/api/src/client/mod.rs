//! [`ApiClient`]: the public API over HTTP/1.1, one typed method per route a client uses.
//! https to a server whose URL says so, trusting what [`mote_tls::Trust`] trusts (a node's own
//! certificate, or the web PKI roots); a bearer token on every request when it has one. An
//! error status, an answer that is not the route's, and a server that cannot be reached are
//! each an [`ApiError`] that names the server or the route.

mod body;
mod logs;

pub use body::Upload;
pub use logs::LogStream;

use crate::cluster::ClusterView;
use crate::error::{ApiError, ErrorBody, ErrorStatus};
use crate::functions::{DeployParams, FunctionInfo, FunctionList, Released};
use crate::jobs::{JobStatus, RunRequest};
use crate::tokens::{CreateToken, Revoked, TokenInfo, TokenList};
use body::RequestBody;
use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap};
use hyper::{Method, StatusCode, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use mote_types::with_causes;
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::time::Duration;

/// The longest a request may take, answer read whole, unless the client is told otherwise.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// The most of an answer a client reads.
const MAX_ANSWER: usize = 1 << 30;

/// The characters a name in a path is escaped of: those that would end the segment or the path.
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'/')
    .add(b'?')
    .add(b'#')
    .add(b'%')
    .add(b'"')
    .add(b'<')
    .add(b'>');

/// A function's answer to a call, whatever its status.
#[derive(Clone, Debug)]
pub struct Invoked {
    /// Its status.
    pub status: StatusCode,
    /// Its headers (`mote-call-id` names the call in the function's log).
    pub headers: HeaderMap,
    /// Its body.
    pub body: Bytes,
    /// The route asked, for the error [`Invoked::success`] makes.
    route: String,
}

impl Invoked {
    /// The body of a successful answer; an error status as the error it is.
    pub fn success(self) -> Result<Bytes, ApiError> {
        match self.status.is_success() {
            true => Ok(self.body),
            false => Err(error_status(self.route, self.status, &self.body).into()),
        }
    }
}

/// A client of one mote server's public API. Cheap to clone: clones share one connection pool.
#[derive(Clone)]
pub struct ApiClient {
    /// The server's URL as given, for messages.
    server: String,
    /// The same, without a trailing `/`, for building URLs.
    base: String,
    token: Option<String>,
    timeout: Duration,
    client: Client<HttpsConnector<HttpConnector>, RequestBody>,
}

impl ApiClient {
    /// A client of the server at `server` (`http://HOST:PORT` or `https://...`) that sends
    /// `token` with every request, if given, and trusts what `trust` trusts for https.
    pub fn new(
        server: &str,
        token: Option<String>,
        trust: &mote_tls::Trust,
    ) -> Result<Self, ApiError> {
        let base = server.trim_end_matches('/').to_owned();
        let bad = |detail: &str| ApiError::BadUrl {
            server: server.to_owned(),
            detail: detail.to_owned(),
        };
        let uri: Uri = base
            .parse()
            .map_err(|e: hyper::http::uri::InvalidUri| bad(&e.to_string()))?;
        match uri.scheme_str() {
            Some("http" | "https") => {}
            _ => return Err(bad("it must begin with http:// or https://")),
        }
        if uri.host().is_none_or(str::is_empty) {
            return Err(bad("it names no host"));
        }
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new()).build(trust.https_connector(connector));
        Ok(Self {
            server: server.to_owned(),
            base,
            token,
            timeout: REQUEST_TIMEOUT,
            client,
        })
    }

    /// The same client, with `timeout` for each request's whole exchange (a followed log has
    /// none).
    pub fn with_timeout(self, timeout: Duration) -> Self {
        Self { timeout, ..self }
    }

    /// The server's URL, as given.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The server's URL without a trailing `/`, to which a route's path is appended.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// `PUT /v1/functions/{name}?...`: deploys `wasm` as `name`, telling `progress` how far
    /// the upload is; the answer comes once the server compiled it (at once for a module it
    /// has).
    pub async fn deploy(
        &self,
        name: &str,
        wasm: Bytes,
        params: &DeployParams,
        progress: impl FnMut(Upload) + Send + 'static,
    ) -> Result<FunctionInfo, ApiError> {
        let query = params.query();
        let path = match query.is_empty() {
            true => format!("/v1/functions/{}", segment(name)),
            false => format!("/v1/functions/{}?{query}", segment(name)),
        };
        let body = RequestBody::watched(wasm, Box::new(progress));
        self.json(Method::PUT, &path, body, None).await
    }

    /// `POST /v1/invoke/{name}` with `input`: the function's answer, whatever its status.
    pub async fn invoke(&self, name: &str, input: Bytes) -> Result<Invoked, ApiError> {
        let path = format!("/v1/invoke/{}", segment(name));
        let route = route(&Method::POST, &path);
        let exchange = async {
            let response = self
                .send(Method::POST, &path, RequestBody::new(input), None)
                .await?;
            let status = response.status();
            let headers = response.headers().clone();
            let body = self.read(&route, response.into_body()).await?;
            Ok(Invoked {
                status,
                headers,
                body,
                route: route.clone(),
            })
        };
        self.bounded(&route, exchange).await
    }

    /// `GET /v1/functions`.
    pub async fn functions(&self) -> Result<FunctionList, ApiError> {
        self.get("/v1/functions").await
    }

    /// `GET /v1/functions/{name}`.
    pub async fn function(&self, name: &str) -> Result<FunctionInfo, ApiError> {
        self.get(&format!("/v1/functions/{}", segment(name))).await
    }

    /// `DELETE /v1/functions/{name}`: the function removed.
    pub async fn remove(&self, name: &str) -> Result<FunctionInfo, ApiError> {
        let path = format!("/v1/functions/{}", segment(name));
        self.json(Method::DELETE, &path, RequestBody::empty(), None)
            .await
    }

    /// `POST /v1/functions/{name}/release`: lets a quarantined function's calls in again.
    pub async fn release(&self, name: &str) -> Result<Released, ApiError> {
        let path = format!("/v1/functions/{}/release", segment(name));
        self.json(Method::POST, &path, RequestBody::empty(), None)
            .await
    }

    /// `GET /v1/cluster`.
    pub async fn cluster(&self) -> Result<ClusterView, ApiError> {
        self.get("/v1/cluster").await
    }

    /// `POST /v1/jobs`: starts a job; its status as it began.
    pub async fn run_job(&self, request: &RunRequest) -> Result<JobStatus, ApiError> {
        self.post_json("/v1/jobs", request).await
    }

    /// `GET /v1/jobs/{id}`.
    pub async fn job(&self, id: &str) -> Result<JobStatus, ApiError> {
        self.get(&format!("/v1/jobs/{}", segment(id))).await
    }

    /// `GET /v1/jobs`: the jobs the server started.
    pub async fn jobs(&self) -> Result<Vec<JobStatus>, ApiError> {
        self.get("/v1/jobs").await
    }

    /// `DELETE /v1/jobs/{id}`: cancels a job; its status then.
    pub async fn cancel_job(&self, id: &str) -> Result<JobStatus, ApiError> {
        let path = format!("/v1/jobs/{}", segment(id));
        self.json(Method::DELETE, &path, RequestBody::empty(), None)
            .await
    }

    /// `POST /v1/tokens`: the token made, with the token itself.
    pub async fn create_token(&self, request: &CreateToken) -> Result<TokenInfo, ApiError> {
        self.post_json("/v1/tokens", request).await
    }

    /// `GET /v1/tokens`.
    pub async fn tokens(&self) -> Result<TokenList, ApiError> {
        self.get("/v1/tokens").await
    }

    /// `DELETE /v1/tokens/{name}`.
    pub async fn revoke_token(&self, name: &str) -> Result<Revoked, ApiError> {
        let path = format!("/v1/tokens/{}", segment(name));
        self.json(Method::DELETE, &path, RequestBody::empty(), None)
            .await
    }

    /// `GET /v1/functions/{name}/logs`: the newest `tail` entries (every entry kept if none),
    /// and with `follow` the entries calls write from then on, until the server stops. Only
    /// the answer's head is bounded by the client's time limit: a followed log has no end.
    pub async fn logs(
        &self,
        name: &str,
        tail: Option<usize>,
        follow: bool,
    ) -> Result<LogStream, ApiError> {
        let mut query = Vec::new();
        if let Some(tail) = tail {
            query.push(format!("tail={tail}"));
        }
        if follow {
            query.push("follow=true".to_owned());
        }
        let mut path = format!("/v1/functions/{}/logs", segment(name));
        if !query.is_empty() {
            path = format!("{path}?{}", query.join("&"));
        }
        let route = route(&Method::GET, &path);
        let answer = self.bounded(&route, async {
            let response = self
                .send(Method::GET, &path, RequestBody::empty(), None)
                .await?;
            self.success(&route, response).await
        });
        let response = answer.await?;
        Ok(LogStream::new(
            route,
            self.server.clone(),
            response.into_body(),
        ))
    }

    /// A GET of `path`, read as `T`.
    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ApiError> {
        self.json(Method::GET, path, RequestBody::empty(), None)
            .await
    }

    /// A POST of `body` as JSON to `path`, its answer read as `T`.
    async fn post_json<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &impl Serialize,
    ) -> Result<T, ApiError> {
        let route = route(&Method::POST, path);
        let body = serde_json::to_vec(body).map_err(|e| ApiError::Unexpected {
            route,
            detail: format!("the request cannot be written as JSON: {e}"),
        })?;
        let body = RequestBody::new(Bytes::from(body));
        self.json(Method::POST, path, body, Some("application/json"))
            .await
    }

    /// A request whose successful answer is JSON, read as `T`.
    async fn json<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: RequestBody,
        content_type: Option<&'static str>,
    ) -> Result<T, ApiError> {
        let route = route(&method, path);
        let exchange = async {
            let response = self.send(method, path, body, content_type).await?;
            let response = self.success(&route, response).await?;
            self.read(&route, response.into_body()).await
        };
        let body = self.bounded(&route, exchange).await?;
        serde_json::from_slice(&body).map_err(|e| ApiError::Unexpected {
            route,
            detail: format!("{e} (is {} a mote server of this version?)", self.server),
        })
    }

    /// `exchange`, within the client's time limit.
    async fn bounded<T>(
        &self,
        route: &str,
        exchange: impl Future<Output = Result<T, ApiError>>,
    ) -> Result<T, ApiError> {
        tokio::time::timeout(self.timeout, exchange)
            .await
            .unwrap_or_else(|_| {
                Err(ApiError::TimedOut {
                    server: self.server.clone(),
                    route: route.to_owned(),
                    after: self.timeout,
                })
            })
    }

    /// Sends a request; its answer, whatever its status, the body still to read.
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: RequestBody,
        content_type: Option<&'static str>,
    ) -> Result<hyper::Response<Incoming>, ApiError> {
        let asked = route(&method, path);
        let mut request = hyper::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            request = request.header(AUTHORIZATION, format!("Bearer {token}"));
        }
        if let Some(content_type) = content_type {
            request = request.header(CONTENT_TYPE, content_type);
        }
        let request = request.body(body).map_err(|e| ApiError::BadUrl {
            server: self.server.clone(),
            detail: e.to_string(),
        })?;
        self.client.request(request).await.map_err(|e| {
            let detail = with_causes(&e);
            match e.is_connect() {
                true => ApiError::Unreachable {
                    server: self.server.clone(),
                    detail,
                },
                false => ApiError::Lost {
                    server: self.server.clone(),
                    route: asked,
                    detail,
                },
            }
        })
    }

    /// `response` if its status is a success; otherwise the error it answers.
    async fn success(
        &self,
        route: &str,
        response: hyper::Response<Incoming>,
    ) -> Result<hyper::Response<Incoming>, ApiError> {
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let body = self.read(route, response.into_body()).await?;
        Err(error_status(route.to_owned(), status, &body).into())
    }

    /// The whole of `body`.
    async fn read(&self, route: &str, body: Incoming) -> Result<Bytes, ApiError> {
        match Limited::new(body, MAX_ANSWER).collect().await {
            Ok(collected) => Ok(collected.to_bytes()),
            Err(e) => Err(ApiError::Lost {
                server: self.server.clone(),
                route: route.to_owned(),
                detail: with_causes(&*e),
            }),
        }
    }
}

/// The error `status` answers, with the server's message if `body` is an [`ErrorBody`].
fn error_status(route: String, status: StatusCode, body: &[u8]) -> ErrorStatus {
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(answer) => ErrorStatus {
            route,
            status,
            message: Some(answer.error),
            body: String::new(),
        },
        Err(_) => ErrorStatus {
            route,
            status,
            message: None,
            body: String::from_utf8_lossy(body).into_owned(),
        },
    }
}

/// A route as errors name it: `GET /v1/functions` (the query left out).
fn route(method: &Method, path: &str) -> String {
    let path = path.split_once('?').map_or(path, |(path, _)| path);
    format!("{method} {path}")
}

/// `name` as one segment of a path.
fn segment(name: &str) -> String {
    utf8_percent_encode(name, SEGMENT).to_string()
}

#[cfg(test)]
mod tests;
