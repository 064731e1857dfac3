//! What a `wasi:http` component is deployed with besides its limits: the [`Route`] it is
//! mounted on at the root of the gateway, and the [`OutboundHost`]s it may send requests to.
//! Both are parsed here, once, at deploy; the gateway and the runtime only match against them.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// Paths the platform owns: its API, and the dashboard's page, which the API's listener
/// redirects to the dashboard's own listener. No route may serve them.
const RESERVED: [&str; 4] = ["/v1", "/ui", "/healthz", "/metrics"];

/// A path at the root of the gateway that a component serves, as Spin spells it: `/a/b` serves
/// exactly that path, `/a/...` serves `/a` and everything below it, and `/...` a whole site.
/// Where routes nest, the most specific one serves a path (an exact route, then the longest
/// prefix), as in Spin; the same route twice is a conflict.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Route {
    /// The path without the trailing `/...`; `/` for the whole site.
    base: String,
    /// Whether paths below `base` are served too.
    prefix: bool,
}

/// A route that cannot be used, with the reason.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid route `{route}`: {reason}")]
pub struct RouteError {
    /// The route as given.
    pub route: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl Route {
    /// Parses `/path` (exact) or `/path/...` (the path and everything below it).
    pub fn parse(route: &str) -> Result<Self, RouteError> {
        let fail = |reason| RouteError {
            route: route.to_owned(),
            reason,
        };
        if !route.starts_with('/') {
            return Err(fail("a route starts with `/`, as in `/api/...`"));
        }
        if route.len() > 1024 {
            return Err(fail("a route is at most 1024 bytes"));
        }
        if route
            .bytes()
            .any(|b| b == b'?' || b == b'#' || b == b'%' || !b.is_ascii_graphic())
        {
            return Err(fail(
                "a route is a plain path: no query, fragment, escapes or spaces",
            ));
        }
        let (base, prefix) = match route.strip_suffix("/...") {
            Some("") => ("/", true),
            Some(base) => (base, true),
            None => (route, false),
        };
        if base != "/" && base.split('/').skip(1).any(|s| s.is_empty()) {
            return Err(fail(
                "a route has no empty segments and no trailing `/` (use `/path/...` to serve everything below a path)",
            ));
        }
        if base.split('/').any(|s| s == "." || s == ".." || s == "...") {
            return Err(fail(
                "`.` and `..` are not route segments, and `...` may only end a route",
            ));
        }
        if RESERVED.iter().any(|r| Self::under(base, r)) {
            return Err(fail(
                "/v1, /healthz and /metrics are mote's own API and /ui its dashboard; choose another path",
            ));
        }
        Ok(Self {
            base: base.to_owned(),
            prefix,
        })
    }

    /// Whether `path` (without its query) is `base` or below it, by whole segments.
    fn under(path: &str, base: &str) -> bool {
        base == "/"
            || path
                .strip_prefix(base)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    }

    /// Whether this route serves `path` (without its query).
    pub fn matches(&self, path: &str) -> bool {
        match self.prefix {
            true => Self::under(path, &self.base),
            false => path == self.base,
        }
    }

    /// How specific the route is: an exact route beats any prefix, a longer prefix a shorter.
    pub fn specificity(&self) -> (bool, usize) {
        (!self.prefix, self.base.len())
    }

    /// The part of `path` (which this route matches) that the component sees: below a prefix
    /// route the path after its base, so a component mounted on `/api/...` sees `/users` for
    /// `/api/users`; an exact route's component sees the whole path, as Spin does.
    pub fn strip<'p>(&self, path: &'p str) -> &'p str {
        if !self.prefix || self.base == "/" {
            return path;
        }
        match &path[self.base.len()..] {
            "" => "/",
            rest => rest,
        }
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.prefix, self.base.as_str()) {
            (true, "/") => f.write_str("/..."),
            (true, base) => write!(f, "{base}/..."),
            (false, base) => f.write_str(base),
        }
    }
}

impl Serialize for Route {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Route {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Route::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A host a component may send requests to: `name`, `name:port`, `*.domain` (any subdomain),
/// `*` (any host), with or without a port (none: any port).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OutboundHost {
    /// Lowercase host name or IP address, `*`, or `*.` and a domain.
    host: String,
    port: Option<u16>,
}

/// An allowed host that cannot be used, with the reason.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "invalid outbound host `{host}`: {reason}; write HOST or HOST:PORT, as in `api.example.com:443`, `*.example.com` or `127.0.0.1:8080`"
)]
pub struct OutboundHostError {
    /// The host as given.
    pub host: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl OutboundHost {
    /// Parses one `HOST[:PORT]`; an IPv6 address is written in brackets, `[::1]:8080`.
    pub fn parse(spec: &str) -> Result<Self, OutboundHostError> {
        let fail = |reason| OutboundHostError {
            host: spec.to_owned(),
            reason,
        };
        if spec.contains("://") {
            return Err(fail("give the host, not a URL"));
        }
        let (host, port) = match spec.rsplit_once(':') {
            Some((host, port))
                if !host.ends_with(':') && (host.ends_with(']') || !host.contains(':')) =>
            {
                let port = port
                    .parse::<u16>()
                    .map_err(|_| fail("the port is not a number from 1 to 65535"))?;
                if port == 0 {
                    return Err(fail("the port is not a number from 1 to 65535"));
                }
                (host, Some(port))
            }
            _ => (spec, None),
        };
        let host = host.to_ascii_lowercase();
        let name = host.strip_prefix("*.").unwrap_or(&host);
        let valid = match (
            host.as_str(),
            name.strip_prefix('[').and_then(|n| n.strip_suffix(']')),
        ) {
            ("*", _) => true,
            (_, Some(v6)) => v6.parse::<std::net::Ipv6Addr>().is_ok() && name.len() == host.len(),
            _ => {
                !name.is_empty()
                    && name.len() <= 253
                    && name.split('.').all(|label| {
                        !label.is_empty()
                            && label.len() <= 63
                            && label
                                .bytes()
                                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                    })
            }
        };
        if !valid {
            return Err(fail(
                "the host is not a name, an IP address, `*` or `*.domain`",
            ));
        }
        Ok(Self { host, port })
    }

    /// Parses a comma-separated list, as `--allow-outbound` takes it; empty parts are skipped.
    pub fn parse_list(list: &str) -> Result<Vec<Self>, OutboundHostError> {
        list.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(Self::parse)
            .collect()
    }

    /// Whether a request to `host` (as in a URL's authority, IPv6 in brackets) on `port` is
    /// allowed by this entry.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        let host = host.trim_end_matches('.');
        match self.host.strip_prefix("*.") {
            _ if self.host == "*" => true,
            Some(domain) => host.len().checked_sub(domain.len() + 1).is_some_and(|at| {
                host.as_bytes()[at] == b'.' && host[at + 1..].eq_ignore_ascii_case(domain)
            }),
            None => host.eq_ignore_ascii_case(&self.host),
        }
    }
}

impl fmt::Display for OutboundHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.host)?;
        if let Some(port) = self.port {
            write!(f, ":{port}")?;
        }
        Ok(())
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

/// How a `wasi:http` component is deployed besides its limits. Empty for every other kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpSettings {
    /// Where it is mounted at the gateway's root, besides `/v1/invoke/NAME`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<Route>,
    /// The hosts its outbound requests may go to; none by default.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_outbound: Vec<OutboundHost>,
}

impl HttpSettings {
    /// Whether nothing is set (every function that is not a component).
    pub fn is_empty(&self) -> bool {
        self.route.is_none() && self.allow_outbound.is_empty()
    }

    /// Whether any entry allows a request to `host` on `port`.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        self.allow_outbound.iter().any(|h| h.allows(host, port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn routes_parse_and_match_by_whole_segments() {
        let api = Route::parse("/api/...").unwrap();
        assert!(api.matches("/api") && api.matches("/api/users") && api.matches("/api/a/b"));
        assert!(!api.matches("/apis") && !api.matches("/") && !api.matches("/ap"));
        assert_eq!(api.strip("/api/users"), "/users");
        assert_eq!(api.strip("/api"), "/");
        let exact = Route::parse("/hello").unwrap();
        assert!(exact.matches("/hello") && !exact.matches("/hello/x") && !exact.matches("/hello/"));
        assert_eq!(exact.strip("/hello"), "/hello");
        let site = Route::parse("/...").unwrap();
        assert!(site.matches("/") && site.matches("/index.html"));
        assert_eq!(site.strip("/a/b"), "/a/b");
        assert!(exact.specificity() > site.specificity());
        assert!(api.specificity() > site.specificity());
    }

    #[test]
    fn bad_routes_say_why() {
        for (route, says) in [
            ("api", "starts with"),
            ("/api/", "trailing"),
            ("/a//b", "empty segments"),
            ("/a?x=1", "no query"),
            ("/a/../b", "not route segments"),
            ("/a/.../b", "may only end"),
            ("/v1/...", "mote's own API"),
            ("/v1", "mote's own API"),
            ("/metrics", "mote's own API"),
            ("/healthz/x", "mote's own API"),
            ("/ui", "/ui its dashboard"),
            ("/ui/...", "/ui its dashboard"),
            ("/ui/x", "/ui its dashboard"),
            ("/ui/app.js", "/ui its dashboard"),
        ] {
            let e = Route::parse(route).unwrap_err().to_string();
            assert!(e.contains(says) && e.contains(route), "{route}: {e}");
        }
        for free in ["/v1x", "/uix", "/ux/ui", "/UI"] {
            assert!(
                Route::parse(free).is_ok(),
                "{free}: only whole segments are reserved"
            );
        }
    }

    #[test]
    fn outbound_hosts_allow_what_they_name() {
        let hosts =
            OutboundHost::parse_list("api.example.com:443, *.internal,127.0.0.1:8080,[::1]")
                .unwrap();
        let settings = HttpSettings {
            route: None,
            allow_outbound: hosts,
        };
        assert!(settings.allows("api.example.com", 443));
        assert!(settings.allows("API.Example.com", 443));
        assert!(!settings.allows("api.example.com", 80));
        assert!(settings.allows("db.internal", 5432) && settings.allows("a.b.internal", 1));
        assert!(!settings.allows("internal", 1) && !settings.allows("xinternal", 1));
        assert!(settings.allows("127.0.0.1", 8080) && !settings.allows("127.0.0.1", 8081));
        assert!(settings.allows("[::1]", 9));
        assert!(!settings.allows("example.com", 443));
        assert!(HttpSettings::default().is_empty() && !HttpSettings::default().allows("a", 1));
        assert!(OutboundHost::parse("*").unwrap().allows("anything", 1));
    }

    #[test]
    fn bad_outbound_hosts_say_why() {
        for (spec, says) in [
            ("http://a.com", "not a URL"),
            ("a.com:0", "port"),
            ("a.com:http", "port"),
            ("a..com", "not a name"),
            ("a_b.com", "not a name"),
            ("[::1", "not a name"),
            ("", "not a name"),
        ] {
            let e = OutboundHost::parse(spec).unwrap_err().to_string();
            assert!(e.contains(says), "{spec}: {e}");
        }
    }

    fn segment() -> impl Strategy<Value = String> {
        "[a-z0-9_.-]{1,6}".prop_filter("not a dot segment", |s| s != "." && s != ".." && s != "...")
    }

    proptest! {
        /// Display and parse are inverses, for routes and hosts alike, and a parsed route
        /// serves its own base path.
        #[test]
        fn routes_round_trip(segments in prop::collection::vec(segment(), 0..4), prefix: bool) {
            let base = format!("/{}", segments.join("/"));
            let text = match (prefix, base.as_str()) {
                (true, "/") => "/...".to_owned(),
                (true, b) => format!("{b}/..."),
                (false, b) => b.to_owned(),
            };
            match Route::parse(&text) {
                Ok(route) => {
                    prop_assert_eq!(route.to_string(), text.clone());
                    prop_assert_eq!(Route::parse(&route.to_string()).unwrap(), route.clone());
                    prop_assert!(route.matches(&base));
                    let json = serde_json::to_string(&route).unwrap();
                    prop_assert_eq!(serde_json::from_str::<Route>(&json).unwrap(), route);
                }
                Err(e) => prop_assert!(
                    segments.first().is_some_and(|s| RESERVED.contains(&format!("/{s}").as_str())),
                    "{} was refused: {}", text, e
                ),
            }
        }

        #[test]
        fn hosts_round_trip(labels in prop::collection::vec("[a-z0-9-]{1,8}", 1..4), wildcard: bool, port in prop::option::of(1u16..)) {
            let mut host = labels.join(".");
            if wildcard {
                host = format!("*.{host}");
            }
            let text = match port {
                Some(p) => format!("{host}:{p}"),
                None => host.clone(),
            };
            let parsed = OutboundHost::parse(&text).unwrap();
            prop_assert_eq!(parsed.to_string(), text);
            let name = labels.join(".");
            let probe = if wildcard { format!("x.{name}") } else { name };
            prop_assert!(parsed.allows(&probe, port.unwrap_or(80)));
        }
    }
}
