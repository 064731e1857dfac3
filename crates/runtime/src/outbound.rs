//! Outbound requests of `wasi:http` components, sent so that they reach only what the node's
//! operator and the function's grants allow ([`Egress`]).
//!
//! A request's host is resolved once (unless it is an address already), every address it
//! resolved to is judged by [`OutboundRules`] (public or special, one of the node's own
//! interface addresses or not, granted by name or by address), and the connection goes to an
//! address that passed, tried in the resolver's order: nothing looks the name up a second time,
//! so a DNS answer that changes between the check and the connection (rebinding) changes
//! nothing. Then TLS (SNI and certificate checks against the host name, web PKI roots) and the
//! HTTP/1 handshake, as wasmtime's `default_send_request` does, with every wait bounded by
//! what the call's budget leaves. A refused request reaches the guest as wasi:http's
//! `HttpRequestDenied` and is logged with the function, host, address and reason.
//!
//! Everything here runs on the node's I/O runtime: the threads that poll guests hold no
//! sockets.

use bytes::Bytes;
use core::pin::Pin;
use core::task::{Context, Poll, ready};
use http_body_util::BodyExt;
use mote_types::{OutboundCeiling, OutboundHost, OutboundRules, Refusal};
use std::future::{Future, poll_fn};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout, timeout_at};
use tokio_rustls::TlsConnector;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{Error, WasiBody};

/// The node's side of its functions' outbound requests: the ceiling set by its operator
/// (`mote up --outbound-ceiling`) and the TLS client they share.
pub struct Egress {
    ceiling: OutboundCeiling,
    tls: TlsConnector,
}

impl std::fmt::Debug for Egress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Egress")
            .field("ceiling", &self.ceiling)
            .finish_non_exhaustive()
    }
}

/// How long each wait of one request may take, already bounded by the call's budget.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Waits {
    /// The lookup, the connection, TLS and the HTTP handshake, together.
    pub(crate) connect: Duration,
    /// From the request sent to the response's head.
    pub(crate) first_byte: Duration,
    /// Between two frames of the response body.
    pub(crate) between_bytes: Duration,
}

/// A response, and the connection's future, which must be polled (on the I/O runtime) for
/// the body to arrive.
pub(crate) type Sent = (
    http::Response<WasiBody>,
    Box<dyn Future<Output = Result<(), Error>> + Send>,
);

trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for T {}

impl Egress {
    /// Outbound requests under `ceiling`.
    pub fn new(ceiling: OutboundCeiling) -> Self {
        Self {
            ceiling,
            // The web PKI's roots alone: functions reach the public internet, and the node's
            // own certificate or `--tls-ca` is for its peers, not for them.
            tls: TlsConnector::from(mote_tls::Trust::default().client_config()),
        }
    }

    /// The most the node lets any function reach.
    pub fn ceiling(&self) -> &OutboundCeiling {
        &self.ceiling
    }

    /// Sends `request` for `function`, whose outbound grants are `grants`, within `waits`.
    pub(crate) async fn send(
        &self,
        function: &str,
        grants: &[OutboundHost],
        mut request: http::Request<WasiBody>,
        waits: Waits,
    ) -> Result<Sent, Error> {
        let uri = request.uri();
        let host = uri.host().ok_or(Error::HttpRequestUriInvalid)?.to_owned();
        let https = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let connect_by = Instant::now() + waits.connect;
        let rules = OutboundRules {
            grants,
            ceiling: &self.ceiling,
        };
        let addresses = admitted(rules, function, &host, port, connect_by).await?;
        let stream = timeout_at(connect_by, connect(&addresses, port))
            .await
            .map_err(|_| Error::ConnectionTimeout)??;
        let stream: Box<dyn Stream> = match https {
            false => Box::new(stream),
            true => {
                let name = server_name(&host)?;
                let tls = timeout_at(connect_by, self.tls.connect(name, stream))
                    .await
                    .map_err(|_| Error::ConnectionTimeout)?
                    .map_err(Error::Tls)?;
                Box::new(tls)
            }
        };
        let (mut sender, connection) = timeout_at(
            connect_by,
            hyper::client::conn::http1::Builder::new().handshake(TokioIo::new(stream)),
        )
        .await
        .map_err(|_| Error::ConnectionTimeout)??;

        // The request holds the scheme and authority, which HTTP/1 sends only to a proxy.
        *request.uri_mut() = http::Uri::builder()
            .path_and_query(
                request
                    .uri()
                    .path_and_query()
                    .map_or("/", |p| p.as_str())
                    .to_owned(),
            )
            .build()
            .map_err(|_| Error::HttpRequestUriInvalid)?;
        let between_bytes = waits.between_bytes.max(Duration::from_nanos(1));
        let send = async move {
            let response = timeout(waits.first_byte, sender.send_request(request))
                .await
                .map_err(|_| Error::ConnectionReadTimeout)??;
            let mut idle = tokio::time::interval(between_bytes);
            idle.reset();
            Ok::<_, Error>(response.map(|incoming| ResponseBody { incoming, idle }.boxed_unsync()))
        };
        // Wait for the response while driving the connection's I/O.
        let mut send = std::pin::pin!(send);
        let mut connection = Some(connection);
        let response = poll_fn(|cx| match send.as_mut().poll(cx) {
            Poll::Ready(result) => Poll::Ready(result),
            Poll::Pending => {
                let Some(open) = connection.as_mut() else {
                    return Poll::Pending;
                };
                let ended = ready!(Pin::new(open).poll(cx));
                connection = None;
                match ended {
                    Ok(()) => send.as_mut().poll(cx),
                    Err(e) => Poll::Ready(Err(Error::from(e))),
                }
            }
        })
        .await?;
        let connection: Box<dyn Future<Output = Result<(), Error>> + Send> = Box::new(async move {
            match connection {
                None => Ok(()),
                Some(open) => open.await.map_err(|e| match e.is_timeout() {
                    true => Error::HttpResponseTimeout,
                    false => Error::from(e),
                }),
            }
        });
        Ok((response, connection))
    }
}

/// The addresses a request to `host` on `port` may connect to, in the resolver's order:
/// `host` itself if it is an address, or what it resolves to (once), each judged by `rules`.
/// None passing is a refusal, logged and answered with `HttpRequestDenied`.
async fn admitted(
    rules: OutboundRules<'_>,
    function: &str,
    host: &str,
    port: u16,
    lookup_by: Instant,
) -> Result<Vec<IpAddr>, Error> {
    let literal = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
        .parse::<IpAddr>();
    let resolved: Vec<IpAddr> = match literal {
        Ok(addr) => vec![addr],
        Err(_) => {
            rules
                .may_resolve(host, port)
                .map_err(|refusal| refused(function, host, port, None, refusal))?;
            let found = timeout_at(lookup_by, tokio::net::lookup_host((host, port)))
                .await
                .map_err(|_| Error::DnsTimeout)?
                .map_err(|_| Error::DnsError {
                    rcode: Some("address not available".to_owned()),
                    info_code: None,
                })?;
            found.map(|a| a.ip()).collect()
        }
    };
    let own = own_addresses().map_err(|e| {
        tracing::error!(function, host, error = %e, "cannot list the node's own addresses; the outbound request is refused");
        Error::InternalError(Some("cannot check the destination address".to_owned()))
    })?;
    let mut admitted = Vec::with_capacity(resolved.len());
    let mut first_refusal = None;
    for addr in resolved {
        let addr = addr.to_canonical();
        match rules.admit(host, port, addr, own.contains(&addr)) {
            Ok(()) if !admitted.contains(&addr) => admitted.push(addr),
            Ok(()) => {}
            Err(refusal) => {
                tracing::debug!(function, host, port, address = %addr, reason = %refusal, "outbound address skipped");
                first_refusal.get_or_insert((addr, refusal));
            }
        }
    }
    match (admitted.is_empty(), first_refusal) {
        (false, _) => Ok(admitted),
        (true, Some((addr, refusal))) => Err(refused(function, host, port, Some(addr), refusal)),
        (true, None) => Err(Error::DnsError {
            rcode: Some("address not available".to_owned()),
            info_code: None,
        }),
    }
}

/// Logs a refused request and answers it as wasi:http does.
fn refused(
    function: &str,
    host: &str,
    port: u16,
    address: Option<IpAddr>,
    refusal: Refusal,
) -> Error {
    let address = address.map_or_else(|| "not looked up".to_owned(), |a| a.to_string());
    tracing::warn!(function, host, port, address, reason = %refusal, "outbound request refused");
    Error::HttpRequestDenied
}

/// Connects to the first of `addresses` that takes the connection.
async fn connect(addresses: &[IpAddr], port: u16) -> Result<TcpStream, Error> {
    let mut last = None;
    for &addr in addresses {
        match TcpStream::connect(SocketAddr::new(addr, port)).await {
            Ok(stream) => return Ok(stream),
            Err(e) => last = Some(e),
        }
    }
    Err(match last {
        Some(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Error::ConnectionRefused,
        Some(e) => Error::Connect(e),
        None => Error::DestinationNotFound,
    })
}

/// The name TLS checks the server's certificate against: the host as the guest wrote it.
fn server_name(host: &str) -> Result<rustls::pki_types::ServerName<'static>, Error> {
    use rustls::pki_types::ServerName;
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    match bare.parse::<IpAddr>() {
        Ok(addr) => Ok(ServerName::from(addr)),
        Err(_) => ServerName::try_from(bare.to_owned()).map_err(|_| Error::HttpRequestUriInvalid),
    }
}

/// The addresses of the node's own interfaces, read each time (interfaces come and go).
fn own_addresses() -> std::io::Result<Vec<IpAddr>> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes to `list` a list it allocated, freed below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut addresses = Vec::new();
    let mut at = list;
    while !at.is_null() {
        // SAFETY: `at` is a node of the list getifaddrs returned, which is not freed yet.
        let entry = unsafe { &*at };
        at = entry.ifa_next;
        if entry.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: a non-null `ifa_addr` points to a socket address, whose family says which
        // structure it is; each is read as that structure only.
        let address = unsafe {
            match i32::from((*entry.ifa_addr).sa_family) {
                libc::AF_INET => {
                    let v4 = &*(entry.ifa_addr as *const libc::sockaddr_in);
                    IpAddr::V4(Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr)))
                }
                libc::AF_INET6 => {
                    let v6 = &*(entry.ifa_addr as *const libc::sockaddr_in6);
                    IpAddr::V6(Ipv6Addr::from(v6.sin6_addr.s6_addr))
                }
                _ => continue,
            }
        };
        addresses.push(address.to_canonical());
    }
    // SAFETY: `list` came from getifaddrs, is freed once, and nothing read from it is kept.
    unsafe { libc::freeifaddrs(list) };
    Ok(addresses)
}

/// A response body that fails if no frame arrives for its between-bytes timeout.
struct ResponseBody {
    incoming: hyper::body::Incoming,
    idle: tokio::time::Interval,
}

impl http_body::Body for ResponseBody {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Error>>> {
        match Pin::new(&mut self.incoming).poll_frame(cx) {
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Ready(Some(Err(e))) if e.is_timeout() => {
                Poll::Ready(Some(Err(Error::HttpResponseTimeout)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(Error::from(e)))),
            Poll::Ready(Some(Ok(frame))) => {
                self.idle.reset();
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => {
                ready!(self.idle.poll_tick(cx));
                Poll::Ready(Some(Err(Error::ConnectionReadTimeout)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.incoming.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    fn waits() -> Waits {
        Waits {
            connect: Duration::from_secs(5),
            first_byte: Duration::from_secs(5),
            between_bytes: Duration::from_secs(5),
        }
    }

    fn get(url: &str) -> http::Request<WasiBody> {
        http::Request::get(url)
            .body(
                http_body_util::Empty::new()
                    .map_err(|never| match never {})
                    .boxed_unsync(),
            )
            .unwrap()
    }

    /// A loopback server that answers every request with `ok` and counts connections.
    async fn server() -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let _ = stream
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                        .await;
                });
            }
        });
        (port, accepted)
    }

    async fn body(sent: Sent) -> Vec<u8> {
        let (response, connection) = sent;
        tokio::spawn(Box::into_pin(connection));
        response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec()
    }

    #[tokio::test]
    async fn loopback_is_reached_only_through_address_entries_on_both_sides() {
        let (port, accepted) = server().await;
        let grants =
            OutboundHost::parse_list(&format!("127.0.0.1:{port},localhost:{port}")).unwrap();
        let url = format!("http://127.0.0.1:{port}/");

        let any = Egress::new(OutboundCeiling::default());
        let refused = any.send("f", &grants, get(&url), waits()).await.err();
        assert!(
            matches!(refused, Some(Error::HttpRequestDenied)),
            "{refused:?}"
        );
        let named = OutboundHost::parse_list(&format!("localhost:{port}")).unwrap();
        let localhost = format!("http://localhost:{port}/");
        let refused = any.send("f", &named, get(&localhost), waits()).await.err();
        assert!(
            matches!(refused, Some(Error::HttpRequestDenied)),
            "{refused:?}"
        );
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 0);

        let allowed = Egress::new(OutboundCeiling::parse(&format!("127.0.0.1:{port}")).unwrap());
        let sent = allowed
            .send("f", &grants, get(&url), waits())
            .await
            .unwrap();
        assert_eq!(body(sent).await, b"ok");
        // An address entry matches a name by what it resolves to.
        let sent = allowed
            .send("f", &grants, get(&localhost), waits())
            .await
            .unwrap();
        assert_eq!(body(sent).await, b"ok");
        let refused = allowed
            .send("f", &named, get(&localhost), waits())
            .await
            .err();
        assert!(
            matches!(refused, Some(Error::HttpRequestDenied)),
            "{refused:?}"
        );
        let other = format!("http://127.0.0.1:{}/", port.wrapping_add(1).max(1));
        let refused = allowed.send("f", &grants, get(&other), waits()).await.err();
        assert!(
            matches!(refused, Some(Error::HttpRequestDenied)),
            "{refused:?}"
        );
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn mapped_and_unspecified_forms_of_loopback_are_refused_without_a_connection() {
        let (port, accepted) = server().await;
        let everything = OutboundHost::parse_list("*").unwrap();
        let egress = Egress::new(OutboundCeiling::default());
        for host in [
            "[::ffff:127.0.0.1]".to_owned(),
            "0.0.0.0".to_owned(),
            "[::]".to_owned(),
            "[::1]".to_owned(),
            "127.0.0.1".to_owned(),
        ] {
            let url = format!("http://{host}:{port}/");
            let refused = egress
                .send("f", &everything, get(&url), waits())
                .await
                .err();
            assert!(
                matches!(refused, Some(Error::HttpRequestDenied)),
                "{url}: {refused:?}"
            );
        }
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_name_nothing_grants_is_not_even_looked_up() {
        let egress = Egress::new(OutboundCeiling::default());
        let grants = OutboundHost::parse_list("api.example.com").unwrap();
        // A lookup of this name would fail (or time out) rather than be denied.
        let refused = egress
            .send("f", &grants, get("http://unknown.invalid/"), waits())
            .await
            .err();
        assert!(
            matches!(refused, Some(Error::HttpRequestDenied)),
            "{refused:?}"
        );
        let none = Egress::new(OutboundCeiling::none());
        let refused = none
            .send("f", &grants, get("http://api.example.com/"), waits())
            .await
            .err();
        assert!(
            matches!(refused, Some(Error::HttpRequestDenied)),
            "{refused:?}"
        );
    }

    #[test]
    fn the_node_s_own_addresses_include_loopback() {
        let own = own_addresses().unwrap();
        assert!(own.contains(&IpAddr::V4(Ipv4Addr::LOCALHOST)), "{own:?}");
    }

    #[test]
    fn tls_checks_the_host_the_guest_named() {
        use rustls::pki_types::ServerName;
        assert_eq!(
            server_name("api.example.com").unwrap(),
            ServerName::try_from("api.example.com").unwrap()
        );
        assert_eq!(
            server_name("[::1]").unwrap(),
            ServerName::from(IpAddr::V6(Ipv6Addr::LOCALHOST))
        );
        assert!(server_name("bad name").is_err());
    }
}
