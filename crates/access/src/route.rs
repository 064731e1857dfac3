//! What a request needs, from its method and path: the API's permissions in one table
//! ([`need`]). The decision is made on whole path segments of the path exactly as the client sent
//! it (still percent-encoded, case and all), which is also what the gateway's router matches on,
//! so the check and the dispatch never read a path two ways: `/v1beta/x` is not under `/v1`,
//! `/V1/tokens` and `//v1/tokens` are no API route at all, and `/ui/../v1/tokens` is not the
//! dashboard's.
//!
//! The paths the platform owns are `/healthz`, `/metrics`, and everything under the segments
//! `/v1` and `/ui`; no component may be mounted on them ([`owned`]). Any other path is a
//! component's, if one is mounted there.

use crate::scope::Scope;

/// What a request needs to get through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need<'a> {
    /// Nothing: the health check and the dashboard's page and files (which hold no data).
    Nothing,
    /// A token with this scope.
    Scope(Scope),
    /// A call of the function named so: a token with `invoke`, unless the function is public.
    Invoke(&'a str),
    /// A path the platform does not own: a token with `invoke` if a component that is not
    /// public is mounted there; otherwise nothing (it is a 404).
    Mounted,
    /// The cluster secret: a route only nodes call.
    Cluster,
}

/// The dashboard's files, as `/ui/FILE` serves them.
pub const DASHBOARD_FILES: [&str; 3] = ["index.html", "app.js", "style.css"];

/// Whether the platform owns `path` (its own routes, or 404), so that no component serves it.
pub fn owned(path: &str) -> bool {
    matches!(path, "/healthz" | "/metrics") || under(path, "v1") || under(path, "ui")
}

/// Whether `path` is `/{segment}` or below it.
fn under(path: &str, segment: &str) -> bool {
    path.strip_prefix('/')
        .and_then(|p| p.strip_prefix(segment))
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// What a request with `method` on `path` (without its query) needs.
pub fn need<'a>(method: &str, path: &'a str) -> Need<'a> {
    let looks = matches!(method, "GET" | "HEAD");
    let changes = |what: Scope| match looks {
        true => Need::Scope(Scope::Read),
        false => Need::Scope(what),
    };
    if path == "/healthz" {
        return Need::Nothing;
    }
    if path == "/metrics" {
        return Need::Scope(Scope::Read);
    }
    if under(path, "ui") {
        let file = &path[3..];
        let page = matches!(file, "" | "/")
            || file
                .strip_prefix('/')
                .is_some_and(|f| DASHBOARD_FILES.contains(&f));
        return match page && looks {
            true => Need::Nothing,
            // The platform's, and no page: a 404 for anyone who may look.
            false => Need::Scope(Scope::Read),
        };
    }
    if !under(path, "v1") {
        return Need::Mounted;
    }
    let mut segments = path[3..].split('/').skip(1);
    match segments.next().unwrap_or_default() {
        "internal" => Need::Cluster,
        "tokens" => Need::Scope(Scope::Admin),
        "invoke" => Need::Invoke(segments.next().unwrap_or_default()),
        "functions" | "jobs" => changes(Scope::Deploy),
        // Every other route under /v1 only looks; what is not a route is a 404 or 405, told only
        // to a caller who may change things.
        _ => changes(Scope::Admin),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn every_route_needs_what_the_api_documents() {
        let read = Need::Scope(Scope::Read);
        let cases: &[(&str, &str, Need<'_>)] = &[
            ("GET", "/healthz", Need::Nothing),
            ("GET", "/ui", Need::Nothing),
            ("GET", "/ui/", Need::Nothing),
            ("GET", "/ui/app.js", Need::Nothing),
            ("HEAD", "/ui/style.css", Need::Nothing),
            ("GET", "/metrics", read),
            ("GET", "/v1/functions", read),
            ("GET", "/v1/functions/f", read),
            ("GET", "/v1/functions/f/logs", read),
            ("PUT", "/v1/functions/f", Need::Scope(Scope::Deploy)),
            ("DELETE", "/v1/functions/f", Need::Scope(Scope::Deploy)),
            (
                "POST",
                "/v1/functions/f/release",
                Need::Scope(Scope::Deploy),
            ),
            ("POST", "/v1/invoke/f", Need::Invoke("f")),
            ("DELETE", "/v1/invoke/f/a/b", Need::Invoke("f")),
            ("GET", "/v1/invoke/", Need::Invoke("")),
            ("POST", "/v1/jobs", Need::Scope(Scope::Deploy)),
            ("GET", "/v1/jobs/j1", read),
            ("DELETE", "/v1/jobs/j1", Need::Scope(Scope::Deploy)),
            ("GET", "/v1/node", read),
            ("GET", "/v1/cluster", read),
            ("GET", "/v1/dashboard", read),
            ("GET", "/v1/dashboard/events", read),
            ("POST", "/v1/tokens", Need::Scope(Scope::Admin)),
            ("GET", "/v1/tokens", Need::Scope(Scope::Admin)),
            ("DELETE", "/v1/tokens/ci", Need::Scope(Scope::Admin)),
            ("PUT", "/v1/internal/jobs/j1", Need::Cluster),
            ("GET", "/v1/internal/modules/ab", Need::Cluster),
            ("GET", "/v1/internal/logs/f", Need::Cluster),
            ("GET", "/v1", read),
            ("GET", "/v1/", read),
            ("GET", "/v1/unknown", read),
            ("POST", "/v1/node", Need::Scope(Scope::Admin)),
            ("GET", "/hello-http/echo", Need::Mounted),
            ("GET", "/", Need::Mounted),
        ];
        for (method, path, expected) in cases {
            assert_eq!(need(method, path), *expected, "{method} {path}");
        }
    }

    /// The spellings that once let requests past the check: each is either exactly an API route
    /// or not the API's at all, never both.
    #[test]
    fn tricky_spellings_are_decided_on_whole_segments() {
        let read = Need::Scope(Scope::Read);
        let cases: &[(&str, &str, Need<'_>)] = &[
            // Not under /v1: a component's path (so invoke, unless it is public), never `read`.
            ("POST", "/v1beta/invoke/f", Need::Mounted),
            ("POST", "/v1x/anything", Need::Mounted),
            ("POST", "/v1./tokens", Need::Mounted),
            ("POST", "/V1/tokens", Need::Mounted),
            ("POST", "//v1/tokens", Need::Mounted),
            ("POST", "/%76%31/tokens", Need::Mounted),
            // Under /v1 but no route: percent-encoded segments are not decoded.
            ("POST", "/v1/%74okens", Need::Scope(Scope::Admin)),
            ("GET", "/v1/%74okens", read),
            ("POST", "/v1//tokens", Need::Scope(Scope::Admin)),
            // Under /ui, but not the dashboard's files: the platform's, so no component's.
            ("GET", "/ui/a/b", read),
            ("GET", "/ui/../v1/tokens", read),
            ("GET", "/ui/app.js/", read),
            ("POST", "/ui", read),
            ("GET", "/uix", Need::Mounted),
            ("GET", "/UI/app.js", Need::Mounted),
            ("GET", "/healthz/", Need::Mounted),
            ("GET", "/metrics.", Need::Mounted),
        ];
        for (method, path, expected) in cases {
            assert_eq!(need(method, path), *expected, "{method} {path}");
        }
    }

    #[test]
    fn the_platform_owns_its_segments_only() {
        for path in [
            "/v1", "/v1/", "/v1/x", "/ui", "/ui/", "/ui/a", "/healthz", "/metrics",
        ] {
            assert!(owned(path), "{path}");
        }
        for path in [
            "/",
            "/v1beta",
            "/v1x/y",
            "/uix",
            "/V1",
            "//v1",
            "/x/v1",
            "/healthz/x",
        ] {
            assert!(!owned(path), "{path}");
        }
    }

    proptest! {
        /// Whatever the path, a request that would reach a component (`Mounted`) is on a path the
        /// platform does not own, and every path the platform owns needs something of its own.
        #[test]
        fn mounted_and_owned_never_overlap(method in "GET|HEAD|POST|PUT|DELETE|OPTIONS", path in "(/[a-zA-Z0-9.%_-]{0,6}){0,4}/?") {
            prop_assert_eq!(need(&method, &path) == Need::Mounted, !owned(&path));
        }

        /// Only `/healthz` and the dashboard's page and files pass without anything.
        #[test]
        fn only_the_public_files_need_nothing(method in "GET|HEAD|POST", path in "(/[a-z0-9.]{0,8}){0,3}") {
            if need(&method, &path) == Need::Nothing {
                let public = path == "/healthz" || path == "/ui" || path == "/ui/"
                    || DASHBOARD_FILES.iter().any(|f| path == format!("/ui/{f}"));
                prop_assert!(public, "{} {} needs nothing", method, path);
            }
        }
    }
}
