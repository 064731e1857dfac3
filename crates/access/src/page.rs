//! Whether a request was made by a web page, and from which origin ([`page`]): what a browser
//! says in `Sec-Fetch-Site` (every current browser sends it), else in `Origin`. Programs (curl,
//! the CLI, peers) send neither, and neither does a browser for an address typed by its user
//! (`Sec-Fetch-Site: none`).
//!
//! mote's API is for programs: a page of another origin may not use it at all (its simple
//! requests, such as a `text/plain` POST, would otherwise run with whatever the browser's network
//! position allows), and a page of the node's own origin (a tenant's component) may only call
//! functions. The dashboard, which is a page, is served on a listener of its own.

/// Who made a request, as far as the browser says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Page {
    /// Not a web page: a program, or the browser's user directly.
    None,
    /// A page of the origin the request goes to.
    SameOrigin,
    /// A page of another origin (another site, another port, or an opaque origin).
    CrossOrigin,
}

/// Classifies a request by its `Sec-Fetch-Site`, `Origin` and `Host` headers.
pub fn page(sec_fetch_site: Option<&[u8]>, origin: Option<&[u8]>, host: Option<&[u8]>) -> Page {
    if let Some(site) = sec_fetch_site {
        return match site {
            b"none" => Page::None,
            b"same-origin" => Page::SameOrigin,
            _ => Page::CrossOrigin,
        };
    }
    let Some(origin) = origin else {
        return Page::None;
    };
    // `scheme://host[:port]`; `null` for opaque origins (sandboxed frames, files, data: URLs).
    let authority = std::str::from_utf8(origin)
        .ok()
        .and_then(|o| o.split_once("://"))
        .map(|(_, authority)| authority);
    match (authority, host) {
        (Some(authority), Some(host)) if same_authority(authority.as_bytes(), host) => {
            Page::SameOrigin
        }
        _ => Page::CrossOrigin,
    }
}

/// Whether `Origin`'s authority and `Host` name the same host and port; an origin omits its
/// scheme's default port, and a `Host` may too.
fn same_authority(origin: &[u8], host: &[u8]) -> bool {
    origin.eq_ignore_ascii_case(host)
        || [b":80".as_slice(), b":443"].iter().any(|port| {
            host.strip_suffix(*port)
                .is_some_and(|h| h.eq_ignore_ascii_case(origin))
                || origin
                    .strip_suffix(*port)
                    .is_some_and(|o| o.eq_ignore_ascii_case(host))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fetch_metadata_decides_when_present() {
        let host = Some(b"127.0.0.1:8080".as_slice());
        assert_eq!(page(Some(b"none"), None, host), Page::None);
        assert_eq!(page(Some(b"same-origin"), None, host), Page::SameOrigin);
        assert_eq!(page(Some(b"same-site"), None, host), Page::CrossOrigin);
        assert_eq!(page(Some(b"cross-site"), None, host), Page::CrossOrigin);
        assert_eq!(page(Some(b"bogus"), None, host), Page::CrossOrigin);
        // The browser's word wins over an Origin that looks the same.
        let same = Some(b"http://127.0.0.1:8080".as_slice());
        assert_eq!(page(Some(b"cross-site"), same, host), Page::CrossOrigin);
    }

    #[test]
    fn without_fetch_metadata_the_origin_is_compared_with_the_host() {
        let host = Some(b"127.0.0.1:8080".as_slice());
        assert_eq!(page(None, None, host), Page::None);
        let origin = |o: &'static str| Some(o.as_bytes());
        assert_eq!(
            page(None, origin("http://127.0.0.1:8080"), host),
            Page::SameOrigin
        );
        assert_eq!(
            page(None, origin("http://127.0.0.1:8081"), host),
            Page::CrossOrigin
        );
        assert_eq!(
            page(None, origin("http://evil.example"), host),
            Page::CrossOrigin
        );
        assert_eq!(page(None, origin("null"), host), Page::CrossOrigin);
        assert_eq!(
            page(None, origin("http://127.0.0.1:8080"), None),
            Page::CrossOrigin
        );
        let default_port = Some(b"mote.example:443".as_slice());
        assert_eq!(
            page(None, origin("https://mote.example"), default_port),
            Page::SameOrigin
        );
        assert_eq!(
            page(None, origin("https://MOTE.example"), Some(b"mote.example")),
            Page::SameOrigin
        );
    }
}
