//! A running replica: the engine behind a lock, the disk that makes its changes durable, the
//! feed of its writes for watchers, the lease timer, and the loop that pulls changes from each
//! peer, with how far behind that peer it is ([`PullStatus`]).

use crate::disk::{self, Disk};
use crate::engine::{Applied, Engine, PullCursor};
use crate::error::StoreError;
use crate::pb;
use etcd_client::proto::PbEvent;
use mote_types::{CLUSTER_SECRET_HEADER, ClusterSecret};
use parking_lot::{Mutex, MutexGuard};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{broadcast, oneshot};

/// Write batches kept for watchers that fall behind before they must catch up from history.
const FEED_CAPACITY: usize = 4096;
/// Changes a replica sends a peer in one pull.
pub const PULL_LIMIT: u32 = 1024;
/// Bytes of keys and values a replica sends a peer in one pull, give or take one revision.
pub const PULL_MAX_BYTES: u32 = 1 << 20;
/// The largest pull answer a replica accepts. An answer holds whole revisions, and one
/// revision (a transaction, or a batch merged from another peer) can be several MiB.
const PULL_MAX_MESSAGE: usize = 256 << 20;

/// A peer URL that cannot be dialled.
#[derive(Debug, thiserror::Error)]
#[error(
    "peer URL `{url}` {reason}; write it as http://HOST:PORT, or https://HOST:PORT for a replica serving TLS"
)]
pub struct PeerUrlError {
    url: String,
    reason: &'static str,
}

/// Checks that `url` names a peer this replica can dial: `http://HOST:PORT` or
/// `https://HOST:PORT`.
pub fn check_peer_url(url: &str) -> Result<(), PeerUrlError> {
    let fail = |reason| PeerUrlError {
        url: url.to_owned(),
        reason,
    };
    let uri: tonic::transport::Uri = url.parse().map_err(|_| fail("is not a URL"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err(fail("does not start with http:// or https://"));
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(fail("names no host"));
    }
    if uri.port_u16().is_none() {
        return Err(fail("names no port (or one past 65535)"));
    }
    Ok(())
}

/// How a replica deals with its peers: the cluster secret it requires of those that pull from
/// it and shows those it pulls from, and the TLS it dials `https://` peers with.
#[derive(Clone, Default)]
pub struct PeerAccess {
    /// The cluster's secret; without it, any replica may pull.
    pub secret: Option<ClusterSecret>,
    /// Whom it trusts when it dials an `https://` peer.
    pub tls: Option<tonic::transport::ClientTlsConfig>,
    /// Whether this process serves TLS: then it pulls, showing its secret, from `https://` peers
    /// only.
    pub serves_tls: bool,
}

/// Who a replica is, for `MemberList` and `Status`.
#[derive(Clone, Debug)]
pub struct Member {
    /// Its name (`--name`).
    pub name: String,
    /// Its id, derived from the name.
    pub id: u64,
    /// Where clients reach it.
    pub client_urls: Vec<String>,
    /// Where peers reach it.
    pub peer_urls: Vec<String>,
}

impl Member {
    /// A member called `name`; its id is a hash of the name, so it is the same on every start
    /// and every replica agrees on it.
    pub fn new(name: &str, client_urls: Vec<String>, peer_urls: Vec<String>) -> Self {
        Self {
            name: name.to_owned(),
            id: member_id(name),
            client_urls,
            peer_urls,
        }
    }
}

/// FNV-1a of the name, never zero (etcd treats member id 0 as none).
pub fn member_id(name: &str) -> u64 {
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    hash.max(1)
}

/// The write feed watchers read, and how far it has got.
struct Feed {
    sender: broadcast::Sender<Arc<Vec<PbEvent>>>,
    /// The revision of the last events sent: a watcher that has drained the feed has seen
    /// everything up to it.
    published: AtomicI64,
}

impl Feed {
    fn publish(&self, revision: i64, events: Option<Arc<Vec<PbEvent>>>) {
        if let Some(events) = events {
            // No receivers is fine: nobody is watching.
            let _ = self.sender.send(events);
        }
        // Stored after the send: whoever reads it finds those events in the feed already.
        self.published.fetch_max(revision, Ordering::Release);
    }
}

/// The state one replica's services share.
pub struct Replica {
    engine: Mutex<Engine>,
    feed: Arc<Feed>,
    /// Where changes are made durable before they are acknowledged; `None` keeps the replica
    /// in memory only.
    disk: Option<Disk>,
    /// This replica first, then its peers.
    members: Vec<Member>,
    /// Tells this run of the replica from earlier ones, so peers' pull positions from before a
    /// restart are not trusted.
    incarnation: u64,
    /// Each pull loop's progress, by the peer URL it pulls from.
    pulls: Mutex<BTreeMap<String, Pulled>>,
    access: PeerAccess,
}

/// How one pull loop is doing.
#[derive(Clone, Debug, Default)]
struct Pulled {
    /// The peer's revision up to which this replica has merged everything.
    merged: i64,
    /// When a pull last returned everything the peer had.
    caught_up: Option<Instant>,
    /// Why the last pull failed, and since when pulls fail.
    failing: Option<(Instant, String)>,
}

/// How far behind one peer a replica is, as [`Replica::pulls`] shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullStatus {
    /// The peer's peer-API URL.
    pub url: String,
    /// The peer's revision up to which this replica has merged everything.
    pub merged_revision: i64,
    /// How long ago this replica last had every change the peer had: its lag behind the peer,
    /// give or take one pull interval. `None` until the first complete pull.
    pub caught_up_ago: Option<Duration>,
    /// Why pulls from the peer fail, and for how long they have, while they do.
    pub failing: Option<(Duration, String)>,
}

/// A change applied to the engine, on its way to disk.
type Pending = Option<oneshot::Receiver<Result<(), StoreError>>>;

/// A number that differs between starts: the clock in nanoseconds mixed with the process id,
/// never zero (zero is what a puller sends before it knows).
fn incarnation() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    (nanos ^ u64::from(std::process::id()).rotate_left(48)).max(1)
}

/// Milliseconds since the Unix epoch, the engine's wall time.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Replica {
    /// A replica described by `members[0]`, with `members[1..]` as its peers. With `data` it
    /// restores the state kept there and makes every change durable before acknowledging it;
    /// without, it starts empty and keeps everything in memory. Any replica may pull from it.
    pub fn open(members: Vec<Member>, data: Option<&Path>) -> Result<Arc<Self>, StoreError> {
        Self::open_with(members, data, PeerAccess::default())
    }

    /// [`Replica::open`], dealing with its peers by `access`.
    pub fn open_with(
        members: Vec<Member>,
        data: Option<&Path>,
        access: PeerAccess,
    ) -> Result<Arc<Self>, StoreError> {
        let (sender, _) = broadcast::channel(FEED_CAPACITY);
        let id = members[0].id;
        let (engine, db) = match data {
            None => (Engine::new(id), None),
            Some(dir) => {
                let (db, restored) = disk::open(dir)?;
                (Engine::restore(id, restored, now_ms()), Some((db, dir)))
            }
        };
        let feed = Arc::new(Feed {
            sender,
            published: AtomicI64::new(engine.revision()),
        });
        let disk = db
            .map(|(db, dir)| {
                let feed = feed.clone();
                let publish = Box::new(move |revision, events| feed.publish(revision, events));
                Disk::start(db, dir.to_path_buf(), publish)
            })
            .transpose()?;
        Ok(Arc::new(Self {
            engine: Mutex::new(engine),
            feed,
            disk,
            members,
            incarnation: incarnation(),
            pulls: Mutex::new(BTreeMap::new()),
            access,
        }))
    }

    /// How it deals with its peers.
    pub fn access(&self) -> &PeerAccess {
        &self.access
    }

    /// This replica.
    pub fn me(&self) -> &Member {
        &self.members[0]
    }

    /// This run of the replica: a different number each start.
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// This replica and its peers.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// The engine, locked. A panic while it was held cannot leave it half-written in a way a
    /// reader could see: every engine method either finishes its change or returns an error
    /// before making one.
    pub fn engine(&self) -> MutexGuard<'_, Engine> {
        self.engine.lock()
    }

    /// Runs a write on the engine and returns its answer once the change is durable (at once
    /// in memory); watchers get its events then too, in revision order.
    pub async fn write<T>(
        &self,
        f: impl FnOnce(&mut Engine, u64) -> Result<(T, Applied), StoreError>,
    ) -> Result<T, StoreError> {
        let (value, pending) = {
            let mut engine = self.engine();
            let (value, applied) = f(&mut engine, now_ms())?;
            (value, self.record(&engine, applied, true)?)
        };
        if let Some(pending) = pending {
            pending.await.map_err(|_| {
                StoreError::Disk("the disk thread stopped before committing".into())
            })??;
        }
        Ok(value)
    }

    /// Hands a change the engine just applied to the disk, or straight to watchers when in
    /// memory. Called with the engine's lock held, so changes leave in revision order.
    fn record(
        &self,
        engine: &Engine,
        mut applied: Applied,
        wait: bool,
    ) -> Result<Pending, StoreError> {
        let events =
            (!applied.events.is_empty()).then(|| Arc::new(std::mem::take(&mut applied.events)));
        let Some(disk) = &self.disk else {
            self.feed.publish(engine.revision(), events);
            return Ok(None);
        };
        if events.is_none() && applied.is_empty() {
            return Ok(None);
        }
        let (done, pending) = match wait {
            true => {
                let (done, pending) = oneshot::channel();
                (Some(done), Some(pending))
            }
            false => (None, None),
        };
        disk.submit(engine.revision(), applied, events, done)?;
        Ok(pending)
    }

    /// Records a change nobody waits on (a merge, an expiry); a disk failure is logged, and
    /// every later write reports it.
    fn record_in_background(&self, engine: &Engine, applied: Applied) {
        if let Err(e) = self.record(engine, applied, false) {
            tracing::error!(error = %e, "a change could not be queued for disk");
        }
    }

    /// The size of this replica's database in bytes: its file on disk, or an estimate of its
    /// history in memory.
    pub fn db_size(&self) -> u64 {
        match &self.disk {
            Some(disk) => disk.size(),
            None => self.engine().history_bytes(),
        }
    }

    /// The revision up to which every change has reached the feed: what a progress
    /// notification may promise.
    pub fn published(&self) -> i64 {
        self.feed.published.load(Ordering::Acquire)
    }

    /// A receiver of every write published after this moment, in revision order.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Vec<PbEvent>>> {
        self.feed.sender.subscribe()
    }

    /// Compacts history every `every`, keeping the last `keep` revisions (etcd's revision mode
    /// of auto-compaction), so a replica that no client compacts still keeps its disk bounded.
    pub async fn run_compactor(self: Arc<Self>, keep: i64, every: Duration) {
        let mut ticks = tokio::time::interval(every);
        ticks.tick().await;
        loop {
            ticks.tick().await;
            let compacted = self
                .write(|e, _| {
                    let target = e.revision() - keep;
                    if target <= e.compacted().max(0) {
                        return Ok((None, Applied::default()));
                    }
                    Ok((Some(target), e.compact(target)?))
                })
                .await;
            match compacted {
                Ok(Some(revision)) => tracing::debug!(revision, "compacted history"),
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "automatic compaction failed"),
            }
        }
    }

    /// Expires leases whose time ran out, now and whenever the next one is due.
    pub async fn run_lease_timer(self: Arc<Self>) {
        loop {
            let next = {
                let mut engine = self.engine();
                let applied = engine.expire_leases(now_ms());
                self.record_in_background(&engine, applied);
                engine.leases().next_expiry_ms()
            };
            let wait = next.map_or(Duration::from_millis(500), |at| {
                Duration::from_millis(at.saturating_sub(now_ms()).clamp(1, 500))
            });
            tokio::time::sleep(wait).await;
        }
    }

    /// Merges one peer's changes and publishes what they changed here.
    pub fn merge(&self, changes: Vec<pb::Change>) {
        let mut engine = self.engine();
        let applied = engine.merge(changes);
        self.record_in_background(&engine, applied);
    }

    /// How far behind each peer it pulls from this replica is, by URL.
    pub fn pulls(&self) -> Vec<PullStatus> {
        let pulls = self.pulls.lock();
        pulls
            .iter()
            .map(|(url, pulled)| PullStatus {
                url: url.clone(),
                merged_revision: pulled.merged,
                caught_up_ago: pulled.caught_up.map(|at| at.elapsed()),
                failing: pulled
                    .failing
                    .as_ref()
                    .map(|(since, error)| (since.elapsed(), error.clone())),
            })
            .collect()
    }

    /// Notes how the last pull from `url` went: `Ok(merged revision, whether it returned
    /// everything)` or why it failed.
    fn pulled(&self, url: &str, outcome: Result<(i64, bool), String>) {
        let mut pulls = self.pulls.lock();
        let pulled = pulls.entry(url.to_owned()).or_default();
        match outcome {
            Ok((merged, complete)) => {
                pulled.merged = merged;
                pulled.failing = None;
                if complete {
                    pulled.caught_up = Some(Instant::now());
                }
            }
            Err(error) => {
                let since = pulled
                    .failing
                    .take()
                    .map_or_else(Instant::now, |(at, _)| at);
                pulled.failing = Some((since, error));
            }
        }
    }

    /// Pulls changes from the peer at `url` forever, every `interval` when idle and at once
    /// while it has more. A peer that is down is retried at the same pace; its changes arrive
    /// when it is back.
    pub async fn run_pull_loop(self: Arc<Self>, url: String, interval: Duration) {
        let mut cursor = PullCursor::default();
        let mut client = None;
        // Failures are logged when they start and when they end, not on every retry.
        let mut failing = false;
        loop {
            let peer = match &mut client {
                Some(peer) => peer,
                None => match connect(&url, &self.access).await {
                    Ok(connected) => client.insert(connected),
                    Err(e) => {
                        if !failing {
                            tracing::warn!(peer = %url, error = %e, "cannot reach peer; retrying");
                            failing = true;
                        }
                        self.pulled(&url, Err(format!("cannot reach the peer: {e}")));
                        tokio::time::sleep(interval).await;
                        continue;
                    }
                },
            };
            let mut request =
                tonic::Request::new(cursor.request(self.me().id, PULL_LIMIT, PULL_MAX_BYTES));
            if let Some(secret) = &self.access.secret {
                if let Err(e) = ClusterSecret::may_travel_to(&url, self.access.serves_tls) {
                    if !failing {
                        tracing::warn!(peer = %url, error = %e, "not pulling from a peer");
                        failing = true;
                    }
                    self.pulled(&url, Err(e.to_string()));
                    tokio::time::sleep(interval).await;
                    continue;
                }
                let value = tonic::metadata::MetadataValue::try_from(secret.expose())
                    .expect("a cluster secret is printable ASCII");
                request.metadata_mut().insert(CLUSTER_SECRET_HEADER, value);
            }
            match peer.pull(request).await {
                Ok(resp) => {
                    if failing {
                        tracing::info!(peer = %url, "pulling from peer again");
                        failing = false;
                    }
                    let resp = resp.into_inner();
                    let more = resp.more;
                    self.merge(cursor.advance(resp));
                    self.pulled(&url, Ok((cursor.since(), !more)));
                    if more {
                        continue;
                    }
                }
                Err(status) => {
                    if !failing {
                        tracing::warn!(peer = %url, error = %status, "pull failed; retrying");
                        failing = true;
                    }
                    self.pulled(&url, Err(format!("pull failed: {}", status.message())));
                    client = None;
                }
            }
            tokio::time::sleep(interval).await;
        }
    }
}

async fn connect(
    url: &str,
    access: &PeerAccess,
) -> Result<pb::peer_client::PeerClient<tonic::transport::Channel>, tonic::transport::Error> {
    let mut endpoint = tonic::transport::Endpoint::from_shared(url.to_owned())?
        .connect_timeout(Duration::from_secs(2))
        .tcp_nodelay(true);
    if url.starts_with("https://") {
        endpoint = endpoint.tls_config(access.tls.clone().unwrap_or_default())?;
    }
    let channel = endpoint.connect().await?;
    Ok(pb::peer_client::PeerClient::new(channel).max_decoding_message_size(PULL_MAX_MESSAGE))
}
