//! Which `Host` a request may name ([`HostAllowList`]): the answer to DNS rebinding. A web page at
//! `http://evil.example:8080` whose name the attacker re-points at `127.0.0.1` makes the browser
//! send the page's requests to the node as same-origin requests, with `Host: evil.example:8080`;
//! a node that answers only the names it is known by refuses them. Loopback names and addresses,
//! the address the node listens on and the host of its advertised URL are allowed, and any other
//! names the operator adds (`--allow-host`).
//!
//! A node listening on every address (`0.0.0.0`, `::`) cannot know each address it is reached at,
//! so it allows every IP literal: a page's origin is an IP literal only if the browser dialed that
//! address itself, which is no rebinding. Names it must still be told.

use std::net::IpAddr;

/// The hosts a node answers to.
#[derive(Clone, Debug)]
pub struct HostAllowList {
    /// Lowercase names without a trailing dot; `*.domain` entries as `.domain`.
    names: Vec<String>,
    /// Allowed IP addresses beyond loopback.
    addresses: Vec<IpAddr>,
    /// Every IP literal (the node listens on every address).
    any_address: bool,
    /// Every host (`--allow-host '*'`).
    any: bool,
}

/// A host the operator gave that is not a host name or address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not a host to allow: give a name (`mote.example.com`), a subdomain pattern (`*.example.com`), an IP address, or `*` for any"
)]
pub struct HostError(pub String);

impl HostAllowList {
    /// The hosts of a node listening on `listen`, advertised at `advertised` (a URL), with
    /// `extra` hosts from the operator.
    pub fn new(listen: IpAddr, advertised: &str, extra: &[String]) -> Result<Self, HostError> {
        let mut list = Self {
            names: Vec::new(),
            addresses: Vec::new(),
            any_address: listen.is_unspecified(),
            any: false,
        };
        list.addresses.push(listen);
        if let Some(host) = url_host(advertised) {
            list.add(host)?;
        }
        for host in extra {
            list.add(host)?;
        }
        Ok(list)
    }

    fn add(&mut self, host: &str) -> Result<(), HostError> {
        let bad = || HostError(host.to_owned());
        let host = host.trim();
        if host == "*" {
            self.any = true;
            return Ok(());
        }
        if let Some(ip) = parse_ip(host) {
            self.addresses.push(ip);
            return Ok(());
        }
        let (wildcard, name) = match host.strip_prefix("*.") {
            Some(domain) => (true, domain),
            None => (false, host),
        };
        let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
        if !is_name(&name) {
            return Err(bad());
        }
        self.names.push(match wildcard {
            true => format!(".{name}"),
            false => name,
        });
        Ok(())
    }

    /// Whether a request whose `Host` header is `host` (`name`, `name:port`, `[v6]:port`) may be
    /// answered. The port is not checked: rebinding changes names, not ports.
    pub fn allows(&self, host: &[u8]) -> bool {
        if self.any {
            return true;
        }
        let Some(host) = std::str::from_utf8(host).ok().and_then(strip_port) else {
            return false;
        };
        if let Some(ip) = parse_ip(host) {
            return ip.is_loopback()
                || self.any_address
                || self.addresses.contains(&ip)
                || mapped_loopback(ip);
        }
        let name = host.strip_suffix('.').unwrap_or(host);
        if !is_name(name) {
            return false;
        }
        let loopback =
            name.eq_ignore_ascii_case("localhost") || ends_with_ignore_case(name, ".localhost");
        loopback
            || self
                .names
                .iter()
                .any(|allowed| match allowed.starts_with('.') {
                    true => ends_with_ignore_case(name, allowed),
                    false => name.eq_ignore_ascii_case(allowed),
                })
    }
}

/// `::ffff:127.0.0.1` is loopback too, though `Ipv6Addr::is_loopback` says only `::1`.
fn mapped_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
        IpAddr::V4(_) => false,
    }
}

fn ends_with_ignore_case(name: &str, suffix: &str) -> bool {
    name.len() > suffix.len()
        && name.as_bytes()[name.len() - suffix.len()..].eq_ignore_ascii_case(suffix.as_bytes())
}

/// A DNS name: dot-separated labels of letters, digits, `-` and `_`, each 1 to 63 bytes.
fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// An IP address as a host: `1.2.3.4` or `[v6]` (or a bare v6, as an operator may write it).
fn parse_ip(host: &str) -> Option<IpAddr> {
    match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => v6.parse::<std::net::Ipv6Addr>().ok().map(IpAddr::V6),
        None => host.parse().ok(),
    }
}

/// The host of a `Host` header: without its port, brackets kept around an IPv6 address.
fn strip_port(host: &str) -> Option<&str> {
    let host = match host.rsplit_once(':') {
        Some((name, port)) if !name.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
            match name.starts_with('[') || !name.contains(':') {
                true => name,
                false => return None,
            }
        }
        _ => host,
    };
    (!host.is_empty()).then_some(host)
}

/// The host of a URL such as `https://node-a.example:8080/`.
fn url_host(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    strip_port(authority)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn list(listen: &str, advertised: &str, extra: &[&str]) -> HostAllowList {
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        HostAllowList::new(listen.parse().unwrap(), advertised, &extra).unwrap()
    }

    #[test]
    fn a_loopback_node_answers_loopback_names_and_nothing_else() {
        let hosts = list("127.0.0.1", "http://127.0.0.1:8080", &[]);
        for ok in [
            "127.0.0.1:8080",
            "127.0.0.1",
            "127.9.9.9:1",
            "localhost:8080",
            "LOCALHOST",
            "localhost.",
            "app.localhost:8080",
            "[::1]:8080",
            "[::ffff:127.0.0.1]:8080",
        ] {
            assert!(hosts.allows(ok.as_bytes()), "{ok} was refused");
        }
        for bad in [
            "evil.example:8080",
            "evil.example",
            "localhost.evil.example",
            "evillocalhost",
            "10.0.0.5:8080",
            "0.0.0.0:8080",
            "",
            ":8080",
            "local host",
            "localhost:80:80",
            "::1",
            "[::1",
            "xn--\u{fffd}",
        ] {
            assert!(!hosts.allows(bad.as_bytes()), "{bad:?} was allowed");
        }
    }

    #[test]
    fn the_advertised_host_and_the_operators_names_are_allowed() {
        let hosts = list(
            "10.0.0.5",
            "https://node-a.example:8443/",
            &["mote.example.com", "*.corp.example", "192.168.1.9"],
        );
        for ok in [
            "10.0.0.5:8080",
            "node-a.example:8443",
            "Node-A.Example.",
            "mote.example.com",
            "a.b.corp.example:1",
            "192.168.1.9:8080",
        ] {
            assert!(hosts.allows(ok.as_bytes()), "{ok} was refused");
        }
        for bad in ["corp.example", "xcorp.example", "10.0.0.6", "example.com"] {
            assert!(!hosts.allows(bad.as_bytes()), "{bad} was allowed");
        }
    }

    #[test]
    fn a_node_on_every_address_allows_every_ip_literal_but_not_every_name() {
        let hosts = list("0.0.0.0", "http://n1:8080", &[]);
        assert!(hosts.allows(b"10.1.2.3:8080"));
        assert!(hosts.allows(b"[fd00::1]:8080"));
        assert!(hosts.allows(b"n1:8080"));
        assert!(!hosts.allows(b"evil.example:8080"));
        assert!(list("::", "http://n1", &["*"]).allows(b"anything.at.all"));
    }

    #[test]
    fn bad_operator_hosts_are_refused_with_the_host_named() {
        let e = HostAllowList::new("127.0.0.1".parse().unwrap(), "", &["a b".into()]).unwrap_err();
        assert!(e.to_string().contains("`a b`"), "{e}");
        assert!(HostAllowList::new("127.0.0.1".parse().unwrap(), "", &["*.".into()]).is_err());
    }

    proptest! {
        /// A name that is not loopback's and not given is refused, whatever its port or case.
        #[test]
        fn foreign_names_are_refused(name in "[a-z][a-z0-9-]{0,10}(\\.[a-z][a-z0-9-]{0,10}){1,3}", port in proptest::option::of(1u16..)) {
            prop_assume!(!name.ends_with(".localhost") && name != "node-a.example");
            let hosts = list("127.0.0.1", "http://node-a.example:8080", &[]);
            let host = match port { Some(p) => format!("{name}:{p}"), None => name.clone() };
            prop_assert!(!hosts.allows(host.to_uppercase().as_bytes()));
            prop_assert!(!hosts.allows(host.as_bytes()));
        }

        /// Arbitrary bytes never panic, and are allowed only if they parse as a host.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let hosts = list("127.0.0.1", "http://127.0.0.1:8080", &[]);
            if hosts.allows(&bytes) {
                prop_assert!(std::str::from_utf8(&bytes).is_ok());
            }
        }
    }
}
