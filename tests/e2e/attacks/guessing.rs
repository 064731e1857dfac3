//! Attack 8: the failure limiter did not slow guessing: after the 429 started, a correct guess
//! still passed at full speed. Now a client that failed too often is refused before its
//! credentials are looked at, good ones included, until its window ends; other clients are not.
//! (The limiter's memory bound and the IPv6 /64 grouping are unit-tested in `mote_access`.)
//!
//! Also: the cluster secret opens only the internal routes and forwarded calls, and one a node
//! makes for itself is 32 random bytes.

use super::{loopback, raw};
use crate::access::{Closed, read_trimmed};
use std::net::IpAddr;

fn get_functions(from: IpAddr, url: &str, token: &str) -> (u16, String) {
    raw(
        from,
        url,
        &format!("GET /v1/functions HTTP/1.1\r\nhost: {{addr}}\r\nauthorization: Bearer {token}"),
        b"",
    )
}

#[test]
fn after_too_many_failures_even_a_correct_token_is_refused() {
    let node = Closed::start(&["--auth-failures-per-minute", "3"]);
    let url = &node.p.url;
    let guesser = IpAddr::from([127, 0, 0, 2]);
    let statuses: Vec<u16> = (0..5)
        .map(|i| get_functions(guesser, url, &format!("mote_guess{i}")).0)
        .collect();
    assert_eq!(statuses, [401, 401, 401, 429, 429]);
    let (status, answer) = get_functions(guesser, url, &node.read);
    assert_eq!(
        status, 429,
        "a correct guess passed after the refusal began: {answer}"
    );
    assert!(
        answer.contains("too many failed authentications"),
        "{answer}"
    );
    // Another client is not held to the guesser's count.
    let (status, answer) = get_functions(IpAddr::from([127, 0, 0, 3]), url, &node.read);
    assert_eq!(status, 200, "{answer}");
}

#[test]
fn the_cluster_secret_opens_only_internal_routes_and_is_long() {
    let node = Closed::start(&[]);
    let url = &node.p.url;
    assert!(
        node.secret.len() >= 64,
        "a made secret is 32 random bytes in hex: {}",
        node.secret.len()
    );
    assert!(node.secret.bytes().all(|b| b.is_ascii_hexdigit()));
    let with_secret = |head: &str| {
        raw(
            loopback(),
            url,
            &format!(
                "{head}\r\nhost: {{addr}}\r\nmote-cluster-secret: {}",
                node.secret
            ),
            b"",
        )
    };
    for head in [
        "GET /v1/tokens HTTP/1.1",
        "GET /v1/functions HTTP/1.1",
        "DELETE /v1/functions/hello HTTP/1.1",
    ] {
        let (status, answer) = with_secret(head);
        assert_eq!(status, 401, "{head} with the cluster secret: {answer}");
    }
    // A call forwarded by a peer, and the internal routes, still take it.
    let (status, answer) = raw(
        loopback(),
        url,
        &format!(
            "POST /v1/invoke/hello HTTP/1.1\r\nhost: {{addr}}\r\nmote-forwarded-by: n2\r\nmote-cluster-secret: {}",
            node.secret
        ),
        b"peer",
    );
    assert_eq!((status, answer.as_str()), (200, "Hello, peer!\n"));
    let (status, answer) = with_secret(&format!(
        "GET /v1/internal/modules/{} HTTP/1.1",
        "0".repeat(64)
    ));
    assert_eq!(status, 404, "{answer}");
    assert_eq!(
        read_trimmed(&node.p.data.join("cluster.secret")),
        node.secret
    );
}
