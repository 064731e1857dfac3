//! Which special-purpose range (IANA's registries) holds an address, if any ([`special_range`]):
//! an address in none of them is a public host's. Also whether a whole range is public
//! ([`is_public_net`]).

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

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
pub(super) const V4_SPECIAL: [(Ipv4Net, Special); 17] = [
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
pub(super) fn is_public_net(net: &IpNet) -> bool {
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
