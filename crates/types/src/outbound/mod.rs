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

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
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

/// A special-purpose address range (IANA's registries): not a public host's address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Special {
    /// `0.0.0.0`, `::`: a connection to it reaches the local host.
    Unspecified,
    /// `0.0.0.0/8`: "this network", no destination.
    ThisNetwork,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// `10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16`, and the local-use NAT64 prefix.
    Private,
    /// `100.64.0.0/10`: carrier-grade NAT.
    Shared,
    /// `169.254.0.0/16` (cloud metadata services live here), `fe80::/10`.
    LinkLocal,
    /// `fec0::/10`, deprecated but still routed by some networks.
    SiteLocal,
    /// `fc00::/7`.
    UniqueLocal,
    /// `192.0.2.0/24`, `198.51.100.0/24`, `203.0.113.0/24`, `2001:db8::/32`, `3fff::/20`.
    Documentation,
    /// `198.18.0.0/15`.
    Benchmarking,
    /// Reserved or protocol-specific: `192.0.0.0/24`, `192.88.99.0/24`, `240.0.0.0/4`,
    /// `100::/64`, `2001::/23`, `5f00::/16`, IPv4-compatible IPv6 and anything outside
    /// `2000::/3` that no other entry names.
    Reserved,
    /// `224.0.0.0/4`, `ff00::/8`: no TCP peer.
    Multicast,
    /// `255.255.255.255`: no TCP peer.
    Broadcast,
    /// An address of one of the node's own interfaces (found at connect time, not here).
    Own,
}

impl Special {
    /// Whether no entry can make this a destination: a connection to the unspecified address
    /// reaches the local host by another name (an operator who means it grants `127.0.0.1`),
    /// and "this network", multicast and broadcast have no TCP peer.
    pub fn never_reachable(self) -> bool {
        matches!(
            self,
            Self::Unspecified | Self::ThisNetwork | Self::Multicast | Self::Broadcast
        )
    }

    /// What the range is, in words.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unspecified => "the unspecified address",
            Self::ThisNetwork => "in 0.0.0.0/8 (this network)",
            Self::Loopback => "a loopback address",
            Self::Private => "a private address",
            Self::Shared => "a shared (carrier-grade NAT) address",
            Self::LinkLocal => "a link-local address",
            Self::SiteLocal => "a site-local address",
            Self::UniqueLocal => "a unique-local address",
            Self::Documentation => "a documentation address",
            Self::Benchmarking => "a benchmarking address",
            Self::Reserved => "a reserved address",
            Self::Multicast => "a multicast address",
            Self::Broadcast => "the broadcast address",
            Self::Own => "one of the node's own addresses",
        }
    }
}

impl fmt::Display for Special {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

const fn v4(a: [u8; 4], prefix: u8) -> Ipv4Net {
    Ipv4Net::new_assert(Ipv4Addr::new(a[0], a[1], a[2], a[3]), prefix)
}

const fn v6(s: [u16; 8], prefix: u8) -> Ipv6Net {
    Ipv6Net::new_assert(
        Ipv6Addr::new(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]),
        prefix,
    )
}

/// IPv4's special-purpose ranges; the first that holds an address names it, so the narrower
/// come first.
const V4_SPECIAL: [(Ipv4Net, Special); 17] = [
    (v4([0, 0, 0, 0], 32), Special::Unspecified),
    (v4([255, 255, 255, 255], 32), Special::Broadcast),
    (v4([0, 0, 0, 0], 8), Special::ThisNetwork),
    (v4([10, 0, 0, 0], 8), Special::Private),
    (v4([100, 64, 0, 0], 10), Special::Shared),
    (v4([127, 0, 0, 0], 8), Special::Loopback),
    (v4([169, 254, 0, 0], 16), Special::LinkLocal),
    (v4([172, 16, 0, 0], 12), Special::Private),
    (v4([192, 0, 0, 0], 24), Special::Reserved),
    (v4([192, 0, 2, 0], 24), Special::Documentation),
    (v4([192, 88, 99, 0], 24), Special::Reserved),
    (v4([192, 168, 0, 0], 16), Special::Private),
    (v4([198, 18, 0, 0], 15), Special::Benchmarking),
    (v4([198, 51, 100, 0], 24), Special::Documentation),
    (v4([203, 0, 113, 0], 24), Special::Documentation),
    (v4([224, 0, 0, 0], 4), Special::Multicast),
    (v4([240, 0, 0, 0], 4), Special::Reserved),
];

/// IPv6's special-purpose ranges besides the forms that embed an IPv4 address
/// ([`embedded_v4`]); anything outside `2000::/3` not named here is [`Special::Reserved`].
const V6_SPECIAL: [(Ipv6Net, Special); 10] = [
    (v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48), Special::Private),
    (v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64), Special::Reserved),
    (
        v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32),
        Special::Documentation,
    ),
    (v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 23), Special::Reserved),
    (
        v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20),
        Special::Documentation,
    ),
    (v6([0x5f00, 0, 0, 0, 0, 0, 0, 0], 16), Special::Reserved),
    (v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7), Special::UniqueLocal),
    (v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10), Special::LinkLocal),
    (v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10), Special::SiteLocal),
    (v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8), Special::Multicast),
];

/// Global unicast: the only IPv6 space allocated for public hosts.
const V6_GLOBAL: Ipv6Net = v6([0x2000, 0, 0, 0, 0, 0, 0, 0], 3);

/// The IPv6 forms that carry an IPv4 address, and where it is.
const V6_EMBEDDING: [Ipv6Net; 4] = [
    // IPv4-mapped, ::ffff:a.b.c.d: the same host as a.b.c.d.
    v6([0, 0, 0, 0, 0, 0xffff, 0, 0], 96),
    // IPv4-compatible, ::a.b.c.d (deprecated).
    v6([0, 0, 0, 0, 0, 0, 0, 0], 96),
    // NAT64's well-known prefix, 64:ff9b::a.b.c.d: a translator reaches a.b.c.d.
    v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96),
    // 6to4, 2002:AABB:CCDD::/48: a relay reaches a.b.c.d.
    v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16),
];

/// The IPv4 address `addr` embeds, if it is one of the forms that carry one.
fn embedded_v4(addr: Ipv6Addr) -> Option<(Ipv4Addr, bool)> {
    let s = addr.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    let sixto4 = Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8);
    let [mapped, compatible, nat64, six_to_four] = V6_EMBEDDING;
    if mapped.contains(&addr) || nat64.contains(&addr) {
        Some((low, false))
    } else if compatible.contains(&addr) {
        Some((low, true))
    } else if six_to_four.contains(&addr) {
        Some((sixto4, false))
    } else {
        None
    }
}

/// The special-purpose range that holds `addr`, or `None` for a public address. An IPv6 form
/// that embeds an IPv4 address is judged by it (the deprecated IPv4-compatible form is never
/// public).
pub fn special_range(addr: IpAddr) -> Option<Special> {
    match addr {
        IpAddr::V4(a) => V4_SPECIAL
            .iter()
            .find(|(net, _)| net.contains(&a))
            .map(|(_, special)| *special),
        IpAddr::V6(a) if a.is_unspecified() => Some(Special::Unspecified),
        IpAddr::V6(a) if a.is_loopback() => Some(Special::Loopback),
        IpAddr::V6(a) => match embedded_v4(a) {
            Some((v4, deprecated)) => match special_range(IpAddr::V4(v4)) {
                Some(special) => Some(special),
                None if deprecated => Some(Special::Reserved),
                None => None,
            },
            None => match V6_SPECIAL.iter().find(|(net, _)| net.contains(&a)) {
                Some((_, special)) => Some(*special),
                None if !V6_GLOBAL.contains(&a) => Some(Special::Reserved),
                None => None,
            },
        },
    }
}

/// Whether every address of `net` is public (as far as can be known without the node's own
/// addresses).
fn is_public_net(net: &IpNet) -> bool {
    if net.prefix_len() == net.max_prefix_len() {
        return special_range(net.addr()).is_none();
    }
    match net {
        IpNet::V4(net) => !V4_SPECIAL.iter().any(|(s, _)| overlap4(s, net)),
        IpNet::V6(net) => {
            V6_GLOBAL.contains(net)
                && !V6_SPECIAL.iter().any(|(s, _)| overlap6(s, net))
                && !V6_EMBEDDING.iter().any(|s| overlap6(s, net))
        }
    }
}

/// Two ranges overlap exactly when one holds the other.
fn overlap4(a: &Ipv4Net, b: &Ipv4Net) -> bool {
    a.contains(b) || b.contains(a)
}

fn overlap6(a: &Ipv6Net, b: &Ipv6Net) -> bool {
    a.contains(b) || b.contains(a)
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
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hosts(list: &str) -> Vec<OutboundHost> {
        OutboundHost::parse_list(list).unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn entries_parse_to_what_they_name_and_print_back() {
        for spec in [
            "api.example.com:443",
            "*.internal",
            "*",
            "*:443",
            "10.0.0.5:5432",
            "10.0.0.0/8:5432",
            "10.0.0.0/8",
            "[::1]",
            "[::1]:8080",
            "[fd00::/8]:443",
            "[fd00::/8]",
            "0.0.0.0",
        ] {
            let parsed = OutboundHost::parse(spec).unwrap();
            assert_eq!(parsed.to_string(), spec);
            let json = serde_json::to_string(&parsed).unwrap();
            assert_eq!(serde_json::from_str::<OutboundHost>(&json).unwrap(), parsed);
        }
        assert_eq!(OutboundHost::parse("::1").unwrap().to_string(), "[::1]");
        assert_eq!(
            OutboundHost::parse("fd00::/8").unwrap().to_string(),
            "[fd00::/8]"
        );
        assert_eq!(
            OutboundHost::parse("API.Example.COM").unwrap().to_string(),
            "api.example.com"
        );
    }

    #[test]
    fn names_match_by_name_and_addresses_by_address() {
        let h = hosts("api.example.com:443, *.internal,10.0.0.5:5432,[fd00::/8]");
        let by_name = |host, port| h.iter().any(|e| e.allows_name(host, port));
        let by_address = |addr, port| h.iter().any(|e| e.allows_address(ip(addr), port));
        assert!(by_name("api.example.com", 443) && by_name("API.Example.com.", 443));
        assert!(!by_name("api.example.com", 80) && !by_name("example.com", 443));
        assert!(by_name("db.internal", 5432) && by_name("a.b.internal", 1));
        assert!(!by_name("internal", 1) && !by_name("xinternal", 1));
        assert!(!by_name("10.0.0.5", 5432), "an address entry is no name");
        assert!(by_address("10.0.0.5", 5432) && !by_address("10.0.0.5", 5433));
        assert!(
            by_address("::ffff:10.0.0.5", 5432),
            "the mapped form is the address"
        );
        assert!(by_address("fd12::1", 9) && !by_address("fe80::1", 9));
        assert!(OutboundHost::parse("*").unwrap().allows_name("anything", 1));
    }

    #[test]
    fn only_names_and_subdomains_are_a_deployer_s_to_grant() {
        for spec in [
            "*",
            "*:443",
            "127.0.0.1:8080",
            "10.0.0.0/8",
            "[::1]",
            "0.0.0.0",
        ] {
            assert!(OutboundHost::parse(spec).unwrap().needs_admin(), "{spec}");
        }
        for spec in ["api.example.com", "localhost:8080", "*.example.com:443"] {
            assert!(!OutboundHost::parse(spec).unwrap().needs_admin(), "{spec}");
        }
    }

    #[test]
    fn bad_entries_say_why() {
        for (spec, says) in [
            ("http://a.com", "not a URL"),
            ("a.com:0", "port"),
            ("a.com:http", "port"),
            ("a.com:+80", "port"),
            ("a..com", "not a name"),
            ("a_b.com", "not a name"),
            ("[::1", "not a name"),
            ("[a.com]", "not an IPv6"),
            ("", "not a name"),
            ("10.0.0.1/8", "bits set past"),
            ("10.0.0.0/33", "longer than"),
            ("10.0.0.0/x", "not a number"),
            ("[fd00::/129]", "longer than"),
            ("127.1", "ends in a number"),
            ("0x7f.1", "ends in a number"),
            ("2130706433", "ends in a number"),
            ("a.0x7f000001", "ends in a number"),
        ] {
            let e = OutboundHost::parse(spec).unwrap_err().to_string();
            assert!(e.contains(says), "{spec}: {e}");
        }
    }

    #[test]
    fn a_ceiling_is_a_list_or_none_and_covers_what_it_holds() {
        assert_eq!(OutboundCeiling::default().to_string(), "*");
        assert_eq!(OutboundCeiling::parse("none").unwrap().to_string(), "none");
        assert!(OutboundCeiling::parse(" , ").is_err());
        let ceiling = OutboundCeiling::parse("*.example.com,10.0.0.0/8:5432").unwrap();
        let grants = hosts("api.example.com,*.a.example.com,10.1.2.3:5432,10.0.0.0/16:5432");
        assert_eq!(ceiling.first_uncovered(&grants), None);
        for beyond in [
            "example.com",
            "other.com",
            "*",
            "10.1.2.3",
            "10.1.2.3:22",
            "11.0.0.1:5432",
        ] {
            let grant = hosts(beyond);
            assert_eq!(ceiling.first_uncovered(&grant), Some(&grant[0]), "{beyond}");
        }
        let any = OutboundCeiling::default();
        assert_eq!(
            any.first_uncovered(&hosts("*,a.com,*.b.com,8.8.8.8:53")),
            None
        );
        assert_eq!(any.first_uncovered(&hosts("2606:4700::/32")), None);
        for private in [
            "127.0.0.1:8080",
            "169.254.169.254",
            "[::1]",
            "0.0.0.0",
            "10.0.0.0/8",
            "8.0.0.0/6",
            "0.0.0.0/0",
            "[2002::/24]",
            "[::ffff:127.0.0.1]",
        ] {
            let grant = hosts(private);
            assert!(any.first_uncovered(&grant).is_some(), "{private}");
        }
        let none = OutboundCeiling::none();
        assert!(none.first_uncovered(&hosts("a.com")).is_some());
        assert_eq!(none.first_uncovered(&[]), None);
    }

    #[test]
    fn special_ranges_are_named() {
        for (addr, special) in [
            ("127.0.0.1", Some(Special::Loopback)),
            ("127.255.0.9", Some(Special::Loopback)),
            ("0.0.0.0", Some(Special::Unspecified)),
            ("0.1.2.3", Some(Special::ThisNetwork)),
            ("10.9.8.7", Some(Special::Private)),
            ("172.31.255.255", Some(Special::Private)),
            ("172.32.0.1", None),
            ("192.168.1.1", Some(Special::Private)),
            ("100.64.0.1", Some(Special::Shared)),
            ("100.128.0.1", None),
            ("169.254.169.254", Some(Special::LinkLocal)),
            ("198.19.0.1", Some(Special::Benchmarking)),
            ("224.0.0.1", Some(Special::Multicast)),
            ("255.255.255.255", Some(Special::Broadcast)),
            ("240.0.0.1", Some(Special::Reserved)),
            ("8.8.8.8", None),
            ("::", Some(Special::Unspecified)),
            ("::1", Some(Special::Loopback)),
            ("::ffff:127.0.0.1", Some(Special::Loopback)),
            ("::ffff:169.254.169.254", Some(Special::LinkLocal)),
            ("::ffff:8.8.8.8", None),
            ("::127.0.0.1", Some(Special::Loopback)),
            ("::8.8.8.8", Some(Special::Reserved)),
            ("64:ff9b::10.0.0.1", Some(Special::Private)),
            ("64:ff9b::8.8.8.8", None),
            ("64:ff9b:1::8.8.8.8", Some(Special::Private)),
            ("2002:7f00:1::", Some(Special::Loopback)),
            ("2002:808:808::1", None),
            ("fd00::1", Some(Special::UniqueLocal)),
            ("fe80::1", Some(Special::LinkLocal)),
            ("fec0::1", Some(Special::SiteLocal)),
            ("ff02::1", Some(Special::Multicast)),
            ("2001:db8::1", Some(Special::Documentation)),
            ("2001::1", Some(Special::Reserved)),
            ("4000::1", Some(Special::Reserved)),
            ("2606:4700::1111", None),
        ] {
            assert_eq!(special_range(ip(addr)), special, "{addr}");
        }
    }

    #[test]
    fn rules_admit_public_addresses_by_name_and_others_only_by_address() {
        let any = OutboundCeiling::default();
        let named = hosts("db.internal:5432,localhost:8080");
        let rules = OutboundRules {
            grants: &named,
            ceiling: &any,
        };
        assert_eq!(rules.may_resolve("db.internal", 5432), Ok(()));
        assert_eq!(
            rules.may_resolve("db.internal", 22),
            Err(Refusal::NotGranted)
        );
        assert_eq!(
            rules.admit("db.internal", 5432, ip("8.8.8.8"), false),
            Ok(())
        );
        assert_eq!(
            rules.admit("db.internal", 5432, ip("10.0.0.5"), false),
            Err(Refusal::NotPublic(Special::Private)),
            "a name a tenant controls cannot point at the node's network"
        );
        assert_eq!(
            rules.admit("localhost", 8080, ip("127.0.0.1"), false),
            Err(Refusal::NotPublic(Special::Loopback))
        );
        assert_eq!(
            rules.admit("db.internal", 5432, ip("8.8.8.8"), true),
            Err(Refusal::NotPublic(Special::Own))
        );

        let ceiling = OutboundCeiling::parse("*,10.0.0.0/8").unwrap();
        let by_address = hosts("10.0.0.5:5432");
        let rules = OutboundRules {
            grants: &by_address,
            ceiling: &ceiling,
        };
        assert_eq!(rules.may_resolve("db.internal", 5432), Ok(()));
        assert_eq!(
            rules.admit("db.internal", 5432, ip("10.0.0.5"), false),
            Ok(())
        );
        assert_eq!(
            rules.admit("10.0.0.5", 5432, ip("::ffff:10.0.0.5"), false),
            Ok(())
        );
        assert_eq!(
            rules.admit("db.internal", 5432, ip("10.0.0.6"), false),
            Err(Refusal::NotPublic(Special::Private))
        );
        assert_eq!(
            rules.admit("db.internal", 5432, ip("8.8.8.8"), false),
            Err(Refusal::NotGranted)
        );
        let under_any = OutboundRules {
            grants: &by_address,
            ceiling: &any,
        };
        assert_eq!(
            under_any.admit("db.internal", 5432, ip("10.0.0.5"), false),
            Err(Refusal::NotPublic(Special::Private)),
            "the ceiling must name the address too"
        );

        let everything = OutboundCeiling::parse("0.0.0.0/0,[::/0]").unwrap();
        let all = hosts("0.0.0.0/0,[::/0]");
        let rules = OutboundRules {
            grants: &all,
            ceiling: &everything,
        };
        assert_eq!(rules.admit("x", 80, ip("127.0.0.1"), true), Ok(()));
        for never in ["0.0.0.0", "::", "224.0.0.1", "255.255.255.255", "0.1.2.3"] {
            assert!(
                matches!(
                    rules.admit("x", 80, ip(never), false),
                    Err(Refusal::Never(_))
                ),
                "{never}"
            );
        }

        let none = OutboundCeiling::none();
        let rules = OutboundRules {
            grants: &named,
            ceiling: &none,
        };
        assert_eq!(
            rules.may_resolve("db.internal", 5432),
            Err(Refusal::AboveCeiling)
        );
        assert_eq!(
            rules.admit("db.internal", 5432, ip("8.8.8.8"), false),
            Err(Refusal::AboveCeiling)
        );
    }

    /// Any IPv4 address, biased towards the special ranges' edges.
    fn any_v4() -> impl Strategy<Value = Ipv4Addr> {
        prop_oneof![
            any::<u32>().prop_map(Ipv4Addr::from),
            (0..V4_SPECIAL.len(), any::<u32>()).prop_map(|(i, bits)| {
                let net = V4_SPECIAL[i].0;
                Ipv4Addr::from(u32::from(net.network()) | (bits & u32::from(net.hostmask())))
            }),
        ]
    }

    /// The IPv6 forms that carry `a`.
    fn embeddings(a: Ipv4Addr) -> [Ipv6Addr; 4] {
        let [b0, b1, b2, b3] = a.octets();
        let (hi, lo) = (u16::from_be_bytes([b0, b1]), u16::from_be_bytes([b2, b3]));
        [
            a.to_ipv6_mapped(),
            Ipv6Addr::new(0, 0, 0, 0, 0, 0, hi, lo),
            Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, hi, lo),
            Ipv6Addr::new(0x2002, hi, lo, 7, 0, 0, 0, 1),
        ]
    }

    fn any_entry() -> impl Strategy<Value = OutboundHost> {
        let port = prop::option::of(prop_oneof![Just(80u16), Just(443), 1u16..]);
        let target = prop_oneof![
            Just(Target::Any),
            "[a-c]{1,2}(\\.[a-c]{1,2}){0,2}".prop_map(Target::Subdomains),
            "[a-c]{1,2}(\\.[a-c]{1,2}){0,2}".prop_map(Target::Name),
            (any_v4(), 0u8..=32)
                .prop_map(|(a, p)| Target::Net(IpNet::V4(Ipv4Net::new(a, p).unwrap().trunc()))),
            (any::<u128>(), 0u8..=128).prop_map(|(a, p)| Target::Net(canonical_net(IpNet::V6(
                Ipv6Net::new(Ipv6Addr::from(a), p).unwrap().trunc()
            )))),
        ];
        (target, port).prop_map(|(target, port)| OutboundHost { target, port })
    }

    /// An entry `cover` is likely to cover: the same kind, narrower.
    fn narrower(cover: OutboundHost) -> BoxedStrategy<OutboundHost> {
        let port = match cover.port {
            Some(p) => Just(Some(p)).boxed(),
            None => prop::option::of(1u16..).boxed(),
        };
        let target = match cover.target {
            Target::Any => any_entry().prop_map(|e| e.target).boxed(),
            Target::Subdomains(d) => ("[a-c]{1,2}", any::<bool>())
                .prop_map(move |(label, sub)| match sub {
                    true => Target::Subdomains(format!("{label}.{d}")),
                    false => Target::Name(format!("{label}.{d}")),
                })
                .boxed(),
            Target::Name(n) => Just(Target::Name(n)).boxed(),
            Target::Net(net) => (any::<u128>(), 0u8..=128)
                .prop_map(move |(bits, extra)| {
                    let prefix =
                        net.prefix_len() + extra % (net.max_prefix_len() - net.prefix_len() + 1);
                    let addr = match net {
                        IpNet::V4(n) => IpAddr::V4(Ipv4Addr::from(
                            u32::from(n.network()) | (bits as u32 & u32::from(n.hostmask())),
                        )),
                        IpNet::V6(n) => IpAddr::V6(Ipv6Addr::from(
                            u128::from(n.network()) | (bits & u128::from(n.hostmask())),
                        )),
                    };
                    Target::Net(IpNet::new(addr, prefix).unwrap().trunc())
                })
                .boxed(),
        };
        (target, port)
            .prop_map(|(target, port)| OutboundHost { target, port })
            .boxed()
    }

    /// An address near `entry` if it is a range (so that probes hit it), any address otherwise.
    fn probe_address(entry: &OutboundHost, bits: u128, near: bool) -> IpAddr {
        match (&entry.target, near) {
            (Target::Net(IpNet::V4(net)), true) => IpAddr::V4(Ipv4Addr::from(
                u32::from(net.network()) | (bits as u32 & u32::from(net.hostmask())),
            )),
            (Target::Net(IpNet::V6(net)), true) => IpAddr::V6(Ipv6Addr::from(
                u128::from(net.network()) | (bits & u128::from(net.hostmask())),
            )),
            _ if bits.is_multiple_of(2) => IpAddr::V4(Ipv4Addr::from(bits as u32)),
            _ => IpAddr::V6(Ipv6Addr::from(bits)),
        }
    }

    proptest! {
        /// Every address std calls special is special here, and every IPv6 form that embeds a
        /// special IPv4 address is refused like the address itself.
        #[test]
        fn special_ipv4_addresses_are_special_in_every_form(a in any_v4()) {
            let std_special = a.is_private() || a.is_loopback() || a.is_link_local()
                || a.is_multicast() || a.is_broadcast() || a.is_documentation()
                || a.is_unspecified();
            let special = special_range(IpAddr::V4(a));
            if std_special {
                prop_assert!(special.is_some(), "{a}");
            }
            let [mapped, compatible, nat64, six_to_four] = embeddings(a).map(|form| special_range(IpAddr::V6(form)));
            prop_assert_eq!(mapped, special);
            prop_assert_eq!(nat64, special);
            prop_assert_eq!(six_to_four, special);
            prop_assert!(compatible.is_some(), "the deprecated ::{} is never public", a);
        }

        #[test]
        fn special_ipv6_addresses_are_special(bits: u128) {
            let a = Ipv6Addr::from(bits);
            if a.is_loopback() || a.is_unspecified() || a.is_multicast() || a.is_unique_local()
                || a.is_unicast_link_local() {
                prop_assert!(special_range(IpAddr::V6(a)).is_some(), "{a}");
            }
        }

        /// Whatever a function is granted and the node allows, a non-public address is reached
        /// only if both hold an address or range entry that contains it, and names alone never
        /// reach one.
        #[test]
        fn non_public_addresses_need_an_address_entry_on_both_sides(
            grants in prop::collection::vec(any_entry(), 0..4),
            ceiling in prop::collection::vec(any_entry(), 0..4),
            pick in any::<prop::sample::Index>(),
            bits: u128, near: bool, port in prop_oneof![Just(80u16), Just(443), 1u16..],
            own: bool, host in "[a-c]{1,2}(\\.[a-c]{1,2}){0,2}",
        ) {
            let all: Vec<_> = grants.iter().chain(&ceiling).collect();
            let addr = match all.is_empty() {
                true => probe_address(&OutboundHost { target: Target::Any, port: None }, bits, false),
                false => probe_address(all[pick.index(all.len())], bits, near),
            };
            let ceiling = OutboundCeiling { hosts: ceiling };
            let rules = OutboundRules { grants: &grants, ceiling: &ceiling };
            let admitted = rules.admit(&host, port, addr, own).is_ok();
            let special = special_range(addr.to_canonical()).or(own.then_some(Special::Own));
            if let Some(special) = special && admitted {
                prop_assert!(!special.never_reachable());
                prop_assert!(grants.iter().any(|e| e.allows_address(addr, port)));
                prop_assert!(ceiling.hosts().iter().any(|e| e.allows_address(addr, port)));
            }
            let names: Vec<_> = grants.iter().filter(|e| !e.needs_admin()).cloned().collect();
            let named = OutboundRules { grants: &names, ceiling: &ceiling };
            if special.is_some() {
                prop_assert!(named.admit(&host, port, addr, own).is_err());
            }
            if admitted && special.is_none() {
                prop_assert!(rules.may_resolve(&host, port).is_ok());
            }
        }

        /// What a ceiling entry covers, it allows: a deploy the ceiling admits cannot reach
        /// past it at connect time.
        #[test]
        fn a_covered_entry_allows_nothing_its_cover_does_not(
            (cover, entry) in any_entry().prop_flat_map(|c| (Just(c.clone()), narrower(c))),
            bits: u128, near: bool,
            port in prop_oneof![Just(80u16), Just(443), 1u16..],
            host in "[a-c]{1,2}(\\.[a-c]{1,2}){0,3}",
        ) {
            if !cover.covers(&entry) {
                return Ok(());
            }
            let addr = probe_address(&entry, bits, near);
            let public = special_range(addr.to_canonical()).is_none();
            if entry.allows_address(addr, port) {
                prop_assert!(cover.allows_address(addr, port) || (public && cover.allows_name(&host, port)));
            }
            if entry.allows_name(&host, port) {
                prop_assert!(cover.allows_name(&host, port));
            }
        }

        #[test]
        fn entries_round_trip(entry in any_entry()) {
            let text = entry.to_string();
            prop_assert_eq!(OutboundHost::parse(&text), Ok(entry.clone()), "{}", text);
        }
    }
}
