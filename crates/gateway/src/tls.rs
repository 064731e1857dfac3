//! The API's listeners. Over TLS, a [`Listener`] for `axum::serve` whose connections have
//! finished their handshake. A task accepts TCP connections and spawns one handshake each, so that a client
//! that is slow to shake hands (or never does) holds up nobody else; only finished handshakes
//! reach the server. A failed one is logged at debug with the client's address, and serving
//! goes on. Without TLS, plain TCP with no delay.

use axum::serve::Listener;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::server::TlsStream;

/// How long a client may take over its handshake before its connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Handshakes finished but not yet taken by the server.
const READY_QUEUE: usize = 1024;

/// Connections that finished their TLS handshake.
pub(crate) struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    /// Starts accepting on `tcp`, each connection shaking hands under `config`, until the
    /// listener is dropped.
    pub(crate) fn new(tcp: TcpListener, config: Arc<ServerConfig>) -> std::io::Result<Self> {
        let local = tcp.local_addr()?;
        let (handed, ready) = mpsc::channel(READY_QUEUE);
        tokio::spawn(accept_loop(tcp, TlsAcceptor::from(config), handed));
        Ok(Self { ready, local })
    }
}

async fn accept_loop(
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    handed: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    loop {
        let accepted = tokio::select! {
            accepted = tcp.accept() => accepted,
            // The server stopped: stop accepting, which closes the port.
            () = handed.closed() => return,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors, mostly: as axum's own listener does, wait a moment
                // rather than spin.
                tracing::warn!(error = %e, "cannot accept a connection");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        // Responses often leave in two writes (a head, then a streamed body): with Nagle's
        // algorithm the second waits for the client's delayed acknowledgement, up to 40 ms.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY on a connection");
        }
        let (acceptor, handed) = (acceptor.clone(), handed.clone());
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => {
                    let _ = handed.send((tls, peer)).await;
                }
                Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                Err(_) => {
                    tracing::debug!(%peer, timeout = ?HANDSHAKE_TIMEOUT, "TLS handshake timed out")
                }
            }
        });
    }
}

impl Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            // The accept loop only ends once this listener is dropped.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

/// Plain TCP with `TCP_NODELAY` on every connection: responses often leave in two writes (a
/// head, then a streamed body), and with Nagle's algorithm the second waits for the client's
/// delayed acknowledgement, up to 40 ms.
pub(crate) struct PlainListener(pub(crate) tokio::net::TcpListener);

impl Listener for PlainListener {
    type Io = TcpStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (tcp, addr) = Listener::accept(&mut self.0).await;
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY on a connection");
        }
        (tcp, addr)
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Listener::local_addr(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::rustls::pki_types::ServerName;

    /// A client that connects and never shakes hands, and one that speaks plain HTTP, hold up
    /// nobody: the next client's handshake finishes and its connection reaches the server
    /// well within the silent one's handshake timeout.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn clients_that_fail_or_stall_their_handshake_stall_nobody() {
        let dir = tempfile::tempdir().unwrap();
        let identity =
            mote_tls::Identity::self_signed(dir.path(), &["127.0.0.1".to_owned()]).unwrap();
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        let mut listener = TlsListener::new(tcp, identity.server_config()).unwrap();

        let _silent = TcpStream::connect(addr).await.unwrap();
        let mut plain = TcpStream::connect(addr).await.unwrap();
        plain.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        let trust = mote_tls::Trust::with_own(Some(&identity));
        let connector = tokio_rustls::TlsConnector::from(trust.client_config());
        let client = async {
            let tcp = TcpStream::connect(addr).await.unwrap();
            let name = ServerName::try_from("127.0.0.1").unwrap();
            let mut tls = connector.connect(name, tcp).await.unwrap();
            tls.write_all(b"ping").await.unwrap();
            tls
        };
        let within = HANDSHAKE_TIMEOUT / 2;
        let ((mut served, peer), _client) =
            tokio::time::timeout(within, async { tokio::join!(listener.accept(), client) })
                .await
                .expect("the good client waited behind the silent one");
        assert!(peer.ip().is_loopback());
        let mut ping = [0; 4];
        served.read_exact(&mut ping).await.unwrap();
        assert_eq!(&ping, b"ping");
    }
}
