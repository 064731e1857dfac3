//! SIGTERM while clients hold streams. A watch and a lease keep-alive never end on their own,
//! and the store's servers used to wait for every open stream before stopping, so `mote store`
//! and `mote up` (for its embedded store) went on running after SIGTERM until SIGKILL;
//! Kubernetes' apiserver always holds watches. Now both end every stream with etcd's
//! `Unavailable: etcdserver: server stopped`, so clients fail over, and exit at once, keeping
//! every write they acknowledged.

use crate::platform::Platform;
use crate::store::{Reaper, Store, client};
use etcd_client::{Client, LeaseKeepAliveStream, LeaseKeeper, WatchStream};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long a server may take to exit after SIGTERM on a loaded 2-core machine. Before the fix
/// it never exited; now it takes milliseconds.
const EXIT_WITHIN: Duration = Duration::from_secs(5);
/// How long a client may wait for a stream to tell it the server stopped, once the server is
/// gone: the answer is already buffered, or the connection is closed.
const ANSWER_WITHIN: Duration = Duration::from_secs(5);
/// The longest a server may take to start.
const START_WITHIN: Duration = Duration::from_secs(60);

/// What etcd answers a request to a server that is stopping (`rpctypes.ErrGRPCStopped`).
const STOPPED: &str = "etcdserver: server stopped";

/// A watch and a lease keep-alive open on one server, each seen to work.
struct Streams {
    watch: WatchStream,
    keep_alive: LeaseKeepAliveStream,
    /// Holds the request side of the keep-alive open.
    _keeper: LeaseKeeper,
}

/// Opens a watch on `shutdown/` and keeps a lease alive on the server `c` talks to, and waits
/// for an answer on each, so both streams are established on the server.
async fn hold_streams(c: &mut Client) -> Streams {
    let mut watch = c
        .watch(
            "shutdown/",
            Some(etcd_client::WatchOptions::new().with_prefix()),
        )
        .await
        .expect("opening a watch");
    let created = watch.message().await.expect("the watch answers");
    assert!(
        created.is_some_and(|r| r.created()),
        "the watch was not created"
    );
    let lease = c
        .lease_grant(60, None)
        .await
        .expect("granting a lease")
        .id();
    let (mut keeper, mut keep_alive) = c
        .lease_keep_alive(lease)
        .await
        .expect("opening a keep-alive");
    keeper.keep_alive().await.expect("sending a keep-alive");
    let renewed = keep_alive.message().await.expect("the keep-alive answers");
    assert_eq!(renewed.map(|r| r.ttl()), Some(60), "the lease was renewed");
    Streams {
        watch,
        keep_alive,
        _keeper: keeper,
    }
}

impl Streams {
    /// Waits for the watch to report the put of `key`: the stream is live up to the stop.
    async fn saw_put(&mut self, key: &str) {
        let answer = tokio::time::timeout(ANSWER_WITHIN, self.watch.message())
            .await
            .expect("the watch did not report the put")
            .expect("the watch failed before the stop")
            .expect("the watch ended before the stop");
        let keys: Vec<&[u8]> = answer
            .events()
            .iter()
            .filter_map(|e| e.kv().map(|kv| kv.key()))
            .collect();
        assert_eq!(keys, [key.as_bytes()], "the watch reported other events");
    }

    /// Asserts that each stream ended with etcd's `Unavailable` for a stopped server, the
    /// answer that makes a client fail over (a stream ending without a status would look like
    /// a normal end, and clientv3 gives up on the watch).
    async fn assert_told_the_server_stopped(mut self) {
        let watch = tokio::time::timeout(ANSWER_WITHIN, self.watch.message())
            .await
            .expect("the watch stream neither ended nor answered");
        assert_stopped("the watch", watch.map(|_| ()));
        let keep_alive = tokio::time::timeout(ANSWER_WITHIN, self.keep_alive.message())
            .await
            .expect("the keep-alive stream neither ended nor answered");
        assert_stopped("the keep-alive", keep_alive.map(|_| ()));
    }
}

fn assert_stopped(stream: &str, answer: Result<(), etcd_client::Error>) {
    match answer {
        Err(etcd_client::Error::GRpcStatus(s)) => assert_eq!(
            (format!("{:?}", s.code()), s.message()),
            ("Unavailable".to_owned(), STOPPED),
            "{stream} ended with the wrong status"
        ),
        Err(other) => panic!("{stream} failed with {other}, not a gRPC status"),
        Ok(()) => panic!("{stream} ended without a status or answered after the stop"),
    }
}

/// Sends SIGTERM to `child` and waits up to [`EXIT_WITHIN`] for it to exit; fails the test,
/// naming the hang, if it is still running then (the caller's reaper then kills it).
async fn terminate(child: &mut Child, what: &str) -> ExitStatus {
    let pid = child.id().to_string();
    let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(sent.success(), "could not send SIGTERM to {what}");
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            eprintln!(
                "shutdown: {what} exited {:?} after SIGTERM",
                start.elapsed()
            );
            return status;
        }
        assert!(
            start.elapsed() < EXIT_WITHIN,
            "{what} was still running {EXIT_WITHIN:?} after SIGTERM while clients held a \
             watch and a lease keep-alive: it hangs on open streams"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mote_store_ends_open_streams_and_exits_at_once_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::start("a", dir.path(), &[]).await;
    let mut c = client(&store.url).await;
    let mut streams = hold_streams(&mut c).await;
    c.put("shutdown/acked", "before SIGTERM", None)
        .await
        .expect("a put just before the stop");
    streams.saw_put("shutdown/acked").await;

    let child = store.process.0.as_mut().unwrap();
    let status = terminate(child, "mote store").await;
    assert!(
        status.success(),
        "mote store exited with {status} on SIGTERM"
    );
    streams.assert_told_the_server_stopped().await;

    let store = Store::start("a", dir.path(), &[]).await;
    let mut c = client(&store.url).await;
    let kept = c.get("shutdown/acked", None).await.unwrap();
    assert_eq!(
        kept.kvs().first().map(|kv| kv.value()),
        Some(&b"before SIGTERM"[..]),
        "the write acknowledged before SIGTERM is lost"
    );
}

/// A running `mote up` and the URL of the store it embeds.
struct Up {
    process: Reaper,
    store: String,
}

impl Up {
    /// Starts `mote up` on `data` and waits until it says it is up.
    async fn start(data: &Path) -> Up {
        let mut child = Platform::up_command(data, &["--log", "warn"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting mote up");
        let stdout = child.stdout.take().unwrap();
        let process = Reaper(Some(child));
        let (tx, rx) = tokio::sync::oneshot::channel();
        // Drains stdout until mote up exits, so it never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(store) = embedded_store(&line)
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(store);
                }
            }
        });
        let store = tokio::time::timeout(START_WITHIN, rx)
            .await
            .expect("mote up did not say it was up in time")
            .expect("mote up exited without saying it was up");
        Up { process, store }
    }
}

/// The embedded store's URL in the line `mote up` prints once up: `… function records in the
/// etcd-API store at http://ADDR, objects in …`.
fn embedded_store(line: &str) -> Option<String> {
    let label = "function records in the etcd-API store at ";
    let rest = &line[line.find(label)? + label.len()..];
    Some(rest.split(", ").next()?.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mote_up_ends_open_streams_on_its_store_and_exits_at_once_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut up = Up::start(&data).await;
    let mut c = client(&up.store).await;
    let mut streams = hold_streams(&mut c).await;
    c.put("shutdown/acked", "before SIGTERM", None)
        .await
        .expect("a put just before the stop");
    streams.saw_put("shutdown/acked").await;

    let child = up.process.0.as_mut().unwrap();
    let status = terminate(child, "mote up").await;
    assert!(status.success(), "mote up exited with {status} on SIGTERM");
    streams.assert_told_the_server_stopped().await;

    let up = Up::start(&data).await;
    let mut c = client(&up.store).await;
    let kept = c.get("shutdown/acked", None).await.unwrap();
    assert_eq!(
        kept.kvs().first().map(|kv| kv.value()),
        Some(&b"before SIGTERM"[..]),
        "the write acknowledged before SIGTERM is lost"
    );
}
