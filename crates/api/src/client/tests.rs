use super::*;
use crate::cluster::{MemberState, MemberView, StoreView};
use crate::logs::LogLine;
use axum::Router;
use axum::http::HeaderMap as Headers;
use axum::response::IntoResponse;
use axum::routing::{get, post, put};
use parking_lot::Mutex;
use std::net::SocketAddr;
use std::sync::Arc;

/// Serves `router` on a port of loopback; its URL.
async fn serve(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{addr}")
}

fn client(url: &str, token: Option<&str>) -> ApiClient {
    ApiClient::new(url, token.map(str::to_owned), &mote_tls::Trust::default()).unwrap()
}

fn function(name: &str, size: u64) -> FunctionInfo {
    FunctionInfo {
        name: name.to_owned(),
        sha256: "ab".repeat(32),
        kind: "mote-abi-v1".into(),
        timeout_ms: 10,
        timeout_us: 10_000,
        memory_mb: 128,
        size_bytes: size,
        route: None,
        allow_outbound: Vec::new(),
        public: false,
        quarantined_after_kills: None,
    }
}

/// `GET /v1/functions` that lists one function for the bearer of `mote_right`, and refuses
/// anyone else as the API does.
fn guarded() -> Router {
    Router::new().route(
        "/v1/functions",
        get(|headers: Headers| async move {
            match headers.get("authorization").and_then(|v| v.to_str().ok()) {
                Some("Bearer mote_right") => axum::Json(FunctionList {
                    functions: vec![function("greet", 9)],
                })
                .into_response(),
                _ => (
                    StatusCode::UNAUTHORIZED,
                    axum::Json(ErrorBody {
                        error: "this route needs a token".into(),
                    }),
                )
                    .into_response(),
            }
        }),
    )
}

#[tokio::test]
async fn the_token_goes_with_the_request_and_a_refusal_carries_the_server_s_message() {
    let url = serve(guarded()).await;
    let listed = client(&url, Some("mote_right")).functions().await.unwrap();
    assert_eq!(listed.functions, vec![function("greet", 9)]);

    for token in [None, Some("mote_wrong")] {
        let refused = client(&url, token).functions().await.unwrap_err();
        assert_eq!(
            refused.status(),
            Some(StatusCode::UNAUTHORIZED),
            "{refused}"
        );
        assert_eq!(
            refused.to_string(),
            "this route needs a token (401 Unauthorized)"
        );
        let ApiError::Status(answer) = refused else {
            panic!("not a status")
        };
        assert_eq!(answer.route, "GET /v1/functions");
    }
}

#[tokio::test]
async fn an_answer_that_is_not_the_route_s_type_names_the_route() {
    let router = Router::new()
        .route("/v1/cluster", get(|| async { r#"{"node": "n1"}"# }))
        .route("/v1/jobs/{id}", get(|| async { "not json" }));
    let api = client(&serve(router).await, None);
    let unreadable = api.cluster().await.unwrap_err();
    assert!(
        matches!(&unreadable, ApiError::Unexpected { route, .. } if route == "GET /v1/cluster"),
        "{unreadable:?}"
    );
    assert!(
        unreadable
            .to_string()
            .starts_with("unexpected answer to GET /v1/cluster: missing field"),
        "{unreadable}"
    );
    let unreadable = api.job("j1").await.unwrap_err();
    assert!(
        unreadable.to_string().contains("GET /v1/jobs/j1"),
        "{unreadable}"
    );
}

#[tokio::test]
async fn an_error_status_without_an_error_body_shows_the_body() {
    let router = Router::new().route(
        "/v1/cluster",
        get(|| async { (StatusCode::BAD_GATEWAY, "upstream down") }),
    );
    let failed = client(&serve(router).await, None)
        .cluster()
        .await
        .unwrap_err();
    assert_eq!(
        failed.to_string(),
        "server answered 502 Bad Gateway: upstream down"
    );
}

#[tokio::test]
async fn a_server_nobody_listens_at_is_unreachable_and_named() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let failed = client(&url, None).functions().await.unwrap_err();
    assert!(matches!(failed, ApiError::Unreachable { .. }), "{failed:?}");
    let message = failed.to_string();
    assert!(
        message.starts_with(&format!("cannot reach mote at {url}: "))
            && message.ends_with("is `mote up` running there?"),
        "{message}"
    );
}

#[test]
fn a_server_that_is_not_an_http_url_is_refused_before_any_request() {
    for server in ["not a url", "ftp://127.0.0.1:21", "127.0.0.1:8080", ""] {
        let refused = ApiClient::new(server, None, &mote_tls::Trust::default());
        assert!(
            matches!(refused, Err(ApiError::BadUrl { .. })),
            "{server} was taken"
        );
    }
}

#[tokio::test]
async fn a_job_s_status_with_a_worker_not_yet_rated_reads_through_the_client() {
    let status = include_str!("../../testdata/starting_job.json");
    let router = Router::new().route(
        "/v1/jobs/{id}",
        get(move || async move { ([("content-type", "application/json")], status) }),
    );
    let read = client(&serve(router).await, None).job("j1").await.unwrap();
    assert_eq!(read.workers[0].tasks_per_s, None);
    assert_eq!(read.id, "j1");
}

#[tokio::test]
async fn a_deploy_tells_its_upload_s_progress_and_ends_it_once_all_went() {
    let router = Router::new().route(
        "/v1/functions/{name}",
        put(
            |axum::extract::Path(name): axum::extract::Path<String>,
             axum::extract::RawQuery(query): axum::extract::RawQuery,
             body: bytes::Bytes| async move {
                assert_eq!(query.as_deref(), Some("memory_mb=64&public=true"));
                (
                    StatusCode::CREATED,
                    axum::Json(function(&name, body.len() as u64)),
                )
            },
        ),
    );
    let api = client(&serve(router).await, None);
    let told = Arc::new(Mutex::new(Vec::new()));
    let size = 300_000;
    let params = DeployParams {
        memory_mb: Some(64),
        public: true,
        ..DeployParams::default()
    };
    let watch = {
        let told = told.clone();
        move |upload| told.lock().push(upload)
    };
    let made = api
        .deploy("big", Bytes::from(vec![7u8; size]), &params, watch)
        .await
        .unwrap();
    assert_eq!(made.size_bytes, size as u64);
    let told = told.lock();
    assert_eq!(told.last(), Some(&Upload::Done));
    let sent: Vec<u64> = told
        .iter()
        .filter_map(|u| match u {
            Upload::Sent { sent, total } => {
                assert_eq!(*total, size as u64);
                Some(*sent)
            }
            Upload::Done => None,
        })
        .collect();
    assert!(sent.len() > 1, "{sent:?}");
    assert!(sent.windows(2).all(|w| w[0] < w[1]), "{sent:?}");
    assert_eq!(sent.last(), Some(&(size as u64)));
}

#[tokio::test]
async fn an_invoke_answers_whatever_its_status_and_success_turns_an_error_into_one() {
    let router = Router::new().route(
        "/v1/invoke/{name}",
        post(|body: bytes::Bytes| async move {
            match &body[..] {
                b"fail" => (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    axum::Json(ErrorBody {
                        error: "it trapped".into(),
                    }),
                )
                    .into_response(),
                _ => ([("mote-call-id", "n1-7")], body).into_response(),
            }
        }),
    );
    let api = client(&serve(router).await, None);
    let answered = api.invoke("echo", Bytes::from_static(b"hi")).await.unwrap();
    assert_eq!(answered.status, StatusCode::OK);
    assert_eq!(answered.headers["mote-call-id"], "n1-7");
    assert_eq!(answered.success().unwrap(), Bytes::from_static(b"hi"));
    let failed = api
        .invoke("echo", Bytes::from_static(b"fail"))
        .await
        .unwrap();
    assert_eq!(failed.status, StatusCode::INTERNAL_SERVER_ERROR);
    let error = failed.success().unwrap_err();
    assert_eq!(error.to_string(), "it trapped (500 Internal Server Error)");
}

fn entry(seq: u64, text: &str) -> LogLine {
    LogLine {
        seq,
        time: "2026-05-01T10:00:00.000Z".into(),
        unix_ms: 1_777_629_600_000,
        node: "n1".into(),
        call: format!("n1-{seq}"),
        stream: "log".into(),
        outcome: "ok".into(),
        text: text.into(),
    }
}

#[tokio::test]
async fn a_log_reads_entry_by_entry_and_a_line_that_is_not_one_is_named() {
    let mut ndjson = String::new();
    for e in [entry(1, "one"), entry(2, "two\nlines")] {
        ndjson.push_str(&serde_json::to_string(&e).unwrap());
        ndjson.push_str("\n\n");
    }
    ndjson.push_str("garbage\n");
    let router = Router::new().route(
        "/v1/functions/{name}/logs",
        get(
            move |axum::extract::RawQuery(query): axum::extract::RawQuery| async move {
                assert_eq!(query.as_deref(), Some("tail=5&follow=true"));
                ndjson
            },
        ),
    );
    let api = client(&serve(router).await, None);
    let mut log = api.logs("f", Some(5), true).await.unwrap();
    assert_eq!(log.next_entry().await.unwrap(), Some(entry(1, "one")));
    assert_eq!(
        log.next_entry().await.unwrap(),
        Some(entry(2, "two\nlines"))
    );
    let bad = log.next_entry().await.unwrap_err();
    assert!(
        bad.to_string().contains(
            "GET /v1/functions/f/logs: the server sent a line that is not an entry: garbage"
        ),
        "{bad}"
    );
    assert_eq!(log.next_line().await.unwrap(), None);
}

#[tokio::test]
async fn a_log_that_is_refused_is_an_error_before_any_line() {
    let router = Router::new().route(
        "/v1/functions/{name}/logs",
        get(|| async {
            (
                StatusCode::NOT_FOUND,
                axum::Json(ErrorBody {
                    error: "`f` is not deployed".into(),
                }),
            )
        }),
    );
    let refused = client(&serve(router).await, None)
        .logs("f", None, false)
        .await
        .err()
        .unwrap();
    assert_eq!(refused.status(), Some(StatusCode::NOT_FOUND));
}

#[tokio::test]
async fn the_cluster_view_reads_as_the_server_wrote_it() {
    let view = ClusterView {
        node: "n1".into(),
        store: StoreView {
            endpoints: "http://127.0.0.1:2379".into(),
            reachable: false,
            unreachable_for_ms: Some(1500),
            error: Some("connection refused".into()),
        },
        nodes: vec![MemberView {
            name: "n1".into(),
            url: "http://127.0.0.1:8080".into(),
            state: MemberState::Up,
            me: true,
            cores: 4,
            running: 0,
            queued: 0,
            work_ms: 0.0,
            heard_ms_ago: 0,
        }],
    };
    let served = view.clone();
    let router = Router::new().route(
        "/v1/cluster",
        get(move || async move { axum::Json(served) }),
    );
    let read = client(&format!("{}/", serve(router).await), None)
        .cluster()
        .await
        .unwrap();
    assert_eq!(read, view);
}
