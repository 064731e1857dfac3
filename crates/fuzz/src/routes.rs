//! `routes`: what a request needs from its method and path ([`mote_access::need`] and
//! [`mote_access::owned`]), the gateway's one permission table, on paths exactly as clients send
//! them. The first byte chooses the method (one of the API's, or one it has no route for), the
//! rest is the path.
//!
//! The answer must be what the path's segments say, read here a second way (split once on
//! `/`, compared whole): only `/healthz` and reads under the `/ui` segment (the dashboard's page
//! and files, or the API's redirect to them: no data) need nothing, a
//! path outside `/healthz`, `/metrics`, `/v1` and `/ui` is a component's (and exactly those are
//! not [`owned`]), and every spelling that is not a segment match (`/V1`, `//v1`, `/v1beta`,
//! `/ui/../v1`) is refused the API's permissions.

use mote_access::{Need, Scope, need, owned};

const METHODS: [&str; 8] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "get",
];

/// Runs the target on `data`.
pub fn routes(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let Ok(path) = std::str::from_utf8(rest) else {
        return;
    };
    let method = METHODS[usize::from(first) % METHODS.len()];
    let got = need(method, path);
    assert_eq!(got, expected(method, path), "{method} {path:?}");
    assert_eq!(got == Need::Mounted, !owned(path), "{method} {path:?}");
}

fn expected<'a>(method: &str, path: &'a str) -> Need<'a> {
    let looks = method == "GET" || method == "HEAD";
    match path {
        "/healthz" => return Need::Nothing,
        "/metrics" => return Need::Scope(Scope::Read),
        _ => {}
    }
    let segments: Vec<&str> = path.split('/').collect();
    if segments.first() != Some(&"") || segments.len() < 2 {
        return Need::Mounted;
    }
    let below = &segments[2..];
    match segments[1] {
        "ui" => match looks {
            true => Need::Nothing,
            false => Need::Scope(Scope::Read),
        },
        "v1" => {
            let changes = |what| match looks {
                true => Need::Scope(Scope::Read),
                false => Need::Scope(what),
            };
            match below.first().copied().unwrap_or("") {
                "internal" => Need::Cluster,
                "tokens" => Need::Scope(Scope::Admin),
                "invoke" => Need::Invoke(below.get(1).copied().unwrap_or("")),
                "functions" | "jobs" => changes(Scope::Deploy),
                _ => changes(Scope::Admin),
            }
        }
        _ => Need::Mounted,
    }
}

/// Every route of the API, the dashboard's files, and the spellings that once got around the
/// table (issue 33): a prefix that is not a segment, case, doubled slashes, dot segments,
/// percent-encoding.
pub fn seeds() -> Vec<Vec<u8>> {
    let paths = [
        "/healthz",
        "/metrics",
        "/ui",
        "/ui/",
        "/ui/app.js",
        "/ui/a/b",
        "/ui/../v1/tokens",
        "/v1",
        "/v1/functions/f",
        "/v1/functions/f/logs",
        "/v1/invoke/f/a/b",
        "/v1/jobs/j1",
        "/v1/tokens",
        "/v1/internal/jobs/j1/messages",
        "/v1/dashboard/events",
        "/v1beta/invoke/f",
        "/v1x/tokens",
        "/V1/tokens",
        "//v1/tokens",
        "/v1//tokens",
        "/%761/tokens",
        "/v1/invoke/%2e%2e",
        "/x/app",
        "",
    ];
    let mut seeds = Vec::new();
    for (m, _) in METHODS.iter().enumerate().take(5) {
        for path in paths {
            seeds.push([&[m as u8][..], path.as_bytes()].concat());
        }
    }
    seeds
}
