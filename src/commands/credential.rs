//! Which token a client command sends, and to whom. A token the user gave (`MOTE_TOKEN`,
//! `--token-file`) goes wherever `--server` points: the user chose both. The admin token `mote
//! up` left in its data directory goes only to that node ([`is_own_node`]): a command pointed
//! at another server (a typo, a hostile `MOTE_SERVER`) must not hand it the key to this one.

use http::Uri;

/// The token a command sends.
pub enum Credential {
    /// `MOTE_TOKEN` or `--token-file`.
    Given(String),
    /// `DATA/admin.token`, to this machine's node.
    Admin(String),
    /// `DATA/admin.token` exists, but the server is not this machine's node: nothing is sent.
    Withheld,
    /// No token anywhere: nothing is sent.
    None,
}

impl Credential {
    /// The token to send, if any.
    pub fn token(&self) -> Option<&str> {
        match self {
            Self::Given(token) | Self::Admin(token) => Some(token),
            Self::Withheld | Self::None => None,
        }
    }
}

/// Whether `server` is this machine's node, which may be sent its admin token: a loopback host
/// (an address in 127.0.0.0/8, `::1`, or `localhost`), or the origin of `advertised`, the URL
/// that node advertised (`DATA/url`). Decided on the URL as the client reads it, before any name is
/// resolved: a name that resolves to loopback now may not tomorrow, so only `localhost` counts.
pub fn is_own_node(server: &str, advertised: Option<&str>) -> bool {
    let Ok(uri) = server.parse::<Uri>() else {
        return false;
    };
    let Some(host) = uri.host() else {
        return false;
    };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = bare.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.to_canonical().is_loopback());
    loopback
        || advertised
            .and_then(|url| url.parse::<Uri>().ok())
            .is_some_and(|advertised| same_origin(&uri, &advertised))
}

/// Whether `a` and `b` name the same scheme, host and port (a default port counted as given).
fn same_origin(a: &Uri, b: &Uri) -> bool {
    let port = |uri: &Uri| {
        uri.port_u16().or(match uri.scheme_str() {
            Some("https") => Some(443),
            Some("http") => Some(80),
            _ => None,
        })
    };
    a.scheme().is_some()
        && a.scheme() == b.scheme()
        && a.host()
            .zip(b.host())
            .is_some_and(|(a, b)| a.eq_ignore_ascii_case(b))
        && port(a) == port(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn loopback_hosts_are_this_machine_s_node() {
        for server in [
            "http://127.0.0.1:8080",
            "http://127.0.0.1:8080/",
            "https://127.9.8.7",
            "http://[::1]:8080",
            "http://[::ffff:127.0.0.1]:8080",
            "http://localhost:8080",
            "http://LocalHost",
        ] {
            assert!(is_own_node(server, None), "{server}");
        }
    }

    #[test]
    fn other_hosts_are_not_even_when_they_may_reach_this_machine() {
        for server in [
            "http://evil:8080",
            "http://192.0.2.2:8080",
            "http://[fd00::2]:8080",
            "http://0.0.0.0:8080",
            // Resolves to 127.0.0.1, but only a literal address or `localhost` is trusted.
            "http://127.1:8080",
            "http://localhost.evil.example",
            "http://127.0.0.1.evil.example",
            // The user name is 127.0.0.1; the host is evil.example.
            "http://127.0.0.1@evil.example:8080",
            "http://127.0.0.1:8080@evil.example",
            "not a url",
            "",
        ] {
            assert!(!is_own_node(server, None), "{server}");
        }
    }

    #[test]
    fn the_advertised_url_is_this_machine_s_node_with_its_scheme_host_and_port() {
        let advertised = Some("http://node-a.example:8080");
        for server in [
            "http://node-a.example:8080",
            "http://NODE-A.example:8080/",
            "http://node-a.example:8080/v1",
        ] {
            assert!(is_own_node(server, advertised), "{server}");
        }
        for server in [
            "https://node-a.example:8080",
            "http://node-a.example:8081",
            "http://node-a.example",
            "http://node-b.example:8080",
        ] {
            assert!(!is_own_node(server, advertised), "{server}");
        }
        assert!(is_own_node(
            "https://node-a.example",
            Some("https://node-a.example:443")
        ));
    }

    proptest! {
        #[test]
        fn any_address_in_127_8_on_any_port_is_this_machine_s_node(
            b in any::<u8>(), c in any::<u8>(), d in any::<u8>(), port in 1u16.., path in "(/[a-z0-9]{0,8}){0,3}"
        ) {
            let server = format!("http://127.{b}.{c}.{d}:{port}{path}");
            prop_assert!(is_own_node(&server, None), "{}", server);
        }

        #[test]
        fn no_other_host_is_unless_advertised(
            host in "[a-z0-9-]{1,12}(\\.[a-z0-9-]{1,12}){0,3}",
            user in proptest::option::of("(127\\.0\\.0\\.1|localhost)(:[0-9]{1,5})?"),
            port in 1u16..,
        ) {
            prop_assume!(host != "localhost");
            prop_assume!(!host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback()));
            let userinfo = user.map(|u| format!("{u}@")).unwrap_or_default();
            let server = format!("http://{userinfo}{host}:{port}");
            prop_assert!(!is_own_node(&server, None), "{}", server);
            prop_assert!(!is_own_node(&server, Some("http://advertised.example:8080")), "{}", server);
            let advertised = format!("http://{host}:{port}");
            prop_assert!(is_own_node(&server, Some(&advertised)), "{}", server);
        }
    }
}
