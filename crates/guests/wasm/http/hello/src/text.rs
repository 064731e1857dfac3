//! The parts of `http-hello` that need no WASI: the route table, query and URL parsing, the
//! `/stream` pattern and the `/sum` hash. Plain functions, so the tests run natively.

/// What a request asks for, from its path (the query is handed on to the routes that read it).
#[derive(Debug, PartialEq, Eq)]
pub enum Route<'a> {
    /// `/` and any path not below: the greeting.
    Hello,
    /// `/echo`: the request's method, path, `x-` headers and body back.
    Echo,
    /// `/headers`: every request header the component was given, `name: value` per line.
    Headers,
    /// `/status/NNN`: an empty response with status NNN (the text after `/status/`).
    Status(&'a str),
    /// `/stream?bytes=N`: N bytes of [`PATTERN`].
    Stream { query: &'a str },
    /// `/sum`: the length and FNV-1a hash of the whole body, answered only once it is read.
    Sum,
    /// `/trap`: panics.
    Trap,
    /// `/spin`: computes forever.
    Spin,
    /// `/grow?mb=N`: allocates and touches N MiB, then says so.
    Grow { query: &'a str },
    /// `/fetch?url=URL`: GETs URL through `wasi:http/outgoing-handler`.
    Fetch { query: &'a str },
}

/// The route for a request's path with query, such as `/echo?x=1`.
pub fn route(path_with_query: &str) -> Route<'_> {
    let (path, query) = path_with_query
        .split_once('?')
        .unwrap_or((path_with_query, ""));
    match path {
        "/echo" => Route::Echo,
        "/headers" => Route::Headers,
        "/stream" => Route::Stream { query },
        "/sum" => Route::Sum,
        "/trap" => Route::Trap,
        "/spin" => Route::Spin,
        "/grow" => Route::Grow { query },
        "/fetch" => Route::Fetch { query },
        _ => match path.strip_prefix("/status/") {
            Some(status) => Route::Status(status),
            None => Route::Hello,
        },
    }
}

/// The value of the first `name=value` pair of a query such as `a=1&b=2`, not decoded.
pub fn query_param<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find_map(|(key, value)| (key == name).then_some(value))
}

/// A final status code from its text: three digits from 200 to 599. (HTTP's 1xx codes are
/// informational and cannot end a request.)
pub fn parse_status(text: &str) -> Option<u16> {
    if text.len() != 3 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok().filter(|code| (200..=599).contains(code))
}

/// Decodes `%XX` escapes; `None` if an escape is malformed or the result is not UTF-8. (`+` is
/// left alone: this decodes URLs, not forms.)
pub fn percent_decode(text: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(text.len());
    let mut rest = text.as_bytes();
    while let Some((&byte, tail)) = rest.split_first() {
        if byte == b'%' {
            let hex = tail.get(..2)?;
            let hex = std::str::from_utf8(hex).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            rest = &tail[2..];
        } else {
            bytes.push(byte);
            rest = tail;
        }
    }
    String::from_utf8(bytes).ok()
}

/// An absolute `http` or `https` URL split the way `wasi:http` wants it.
#[derive(Debug, PartialEq, Eq)]
pub struct Url<'a> {
    /// `https://` rather than `http://`.
    pub https: bool,
    /// `host[:port]`.
    pub authority: &'a str,
    /// The path with the query, at least `/`.
    pub path_with_query: String,
}

/// Splits `http://host[:port][/path][?query]` (or `https://…`); `None` for anything else.
pub fn parse_url(url: &str) -> Option<Url<'_>> {
    let (https, rest) = if let Some(rest) = url.strip_prefix("http://") {
        (false, rest)
    } else {
        (true, url.strip_prefix("https://")?)
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path_with_query) = rest.split_at(end);
    if authority.is_empty() {
        return None;
    }
    let path_with_query = match path_with_query.as_bytes().first() {
        Some(b'/') => path_with_query.to_owned(),
        _ => format!("/{path_with_query}"),
    };
    Some(Url {
        https,
        authority,
        path_with_query,
    })
}

/// What `/stream` sends: byte `i` of a response is `PATTERN[i % 37]`.
pub const PATTERN: &[u8; 37] = b"abcdefghijklmnopqrstuvwxyz0123456789\n";

/// The pattern repeated over one chunk and one period more, so that the bytes at any offset, up
/// to a chunk long, are a slice of it: a stream of any length is sent without building a chunk.
pub struct Pattern {
    repeated: Vec<u8>,
    chunk: usize,
}

impl Pattern {
    /// A pattern for chunks of at most `chunk` bytes.
    pub fn new(chunk: usize) -> Self {
        let repeated = PATTERN
            .iter()
            .copied()
            .cycle()
            .take(chunk + PATTERN.len())
            .collect();
        Pattern { repeated, chunk }
    }

    /// Bytes `offset..offset + len` of the stream; `len` is at most the chunk size.
    pub fn at(&self, offset: u64, len: usize) -> &[u8] {
        assert!(len <= self.chunk, "{len} bytes is more than a chunk");
        // The remainder is below 37, so it fits any usize.
        let start = (offset % PATTERN.len() as u64) as usize;
        &self.repeated[start..start + len]
    }
}

/// The 64-bit FNV-1a hash, fed in pieces.
pub struct Fnv1a(u64);

impl Default for Fnv1a {
    /// The hash of nothing, the FNV offset basis.
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    /// Feeds `bytes`.
    pub fn update(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// The hash of everything fed so far.
    pub fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert_eq!(route("/"), Route::Hello);
        assert_eq!(route("/echo?x=1"), Route::Echo);
        assert_eq!(route("/echo/more"), Route::Hello);
        assert_eq!(route("/headers?x"), Route::Headers);
        assert_eq!(route("/status/204"), Route::Status("204"));
        assert_eq!(route("/status/"), Route::Status(""));
        assert_eq!(
            route("/stream?bytes=10"),
            Route::Stream { query: "bytes=10" }
        );
        assert_eq!(route("/sum"), Route::Sum);
        assert_eq!(route("/trap"), Route::Trap);
        assert_eq!(route("/spin"), Route::Spin);
        assert_eq!(
            route("/fetch?url=http://a/b?c=d"),
            Route::Fetch {
                query: "url=http://a/b?c=d"
            }
        );
        assert_eq!(route("/nowhere"), Route::Hello);
    }

    #[test]
    fn query_params() {
        assert_eq!(query_param("bytes=10", "bytes"), Some("10"));
        assert_eq!(query_param("a=1&bytes=2&bytes=3", "bytes"), Some("2"));
        assert_eq!(query_param("bytes", "bytes"), None);
        assert_eq!(query_param("", "bytes"), None);
        assert_eq!(
            query_param("url=http://h/p?q=1", "url"),
            Some("http://h/p?q=1")
        );
    }

    #[test]
    fn statuses() {
        assert_eq!(parse_status("200"), Some(200));
        assert_eq!(parse_status("204"), Some(204));
        assert_eq!(parse_status("599"), Some(599));
        for bad in [
            "", "99", "099", "100", "199", "600", "2000", "+20", "abc", " 200",
        ] {
            assert_eq!(parse_status(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(
            percent_decode("http%3A%2F%2Fh%3a80/a+b").as_deref(),
            Some("http://h:80/a+b")
        );
        assert_eq!(percent_decode("plain").as_deref(), Some("plain"));
        assert_eq!(percent_decode("%"), None);
        assert_eq!(percent_decode("%4"), None);
        assert_eq!(percent_decode("%zz"), None);
        assert_eq!(percent_decode("%ff"), None);
    }

    #[test]
    fn urls() {
        let url = |https, authority, path: &str| {
            Some(Url {
                https,
                authority,
                path_with_query: path.to_owned(),
            })
        };
        assert_eq!(
            parse_url("http://127.0.0.1:8000/a?b=c"),
            url(false, "127.0.0.1:8000", "/a?b=c")
        );
        assert_eq!(
            parse_url("https://example.com"),
            url(true, "example.com", "/")
        );
        assert_eq!(parse_url("http://h?x=1"), url(false, "h", "/?x=1"));
        assert_eq!(parse_url("ftp://h/"), None);
        assert_eq!(parse_url("http:///path"), None);
        assert_eq!(parse_url("127.0.0.1/x"), None);
    }

    #[test]
    fn pattern_slices_continue_the_stream() {
        let pattern = Pattern::new(100);
        let mut stream = Vec::new();
        let mut offset = 0u64;
        for len in [100, 1, 37, 63, 100, 99] {
            stream.extend_from_slice(pattern.at(offset, len));
            offset += len as u64;
        }
        let expected: Vec<u8> = (0..stream.len()).map(|i| PATTERN[i % 37]).collect();
        assert_eq!(stream, expected);
        // Offsets beyond 4 GiB work the same.
        let far = (1u64 << 33) + 5;
        assert_eq!(pattern.at(far, 3), &PATTERN[(far % 37) as usize..][..3]);
    }

    #[test]
    fn fnv1a_matches_the_reference_values() {
        let hash = |bytes: &[u8]| {
            let mut fnv = Fnv1a::default();
            fnv.update(bytes);
            fnv.finish()
        };
        assert_eq!(hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(hash(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(hash(b"foobar"), 0x8594_4171_f739_67e8);
        let mut pieces = Fnv1a::default();
        pieces.update(b"foo");
        pieces.update(b"bar");
        assert_eq!(pieces.finish(), hash(b"foobar"));
    }
}
