use super::special::V4_SPECIAL;
use super::*;
use ipnet::Ipv6Net;
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
