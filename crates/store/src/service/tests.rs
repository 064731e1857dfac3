use super::*;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::Code;

/// An in-memory replica served on a free port: its URL, what stops it, and the server.
async fn served() -> (
    String,
    oneshot::Sender<()>,
    JoinHandle<Result<(), tonic::transport::Error>>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let me = Member::new("a", vec![url.clone()], Vec::new());
    let replica = Replica::open(vec![me], None).unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let shutdown = async {
        let _ = stopped.await;
    };
    let server = tokio::spawn(serve(
        replica,
        Duration::from_secs(1),
        listener,
        None,
        None,
        None,
        shutdown,
    ));
    (url, stop, server)
}

/// Waits up to `within` for the server to return; fails the test if it does not.
async fn stops_within(server: JoinHandle<Result<(), tonic::transport::Error>>, within: Duration) {
    tokio::time::timeout(within, server)
        .await
        .unwrap_or_else(|_| panic!("the server still runs {within:?} after it was told to stop"))
        .expect("the server task panicked")
        .expect("the server failed");
}

/// A watch and a lease keep-alive never end on their own, and the server waited for every
/// open stream before it stopped: it never stopped. Now both streams end with etcd's
/// `Unavailable` for a stopping server, and the server returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_ends_open_streams_and_the_server() {
    let (url, stop, server) = served().await;
    let mut client = etcd_client::Client::connect([url], None).await.unwrap();
    let mut watch = client.watch("k", None).await.unwrap();
    let created = watch.message().await.unwrap();
    assert!(created.is_some_and(|r| r.created()));
    let lease = client.lease_grant(60, None).await.unwrap().id();
    let (mut keeper, mut keep_alive) = client.lease_keep_alive(lease).await.unwrap();
    keeper.keep_alive().await.unwrap();
    assert!(keep_alive.message().await.unwrap().is_some());

    stop.send(()).unwrap();
    stops_within(server, Duration::from_secs(5)).await;
    let answers = [
        ("watch", watch.message().await.map(drop)),
        ("keep-alive", keep_alive.message().await.map(drop)),
    ];
    for (stream, answer) in answers {
        match answer {
            Err(etcd_client::Error::GRpcStatus(s)) => assert_eq!(
                (s.code(), s.message()),
                (Code::Unavailable, "etcdserver: server stopped"),
                "{stream}"
            ),
            other => panic!("the {stream} stream ended with {other:?}"),
        }
    }
}

/// A replica says how far behind each peer it is: caught up (with the peer's revision
/// merged) once a pull returned everything, failing (and why) while a peer does not answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_reports_how_far_behind_each_peer_it_is() {
    let clients = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let peers = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client_url = format!("http://{}", clients.local_addr().unwrap());
    let peer_url = format!("http://{}", peers.local_addr().unwrap());
    let me = Member::new("a", vec![client_url.clone()], vec![peer_url.clone()]);
    let served = Replica::open(vec![me], None).unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let shutdown = async {
        let _ = stopped.await;
    };
    let server = tokio::spawn(serve(
        served,
        Duration::from_secs(1),
        clients,
        Some(peers),
        None,
        None,
        shutdown,
    ));
    let mut client = etcd_client::Client::connect([client_url], None)
        .await
        .unwrap();
    let written = client.put("k", "v", None).await.unwrap();
    let revision = written.header().unwrap().revision();

    let puller = Replica::open(vec![Member::new("b", vec![], vec![])], None).unwrap();
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let interval = Duration::from_millis(10);
    tokio::spawn(puller.clone().run_pull_loop(peer_url.clone(), interval));
    tokio::spawn(puller.clone().run_pull_loop(dead.clone(), interval));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let pulls = loop {
        let pulls = puller.pulls();
        let settled = pulls.len() == 2
            && pulls
                .iter()
                .all(|p| p.caught_up_ago.is_some() || p.failing.is_some());
        if settled || std::time::Instant::now() > deadline {
            break pulls;
        }
        tokio::time::sleep(interval).await;
    };
    let live = pulls
        .iter()
        .find(|p| p.url == peer_url)
        .expect("the live peer");
    assert_eq!(live.merged_revision, revision);
    assert!(
        live.caught_up_ago.unwrap() < Duration::from_secs(5),
        "{live:?}"
    );
    assert_eq!(live.failing, None);
    let down = pulls.iter().find(|p| p.url == dead).expect("the dead peer");
    assert_eq!(down.caught_up_ago, None);
    let (_, error) = down
        .failing
        .as_ref()
        .expect("pulls from a closed port fail");
    assert!(error.contains("cannot reach the peer"), "{error}");
    stop.send(()).unwrap();
    stops_within(server, Duration::from_secs(5)).await;
}

/// A client that stops reading its watch leaves no room to send the stream's end, and the
/// server waited for it forever. It waits [`STOP_GRACE`] at most, then drops the
/// connections still open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_holds_the_stop_up_for_the_grace_only() {
    let (url, stop, server) = served().await;
    let mut stuck = etcd_client::Client::connect([url.clone()], None)
        .await
        .unwrap();
    let prefix = etcd_client::WatchOptions::new().with_prefix();
    let mut watch = stuck.watch("big/", Some(prefix)).await.unwrap();
    let created = watch.message().await.unwrap();
    assert!(created.is_some_and(|r| r.created()));
    // Far more than the client's flow-control windows (2 MiB a stream, 5 MiB a
    // connection) and the stream's queue hold, written on a connection of their own,
    // which the unread watch cannot block.
    let mut writer = etcd_client::Client::connect([url], None).await.unwrap();
    for i in 0..100 {
        let value = vec![b'x'; 256 << 10];
        writer.put(format!("big/{i}"), value, None).await.unwrap();
    }
    stop.send(()).unwrap();
    stops_within(server, STOP_GRACE + Duration::from_secs(5)).await;
}
/// How often the replicas of the peer tests pull when idle.
const PULL_EVERY: Duration = Duration::from_millis(20);

/// A replica holding `k = v`, serving its peer API (over TLS with `tls`) and requiring
/// `secret`: its peer URL and what stops it.
async fn source(
    secret: Option<&str>,
    tls: Option<&mote_tls::Identity>,
) -> (String, oneshot::Sender<()>) {
    let clients = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let peers = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let scheme = if tls.is_some() { "https" } else { "http" };
    let url = format!("{scheme}://{}", peers.local_addr().unwrap());
    let access = crate::replica::PeerAccess {
        secret: secret.map(|s| mote_types::ClusterSecret::new(s).unwrap()),
        tls: None,
        serves_tls: false,
    };
    let me = Member::new("source", Vec::new(), vec![url.clone()]);
    let replica = Replica::open_with(vec![me], None, access).unwrap();
    let put = PbPutRequest {
        key: b"k".to_vec(),
        value: b"v".to_vec(),
        ..PbPutRequest::default()
    };
    replica.write(|e, now| e.put(put, now)).await.unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let shutdown = async {
        let _ = stopped.await;
    };
    let tls = tls.map(mote_tls::Identity::tonic_server);
    tokio::spawn(serve(
        replica,
        PULL_EVERY,
        clients,
        Some(peers),
        None,
        tls,
        shutdown,
    ));
    (url, stop)
}

/// A replica pulling from `url`, showing `secret` and trusting `trust`.
fn puller(
    name: &str,
    url: &str,
    secret: Option<&str>,
    trust: Option<&mote_tls::Trust>,
) -> Arc<Replica> {
    let access = crate::replica::PeerAccess {
        secret: secret.map(|s| mote_types::ClusterSecret::new(s).unwrap()),
        serves_tls: trust.is_some(),
        tls: trust.map(mote_tls::Trust::tonic_client),
    };
    let me = Member::new(name, Vec::new(), Vec::new());
    let source = Member::new("source", Vec::new(), vec![url.to_owned()]);
    let replica = Replica::open_with(vec![me, source], None, access).unwrap();
    tokio::spawn(replica.clone().run_pull_loop(url.to_owned(), PULL_EVERY));
    replica
}

fn holds_k(replica: &Replica) -> bool {
    let get = PbRangeRequest {
        key: b"k".to_vec(),
        ..PbRangeRequest::default()
    };
    !replica.engine().range(&get).unwrap().kvs.is_empty()
}

/// Waits until `replica` holds `k` (the source's data), for 10 s at most.
async fn converges(replica: &Replica) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !holds_k(replica) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the replica with the right secret never got the data"
        );
        tokio::time::sleep(PULL_EVERY).await;
    }
}

const SECRET: &str = "the-cluster-secret-0123456789";

/// A scanner knocking without the secret a thousand times a second gets one log line every
/// ten seconds, which counts the refusals it did not log.
#[test]
fn refusals_are_logged_once_a_period_with_the_count_of_the_rest() {
    let refusals = Refusals::default();
    let period = REFUSAL_LOG_EVERY.as_millis() as u64;
    let start = 1_000_000;
    assert_eq!(refusals.note(start), Some(0));
    let logged: Vec<_> = (1..=2 * period)
        .filter_map(|ms| refusals.note(start + ms).map(|unlogged| (ms, unlogged)))
        .collect();
    assert_eq!(logged, [(period, period - 1), (2 * period, period - 1)]);
}

/// The answer of the source to one pull made with `secret`, over plain HTTP.
async fn pull_answer(url: &str, secret: Option<&str>) -> Status {
    let mut client = pb::peer_client::PeerClient::connect(url.to_owned())
        .await
        .unwrap();
    let mut request = Request::new(pb::PullRequest::default());
    if let Some(secret) = secret {
        request
            .metadata_mut()
            .insert(CLUSTER_SECRET_HEADER, secret.parse().unwrap());
    }
    client.pull(request).await.expect_err("the pull is refused")
}

/// The test: a store peer with the wrong secret, or none, gets nothing, and is
/// told what is missing; one with the right secret converges.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_without_the_cluster_secret_pulls_nothing() {
    let (url, _stop) = source(Some(SECRET), None).await;
    let wrong = puller("wrong", &url, Some("another-secret-0123456789"), None);
    let none = puller("none", &url, None, None);
    let right = puller("right", &url, Some(SECRET), None);
    converges(&right).await;
    // Both others have pulled many times since the right one started.
    tokio::time::sleep(PULL_EVERY * 20).await;
    assert!(!holds_k(&wrong), "a replica with a wrong secret got data");
    assert!(!holds_k(&none), "a replica without a secret got data");

    let refused = pull_answer(&url, None).await;
    assert_eq!(refused.code(), Code::Unauthenticated);
    assert!(
        refused.message().contains("carries no cluster secret"),
        "{}",
        refused.message()
    );
    let refused = pull_answer(&url, Some("another-secret-0123456789")).await;
    assert_eq!(refused.code(), Code::Unauthenticated);
    assert!(
        refused.message().contains("carries a wrong cluster secret"),
        "{}",
        refused.message()
    );
}

/// Replicas pull from each other over TLS with a self-signed pair, which the puller
/// trusts; one that trusts only the web PKI cannot, and neither can one without the
/// secret, even over TLS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_pull_over_tls_with_a_self_signed_pair() {
    let dir = tempfile::tempdir().unwrap();
    let names = ["localhost".to_owned(), "127.0.0.1".to_owned()];
    let identity = mote_tls::Identity::self_signed(dir.path(), &names).unwrap();
    let (url, _stop) = source(Some(SECRET), Some(&identity)).await;
    assert!(url.starts_with("https://"), "{url}");
    let trust = mote_tls::Trust::with_own(Some(&identity));
    let web_pki = mote_tls::Trust::default();
    let untrusting = puller("untrusting", &url, Some(SECRET), Some(&web_pki));
    let secretless = puller("secretless", &url, None, Some(&trust));
    let right = puller("right", &url, Some(SECRET), Some(&trust));
    converges(&right).await;
    tokio::time::sleep(PULL_EVERY * 20).await;
    assert!(
        !holds_k(&untrusting),
        "a replica that does not trust the certificate got data"
    );
    assert!(
        !holds_k(&secretless),
        "a replica without a secret got data over TLS"
    );
}
