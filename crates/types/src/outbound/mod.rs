//! Where a `wasi:http` component's outbound requests may go, decided here without I/O; the
//! runtime resolves, asks, and connects only to an address that was admitted.
//!
//! - [`OutboundHost`]: one entry of a function's `allow_outbound` or of a node's ceiling: a
//!   host name, `*.domain` (its subdomains), `*` (any host at a public address), an IP address
//!   or a CIDR range, each with or without a port. Names and `*.domain` are a deployer's to
//!   grant; `*`, addresses and ranges reach past named hosts, so only an admin may grant them
//!   ([`Grantor`], [`OutboundHost::needs_admin`]).
//! - [`OutboundCeiling`]: the most a node allows (`mote up --outbound-ceiling`); a deploy whose
//!   grants it does not cover is refused ([`OutboundCeiling::first_uncovered`]).
//! - [`special_range`]: whether an address is public, or else which special-purpose range
//!   ([`Special`]) holds it: loopback, private, link-local, shared, unique-local, multicast,
//!   documentation, ... IPv6 forms that embed an IPv4 address (mapped, compatible, NAT64,
//!   6to4) are judged by the address they embed.
//! - [`OutboundRules`]: the decision for one request, asked before the lookup
//!   ([`OutboundRules::may_resolve`]) and for each address the host resolved to
//!   ([`OutboundRules::admit`]). A public address needs the function's grants and the ceiling
//!   to allow the request, by name or by address. Any other address, and any of the node's own
//!   addresses, needs both to name it by an IP or CIDR entry: a name is never enough, because
//!   whoever controls a name's DNS records chooses where it points.

mod special;

pub use special::{Special, special_range};

use ipnet::{IpNet, Ipv4Net};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use special::is_public_net;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// A host a component may send requests to: `name`, `*.domain` (any subdomain), `*` (any host
/// at a public address), an IP address (`10.0.0.5`, `[fd00::5]`) or a CIDR range
/// (`10.0.0.0/8`, `[fd00::/8]`), each with a port (`:443`) or without (any port).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OutboundHost {
    target: Target,
    port: Option<u16>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Target {
    /// `*`: any host, as long as it is at a public address.
    Any,
    /// `*.domain`: any name below the domain (lowercase, kept without the `*.`).
    Subdomains(String),
    /// One host name, lowercase.
    Name(String),
    /// An IP address (a network of one address) or a CIDR range, with no bits set past its
    /// prefix.
    Net(IpNet),
}

/// An outbound host entry that cannot be used, with the reason.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "invalid outbound host `{host}`: {reason}; write HOST or HOST:PORT, as in `api.example.com:443`, `*.example.com`, `10.0.0.5:5432`, `10.0.0.0/8` or `[fd00::/8]:443`"
)]
pub struct OutboundHostError {
    /// The entry as given.
    pub host: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl OutboundHost {
    /// Parses one `HOST[:PORT]`. An IPv6 address or range is written in brackets when a port
    /// follows, `[::1]:8080`, `[fd00::/8]:443`.
    pub fn parse(spec: &str) -> Result<Self, OutboundHostError> {
        let fail = |reason| OutboundHostError {
            host: spec.to_owned(),
            reason,
        };
        if spec.contains("://") {
            return Err(fail("give the host, not a URL"));
        }
        // A bare IPv6 address or range has colons of its own and no port.
        if let Some(net) = parse_net(spec, true) {
            return Ok(Self {
                target: Target::Net(net.map_err(fail)?),
                port: None,
            });
        }
        let (host, port) = match spec.rsplit_once(':') {
            Some((host, port))
                if !host.ends_with(':') && (host.ends_with(']') || !host.contains(':')) =>
            {
                let port = port
                    .parse::<u16>()
                    .ok()
                    .filter(|p| *p != 0 && port.bytes().all(|b| b.is_ascii_digit()))
                    .ok_or_else(|| fail("the port is not a number from 1 to 65535"))?;
                (host, Some(port))
            }
            _ => (spec, None),
        };
        let host = host.to_ascii_lowercase();
        let target = if host == "*" {
            Target::Any
        } else if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            match parse_net(v6, true) {
                Some(net) => Target::Net(net.map_err(fail)?),
                None => return Err(fail("the part in brackets is not an IPv6 address or range")),
            }
        } else if let Some(net) = parse_net(&host, false) {
            Target::Net(net.map_err(fail)?)
        } else if let Some(domain) = host.strip_prefix("*.") {
            Target::Subdomains(check_name(domain).map_err(fail)?.to_owned())
        } else {
            Target::Name(check_name(&host).map_err(fail)?.to_owned())
        };
        Ok(Self { target, port })
    }

    /// Parses a comma-separated list, as `--allow-outbound` takes it; empty parts are skipped.
    pub fn parse_list(list: &str) -> Result<Vec<Self>, OutboundHostError> {
        list.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(Self::parse)
            .collect()
    }

    /// Whether only an admin may grant this entry: `*`, an IP address or a CIDR range reach
    /// hosts nobody named, so a deployer may grant names and `*.domain` only.
    pub fn needs_admin(&self) -> bool {
        matches!(self.target, Target::Any | Target::Net(_))
    }

    fn port_allows(&self, port: u16) -> bool {
        self.port.is_none_or(|p| p == port)
    }

    /// Whether this entry allows a request to `host` (as in a URL's authority) on `port` by its
    /// name: `*`, `*.domain` and names do; address and range entries match by address only
    /// ([`OutboundHost::allows_address`]).
    pub fn allows_name(&self, host: &str, port: u16) -> bool {
        if !self.port_allows(port) {
            return false;
        }
        let host = host.trim_end_matches('.');
        match &self.target {
            Target::Any => true,
            Target::Subdomains(domain) => below(host, domain),
            Target::Name(name) => host.eq_ignore_ascii_case(name),
            Target::Net(_) => false,
        }
    }

    /// Whether this entry, an address or a range, holds `addr` and allows `port`.
    pub fn allows_address(&self, addr: IpAddr, port: u16) -> bool {
        match &self.target {
            Target::Net(net) => self.port_allows(port) && net.contains(&addr.to_canonical()),
            _ => false,
        }
    }

    /// Whether this entry is an address or a range (which may match a name by the addresses it
    /// resolves to) allowing `port`.
    fn matches_by_address(&self, port: u16) -> bool {
        matches!(self.target, Target::Net(_)) && self.port_allows(port)
    }

    /// Whether everything `other` allows, this entry allows too.
    pub fn covers(&self, other: &OutboundHost) -> bool {
        let ports = self.port.is_none() || self.port == other.port;
        ports
            && match (&self.target, &other.target) {
                (Target::Any, Target::Any | Target::Subdomains(_) | Target::Name(_)) => true,
                (Target::Any, Target::Net(net)) => is_public_net(net),
                (Target::Subdomains(d), Target::Subdomains(o)) => o == d || below(o, d),
                (Target::Subdomains(d), Target::Name(name)) => below(name, d),
                (Target::Name(a), Target::Name(b)) => a == b,
                (Target::Net(a), Target::Net(b)) => a.contains(b),
                _ => false,
            }
    }
}

/// Whether `host` is a name below `domain` (by whole labels, ignoring case).
fn below(host: &str, domain: &str) -> bool {
    host.len().checked_sub(domain.len() + 1).is_some_and(|at| {
        host.as_bytes()[at] == b'.' && host[at + 1..].eq_ignore_ascii_case(domain)
    })
}

/// `spec` as an IP address or a CIDR range, if it is written as one (`None` if it is not:
/// then it is a name); IPv6 only if `v6`, IPv4 only otherwise.
fn parse_net(spec: &str, v6: bool) -> Option<Result<IpNet, &'static str>> {
    let (addr, prefix) = match spec.split_once('/') {
        Some((addr, prefix)) => (addr, Some(prefix)),
        None => (spec, None),
    };
    let addr: IpAddr = match v6 {
        true => IpAddr::V6(addr.parse::<Ipv6Addr>().ok()?),
        false => IpAddr::V4(addr.parse::<Ipv4Addr>().ok()?),
    };
    let max = if v6 { 128 } else { 32 };
    let prefix = match prefix {
        None => max,
        Some(p) if !p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit()) => {
            match p.parse::<u8>() {
                Ok(p) if p <= max => p,
                _ => return Some(Err("the prefix length is longer than the address")),
            }
        }
        Some(_) => return Some(Err("the prefix length is not a number")),
    };
    let net = IpNet::new(addr, prefix).expect("the prefix length was checked");
    match net.trunc() == net {
        true => Some(Ok(canonical_net(net))),
        false => Some(Err(
            "the address has bits set past its prefix length (write the range's first address, as in `10.0.0.0/8`)",
        )),
    }
}

/// `net`, with an IPv4-mapped IPv6 range written as the IPv4 range it is: a connection to
/// `::ffff:a.b.c.d` is one to `a.b.c.d`, and addresses are compared in that form.
fn canonical_net(net: IpNet) -> IpNet {
    match net {
        IpNet::V6(n) if n.prefix_len() >= 96 => match n.addr().to_ipv4_mapped() {
            Some(a) => IpNet::V4(Ipv4Net::new(a, n.prefix_len() - 96).expect("at most 32 bits")),
            None => net,
        },
        _ => net,
    }
}

/// `name` if it is a DNS host name (and not a number a resolver would take for an address).
fn check_name(name: &str) -> Result<&str, &'static str> {
    let valid = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    if !valid {
        return Err("the host is not a name, an IP address or range, `*` or `*.domain`");
    }
    // `127.1` and `0x7f.1` are addresses to a resolver (inet_aton), not names; so is any name
    // whose last label is a number (the URL standard's rule).
    let last = name.rsplit('.').next().unwrap_or(name);
    let number = last.bytes().all(|b| b.is_ascii_digit())
        || last
            .strip_prefix("0x")
            .is_some_and(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()));
    match number {
        true => Err(
            "the name ends in a number, so resolvers read it as an address; write an IPv4 address as four decimal numbers, a.b.c.d",
        ),
        false => Ok(name),
    }
}

impl fmt::Display for OutboundHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.target {
            Target::Any => f.write_str("*")?,
            Target::Subdomains(domain) => write!(f, "*.{domain}")?,
            Target::Name(name) => f.write_str(name)?,
            Target::Net(net) if net.prefix_len() == net.max_prefix_len() => match net.addr() {
                IpAddr::V4(v4) => write!(f, "{v4}")?,
                IpAddr::V6(v6) => write!(f, "[{v6}]")?,
            },
            Target::Net(IpNet::V4(net)) => write!(f, "{net}")?,
            Target::Net(IpNet::V6(net)) => write!(f, "[{net}]")?,
        }
        if let Some(port) = self.port {
            write!(f, ":{port}")?;
        }
        Ok(())
    }
}

impl FromStr for OutboundHost {
    type Err = OutboundHostError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for OutboundHost {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for OutboundHost {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        OutboundHost::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// Who is deploying a function, as far as its outbound grants go.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Grantor {
    /// An admin (or anyone, on a node that requires no tokens): may grant any entry the
    /// ceiling covers.
    Admin,
    /// A deployer: may grant names and `*.domain` only.
    #[default]
    Deployer,
}

/// The most a node lets any function reach (`mote up --outbound-ceiling`): entries as
/// `allow_outbound` takes them. The default, `*`, is any public address; `none` is no outbound
/// requests at all. A non-public address is reached only through an IP or CIDR entry here and
/// one in the function's grants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboundCeiling {
    hosts: Vec<OutboundHost>,
}

impl Default for OutboundCeiling {
    fn default() -> Self {
        Self {
            hosts: vec![OutboundHost {
                target: Target::Any,
                port: None,
            }],
        }
    }
}

impl OutboundCeiling {
    /// No outbound requests at all.
    pub fn none() -> Self {
        Self { hosts: Vec::new() }
    }

    /// Parses `none`, or a comma-separated list of entries.
    pub fn parse(list: &str) -> Result<Self, OutboundHostError> {
        if list.trim() == "none" {
            return Ok(Self::none());
        }
        let hosts = OutboundHost::parse_list(list)?;
        if hosts.is_empty() {
            return Err(OutboundHostError {
                host: list.to_owned(),
                reason: "the list is empty (write `none` for no outbound requests at all)",
            });
        }
        Ok(Self { hosts })
    }

    /// Its entries; none for `none`.
    pub fn hosts(&self) -> &[OutboundHost] {
        &self.hosts
    }

    /// The first of `grants` that no entry of the ceiling covers, if any.
    pub fn first_uncovered<'g>(&self, grants: &'g [OutboundHost]) -> Option<&'g OutboundHost> {
        grants
            .iter()
            .find(|g| !self.hosts.iter().any(|c| c.covers(g)))
    }
}

impl fmt::Display for OutboundCeiling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.hosts.is_empty() {
            return f.write_str("none");
        }
        for (i, host) in self.hosts.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{host}")?;
        }
        Ok(())
    }
}

impl FromStr for OutboundCeiling {
    type Err = OutboundHostError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// Why an outbound request may not go to an address.
#[derive(Clone, Copy, Debug, thiserror::Error, PartialEq, Eq)]
pub enum Refusal {
    /// The function was granted neither the host nor the address.
    #[error("the function's allow_outbound names neither this host and port nor the address")]
    NotGranted,
    /// The node's ceiling allows neither the host nor the address.
    #[error("the node's --outbound-ceiling allows neither this host and port nor the address")]
    AboveCeiling,
    /// A non-public address that the function's grants and the ceiling do not both name by an
    /// IP or CIDR entry.
    #[error(
        "the address is {0}: only an IP or CIDR entry in both the function's allow_outbound (granted by an admin) and the node's --outbound-ceiling reaches it"
    )]
    NotPublic(Special),
    /// An address that is never a destination.
    #[error("the address is {0}, never a destination")]
    Never(Special),
}

/// The outbound rules of one function on one node: its grants under the node's ceiling.
#[derive(Clone, Copy, Debug)]
pub struct OutboundRules<'a> {
    /// The function's `allow_outbound`.
    pub grants: &'a [OutboundHost],
    /// The node's `--outbound-ceiling`.
    pub ceiling: &'a OutboundCeiling,
}

impl OutboundRules<'_> {
    /// Whether the name `host` may be looked up for a request on `port`: the grants and the
    /// ceiling each allow it by name, or hold an IP or CIDR entry that may match one of its
    /// addresses. Asking first keeps a function from having the node look up (and so leak to
    /// a DNS server) names it could never reach.
    pub fn may_resolve(&self, host: &str, port: u16) -> Result<(), Refusal> {
        let may = |list: &[OutboundHost]| {
            list.iter()
                .any(|e| e.allows_name(host, port) || e.matches_by_address(port))
        };
        if !may(self.grants) {
            return Err(Refusal::NotGranted);
        }
        if !may(self.ceiling.hosts()) {
            return Err(Refusal::AboveCeiling);
        }
        Ok(())
    }

    /// Whether a request to `host` on `port` may connect to `addr`, the address `host` is or
    /// one it resolved to; `own` says `addr` is one of the node's own addresses.
    pub fn admit(&self, host: &str, port: u16, addr: IpAddr, own: bool) -> Result<(), Refusal> {
        let addr = addr.to_canonical();
        let special = special_range(addr).or(own.then_some(Special::Own));
        let by_address = |list: &[OutboundHost]| list.iter().any(|e| e.allows_address(addr, port));
        match special {
            Some(special) if special.never_reachable() => Err(Refusal::Never(special)),
            Some(special) => match by_address(self.grants) && by_address(self.ceiling.hosts()) {
                true => Ok(()),
                false => Err(Refusal::NotPublic(special)),
            },
            None => {
                let allows = |list: &[OutboundHost]| {
                    by_address(list) || list.iter().any(|e| e.allows_name(host, port))
                };
                if !allows(self.grants) {
                    Err(Refusal::NotGranted)
                } else if !allows(self.ceiling.hosts()) {
                    Err(Refusal::AboveCeiling)
                } else {
                    Ok(())
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
