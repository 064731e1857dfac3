//! `host`: the `Host` header against a node's allow-list ([`HostAllowList`]), the answer to DNS
//! rebinding. The first byte chooses the address the node listens on; the rest is the header,
//! then, after a newline if there is one, a host the operator added (`--allow-host`).
//!
//! A list that builds must: answer every loopback IP literal and every `localhost` name; answer
//! alike whatever the case of the header, with or without a port, and with or without a
//! trailing dot on a name; and answer a name only if it is a loopback name, the advertised
//! host, or the operator's (itself or, for `*.domain`, below it), unless the operator allowed
//! `*`.

use mote_access::HostAllowList;
use std::net::IpAddr;

const LISTEN: [&str; 5] = ["127.0.0.1", "0.0.0.0", "10.0.0.5", "::1", "::"];
const ADVERTISED: &str = "https://node-a.example:8443/";

/// Runs the target on `data`.
pub fn host(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let listen: IpAddr = LISTEN[usize::from(first) % LISTEN.len()]
        .parse()
        .expect("the listen addresses parse");
    let (header, extra) = match rest.iter().position(|&b| b == b'\n') {
        Some(at) => (&rest[..at], Some(&rest[at + 1..])),
        None => (rest, None),
    };
    let extra: Vec<String> = extra
        .map(|e| String::from_utf8_lossy(e).into_owned())
        .into_iter()
        .collect();
    let Ok(list) = HostAllowList::new(&[listen], ADVERTISED, &extra) else {
        return;
    };
    let allowed = list.allows(header);
    assert_eq!(
        list.allows(&header.to_ascii_lowercase()),
        allowed,
        "case changed the answer for {header:?}"
    );
    let Ok(text) = std::str::from_utf8(header) else {
        assert!(!allowed || extra.iter().any(|e| e.trim() == "*"));
        return;
    };
    if !text.is_empty() && !text.contains(':') {
        assert_eq!(
            list.allows(format!("{text}:8080").as_bytes()),
            allowed,
            "a port changed the answer for {text:?}"
        );
        // A letter past `f` makes it a name, never an IP literal.
        let named = text
            .bytes()
            .any(|b| b.to_ascii_lowercase() > b'f' && b.is_ascii_alphabetic());
        if named && !text.ends_with('.') {
            assert_eq!(
                list.allows(format!("{text}.").as_bytes()),
                allowed,
                "a trailing dot changed the answer for {text:?}"
            );
        }
        if named && allowed {
            assert!(
                name_allowed(text.trim_end_matches('.'), &extra),
                "{text:?} was let in"
            );
        }
    }
    let literal = match text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        Some(v6) => v6.parse::<std::net::Ipv6Addr>().ok().map(IpAddr::V6),
        None => text.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4),
    };
    if let Some(ip) = literal
        && ip.is_loopback()
    {
        assert!(allowed, "loopback {text:?} was refused");
    }
    for loopback in [
        "localhost",
        "LocalHost:80",
        "app.localhost",
        "127.0.0.1",
        "[::1]:1",
    ] {
        assert!(list.allows(loopback.as_bytes()), "{loopback} was refused");
    }
}

/// Whether a name is one the list was told of: a loopback name, the advertised host, or the
/// operator's.
fn name_allowed(name: &str, extra: &[String]) -> bool {
    let name = name.to_ascii_lowercase();
    if name == "localhost" || name.ends_with(".localhost") || name == "node-a.example" {
        return true;
    }
    extra.iter().any(|e| {
        let e = e.trim().to_ascii_lowercase();
        let e = e.strip_suffix('.').unwrap_or(&e);
        match e.strip_prefix("*.") {
            _ if e == "*" => true,
            Some(domain) => name.len() > domain.len() + 1 && name.ends_with(&format!(".{domain}")),
            None => name == e,
        }
    })
}

/// Headers as browsers send them (names, ports, IPv4 and IPv6 literals, mapped addresses),
/// rebinding attempts, and operator hosts of each kind.
pub fn seeds() -> Vec<Vec<u8>> {
    let headers = [
        "127.0.0.1:8080",
        "localhost",
        "localhost.:8080",
        "[::1]:8080",
        "[::ffff:127.0.0.1]",
        "node-a.example:8443",
        "NODE-A.EXAMPLE.",
        "evil.example:8080",
        "10.0.0.5",
        "127.0.0.1.",
        "a.localhost",
        "",
    ];
    let extras = [
        "",
        "\nmote.example.com",
        "\n*.example.com",
        "\n10.1.2.3",
        "\n*",
    ];
    let mut seeds = Vec::new();
    for listen in 0..LISTEN.len() as u8 {
        for header in headers {
            for extra in extras {
                seeds.push([&[listen][..], header.as_bytes(), extra.as_bytes()].concat());
            }
        }
    }
    seeds
}
