//! Issue 33's attacks, each reproduced against the real binary and refused, with the legitimate
//! use beside it still working. One module per adversary's way in:
//! what reaches guests (credentials), what web pages can do (Host, Origin, the dashboard's
//! origin), routes, the node's network (outbound grants), open streams after revocation,
//! guessing, and the secrets around a node (argv, the admin token, logs).

mod credentials;
mod dashboard;
mod flood;
mod guessing;
pub(crate) mod outbound;
mod routes;
mod secrets;
mod streams;
mod web;

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr};

/// A raw HTTP/1.1 exchange from the local address `from` (any 127.0.0.0/8 address is this
/// machine's), for what a client library will not send: a forged `Host`, an absolute URI, a
/// path it would normalise. Returns the status and the body.
pub(crate) fn raw(from: IpAddr, to: &str, head: &str, body: &[u8]) -> (u16, String) {
    let addr: SocketAddr = to
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .expect("the node's URL is http://IP:PORT");
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.bind(&SocketAddr::new(from, 0).into()).unwrap();
    socket.connect(&addr.into()).unwrap();
    let mut stream: std::net::TcpStream = socket.into();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let head = head.replace("{addr}", &addr.to_string());
    let request = format!(
        "{head}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {answer:?}"));
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// This machine, as a client of the node under test.
pub(crate) fn loopback() -> IpAddr {
    IpAddr::from([127, 0, 0, 1])
}
