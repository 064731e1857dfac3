//! What a `wasi:http` component is deployed with besides its limits: the [`Route`] it is
//! mounted on at the root of the gateway, and the [`OutboundHost`]s it may send requests to
//! (`outbound` parses those and decides where a request may go). Both are parsed once, at
//! deploy; the gateway and the runtime only match against them.
//!
//! [`OutboundHost`]: crate::OutboundHost

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

/// How a `wasi:http` component is deployed besides its limits. Empty for every other kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpSettings {
    /// Where it is mounted at the gateway's root, besides `/v1/invoke/NAME`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<Route>,
    /// The hosts its outbound requests may go to, under the node's ceiling; none by default.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_outbound: Vec<crate::OutboundHost>,
}

impl HttpSettings {
    /// Whether nothing is set (every function that is not a component).
    pub fn is_empty(&self) -> bool {
        self.route.is_none() && self.allow_outbound.is_empty()
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
    }
}
