//! The API's readers: one thread per core, each with an async runtime of its own, confined as a
//! reader ([`mote_confine::Role::Reader`]) before it takes its first connection. They share
//! the API's listening socket (each wakes on a connection, one accepts it) and serve their
//! connections whole: TLS, HTTP, the gate, and the routes of calls, whose functions the node
//! runs right there when a core is free (`Node::invoke_here`, `Node::serve_http`). Every other
//! route (deploys, tokens, jobs, logs, the cluster, the node's status) is served on the
//! node's I/O runtime, which may open files and connect ([`Hop`]).
//!
//! A reader only sends and receives on sockets: it starts no task on another runtime itself
//! (that would write to the runtime's eventfd), but through the relay, and what it waits on
//! from other threads wakes it from there.
//!
//! The readers stop when the platform's shutdown resolves: each stops accepting and lets its
//! open requests finish, as `listen::serve` does. If the future that runs them is dropped
//! first, they stop at once, and a thread of the I/O runtime joins them, so that the node's
//! last reference is never dropped on a reader (whose filter forbids what tearing a node down
//! does).

use crate::gate::Gate;
use crate::listen::{self, ListenLimits};
use axum::Router;
use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body::Body as _;
use http_body_util::BodyExt;
use mote_confine::{Filter, Relay, Role};
use mote_node::Node;
use std::sync::Arc;
use std::thread::JoinHandle;
use tokio::runtime::Handle;
use tokio::sync::{mpsc, watch};
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

/// What every reader serves with.
pub(crate) struct Setup {
    /// The API's listening socket, shared by the readers (each takes a copy as it starts).
    pub(crate) listener: Option<std::net::TcpListener>,
    pub(crate) tls: Option<TlsAcceptor>,
    pub(crate) gate: Arc<Gate>,
    /// The routes served on a reader; the rest reach the I/O runtime through its fallback.
    pub(crate) router: Router,
    /// What all readers together may hold open.
    pub(crate) limits: ListenLimits,
    /// Whether readers are confined (not with `mote up --seccomp off`).
    pub(crate) confine: bool,
    pub(crate) node: Arc<Node>,
    pub(crate) count: usize,
}

/// How far the readers are to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Stop {
    Serving,
    /// Stop accepting; finish the requests in progress.
    Graceful,
    /// Stop now.
    Forced,
}

/// The readers' threads, serving; dropping this stops them at once.
pub struct Readers {
    threads: Vec<JoinHandle<()>>,
    stop: watch::Sender<Stop>,
    /// Held until every reader has ended: the node's last reference goes with an I/O thread.
    node: Option<Arc<Node>>,
}

impl Readers {
    /// Serves until `shutdown` resolves, then lets the open requests finish, and returns once
    /// every reader has ended.
    pub async fn serve_until(
        mut self,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> std::io::Result<()> {
        shutdown.await;
        if let Some(node) = &self.node {
            // Followed logs never end by themselves: without this the readers would wait.
            node.logs().stop_following();
        }
        self.stop.send_replace(Stop::Graceful);
        let threads = std::mem::take(&mut self.threads);
        let node = self.node.take();
        tokio::task::spawn_blocking(move || {
            for thread in threads {
                let _ = thread.join();
            }
            drop(node);
        })
        .await
        .map_err(std::io::Error::other)
    }
}

/// Starts `setup.count` readers, each confined and serving once this returns. Fails if a
/// reader could not start or be confined.
pub(crate) fn start(mut setup: Setup) -> std::io::Result<Readers> {
    let (stop, stopping) = watch::channel(Stop::Serving);
    let node = setup.node.clone();
    let count = setup.count.max(1);
    // Each reader gets a copy of the listening socket; the original closes as this returns, so
    // that the port closes once the readers drop theirs (a drain refuses new connections).
    let original = setup.listener.take().expect("the API's listening socket");
    let copies = (0..count)
        .map(|_| original.try_clone())
        .collect::<std::io::Result<Vec<_>>>()?;
    drop(original);
    let setup = Arc::new(setup);
    let (started_tx, started) = std::sync::mpsc::channel();
    let mut readers = Readers {
        threads: Vec::with_capacity(count),
        stop,
        node: Some(node),
    };
    for (i, listener) in copies.into_iter().enumerate() {
        let (setup, stopping, started) = (setup.clone(), stopping.clone(), started_tx.clone());
        let thread = std::thread::Builder::new()
            .name(format!("mote-reader-{i}"))
            .spawn(move || run(&setup, listener, count, stopping, started))?;
        readers.threads.push(thread);
    }
    drop(started_tx);
    // Dropping `readers` on failure stops those that did start.
    for result in started.iter() {
        result?;
    }
    Ok(readers)
}

impl Drop for Readers {
    fn drop(&mut self) {
        self.stop.send_replace(Stop::Forced);
        let (threads, node) = (std::mem::take(&mut self.threads), self.node.take());
        if threads.is_empty() {
            return;
        }
        let join = move || {
            for thread in threads {
                let _ = thread.join();
            }
            drop(node);
        };
        match Handle::try_current() {
            Ok(io) => drop(io.spawn_blocking(join)),
            Err(_) => join(),
        }
    }
}

/// One reader: its runtime and its copy of the listening socket are made before it is
/// confined; then it serves until told to stop.
fn run(
    setup: &Setup,
    listener: std::net::TcpListener,
    count: usize,
    mut stopping: watch::Receiver<Stop>,
    started: std::sync::mpsc::Sender<std::io::Result<()>>,
) {
    let prepared = (|| {
        let build = || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
        };
        listener.set_nonblocking(true)?;
        let runtime = match setup.confine {
            true => {
                let runtime = build()?;
                let wakes = mote_confine::own_wakers(&runtime)?;
                let filter = Filter::reader(&wakes).map_err(std::io::Error::other)?;
                filter
                    .confine_this_thread()
                    .map_err(std::io::Error::other)?;
                runtime
            }
            false => {
                let runtime = build()?;
                mote_confine::waive(Role::Reader);
                runtime
            }
        };
        let reader = setup.node.reader().map_err(std::io::Error::other)?;
        Ok((runtime, listener, Arc::new(reader)))
    })();
    let (runtime, listener, reader) = match prepared {
        Ok(prepared) => {
            let _ = started.send(Ok(()));
            prepared
        }
        Err(e) => {
            let _ = started.send(Err(e));
            return;
        }
    };
    drop(started);
    let share = |n: usize| n.div_ceil(count).max(1);
    let limits = ListenLimits {
        max_connections: share(setup.limits.max_connections),
        max_handshakes: share(setup.limits.max_handshakes),
        ..setup.limits
    };
    runtime.block_on(async {
        let tcp = match tokio::net::TcpListener::from_std(listener) {
            Ok(tcp) => tcp,
            Err(e) => {
                tracing::error!(error = %e, "a reader cannot take the API's listening socket");
                return;
            }
        };
        let router = setup.router.clone().layer(axum::Extension(reader));
        let mut graceful = stopping.clone();
        let shutdown = async move {
            let _ = graceful.wait_for(|s| *s >= Stop::Graceful).await;
        };
        let serving = listen::serve(
            tcp,
            setup.tls.clone(),
            setup.gate.clone(),
            router,
            limits,
            shutdown,
        );
        tokio::select! {
            served = serving => {
                if let Err(e) = served {
                    tracing::error!(error = %e, "a reader stopped serving");
                }
            }
            _ = stopping.wait_for(|s| *s == Stop::Forced) => {}
        }
    });
}

/// How a reader reaches the routes it does not serve: the request is served on the node's I/O
/// runtime, started through the relay, and the response's body comes back over a channel
/// that a task there fills (also relayed, since the reader draining it wakes it).
#[derive(Clone)]
pub(crate) struct Hop {
    pub(crate) router: Router,
    pub(crate) relay: Arc<Relay>,
    pub(crate) io: Handle,
}

/// A response body no larger than this is read whole on the I/O runtime and sent back at once.
const WHOLE_BODY: u64 = 1 << 20;

impl Hop {
    /// Serves `request` on the I/O runtime.
    pub(crate) async fn serve(&self, request: axum::extract::Request) -> Response {
        let router = self.router.clone();
        let relay = self.relay.clone();
        let io = self.io.clone();
        let served = self.relay.spawn(&self.io, async move {
            let response = router.oneshot(request).await.into_response();
            let (parts, body) = response.into_parts();
            let body = match body.size_hint().exact() {
                Some(len) if len <= WHOLE_BODY => match body.collect().await {
                    Ok(whole) => Body::from(whole.to_bytes()),
                    Err(e) => Body::new(http_body_util::Full::new(Bytes::from(e.to_string()))),
                },
                _ => pump(body, &relay, &io),
            };
            Response::from_parts(parts, body)
        });
        match served.await {
            Ok(response) => response,
            Err(lost) => {
                crate::error::ApiError::Invoke(mote_node::InvokeError::Internal(lost.to_string()))
                    .into_response()
            }
        }
    }
}

/// A body whose frames a relayed task on `io` reads from `body` and hands over a channel.
fn pump(mut body: Body, relay: &Relay, io: &Handle) -> Body {
    let (tx, rx) = mpsc::channel::<Result<http_body::Frame<Bytes>, axum::Error>>(8);
    let fill = relay.relayed(async move {
        while let Some(frame) = body.frame().await {
            if tx.send(frame).await.is_err() {
                return;
            }
        }
    });
    drop(io.spawn(fill));
    Body::new(http_body_util::StreamBody::new(
        tokio_stream::wrappers::ReceiverStream::new(rx),
    ))
}
