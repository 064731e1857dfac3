//! The etcd v3 gRPC services (KV, Watch, Lease, Cluster, Maintenance) over a [`Replica`], the
//! peer service, and the server that hosts them.
//!
//! Stopping: the servers stop accepting connections and wait for every open request, but a
//! watch or a lease keep-alive never ends on its own. So when the server starts stopping, each
//! open stream ends at once with [`StoreError::Stopped`] (`Unavailable`, etcd's answer from a
//! stopping server, on which clients fail over to another endpoint), the tasks serving them
//! end, and the connections close. Unary requests in flight finish first, so every write
//! acknowledged is committed. A connection that cannot close (its client stopped reading) is
//! waited for [`STOP_GRACE`] at most.

use crate::error::StoreError;
use crate::pb;
use crate::replica::{Member, Replica, now_ms};
use crate::watch;
use etcd_client::proto::*;
use mote_types::CLUSTER_SECRET_HEADER;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::{mpsc, watch as signal};
use tokio_stream::Stream;
use tonic::transport::ServerTlsConfig;
use tonic::{Request, Response, Status, Streaming};

/// The etcd version mote store reports, the API level it serves.
pub const ETCD_VERSION: &str = "3.6.0";

/// How long a stopping server waits for its connections to close: for requests in flight to
/// finish and streams to send their end. A client that stopped reading can keep its
/// connection open forever (flow control leaves no room to send the stream's end), so past
/// this the server stops waiting for it. etcd waits its request timeout (7 s by default), then
/// cuts the connections still open.
pub const STOP_GRACE: Duration = Duration::from_secs(3);

type Answer<T> = Result<Response<T>, Status>;
type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// The etcd API and the peer API of one replica; cheap to clone.
#[derive(Clone)]
pub struct Services {
    replica: Arc<Replica>,
    /// Turns true when the server starts stopping.
    stopping: signal::Receiver<bool>,
    refusals: Arc<Refusals>,
}

impl Services {
    /// The services of `replica`; their streams end once `stopping` turns true (or its sender
    /// is gone).
    pub fn new(replica: Arc<Replica>, stopping: signal::Receiver<bool>) -> Self {
        Self {
            replica,
            stopping,
            refusals: Arc::new(Refusals::default()),
        }
    }

    /// Lets a peer's request through if the replica requires no cluster secret or the request
    /// carries it; otherwise refuses it (`Unauthenticated`, naming what is missing) and logs
    /// the refusal with the peer's address.
    fn admit<T>(&self, request: &Request<T>) -> Result<(), Status> {
        let Some(secret) = &self.replica.access().secret else {
            return Ok(());
        };
        let what = match request.metadata().get(CLUSTER_SECRET_HEADER) {
            Some(presented) if secret.matches(presented.as_bytes()) => return Ok(()),
            Some(_) => "carries a wrong cluster secret",
            None => "carries no cluster secret",
        };
        let peer = request
            .remote_addr()
            .map_or_else(|| "an unknown address".to_owned(), |a| a.to_string());
        self.refusals.log(&peer, what);
        Err(Status::unauthenticated(format!(
            "this store replica serves only the replicas of its cluster, and the request {what}: \
             start the pulling replica with the cluster's secret (--cluster-secret-file or \
             MOTE_CLUSTER_SECRET), sent as `{CLUSTER_SECRET_HEADER}` metadata"
        )))
    }

    fn header(&self) -> PbResponseHeader {
        self.replica.engine().header()
    }

    /// The response stream of a streaming call, fed by a task through `responses`. Every
    /// streaming call answers through this, so that none outlives the server: it ends with
    /// [`StoreError::Stopped`] once the server starts stopping, whatever the task is doing;
    /// the task then sees `responses` closed and ends too, releasing the client's request
    /// stream.
    fn stream<T: Send + 'static>(
        &self,
        responses: mpsc::Receiver<Result<T, Status>>,
    ) -> BoxStream<T> {
        let mut stopping = self.stopping.clone();
        Box::pin(UntilStopped {
            responses,
            stopping: Box::pin(async move {
                let _ = stopping.wait_for(|stopping| *stopping).await;
            }),
            ended: false,
        })
    }
}

/// See [`Services::stream`].
struct UntilStopped<T> {
    responses: mpsc::Receiver<Result<T, Status>>,
    stopping: Pin<Box<dyn Future<Output = ()> + Send>>,
    ended: bool,
}

impl<T> Stream for UntilStopped<T> {
    type Item = Result<T, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.ended {
            return Poll::Ready(None);
        }
        // Checked first, so that a stream with responses still queued ends at once too; they
        // are dropped, as etcd drops them when it cuts its streams.
        if self.stopping.as_mut().poll(cx).is_ready() {
            self.ended = true;
            return Poll::Ready(Some(Err(StoreError::Stopped.into())));
        }
        let next = self.responses.poll_recv(cx);
        if let Poll::Ready(None) = next {
            self.ended = true;
        }
        next
    }
}

/// How often a refused peer is logged at most: a scanner knocking many times a second must not
/// flood the log, but an operator must learn of it.
const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(10);

/// The refusals of peers without the cluster secret, logged at most once a
/// [`REFUSAL_LOG_EVERY`], with how many went unlogged since.
#[derive(Default)]
struct Refusals {
    /// When the last line was logged, in milliseconds since the Unix epoch; 0: never.
    logged_ms: AtomicU64,
    unlogged: AtomicU64,
}

impl Refusals {
    fn log(&self, peer: &str, what: &str) {
        if let Some(unlogged) = self.note(now_ms()) {
            tracing::warn!(
                %peer,
                unlogged,
                "refused a store peer's pull: it {what} (`unlogged` refusals since the last line)"
            );
        }
    }

    /// Counts a refusal at `now_ms`; answers whether to log it, with how many refusals went
    /// unlogged before it.
    fn note(&self, now_ms: u64) -> Option<u64> {
        let last = self.logged_ms.load(Ordering::Relaxed);
        let due = last == 0 || now_ms.saturating_sub(last) >= REFUSAL_LOG_EVERY.as_millis() as u64;
        // Of refusals arriving together, the one that moves the time on logs.
        if due
            && self
                .logged_ms
                .compare_exchange(last, now_ms.max(1), Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            return Some(self.unlogged.swap(0, Ordering::Relaxed));
        }
        self.unlogged.fetch_add(1, Ordering::Relaxed);
        None
    }
}

fn unsupported(what: &str) -> Status {
    Status::unimplemented(format!(
        "mote store does not support {what}; see docs/store.md for what it serves"
    ))
}

#[tonic::async_trait]
impl PbKvService for Services {
    async fn range(&self, req: Request<PbRangeRequest>) -> Answer<PbRangeResponse> {
        Ok(Response::new(self.replica.engine().range(req.get_ref())?))
    }

    type RangeStreamStream = BoxStream<PbRangeStreamResponse>;

    async fn range_stream(&self, _req: Request<PbRangeRequest>) -> Answer<Self::RangeStreamStream> {
        Err(unsupported("RangeStream"))
    }

    async fn put(&self, req: Request<PbPutRequest>) -> Answer<PbPutResponse> {
        let req = req.into_inner();
        let resp = self.replica.write(|e, now| e.put(req, now)).await?;
        Ok(Response::new(resp))
    }

    async fn delete_range(&self, req: Request<PbDeleteRequest>) -> Answer<PbDeleteResponse> {
        let req = req.into_inner();
        let resp = self
            .replica
            .write(|e, now| e.delete_range(req, now))
            .await?;
        Ok(Response::new(resp))
    }

    async fn txn(&self, req: Request<PbTxnRequest>) -> Answer<PbTxnResponse> {
        let req = req.into_inner();
        let resp = self.replica.write(|e, now| e.txn(req, now)).await?;
        Ok(Response::new(resp))
    }

    async fn compact(&self, req: Request<PbCompactionRequest>) -> Answer<PbCompactionResponse> {
        let revision = req.get_ref().revision;
        let header = self
            .replica
            .write(|e, _| Ok((e.header(), e.compact(revision)?)))
            .await?;
        Ok(Response::new(PbCompactionResponse {
            header: Some(header),
        }))
    }
}

#[tonic::async_trait]
impl PbWatchService for Services {
    type WatchStream = BoxStream<PbWatchResponse>;

    async fn watch(&self, req: Request<Streaming<PbWatchRequest>>) -> Answer<Self::WatchStream> {
        let (out, rx) = mpsc::channel(64);
        tokio::spawn(watch::serve(self.replica.clone(), req.into_inner(), out));
        Ok(Response::new(self.stream(rx)))
    }
}

#[tonic::async_trait]
impl PbLeaseService for Services {
    async fn lease_grant(&self, req: Request<PbLeaseGrantRequest>) -> Answer<PbLeaseGrantResponse> {
        let req = req.into_inner();
        let ((id, ttl), header) = self
            .replica
            .write(|e, now| {
                let (granted, applied) = e.grant_lease(req.id, req.ttl, now)?;
                Ok(((granted, e.header()), applied))
            })
            .await?;
        Ok(Response::new(PbLeaseGrantResponse {
            header: Some(header),
            id,
            ttl,
            error: String::new(),
        }))
    }

    async fn lease_revoke(
        &self,
        req: Request<PbLeaseRevokeRequest>,
    ) -> Answer<PbLeaseRevokeResponse> {
        let id = req.get_ref().id;
        self.replica
            .write(|e, now| e.revoke_lease(id, now).map(|applied| ((), applied)))
            .await?;
        Ok(Response::new(PbLeaseRevokeResponse {
            header: Some(self.header()),
        }))
    }

    type LeaseKeepAliveStream = BoxStream<PbLeaseKeepAliveResponse>;

    async fn lease_keep_alive(
        &self,
        req: Request<Streaming<PbLeaseKeepAliveRequest>>,
    ) -> Answer<Self::LeaseKeepAliveStream> {
        let mut requests = req.into_inner();
        let replica = self.replica.clone();
        let (out, rx) = mpsc::channel(16);
        tokio::spawn(async move {
            loop {
                let request = tokio::select! {
                    request = requests.message() => request,
                    // Ending here drops the client's request stream, which the server waits
                    // for.
                    () = out.closed() => return,
                };
                let Ok(Some(request)) = request else { return };
                let response = {
                    let mut engine = replica.engine();
                    // As etcd does, an unknown lease answers with a TTL of 0 rather than an
                    // error, and the client treats the lease as gone.
                    let ttl = engine.keep_alive(request.id, now_ms()).unwrap_or(0);
                    PbLeaseKeepAliveResponse {
                        header: Some(engine.header()),
                        id: request.id,
                        ttl,
                    }
                };
                if out.send(Ok(response)).await.is_err() {
                    return;
                }
            }
        });
        Ok(Response::new(self.stream(rx)))
    }

    async fn lease_time_to_live(
        &self,
        req: Request<PbLeaseTimeToLiveRequest>,
    ) -> Answer<PbLeaseTimeToLiveResponse> {
        let req = req.into_inner();
        let engine = self.replica.engine();
        // etcd answers an unknown lease with TTL -1 rather than an error.
        let (ttl, granted_ttl, keys) = match engine.leases().get(req.id) {
            Some(lease) => (
                lease.remaining(now_ms()),
                lease.granted_ttl,
                if req.keys {
                    lease.keys().cloned().collect()
                } else {
                    Vec::new()
                },
            ),
            None => (-1, 0, Vec::new()),
        };
        Ok(Response::new(PbLeaseTimeToLiveResponse {
            header: Some(engine.header()),
            id: req.id,
            ttl,
            granted_ttl,
            keys,
        }))
    }

    async fn lease_leases(
        &self,
        _req: Request<PbLeaseLeasesRequest>,
    ) -> Answer<PbLeaseLeasesResponse> {
        let engine = self.replica.engine();
        Ok(Response::new(PbLeaseLeasesResponse {
            header: Some(engine.header()),
            leases: engine
                .leases()
                .ids_by_expiry()
                .into_iter()
                .map(|id| PbLeaseStatus { id })
                .collect(),
        }))
    }
}

fn pb_member(m: &Member) -> PbMember {
    PbMember {
        id: m.id,
        name: m.name.clone(),
        peer_ur_ls: m.peer_urls.clone(),
        client_ur_ls: m.client_urls.clone(),
        is_learner: false,
    }
}

#[tonic::async_trait]
impl PbClusterService for Services {
    async fn member_add(&self, _req: Request<PbMemberAddRequest>) -> Answer<PbMemberAddResponse> {
        Err(unsupported("MemberAdd (members are given with --peers)"))
    }

    async fn member_remove(
        &self,
        _req: Request<PbMemberRemoveRequest>,
    ) -> Answer<PbMemberRemoveResponse> {
        Err(unsupported("MemberRemove (members are given with --peers)"))
    }

    async fn member_update(
        &self,
        _req: Request<PbMemberUpdateRequest>,
    ) -> Answer<PbMemberUpdateResponse> {
        Err(unsupported("MemberUpdate (members are given with --peers)"))
    }

    async fn member_list(
        &self,
        _req: Request<PbMemberListRequest>,
    ) -> Answer<PbMemberListResponse> {
        Ok(Response::new(PbMemberListResponse {
            header: Some(self.header()),
            members: self.replica.members().iter().map(pb_member).collect(),
        }))
    }

    async fn member_promote(
        &self,
        _req: Request<PbMemberPromoteRequest>,
    ) -> Answer<PbMemberPromoteResponse> {
        Err(unsupported("MemberPromote (there are no learners)"))
    }
}

#[tonic::async_trait]
impl PbMaintenanceService for Services {
    async fn alarm(&self, _req: Request<PbAlarmRequest>) -> Answer<PbAlarmResponse> {
        Ok(Response::new(PbAlarmResponse {
            header: Some(self.header()),
            alarms: Vec::new(),
        }))
    }

    async fn status(&self, _req: Request<PbStatusRequest>) -> Answer<PbStatusResponse> {
        let header = self.header();
        // etcdctl divides by the size, and a zero there would be a lie anyway.
        let db_size = self.replica.db_size().max(1) as i64;
        Ok(Response::new(PbStatusResponse {
            header: Some(header),
            version: ETCD_VERSION.into(),
            // Every replica leads itself: there is no leader election to wait for.
            leader: self.replica.me().id,
            raft_index: header.revision as u64,
            raft_applied_index: header.revision as u64,
            storage_version: ETCD_VERSION.into(),
            db_size,
            db_size_in_use: db_size,
            ..PbStatusResponse::default()
        }))
    }

    async fn defragment(&self, _req: Request<PbDefragmentRequest>) -> Answer<PbDefragmentResponse> {
        Ok(Response::new(PbDefragmentResponse {
            header: Some(self.header()),
        }))
    }

    async fn hash(&self, _req: Request<PbHashRequest>) -> Answer<PbHashResponse> {
        Err(unsupported("Hash"))
    }

    async fn hash_kv(&self, _req: Request<PbHashKvRequest>) -> Answer<PbHashKvResponse> {
        Err(unsupported("HashKV"))
    }

    type SnapshotStream = BoxStream<PbSnapshotResponse>;

    async fn snapshot(&self, _req: Request<PbSnapshotRequest>) -> Answer<Self::SnapshotStream> {
        Err(unsupported("Snapshot"))
    }

    async fn move_leader(
        &self,
        _req: Request<PbMoveLeaderRequest>,
    ) -> Answer<PbMoveLeaderResponse> {
        Err(unsupported("MoveLeader (there is no leader)"))
    }

    async fn downgrade(&self, _req: Request<PbDowngradeRequest>) -> Answer<PbDowngradeResponse> {
        Err(unsupported("Downgrade"))
    }
}

#[tonic::async_trait]
impl pb::peer_server::Peer for Services {
    async fn pull(&self, req: Request<pb::PullRequest>) -> Answer<pb::PullResponse> {
        self.admit(&req)?;
        let req = req.into_inner();
        let limit = req.limit.clamp(1, crate::replica::PULL_LIMIT) as usize;
        let max_bytes = req.max_bytes.clamp(1, crate::replica::PULL_MAX_BYTES) as usize;
        let incarnation = self.replica.incarnation();
        // A position from another run of this replica means nothing here: start over.
        let (since, resume_key) = match req.incarnation == incarnation {
            true => (req.since, req.resume_key),
            false => (0, Vec::new()),
        };
        let mut resp = self
            .replica
            .engine()
            .changes_after(since, &resume_key, limit, max_bytes);
        resp.incarnation = incarnation;
        Ok(Response::new(resp))
    }
}

/// Connections accepted on `listener`, with Nagle's algorithm off: a small response held back
/// for the client's delayed ACK costs 40 ms, which is what every put took before.
fn incoming(listener: tokio::net::TcpListener) -> tonic::transport::server::TcpIncoming {
    tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true))
}

/// Serves `replica`'s etcd API on `clients` and its peer API on `peers` (a replica nobody
/// pulls from, such as the one `mote up` embeds, needs none), each over TLS when given
/// `client_tls` or `peer_tls`, pulling from each of its peers every `pull_interval` when idle,
/// until `shutdown` resolves. Then it ends every open stream,
/// lets the requests in flight finish, and returns once every connection is closed, or
/// [`STOP_GRACE`] after the stop at the latest: connections still open then are closed when
/// the runtime shuts down, as the process exits.
pub async fn serve(
    replica: Arc<Replica>,
    pull_interval: Duration,
    clients: tokio::net::TcpListener,
    peers: Option<tokio::net::TcpListener>,
    client_tls: Option<ServerTlsConfig>,
    peer_tls: Option<ServerTlsConfig>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), tonic::transport::Error> {
    let (stop_tx, stop) = signal::channel(false);
    let services = Services::new(replica.clone(), stop.clone());
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(replica.clone().run_lease_timer());
    for peer in &replica.members()[1..] {
        if let Some(url) = peer.peer_urls.first() {
            tasks.spawn(replica.clone().run_pull_loop(url.clone(), pull_interval));
        }
    }
    tokio::spawn(async move {
        shutdown.await;
        tracing::info!("stopping: ending open streams, finishing requests in flight");
        let _ = stop_tx.send(true);
    });
    let stopped = |mut stop: signal::Receiver<bool>| async move {
        let _ = stop.wait_for(|s| *s).await;
    };
    let builder = |tls: Option<ServerTlsConfig>| match tls {
        Some(tls) => tonic::transport::Server::builder().tls_config(tls),
        None => Ok(tonic::transport::Server::builder()),
    };
    let peer_server = {
        let server =
            builder(peer_tls)?.add_service(pb::peer_server::PeerServer::new(services.clone()));
        let stop = stopped(stop.clone());
        async move {
            match peers {
                Some(peers) => {
                    server
                        .serve_with_incoming_shutdown(incoming(peers), stop)
                        .await
                }
                None => Ok(()),
            }
        }
    };
    let client_server = builder(client_tls)?
        .add_service(PbKvServer::new(services.clone()))
        .add_service(PbWatchServer::new(services.clone()))
        .add_service(PbLeaseServer::new(services.clone()))
        .add_service(PbClusterServer::new(services.clone()))
        .add_service(PbMaintenanceServer::new(services))
        .serve_with_incoming_shutdown(incoming(clients), stopped(stop.clone()));
    let overdue = async {
        stopped(stop).await;
        tokio::time::sleep(STOP_GRACE).await;
    };
    let result = tokio::select! {
        result = async { tokio::try_join!(client_server, peer_server) } => result.map(|_| ()),
        () = overdue => {
            tracing::warn!(
                grace = ?STOP_GRACE,
                "connections still open after the grace (a client not reading its stream?); \
                 stopping without them"
            );
            Ok(())
        }
    };
    tasks.abort_all();
    result
}

#[cfg(test)]
mod tests;
