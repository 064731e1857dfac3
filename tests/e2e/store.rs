//! mote store under faults: replicas killed with SIGKILL and restarted, partitioned and healed,
//! written to concurrently on every replica. No acknowledged write may be lost, the replicas
//! must converge, and the tests print how long convergence took (run with `--nocapture`).
//!
//! Each replica is a real `mote store` process on loopback, driven with the etcd v3 client
//! (`etcd-client`) as an etcd user would. Replicas reach each other's peer API only through a
//! [`Link`]: a TCP proxy in this test process, one per direction, that can be cut and healed.
//! That also lets every replica listen on port 0 (the test reads the addresses it bound from the
//! line it prints once up), so tests running side by side never race for ports.
//!
//! Nothing here asserts on timing: every wait polls up to a generous [`DEADLINE`].

use crate::platform::mote_bin;
use etcd_client::{
    Client, ConnectOptions, GetOptions, GetResponse, KeyValue, LeaseTimeToLiveOptions, PutOptions,
    Txn, TxnOp,
};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The longest anything that should happen may take on a loaded 2-core machine.
const DEADLINE: Duration = Duration::from_secs(30);
/// How often replicas pull from each other when idle (`--pull-interval-ms`).
const PULL_INTERVAL_MS: u64 = 20;
/// How often the tests poll for a state they wait for.
const POLL: Duration = Duration::from_millis(20);

/// What a replica holds: every live key and its value.
type State = BTreeMap<Vec<u8>, Vec<u8>>;

// ---------------------------------------------------------------------------------------------
// Replica processes
// ---------------------------------------------------------------------------------------------

/// A running `mote store`, killed (SIGKILL) when dropped.
pub(crate) struct Store {
    pub(crate) process: Reaper,
    /// The etcd API, as a client endpoint.
    pub(crate) url: String,
    /// Where its peer API listens.
    peer: SocketAddr,
}

/// A child process killed when dropped, so a failing test leaves nothing running.
pub(crate) struct Reaper(pub(crate) Option<Child>);

impl Drop for Reaper {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The client and peer addresses in the line a replica prints once it serves:
/// `mote store NAME is up: etcd v3 API on http://ADDR, peer API on http://ADDR`.
fn serving_addresses(line: &str) -> Option<(SocketAddr, SocketAddr)> {
    let after = |label: &str| {
        let rest = &line[line.find(label)? + label.len()..];
        let addr = rest.split([',', ' ']).next()?;
        addr.parse().ok()
    };
    Some((
        after("etcd v3 API on http://")?,
        after("peer API on http://")?,
    ))
}

impl Store {
    /// Starts replica `name` on `data`, pulling from `peers` (NAME=URL), and waits until it
    /// serves.
    pub(crate) async fn start(name: &'static str, data: &Path, peers: &[String]) -> Store {
        Self::start_with(name, data, peers, &[]).await
    }

    /// Like [`Store::start`], with more options for `mote store`.
    async fn start_with(
        name: &'static str,
        data: &Path,
        peers: &[String],
        options: &[&str],
    ) -> Store {
        // MOTE_LOG (e.g. `mote_store=debug`) shows more of the replicas' logs.
        let log = std::env::var("MOTE_LOG").unwrap_or_else(|_| "warn".into());
        let mut cmd = Command::new(mote_bin());
        cmd.args(["store", "--name", name, "--log", &log])
            .args(["--listen", "127.0.0.1:0", "--peer-listen", "127.0.0.1:0"])
            .args(["--pull-interval-ms", &PULL_INTERVAL_MS.to_string()])
            .args(options)
            .arg("--data")
            .arg(data);
        if !peers.is_empty() {
            cmd.arg("--peers").arg(peers.join(","));
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting mote store");
        let stdout = child.stdout.take().unwrap();
        let mut reaper = Reaper(Some(child));
        let (tx, rx) = tokio::sync::oneshot::channel();
        // Reads stdout until the replica exits, so it never blocks on a full pipe; the line
        // saying it is up tells where it listens.
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(addrs) = serving_addresses(&line)
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(addrs);
                }
            }
        });
        let (client, peer) = match tokio::time::timeout(DEADLINE, rx).await {
            Ok(Ok(addrs)) => addrs,
            Ok(Err(_)) => {
                let status = reaper.0.as_mut().unwrap().wait().unwrap();
                panic!("mote store {name} exited ({status}) without saying it was up")
            }
            Err(_) => panic!("mote store {name} did not say it was up within {DEADLINE:?}"),
        };
        Store {
            process: reaper,
            url: format!("http://{client}"),
            peer,
        }
    }

    /// Sends SIGKILL and waits for the process to be gone.
    pub(crate) fn kill(mut self) {
        let mut child = self.process.0.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

/// An etcd client of the replica at `url`.
pub(crate) async fn client(url: &str) -> Client {
    let options = ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(5))
        .with_timeout(DEADLINE);
    Client::connect([url], Some(options))
        .await
        .unwrap_or_else(|e| panic!("connecting to {url}: {e}"))
}

// ---------------------------------------------------------------------------------------------
// The network between replicas
// ---------------------------------------------------------------------------------------------

/// A TCP proxy in front of one replica's peer API, used by one other replica: accepts, connects
/// upstream, copies both ways. Cut, it drops every connection and every new one at once, as a
/// partition would; healed, it forwards again.
pub(crate) struct Link {
    pub(crate) addr: SocketAddr,
    upstream: Arc<parking_lot::Mutex<Option<SocketAddr>>>,
    cut: watch::Sender<bool>,
    /// Connections accepted and not yet closed.
    open: Arc<AtomicUsize>,
    accept: tokio::task::JoinHandle<()>,
}

impl Link {
    pub(crate) async fn new() -> Link {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let upstream = Arc::new(parking_lot::Mutex::new(None::<SocketAddr>));
        let (cut, _) = watch::channel(false);
        let open = Arc::new(AtomicUsize::new(0));
        let accept = tokio::spawn({
            let upstream = upstream.clone();
            let cut = cut.subscribe();
            let open = open.clone();
            async move {
                loop {
                    let Ok((mut inbound, _)) = listener.accept().await else {
                        // Out of descriptors, say: wait rather than spin.
                        tokio::time::sleep(POLL).await;
                        continue;
                    };
                    // Counted before the check, so `partition` waiting for zero also waits for
                    // a connection accepted just before the cut.
                    open.fetch_add(1, Ordering::SeqCst);
                    let target = *upstream.lock();
                    let (true, Some(target)) = (!*cut.borrow(), target) else {
                        open.fetch_sub(1, Ordering::SeqCst);
                        continue;
                    };
                    let mut cut = cut.clone();
                    let open = open.clone();
                    tokio::spawn(async move {
                        if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                            let _ = outbound.set_nodelay(true);
                            let _ = inbound.set_nodelay(true);
                            tokio::select! {
                                _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                                // Also ends when the link is dropped.
                                _ = cut.wait_for(|cut| *cut) => {}
                            }
                        }
                        drop(inbound);
                        open.fetch_sub(1, Ordering::SeqCst);
                    });
                }
            }
        });
        Link {
            addr,
            upstream,
            cut,
            open,
            accept,
        }
    }

    /// Forwards new connections to `target` from now on.
    pub(crate) fn point_to(&self, target: SocketAddr) {
        *self.upstream.lock() = Some(target);
    }

    /// Drops every connection and refuses new ones; returns once none is left open.
    pub(crate) async fn cut(&self) {
        self.cut.send_replace(true);
        poll_until("a cut link to close its connections", || async {
            self.open.load(Ordering::SeqCst) == 0
        })
        .await;
    }

    pub(crate) fn heal(&self) {
        self.cut.send_replace(false);
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

// ---------------------------------------------------------------------------------------------
// Clusters
// ---------------------------------------------------------------------------------------------

/// Replicas that pull from each other through [`Link`]s, each keeping its data on disk.
struct Cluster {
    names: Vec<&'static str>,
    stores: Vec<Option<Store>>,
    /// `links[i][j]`: replica `i` pulls from replica `j` through it (`None` for `i == j`).
    links: Vec<Vec<Option<Link>>>,
    dir: tempfile::TempDir,
}

impl Cluster {
    async fn start(names: &[&'static str]) -> Cluster {
        let mut links = Vec::new();
        for i in 0..names.len() {
            let mut row = Vec::new();
            for j in 0..names.len() {
                row.push(if i == j {
                    None
                } else {
                    Some(Link::new().await)
                });
            }
            links.push(row);
        }
        let mut cluster = Cluster {
            names: names.to_vec(),
            stores: names.iter().map(|_| None).collect(),
            links,
            dir: tempfile::tempdir().unwrap(),
        };
        for i in 0..names.len() {
            cluster.start_replica(i).await;
        }
        cluster
    }

    fn data(&self, i: usize) -> PathBuf {
        self.dir.path().join(self.names[i])
    }

    /// Starts replica `i` (again) on its data directory and points the others' links at it.
    async fn start_replica(&mut self, i: usize) {
        let peers: Vec<String> = (0..self.names.len())
            .filter(|&j| j != i)
            .map(|j| format!("{}=http://{}", self.names[j], self.link(i, j).addr))
            .collect();
        let store = Store::start(self.names[i], &self.data(i), &peers).await;
        for j in (0..self.names.len()).filter(|&j| j != i) {
            self.link(j, i).point_to(store.peer);
        }
        self.stores[i] = Some(store);
    }

    fn link(&self, from: usize, to: usize) -> &Link {
        self.links[from][to].as_ref().unwrap()
    }

    fn store(&self, i: usize) -> &Store {
        self.stores[i].as_ref().expect("the replica is running")
    }

    async fn client(&self, i: usize) -> Client {
        client(&self.store(i).url).await
    }

    async fn clients(&self) -> Vec<Client> {
        let mut clients = Vec::new();
        for i in 0..self.names.len() {
            clients.push(self.client(i).await);
        }
        clients
    }

    fn kill(&mut self, i: usize) {
        self.stores[i]
            .take()
            .expect("the replica is running")
            .kill();
    }

    /// Cuts every link to and from replica `i`.
    async fn partition(&self, i: usize) {
        for j in (0..self.names.len()).filter(|&j| j != i) {
            self.link(i, j).cut().await;
            self.link(j, i).cut().await;
        }
    }

    fn heal(&self, i: usize) {
        for j in (0..self.names.len()).filter(|&j| j != i) {
            self.link(i, j).heal();
            self.link(j, i).heal();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Reading and waiting
// ---------------------------------------------------------------------------------------------

/// Polls `done` until it holds; fails the test after [`DEADLINE`].
async fn poll_until<F, Fut>(what: &str, mut done: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if done().await {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < DEADLINE,
            "waited {DEADLINE:?} for {what} in vain"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Every live key and value on the replica `c` talks to.
async fn full_state(c: &mut Client) -> Result<State, etcd_client::Error> {
    let resp = c.get("", Some(GetOptions::new().with_all_keys())).await?;
    Ok(resp
        .kvs()
        .iter()
        .map(|kv| (kv.key().to_vec(), kv.value().to_vec()))
        .collect())
}

/// The value of `key` on the replica `c` talks to, if it exists.
async fn value(c: &mut Client, key: &str) -> Option<Vec<u8>> {
    let resp = c.get(key, None).await.expect("get");
    resp.kvs().first().map(|kv| kv.value().to_vec())
}

fn show(key: &[u8]) -> String {
    String::from_utf8_lossy(key).into_owned()
}

/// How `other` differs from `first`, briefly.
fn difference(first: &State, other: &State) -> String {
    let mut out = Vec::new();
    for (k, v) in first {
        match other.get(k) {
            None => out.push(format!("lacks {}", show(k))),
            Some(w) if w != v => out.push(format!("{}={} (not {})", show(k), show(w), show(v))),
            _ => {}
        }
    }
    for k in other.keys().filter(|k| !first.contains_key(*k)) {
        out.push(format!("has extra {}", show(k)));
    }
    let n = out.len();
    out.truncate(5);
    format!("{n} differences: {}", out.join(", "))
}

/// Waits until every replica holds the same keys and values; returns that state and how long
/// it took.
async fn converge(clients: &mut [Client], names: &[&str]) -> (State, Duration) {
    let start = Instant::now();
    loop {
        let mut states = Vec::new();
        for c in clients.iter_mut() {
            states.push(full_state(c).await.map_err(|e| e.to_string()));
        }
        if let Ok(states) = states.iter().cloned().collect::<Result<Vec<_>, _>>()
            && states.iter().all(|s| *s == states[0])
        {
            return (states.into_iter().next().unwrap(), start.elapsed());
        }
        if start.elapsed() > DEADLINE {
            let report: Vec<String> = states
                .iter()
                .zip(names)
                .map(|(s, name)| match (s, &states[0]) {
                    (Ok(s), Ok(first)) => {
                        format!("{name}: {} keys, {}", s.len(), difference(first, s))
                    }
                    (Err(e), _) => format!("{name}: {e}"),
                    (Ok(s), Err(_)) => format!("{name}: {} keys", s.len()),
                })
                .collect();
            panic!(
                "the replicas did not converge within {DEADLINE:?}:\n{}",
                report.join("\n")
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// A request the replica refused: its gRPC code, by name, and message.
#[derive(Debug)]
struct Refusal {
    code: String,
    message: String,
}

/// How the replica refused a request.
fn refusal(e: etcd_client::Error) -> Refusal {
    match e {
        etcd_client::Error::GRpcStatus(s) => Refusal {
            code: format!("{:?}", s.code()),
            message: s.message().to_owned(),
        },
        other => panic!("expected a gRPC status, got {other}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Writers
// ---------------------------------------------------------------------------------------------

/// One acknowledged put, as its answer described it.
#[derive(Clone, Debug)]
struct Acked {
    value: String,
    revision: i64,
}

/// What a writer that ran until its replica died knows: the puts acknowledged, in order, and
/// the one it was waiting on when the replica went away, which may or may not have happened.
#[derive(Debug, Default)]
struct Written {
    acked: Vec<(String, Acked)>,
    in_flight: Option<(String, String)>,
}

/// Puts `key(i)` = `value(i)` for i = 0, 1, … until a put fails or `stop` is set, counting
/// acknowledged puts in `count`.
async fn write_until_failure(
    mut c: Client,
    key: impl Fn(usize) -> String,
    value: impl Fn(usize) -> String,
    count: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
) -> Written {
    let mut written = Written::default();
    for i in 0.. {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let (key, value) = (key(i), value(i));
        match c.put(key.clone(), value.clone(), None).await {
            Ok(resp) => {
                let revision = resp.header().unwrap().revision();
                written.acked.push((key, Acked { value, revision }));
                count.fetch_add(1, Ordering::SeqCst);
            }
            Err(_) => {
                written.in_flight = Some((key, value));
                break;
            }
        }
    }
    written
}

/// The one key a get found, which was acknowledged as written.
fn lost_unless<'a>(resp: &'a GetResponse, key: &str) -> &'a KeyValue {
    resp.kvs()
        .first()
        .unwrap_or_else(|| panic!("{key}: an acknowledged write is lost"))
}

/// Waits until `count` reaches `target`.
async fn wait_for_count(what: &str, count: &AtomicUsize, target: usize) {
    poll_until(what, || async { count.load(Ordering::SeqCst) >= target }).await;
}

// ---------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------

/// A replica killed with SIGKILL in the middle of a stream of concurrent puts restarts with
/// every acknowledged write at the revision it was acknowledged at, its delete, its lease with
/// the lease's key, and its compaction point.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_mid_stream_keeps_every_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("a");
    let store = Store::start("a", &data, &[]).await;
    let mut c = client(&store.url).await;

    c.put("gone", "soon", None).await.unwrap();
    let kept_created = c.put("kept", "v1", None).await.unwrap();
    let kept_created = kept_created.header().unwrap().revision();
    let kept = c.put("kept", "v2", None).await.unwrap();
    let kept_rev = kept.header().unwrap().revision();

    // Eight writers, each cycling through 25 keys of its own, so the last acknowledged put of
    // every key is known.
    const WRITERS: usize = 8;
    let count = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            tokio::spawn(write_until_failure(
                c.clone(),
                move |i| format!("w/{w}/{:02}", i % 25),
                move |i| format!("{w}-{i}"),
                count.clone(),
                stop.clone(),
            ))
        })
        .collect();
    // While they write: a lease with a key attached, a delete, a compaction, each committed
    // together with the writers' puts.
    wait_for_count("100 acknowledged puts", &count, 100).await;
    let lease = c.lease_grant(600, None).await.unwrap().id();
    let leased = c
        .put("leased", "held", Some(PutOptions::new().with_lease(lease)))
        .await
        .unwrap();
    let leased_rev = leased.header().unwrap().revision();
    let deleted = c.delete("gone", None).await.unwrap();
    assert_eq!(deleted.deleted(), 1);
    let compacted = deleted.header().unwrap().revision();
    c.compact(compacted, None).await.unwrap();
    let mut max_acked = compacted;
    let now = count.load(Ordering::SeqCst);
    wait_for_count("300 more acknowledged puts", &count, now + 300).await;
    store.kill();
    let mut written = Vec::new();
    for writer in writers {
        written.push(writer.await.unwrap());
    }
    let total: usize = written.iter().map(|w| w.acked.len()).sum();
    let cut_short = written.iter().filter(|w| w.in_flight.is_some()).count();
    eprintln!("store: killed with {total} puts acknowledged, {cut_short} writers mid-put");

    let store = Store::start("a", &data, &[]).await;
    let mut c = client(&store.url).await;

    // Every writer's keys: the last acknowledged put, or the put that was in flight.
    let mut expected_keys = BTreeSet::from(["kept".to_owned(), "leased".to_owned()]);
    for w in &written {
        let mut last: BTreeMap<&str, (&Acked, i64, i64)> = BTreeMap::new();
        for (key, acked) in &w.acked {
            max_acked = max_acked.max(acked.revision);
            let entry = last.entry(key).or_insert((acked, acked.revision, 0));
            entry.0 = acked;
            entry.2 += 1;
        }
        for (key, (acked, created, version)) in last {
            expected_keys.insert(key.to_owned());
            let resp = c.get(key, None).await.unwrap();
            let kv = lost_unless(&resp, key);
            if let Some((k, v)) = &w.in_flight
                && k == key
                && kv.value() == v.as_bytes()
            {
                // The put in flight made it to disk: it follows the last acknowledged one.
                assert!(kv.mod_revision() > acked.revision, "{key}");
                assert_eq!(kv.version(), version + 1, "{key}");
                continue;
            }
            assert_eq!(kv.value_str().unwrap(), acked.value, "{key}");
            assert_eq!(kv.mod_revision(), acked.revision, "{key}: mod_revision");
            assert_eq!(kv.create_revision(), created, "{key}: create_revision");
            assert_eq!(kv.version(), version, "{key}: version");
        }
        if let Some((key, _)) = &w.in_flight {
            expected_keys.insert(key.clone());
        }
    }
    let state = full_state(&mut c).await.unwrap();
    let unexpected: Vec<String> = state
        .keys()
        .map(|k| show(k))
        .filter(|k| !expected_keys.contains(k))
        .collect();
    assert!(unexpected.is_empty(), "keys nobody wrote: {unexpected:?}");

    let resp = c.get("kept", None).await.unwrap();
    let kv = lost_unless(&resp, "kept");
    assert_eq!(
        (
            kv.value_str().unwrap(),
            kv.mod_revision(),
            kv.create_revision(),
            kv.version()
        ),
        ("v2", kept_rev, kept_created, 2)
    );
    assert_eq!(value(&mut c, "gone").await, None, "a deleted key came back");

    // The revision did not go backwards, and is not reissued.
    let revision = c
        .get("kept", None)
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision();
    assert!(
        revision >= max_acked,
        "revision {revision} after the restart, {max_acked} acknowledged before"
    );
    let next = c.put("after", "restart", None).await.unwrap();
    assert!(next.header().unwrap().revision() > max_acked);

    // The lease survived with its key attached.
    let ttl = c
        .lease_time_to_live(lease, Some(LeaseTimeToLiveOptions::new().with_keys()))
        .await
        .unwrap();
    assert!(ttl.ttl() > 0, "lease {lease} is gone: TTL {}", ttl.ttl());
    assert_eq!(ttl.granted_ttl(), 600);
    assert_eq!(ttl.keys(), [b"leased".to_vec()]);
    let resp = c.get("leased", None).await.unwrap();
    let kv = lost_unless(&resp, "leased");
    assert_eq!(
        (kv.value(), kv.lease(), kv.mod_revision()),
        (&b"held"[..], lease, leased_rev)
    );

    // The compaction point survived: below it history is gone, at it reads still work.
    let e = c
        .get("kept", Some(GetOptions::new().with_revision(compacted - 1)))
        .await
        .expect_err("a read below the compaction point succeeded after the restart");
    let e = refusal(e);
    assert!(
        e.message
            .contains("etcdserver: mvcc: required revision has been compacted"),
        "{e:?}"
    );
    assert_eq!(e.code, "OutOfRange");
    let at = c
        .get("kept", Some(GetOptions::new().with_revision(compacted)))
        .await
        .unwrap();
    assert_eq!(at.kvs()[0].value(), b"v2");
    assert_eq!(
        c.get("gone", Some(GetOptions::new().with_revision(compacted)))
            .await
            .unwrap()
            .kvs()
            .len(),
        0
    );
}

/// Three replicas written to at once, on the same keys and on their own, with deletes: once
/// the writes stop, all three hold the same keys and values, and deleted keys stay deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_on_three_replicas_converge() {
    let cluster = Cluster::start(&["a", "b", "c"]).await;
    const WRITERS_PER_REPLICA: usize = 2;
    const ROUNDS: usize = 60;
    const SHARED: usize = 8;

    let mut tasks = Vec::new();
    for (r, name) in cluster.names.iter().copied().enumerate() {
        for w in 0..WRITERS_PER_REPLICA {
            let mut c = cluster.client(r).await;
            tasks.push(tokio::spawn(async move {
                let me = format!("{name}{w}");
                // Own keys: the value each should end with (None: deleted).
                let mut own: BTreeMap<String, Option<String>> = BTreeMap::new();
                // Every value written to each shared key.
                let mut shared: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
                let mut writes = 0;
                for i in 0..ROUNDS {
                    writes += 2 + usize::from(i % 5 == 4) + usize::from(i % 10 == 9);
                    let key = format!("own/{me}/{i:03}");
                    let v = format!("{me}-{i}");
                    c.put(key.clone(), v.clone(), None).await.unwrap();
                    own.insert(key, Some(v.clone()));
                    if i % 5 == 4 {
                        let doomed = format!("own/{me}/{:03}", i - 2);
                        let resp = c.delete(doomed.clone(), None).await.unwrap();
                        assert_eq!(resp.deleted(), 1, "{doomed}");
                        own.insert(doomed, None);
                    }
                    let key = format!("shared/{}", i % SHARED);
                    c.put(key.clone(), v.clone(), None).await.unwrap();
                    shared.entry(key).or_default().insert(v);
                    if i % 10 == 9 {
                        c.delete(format!("shared/{}", (i / 10) % SHARED), None)
                            .await
                            .unwrap();
                    }
                }
                (own, shared, writes)
            }));
        }
    }
    let mut own = BTreeMap::new();
    let mut shared: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut writes = 0;
    for task in tasks {
        let (o, s, n) = task.await.unwrap();
        own.extend(o);
        writes += n;
        for (k, v) in s {
            shared.entry(k).or_default().extend(v);
        }
    }

    let mut clients = cluster.clients().await;
    let (state, took) = converge(&mut clients, &cluster.names).await;
    eprintln!(
        "store: 3 replicas, {} writers, {writes} writes: converged {took:?} after the last \
         write was acknowledged",
        3 * WRITERS_PER_REPLICA
    );

    for (key, expected) in &own {
        let actual = state.get(key.as_bytes()).map(|v| show(v));
        assert_eq!(&actual, expected, "{key}");
    }
    for (key, v) in &state {
        let key = show(key);
        if key.starts_with("own/") {
            continue;
        }
        let written = shared
            .get(&key)
            .unwrap_or_else(|| panic!("{key}: nobody wrote it"));
        assert!(
            written.contains(&show(v)),
            "{key}={}: never written",
            show(v)
        );
    }

    // Deleted keys stay deleted: some more pull rounds change nothing anywhere.
    tokio::time::sleep(Duration::from_millis(10 * PULL_INTERVAL_MS)).await;
    for (c, name) in clients.iter_mut().zip(&cluster.names) {
        let again = full_state(c).await.unwrap();
        assert!(
            again == state,
            "{name} changed: {}",
            difference(&state, &again)
        );
    }
}

/// A replica cut off from the others keeps serving reads and writes on its side, as the others
/// do on theirs; once healed, all three converge, each conflicting key to its later write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_replica_serves_both_sides_and_converges_once_healed() {
    let cluster = Cluster::start(&["a", "b", "c"]).await;
    let mut clients = cluster.clients().await.into_iter();
    let mut a = clients.next().unwrap();
    let mut b = clients.next().unwrap();
    let mut c = clients.next().unwrap();
    const C: usize = 2;

    a.put("before", "partition", None).await.unwrap();
    a.put("put-vs-delete", "old", None).await.unwrap();
    a.put("delete-vs-put", "old", None).await.unwrap();
    let mut clients = [a.clone(), b.clone(), c.clone()];
    converge(&mut clients, &cluster.names).await;

    cluster.partition(C).await;
    // Conflicting writes to the same keys, each pair in a known order. The pause between the
    // two lets the wall clock move on, so the later write has the later stamp.
    let later = || tokio::time::sleep(Duration::from_millis(20));
    c.put("lww/1", "c-early", None).await.unwrap();
    later().await;
    a.put("lww/1", "a-late", None).await.unwrap();
    b.put("lww/2", "b-early", None).await.unwrap();
    later().await;
    c.put("lww/2", "c-late", None).await.unwrap();
    a.delete("put-vs-delete", None).await.unwrap();
    later().await;
    c.put("put-vs-delete", "c-late", None).await.unwrap();
    c.put("delete-vs-put", "c-early", None).await.unwrap();
    later().await;
    b.delete("delete-vs-put", None).await.unwrap();
    // Writes on both sides.
    for i in 0..20 {
        a.put(format!("side/ab/{i:02}"), format!("{i}"), None)
            .await
            .unwrap();
        c.put(format!("side/c/{i:02}"), format!("{i}"), None)
            .await
            .unwrap();
    }
    b.delete("before", None).await.unwrap();

    // The majority side replicates among itself; the cut-off replica serves its own writes.
    poll_until("b to see a's writes during the partition", || {
        let mut b = b.clone();
        async move { value(&mut b, "side/ab/19").await.is_some() }
    })
    .await;
    assert_eq!(
        value(&mut c, "side/c/19").await.as_deref(),
        Some(&b"19"[..])
    );
    assert_eq!(
        value(&mut c, "lww/2").await.as_deref(),
        Some(&b"c-late"[..])
    );
    // And nothing crossed the partition.
    let on_c = full_state(&mut c).await.unwrap();
    assert!(
        !on_c.keys().any(|k| k.starts_with(b"side/ab/")),
        "a's writes reached c"
    );
    assert!(on_c.contains_key(&b"before"[..]), "b's delete reached c");
    for mut side in [a.clone(), b.clone()] {
        let state = full_state(&mut side).await.unwrap();
        assert!(
            !state.keys().any(|k| k.starts_with(b"side/c/")),
            "c's writes crossed"
        );
    }

    // The majority side compacts its history: the deletes c has not seen live on only as
    // tombstones, and must still reach it.
    for mut side in [a.clone(), b.clone()] {
        let resp = side.get("side/ab/19", None).await.unwrap();
        side.compact(resp.header().unwrap().revision(), None)
            .await
            .unwrap();
    }

    cluster.heal(C);
    let (state, took) = converge(&mut clients, &cluster.names).await;
    eprintln!("store: a partitioned replica converged {took:?} after the partition healed");

    let get = |k: &str| state.get(k.as_bytes()).map(|v| show(v));
    assert_eq!(get("lww/1").as_deref(), Some("a-late"));
    assert_eq!(get("lww/2").as_deref(), Some("c-late"));
    assert_eq!(get("put-vs-delete").as_deref(), Some("c-late"));
    assert_eq!(get("delete-vs-put"), None);
    assert_eq!(get("before"), None);
    for i in 0..20 {
        assert_eq!(get(&format!("side/ab/{i:02}")), Some(i.to_string()));
        assert_eq!(get(&format!("side/c/{i:02}")), Some(i.to_string()));
    }
    let keys: Vec<String> = state.keys().map(|k| show(k)).collect();
    assert_eq!(keys.len(), 3 + 40, "{keys:?}");
}

/// A replica killed while all three take writes, and restarted while the others still do:
/// it catches up with what it missed, and what it acknowledged before dying reaches the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_restarted_while_the_others_write_catches_up() {
    let mut cluster = Cluster::start(&["a", "b", "c"]).await;
    const C: usize = 2;
    let stop = Arc::new(AtomicBool::new(false));
    let mut counts = Vec::new();
    let mut writers = Vec::new();
    for (r, name) in cluster.names.iter().copied().enumerate() {
        let count = Arc::new(AtomicUsize::new(0));
        counts.push(count.clone());
        writers.push(tokio::spawn(write_until_failure(
            cluster.client(r).await,
            move |i| format!("{name}/{i:04}"),
            move |i| format!("{name}-{i}"),
            count,
            stop.clone(),
        )));
    }
    wait_for_count("c's first 100 puts", &counts[C], 100).await;
    cluster.kill(C);
    let c_written = writers.pop().unwrap().await.unwrap();
    assert!(!c_written.acked.is_empty());

    // The others go on without it.
    let before = [0, 1].map(|r| counts[r].load(Ordering::SeqCst));
    for r in [0, 1] {
        wait_for_count("writes while c is down", &counts[r], before[r] + 100).await;
    }
    let restarted = Instant::now();
    cluster.start_replica(C).await;
    let c = cluster.client(C).await;
    // It catches up with what it missed while down.
    let missed = [0, 1].map(|r| format!("{}/{:04}", cluster.names[r], before[r] + 99));
    let caught_up = poll_until("c to catch up with the writes it missed", || {
        let mut c = c.clone();
        let missed = missed.clone();
        async move {
            for key in &missed {
                if value(&mut c, key).await.is_none() {
                    return false;
                }
            }
            true
        }
    })
    .await;
    eprintln!(
        "store: a restarted replica had the writes it missed {caught_up:?} after it restarted \
         ({:?} after its restart began)",
        restarted.elapsed()
    );
    // The others keep writing a little longer, then stop.
    let now = [0, 1].map(|r| counts[r].load(Ordering::SeqCst));
    for r in [0, 1] {
        wait_for_count("writes after c restarted", &counts[r], now[r] + 50).await;
    }
    stop.store(true, Ordering::SeqCst);
    let mut written = vec![c_written];
    for writer in writers {
        let w = writer.await.unwrap();
        assert!(w.in_flight.is_none(), "a put failed on a live replica");
        written.push(w);
    }

    let mut clients = vec![cluster.client(0).await, cluster.client(1).await, c.clone()];
    let (state, took) = converge(&mut clients, &cluster.names).await;
    eprintln!("store: all three converged {took:?} after the writes stopped");
    let mut acked = BTreeSet::new();
    for w in &written {
        for (key, put) in &w.acked {
            assert_eq!(
                state.get(key.as_bytes()).map(|v| show(v)),
                Some(put.value.clone()),
                "{key}: an acknowledged write is lost"
            );
            acked.insert(key.clone());
        }
    }
    // c's put in flight at the kill may have made it or not; nothing else is there.
    let in_flight = written[0].in_flight.as_ref().map(|(key, _)| key.clone());
    let extra: Vec<String> = state
        .keys()
        .map(|k| show(k))
        .filter(|k| !acked.contains(k) && Some(k) != in_flight.as_ref())
        .collect();
    assert!(extra.is_empty(), "keys nobody wrote: {extra:?}");
}

/// How long a `mote store` given a bad command line may take to give up.
const EXIT_DEADLINE: Duration = Duration::from_secs(10);

/// Runs `mote store` once per case, all at once, each with `args` and expecting it to exit
/// nonzero with a message on stderr that mentions every one of `needles`. Fails listing every
/// case that did not.
fn refused(cases: &[(Vec<&str>, Vec<&str>)]) {
    let mut children: Vec<_> = cases
        .iter()
        .map(|(args, _)| {
            let child = Command::new(mote_bin())
                .args(["store", "--log", "warn"])
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("starting mote store");
            Reaper(Some(child))
        })
        .collect();
    let start = Instant::now();
    let mut problems = Vec::new();
    for ((args, needles), child) in cases.iter().zip(&mut children) {
        let child = child.0.as_mut().unwrap();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if start.elapsed() > EXIT_DEADLINE {
                break None;
            }
            std::thread::sleep(POLL);
        };
        let Some(status) = status else {
            problems.push(format!(
                "mote store {args:?} was still running after {EXIT_DEADLINE:?}"
            ));
            continue;
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        if status.success() {
            problems.push(format!("mote store {args:?} succeeded"));
        }
        for needle in needles {
            if !stderr.contains(needle) {
                problems.push(format!(
                    "mote store {args:?}: {:?} does not mention {needle:?}",
                    stderr.trim()
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The arguments that keep a replica off fixed ports, then `more`.
fn local<'a>(more: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["--listen", "127.0.0.1:0", "--peer-listen", "127.0.0.1:0"];
    args.extend(more);
    args
}

/// Bad command lines make `mote store` exit at once, nonzero, naming the problem.
#[test]
fn bad_command_lines_exit_nonzero_naming_the_problem() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = taken.local_addr().unwrap().to_string();
    // A directory that cannot be created, even by root: its parent is a file.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "not a directory").unwrap();
    let data = file.join("data");
    let data = data.to_str().unwrap();
    refused(&[
        (
            local(&["--peers", "b"]),
            vec!["--peers entry `b`", "NAME=URL"],
        ),
        (
            local(&["--peers", "b=127.0.0.1:2480"]),
            vec!["b=127.0.0.1:2480", "http://"],
        ),
        (
            vec!["--listen", &taken, "--peer-listen", "127.0.0.1:0"],
            vec![&taken, "--listen"],
        ),
        (
            vec!["--listen", "127.0.0.1:0", "--peer-listen", &taken],
            vec![&taken, "--peer-listen"],
        ),
        (local(&["--data", data]), vec![data]),
    ]);
}

/// A peer URL that is no URL is refused at start. Accepted, it would leave the replica up and
/// saying so, yet never pulling from that peer, without a word in its log.
#[test]
fn malformed_peer_urls_are_refused_at_start() {
    refused(&[
        (
            local(&["--peers", "b=http://127.0.0.1:99999"]),
            vec!["b=http://127.0.0.1:99999"],
        ),
        (local(&["--peers", "b=http://"]), vec!["b=http://"]),
        (
            local(&["--peers", "b=http://no such host:2480"]),
            vec!["b=http://no such host:2480"],
        ),
    ]);
}

/// Whatever a replica accepts reaches its peers, however much one pull has to carry: here a
/// thousand values of 6 KiB, and two of 3 MiB (each well within the 4 MiB a request may be),
/// written while the peer was cut off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_of_large_values_replicates() {
    const MANY: usize = 1000;
    const BIG: usize = 2;
    let cluster = Cluster::start(&["a", "b"]).await;
    let mut a = cluster.client(0).await;
    let mut b = cluster.client(1).await;
    cluster.partition(1).await;
    for batch in 0..MANY / 100 {
        let puts: Vec<TxnOp> = (0..100)
            .map(|i| TxnOp::put(format!("many/{batch}/{i:02}"), vec![b'm'; 6 << 10], None))
            .collect();
        a.txn(Txn::new().and_then(puts)).await.unwrap();
    }
    for i in 0..BIG {
        a.put(format!("big/{i}"), vec![b'x'; 3 << 20], None)
            .await
            .unwrap();
    }
    a.put("small", "written last", None).await.unwrap();
    cluster.heal(1);
    let took = poll_until("b to have a's writes", || {
        let mut b = b.clone();
        async move { value(&mut b, "small").await.is_some() }
    })
    .await;
    eprintln!("store: a backlog of about 12 MiB replicated {took:?} after the partition healed");
    let many = b
        .get(
            "many/",
            Some(GetOptions::new().with_prefix().with_count_only()),
        )
        .await
        .unwrap();
    assert_eq!(many.count(), MANY as i64);
    for i in 0..BIG {
        let key = format!("big/{i}");
        assert_eq!(
            value(&mut b, &key).await.map(|v| v.len()),
            Some(3 << 20),
            "{key}"
        );
    }
}

/// A put without a key or with a value past the gRPC message limit is refused with a clear
/// error, and the replica keeps serving with everything it had.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_refused_and_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::start("a", &dir.path().join("a"), &[]).await;
    let mut c = client(&store.url).await;
    c.put("k", "v", None).await.unwrap();

    let e = refusal(c.put("", "no key", None).await.expect_err("empty key"));
    assert_eq!(e.code, "InvalidArgument", "{e:?}");
    assert_eq!(e.message, "etcdserver: key is not provided");

    let big = vec![b'x'; 5 << 20];
    let e = refusal(c.put("big", big, None).await.expect_err("a 5 MiB value"));
    assert!(e.message.contains("too large"), "{e:?}");

    // Still serving, nothing lost, nothing half-written.
    assert_eq!(value(&mut c, "k").await.as_deref(), Some(&b"v"[..]));
    assert_eq!(value(&mut c, "big").await, None);
    c.put("after", "ok", None).await.unwrap();
    let state = full_state(&mut c).await.unwrap();
    assert_eq!(
        state.keys().map(|k| show(k)).collect::<Vec<_>>(),
        ["after", "k"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn automatic_compaction_keeps_the_last_revisions_only() {
    let dir = tempfile::tempdir().unwrap();
    let options = ["--auto-compact-keep", "5", "--auto-compact-interval-s", "1"];
    let store = Store::start_with("a", dir.path(), &[], &options).await;
    let mut c = client(&store.url).await;
    for i in 0..20 {
        c.put("k", format!("v{i}"), None).await.unwrap();
    }
    let latest = c.get("k", None).await.unwrap().header().unwrap().revision();
    let deadline = Instant::now() + DEADLINE;
    loop {
        match c.get("k", Some(GetOptions::new().with_revision(2))).await {
            Err(e)
                if e.to_string()
                    .contains("required revision has been compacted") =>
            {
                break;
            }
            Err(e) => panic!("unexpected error reading revision 2: {e}"),
            Ok(_) => {
                assert!(Instant::now() < deadline, "revision 2 was never compacted");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    // The last revisions stay readable.
    let kept = c
        .get("k", Some(GetOptions::new().with_revision(latest - 4)))
        .await
        .expect("a kept revision reads");
    assert_eq!(kept.kvs()[0].value_str().unwrap(), "v15");
}
