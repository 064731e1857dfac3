//! Attack 1: a component received its callers' mote tokens (every request header reached it), so
//! the author of any function collected the tokens of whoever called it, admins included. Now
//! mote's tokens and the cluster secret are stripped before a request reaches a guest, while a
//! public component still gets an `Authorization` of its own apps.
//!
//! The `http-hello` example answers `/headers` with every header it was given.

use crate::access::{Closed, bearer, send};
use crate::platform::Platform;

#[test]
fn a_component_never_sees_a_callers_mote_token_or_the_cluster_secret() {
    let node = Closed::start(&[]);
    let url = &node.p.url;
    for (scope, path) in [
        ("invoke", "/hello-http/headers"),
        ("admin", "/hello-http/headers"),
        ("admin", "/v1/invoke/http-hello/headers"),
    ] {
        let token = node.token(scope);
        let seen = send(
            "GET",
            &format!("{url}{path}"),
            &[
                ("authorization", &bearer(token)),
                ("mote-cluster-secret", &node.secret),
                ("x-trace", "kept"),
            ],
            b"",
        );
        assert_eq!(seen.status, 200, "{scope} {path}: {}", seen.body);
        assert!(seen.body.contains("x-trace: kept"), "{}", seen.body);
        assert!(
            !seen.body.to_ascii_lowercase().contains("authorization")
                && !seen.body.contains(token)
                && !seen.body.contains(&node.secret),
            "the component saw a credential ({scope} {path}): {}",
            seen.body
        );
    }
}

#[test]
fn a_public_component_gets_its_own_apps_authorization_but_no_mote_token() {
    let node = Closed::start(&[]);
    let url = &node.p.url;
    let deployed = send(
        "PUT",
        &format!("{url}/v1/functions/site?route=/site/...&public=true"),
        &[("authorization", &bearer(&node.deploy))],
        mote_guests::HTTP_HELLO.wasm,
    );
    assert_eq!(deployed.status, 201, "{}", deployed.body);
    let basic = "Basic YWxpY2U6c2VjcmV0";
    let own = send(
        "GET",
        &format!("{url}/site/headers"),
        &[("authorization", basic)],
        b"",
    );
    assert_eq!(own.status, 200, "{}", own.body);
    assert!(
        own.body.contains(&format!("authorization: {basic}")),
        "{}",
        own.body
    );
    // Any mote token, live or not, is the caller's mote credential, not the app's.
    for presented in [bearer(&node.invoke), bearer("mote_revoked_or_made_up")] {
        let seen = send(
            "GET",
            &format!("{url}/site/headers"),
            &[("authorization", &presented)],
            b"",
        );
        assert_eq!(seen.status, 200, "{}", seen.body);
        assert!(
            !seen.body.to_ascii_lowercase().contains("authorization"),
            "{}",
            seen.body
        );
    }
}

/// On a loopback node without tokens the CLI still sends its admin token (from DATA/admin.token)
/// with every request: it must not reach the function either.
#[test]
fn the_admin_token_the_cli_sends_does_not_reach_a_component_on_an_open_node() {
    let p = Platform::start(&["--examples"]);
    let admin = std::fs::read_to_string(p.data.join("admin.token")).unwrap();
    let seen = send(
        "GET",
        &format!("{}/hello-http/headers", p.url),
        &[("authorization", &bearer(admin.trim()))],
        b"",
    );
    assert_eq!(seen.status, 200, "{}", seen.body);
    assert!(seen.body.contains("user-agent: "), "{}", seen.body);
    assert!(!seen.body.contains(admin.trim()), "{}", seen.body);
}
