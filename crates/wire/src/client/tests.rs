use super::*;
use crate::route;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{any, get};
use hyper::header::HeaderValue;
use mote_types::ClusterSecret;
use parking_lot::Mutex;
use std::net::SocketAddr;
use std::sync::Arc;

const SECRET: &str = "a-secret-of-sixteen-or-more";

/// A request as the peer saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Seen {
    path: String,
    secret: Option<String>,
    forwarded_by: Option<String>,
    moved: Option<String>,
}

type Log = Arc<Mutex<Vec<Seen>>>;

fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get(name).map(|v| v.to_str().unwrap().to_owned())
}

/// A peer that records every request's headers; its modules are: `big` (2 KiB), `gone` (a
/// 404 that says why), `slow` (answers after 2 s), and any other, whose bytes are its name.
fn peer(log: Log) -> Router {
    async fn module(Path(sha256): Path<String>) -> axum::response::Response {
        use axum::response::IntoResponse;
        match sha256.as_str() {
            "big" => vec![7u8; 2048].into_response(),
            "gone" => (StatusCode::NOT_FOUND, "no module gone here\n").into_response(),
            "slow" => {
                tokio::time::sleep(Duration::from_secs(2)).await;
                "late".into_response()
            }
            other => other.to_owned().into_response(),
        }
    }
    async fn record(
        State(log): State<Log>,
        request: axum::extract::Request,
        next: axum::middleware::Next,
    ) -> axum::response::Response {
        let headers = request.headers();
        log.lock().push(Seen {
            path: request.uri().to_string(),
            secret: header(headers, CLUSTER_SECRET_HEADER),
            forwarded_by: header(headers, FORWARDED_BY),
            moved: header(headers, crate::MOVED),
        });
        next.run(request).await
    }
    Router::new()
        .route(route::MODULE, get(module))
        .fallback(any(|| async { "ok" }))
        .layer(axum::middleware::from_fn_with_state(log, record))
}

/// Serves `router` on loopback over plain HTTP.
async fn serve_plain(router: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

/// Serves `router` on loopback over TLS with a self-signed certificate for 127.0.0.1, and the
/// trust that accepts it.
async fn serve_tls(router: Router) -> (SocketAddr, mote_tls::Trust, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let identity = mote_tls::Identity::self_signed(dir.path(), &["127.0.0.1".to_owned()]).unwrap();
    let trust = mote_tls::Trust::with_own(Some(&identity));
    let acceptor = tokio_rustls::TlsAcceptor::from(identity.server_config());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let (acceptor, router) = (acceptor.clone(), router.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper_util::service::TowerToHyperService::new(router);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (addr, trust, dir)
}

fn access(trust: mote_tls::Trust, secret: bool, serves_tls: bool) -> mote_tls::PeerAccess {
    mote_tls::PeerAccess {
        trust,
        secret: secret.then(|| ClusterSecret::new(SECRET).unwrap()),
        serves_tls,
    }
}

fn client(access: &mote_tls::PeerAccess) -> WireClient {
    WireClient::new(access, Duration::from_secs(1))
}

fn seen(log: &Log) -> Vec<Seen> {
    log.lock().clone()
}

#[tokio::test]
async fn a_node_without_tls_shows_its_secret_to_an_http_peer() {
    let log = Log::default();
    let url = format!("http://{}", serve_plain(peer(log.clone())).await);
    let wire = client(&access(mote_tls::Trust::default(), true, false));
    let me = HeaderValue::from_static("n1");
    let answer = wire
        .send(
            &Peer::named("n2", &url),
            PeerRequest::invoke("f", Bytes::from_static(b"in"), None, &me),
        )
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(
        seen(&log),
        [Seen {
            path: "/v1/invoke/f".into(),
            secret: Some(SECRET.into()),
            forwarded_by: Some("n1".into()),
            moved: None,
        }]
    );
}

#[tokio::test]
async fn a_node_that_serves_tls_shows_its_secret_to_an_https_peer() {
    let log = Log::default();
    let (addr, trust, _dir) = serve_tls(peer(log.clone())).await;
    let url = format!("https://{addr}");
    let wire = client(&access(trust, true, true));
    let bytes = wire
        .fetch(
            &Peer::named("n2", &url),
            PeerRequest::module("abc"),
            1 << 20,
        )
        .await
        .unwrap();
    assert_eq!(&bytes[..], b"abc");
    let seen = seen(&log);
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].secret.as_deref(), Some(SECRET));
    assert_eq!(seen[0].path, "/v1/internal/modules/abc");
}

/// A peer given a plain `http://` URL by mistake gets nothing from a TLS node: not the secret,
/// not the request, and the error says which peer and what to do.
#[tokio::test]
async fn a_node_that_serves_tls_sends_nothing_to_an_http_peer() {
    let log = Log::default();
    let url = format!("http://{}", serve_plain(peer(log.clone())).await);
    let wire = client(&access(mote_tls::Trust::default(), true, true));
    let err = wire
        .send(&Peer::named("n2", &url), PeerRequest::job_run("j1"))
        .await
        .unwrap_err();
    assert!(matches!(err.failure, Failure::PlainSecret(_)), "{err}");
    assert!(err.not_sent());
    let text = err.to_string();
    assert!(text.contains("node `n2`") && text.contains(&url), "{text}");
    assert!(text.contains("https://"), "the fix is named: {text}");
    assert!(seen(&log).is_empty(), "{:?}", seen(&log));
}

#[tokio::test]
async fn without_a_secret_no_secret_header_is_sent() {
    let log = Log::default();
    let url = format!("http://{}", serve_plain(peer(log.clone())).await);
    let wire = client(&access(mote_tls::Trust::default(), false, false));
    let answer = wire
        .send(
            &Peer::at(&url),
            PeerRequest::store_peer("n1", "http://x:2480"),
        )
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(seen(&log)[0].secret, None);
    assert_eq!(seen(&log)[0].path, route::STORE_PEERS);
}

#[tokio::test]
async fn a_dead_peer_is_unreachable_and_named() {
    let addr = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let url = format!("http://{addr}");
    let wire = client(&access(mote_tls::Trust::default(), true, false));
    let err = wire
        .send(&Peer::named("n9", &url), PeerRequest::module("abc"))
        .await
        .unwrap_err();
    assert!(matches!(err.failure, Failure::Unreachable(_)), "{err}");
    assert!(err.not_sent());
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("node `n9` at {url} cannot be reached: ")),
        "{text}"
    );
    let job = wire
        .fetch(&Peer::at(&url), PeerRequest::job_stop("j1"), 1024)
        .await
        .unwrap_err();
    assert!(
        job.to_string().starts_with(&format!("the node at {url} ")),
        "{job}"
    );
}

#[tokio::test]
async fn a_fetch_says_what_the_peer_answered_and_holds_to_its_limits() {
    let url = format!("http://{}", serve_plain(peer(Log::default())).await);
    let wire = client(&access(mote_tls::Trust::default(), false, false));
    let to = Peer::named("n2", &url);
    let gone = wire
        .fetch(&to, PeerRequest::module("gone"), 1 << 20)
        .await
        .unwrap_err();
    match &gone.failure {
        Failure::Status { status, text } => {
            assert_eq!(
                (status.as_u16(), text.as_str()),
                (404, "no module gone here")
            )
        }
        other => panic!("{other:?}"),
    }
    let big = wire
        .fetch(&to, PeerRequest::module("big"), 1024)
        .await
        .unwrap_err();
    assert!(matches!(big.failure, Failure::TooLarge(1024)), "{big}");
    let fits = wire.fetch(&to, PeerRequest::module("big"), 2048).await;
    assert_eq!(fits.unwrap().len(), 2048);
    let slow = wire
        .fetch(
            &to,
            PeerRequest::module("slow").within(Duration::from_millis(100)),
            1024,
        )
        .await
        .unwrap_err();
    assert!(matches!(slow.failure, Failure::TimedOut(_)), "{slow}");
    assert!(slow.to_string().contains("within 100 ms"), "{slow}");
}

#[tokio::test]
async fn a_read_of_logs_goes_to_its_path_with_the_senders_name() {
    let log = Log::default();
    let url = format!("http://{}", serve_plain(peer(log.clone())).await);
    let wire = client(&access(mote_tls::Trust::default(), true, false));
    let me = HeaderValue::from_static("n1");
    let request = PeerRequest::logs("f", crate::LogsFrom::Tail(5), &me);
    wire.send(&Peer::named("n2", &url), request).await.unwrap();
    let seen = seen(&log);
    assert_eq!(seen[0].path, "/v1/internal/logs/f?tail=5");
    assert_eq!(seen[0].forwarded_by.as_deref(), Some("n1"));
}

#[tokio::test]
async fn a_moved_call_says_so_and_a_placed_one_does_not() {
    let log = Log::default();
    let url = format!("http://{}", serve_plain(peer(log.clone())).await);
    let wire = client(&access(mote_tls::Trust::default(), true, false));
    let me = HeaderValue::from_static("n1");
    let call = || PeerRequest::invoke("f", bytes::Bytes::new(), None, &me);
    let peer = Peer::named("n2", &url);
    wire.send(&peer, call()).await.unwrap();
    wire.send(&peer, call().moved()).await.unwrap();
    wire.send(&peer, PeerRequest::pull(3, &me)).await.unwrap();
    let seen = seen(&log);
    assert_eq!(seen[0].moved, None);
    assert_eq!(seen[1].moved.as_deref(), Some("1"));
    assert_eq!(seen[2].path, "/v1/internal/pull");
    assert_eq!(seen[2].forwarded_by.as_deref(), Some("n1"));
}
