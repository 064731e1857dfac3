//! The API's listeners: accepting connections, shaking hands over TLS, and serving HTTP/1.1 on
//! each, within bounds a flood cannot push the node past.
//!
//! - At most [`ListenLimits::max_connections`] connections are open at once; past that the node
//!   stops accepting and new clients wait in the kernel's backlog (and are refused once it is
//!   full), so a flood costs the node neither descriptors nor memory beyond the bound.
//! - Over TLS, at most [`ListenLimits::max_handshakes`] handshakes run at once (each costs a
//!   public-key operation), and each must finish within [`ListenLimits::handshake_timeout`],
//!   waiting for its turn included. Handshakes run beside the accept loop, so a client that is
//!   slow to shake hands holds up nobody else.
//! - A connection that sends no complete request head within [`IDLE_TIMEOUT`] of opening, or of
//!   its previous response, is closed: a client cannot keep a connection (one of the bounded
//!   many) without using it. Peers' pooled connections idle for less (`mote_peers`' 30 s).
//!
//! - A client that speaks plain HTTP to a TLS listener (an `http://` URL for an `https://` node)
//!   gets a plain 400 that says so, instead of a handshake failure it would show as a reset.
//!
//! Every request goes through the [`Gate`] before the router sees it.

use crate::gate::Gate;
use axum::Router;
use axum::body::Body;
use futures_util::future::Either;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio_rustls::TlsAcceptor;
use tower::Service;

/// How long a connection may wait without a complete request head before it is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Bounds on what clients may hold of a listener.
#[derive(Clone, Copy, Debug)]
pub struct ListenLimits {
    /// Connections open at once.
    pub max_connections: usize,
    /// TLS handshakes in progress at once.
    pub max_handshakes: usize,
    /// How long a client may take over its TLS handshake, waiting for its turn included.
    pub handshake_timeout: Duration,
}

impl Default for ListenLimits {
    fn default() -> Self {
        Self {
            max_connections: 10_000,
            max_handshakes: 64,
            handshake_timeout: Duration::from_secs(10),
        }
    }
}

/// Serves `router` behind `gate` on `tcp` (over TLS with `tls`) until `shutdown` resolves, then
/// lets open requests finish and returns once every connection has closed.
pub(crate) async fn serve(
    tcp: TcpListener,
    tls: Option<TlsAcceptor>,
    gate: Arc<Gate>,
    router: Router,
    limits: ListenLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let connections = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let handshakes = Arc::new(Semaphore::new(limits.max_handshakes.max(1)));
    // Told to every connection when the server stops; each holds `open` until it has closed.
    let (stop, stopping) = watch::channel(());
    let (open, opened) = watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = connections.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let (stream, client) = tokio::select! {
            accepted = tcp.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors, mostly: wait a moment rather than spin, as axum does.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Responses often leave in two writes (a head, then a streamed body): with Nagle's
        // algorithm the second waits for the client's delayed acknowledgement, up to 40 ms.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY on a connection");
        }
        let connection = Connection {
            gate: gate.clone(),
            router: router.clone(),
            client,
        };
        let (tls, handshakes) = (tls.clone(), handshakes.clone());
        let (mut stopping, opened) = (stopping.clone(), opened.clone());
        let stream = SendOnly(stream);
        tokio::spawn(async move {
            let _permit = permit;
            let _opened = opened;
            match tls {
                None => serve_connection(stream, connection, &mut stopping).await,
                Some(acceptor) => {
                    let timeout = limits.handshake_timeout;
                    if let Some(tls) = shake_hands(acceptor, stream, &handshakes, timeout).await {
                        serve_connection(tls, connection, &mut stopping).await;
                    }
                }
            }
        });
    }
    drop(tcp);
    drop(stopping);
    stop.send_replace(());
    drop(opened);
    open.closed().await;
    Ok(())
}

/// Serves HTTP/1.1 on `io` until the client closes it, it idles past [`IDLE_TIMEOUT`], or the
/// server stops (then the request in progress finishes first).
async fn serve_connection<I>(io: I, connection: Connection, stopping: &mut watch::Receiver<()>)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let client = connection.client;
    let mut http = hyper::server::conn::http1::Builder::new();
    // Each response leaves in one `send`: a reader may not `writev` (`mote_confine`).
    http.timer(TokioTimer::new())
        .header_read_timeout(IDLE_TIMEOUT)
        .writev(false);
    let served = http.serve_connection(TokioIo::new(io), connection);
    let mut served = std::pin::pin!(served);
    let result = tokio::select! {
        result = served.as_mut() => result,
        _ = stopping.changed() => {
            served.as_mut().graceful_shutdown();
            served.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(%client, error = %e, "a connection ended with an error");
    }
}

/// The client's TLS handshake, in its turn among at most `handshakes` at once, all within
/// `timeout`; `None` (logged at debug) if it failed or took too long.
async fn shake_hands(
    acceptor: TlsAcceptor,
    stream: SendOnly,
    handshakes: &Semaphore,
    timeout: Duration,
) -> Option<tokio_rustls::server::TlsStream<SendOnly>> {
    let client = stream.0.peer_addr().ok();
    let handshake = async {
        // The turn is taken first: a client that says nothing holds one, as in a handshake.
        let _turn = handshakes
            .acquire()
            .await
            .expect("the semaphore is never closed");
        let mut first = [0u8; 1];
        if stream.0.peek(&mut first).await.is_ok() && first[0].is_ascii_uppercase() {
            answer_plain_http(stream.0).await;
            return None;
        }
        Some(acceptor.accept(stream).await)
    };
    match tokio::time::timeout(timeout, handshake).await {
        Ok(None) => {
            tracing::debug!(?client, "a plain HTTP request came to the TLS listener");
            None
        }
        Ok(Some(Ok(tls))) => Some(tls),
        Ok(Some(Err(e))) => {
            tracing::debug!(?client, error = %e, "TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::debug!(?client, ?timeout, "TLS handshake timed out");
            None
        }
    }
}

/// Why a plain HTTP request to a TLS listener is refused. A TLS client's first byte is a
/// handshake record (22); an HTTP request's is its method's first letter.
const PLAIN_HTTP_REFUSED: &str = "this node serves HTTPS on this port: use an https:// URL (for \
the node's own certificate, mote's --tls-ca or curl's --cacert with DATA/tls/cert.pem)";

/// The most of a plain request read after its answer: closing a socket with unread data sends
/// a reset, which could reach the client before the answer does.
const PLAIN_HTTP_READ: usize = 64 << 10;

/// Answers a plain HTTP request on a TLS listener with 400 and [`PLAIN_HTTP_REFUSED`], stops
/// sending, and reads what the client still sends until it closes (or [`PLAIN_HTTP_READ`]).
async fn answer_plain_http(mut stream: TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = serde_json::json!({ "error": PLAIN_HTTP_REFUSED }).to_string();
    let answer = format!(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\nconnection: close\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    );
    if stream.write_all(answer.as_bytes()).await.is_err() || stream.shutdown().await.is_err() {
        return;
    }
    let (mut buf, mut drained) = ([0u8; 4096], 0);
    while drained < PLAIN_HTTP_READ {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => drained += n,
        }
    }
}

/// A connection's stream, written with `send` only: its vectored writes go one buffer at a
/// time (tokio's default), so TLS records leave with `send` rather than `writev`, which a
/// reader may not make.
struct SendOnly(TcpStream);

impl tokio::io::AsyncRead for SendOnly {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for SendOnly {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// One connection's requests: each passes the gate, then the router.
struct Connection {
    gate: Arc<Gate>,
    router: Router,
    client: SocketAddr,
}

type Answer = std::future::Ready<Result<axum::response::Response, Infallible>>;

impl hyper::service::Service<hyper::Request<Incoming>> for Connection {
    type Response = axum::response::Response;
    type Error = Infallible;
    type Future = Either<Answer, axum::routing::future::RouteFuture<Infallible>>;

    fn call(&self, request: hyper::Request<Incoming>) -> Self::Future {
        let mut request = request.map(Body::new);
        match self.gate.admit(&mut request, self.client) {
            // The router is always ready, and cloning it is one reference count.
            Ok(()) => Either::Right(self.router.clone().call(request)),
            Err(refused) => Either::Left(std::future::ready(Ok(*refused))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::rustls::pki_types::ServerName;

    /// A TLS listener whose every request gets `200 ok`, on loopback.
    async fn tls_server(
        limits: ListenLimits,
    ) -> (SocketAddr, mote_tls::Identity, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let identity =
            mote_tls::Identity::self_signed(dir.path(), &["127.0.0.1".to_owned()]).unwrap();
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        let acceptor = TlsAcceptor::from(identity.server_config());
        let router = Router::new().route("/", axum::routing::get(|| async { "ok" }));
        tokio::spawn(serve(
            tcp,
            Some(acceptor),
            Arc::new(Gate::open_for_tests()),
            router,
            limits,
            std::future::pending(),
        ));
        (addr, identity, dir)
    }

    async fn handshake(
        addr: SocketAddr,
        identity: &mote_tls::Identity,
    ) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
        let trust = mote_tls::Trust::with_own(Some(identity));
        let connector = tokio_rustls::TlsConnector::from(trust.client_config());
        let tcp = TcpStream::connect(addr).await?;
        connector
            .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
            .await
    }

    /// A client that connects and never shakes hands, and one that speaks plain HTTP, hold up
    /// nobody: the next client's handshake finishes and its request is answered well within the
    /// silent one's handshake timeout.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn clients_that_fail_or_stall_their_handshake_stall_nobody() {
        let limits = ListenLimits::default();
        let (addr, identity, _dir) = tls_server(limits).await;
        let _silent = TcpStream::connect(addr).await.unwrap();
        let mut plain = TcpStream::connect(addr).await.unwrap();
        plain.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        let within = limits.handshake_timeout / 2;
        let answer = tokio::time::timeout(within, async {
            let mut tls = handshake(addr, &identity).await.unwrap();
            tls.write_all(b"GET / HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")
                .await
                .unwrap();
            let mut answer = String::new();
            tls.read_to_string(&mut answer).await.unwrap();
            answer
        })
        .await
        .expect("the good client waited behind the silent one");
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }

    /// With one handshake allowed at a time, a silent client holds the only turn until its
    /// timeout: the next client's handshake waits for it, then succeeds. So a flood of silent
    /// clients delays handshakes but never runs more than the bound at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn handshakes_beyond_the_bound_wait_for_a_turn() {
        let limits = ListenLimits {
            max_handshakes: 1,
            handshake_timeout: Duration::from_millis(600),
            ..ListenLimits::default()
        };
        let (addr, identity, _dir) = tls_server(limits).await;
        let _silent = TcpStream::connect(addr).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let started = std::time::Instant::now();
        handshake(addr, &identity)
            .await
            .expect("the handshake after the silent one's timeout");
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(300),
            "the handshake did not wait for the silent client's turn: {waited:?}"
        );
    }

    /// Past the bound on connections the node accepts nothing more until one closes; then the
    /// waiting client is served.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn connections_past_the_bound_wait_until_one_closes() {
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        let router = Router::new().route("/", axum::routing::get(|| async { "ok" }));
        let limits = ListenLimits {
            max_connections: 2,
            ..ListenLimits::default()
        };
        tokio::spawn(serve(
            tcp,
            None,
            Arc::new(Gate::open_for_tests()),
            router,
            limits,
            std::future::pending(),
        ));
        let request = b"GET / HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n";
        let mut held = Vec::new();
        for _ in 0..2 {
            let mut c = TcpStream::connect(addr).await.unwrap();
            c.write_all(request).await.unwrap();
            let mut head = [0u8; 12];
            c.read_exact(&mut head).await.unwrap();
            assert_eq!(&head, b"HTTP/1.1 200");
            held.push(c);
        }
        let mut third = TcpStream::connect(addr).await.unwrap();
        third.write_all(request).await.unwrap();
        let mut head = [0u8; 12];
        let early = tokio::time::timeout(Duration::from_millis(300), third.read_exact(&mut head));
        assert!(early.await.is_err(), "a third connection was served");
        drop(held.pop());
        tokio::time::timeout(Duration::from_secs(5), third.read_exact(&mut head))
            .await
            .expect("the waiting connection was never served")
            .unwrap();
        assert_eq!(&head, b"HTTP/1.1 200");
    }
}
