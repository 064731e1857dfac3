//! What the CLI knows of the machine it runs on.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

/// The machine's host name, the default node name.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "mote".to_owned())
}

/// The address a process of this machine dials to reach a listener on `addr`: a listener on
/// every address (`0.0.0.0`, `[::]`) is reached on loopback, a name certificates and the
/// node's Host allow-list hold.
pub fn dialled_here(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V4(a) if a.ip().is_unspecified() => (Ipv4Addr::LOCALHOST, a.port()).into(),
        SocketAddr::V6(a) if a.ip().is_unspecified() => (Ipv6Addr::LOCALHOST, a.port()).into(),
        _ => addr,
    }
}
