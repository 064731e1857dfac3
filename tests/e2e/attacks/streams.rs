//! Attack 7: revocation did not end open streams: `/v1/dashboard/events` and `logs?follow=true`
//! opened with a token kept streaming after `mote token revoke`. Now a stream ends within a
//! second of its token's revocation reaching the node (the token table announces each change;
//! nothing polls), while streams of other tokens go on.

use crate::access::{Closed, agent, bearer, make_token, send};
use std::io::Read;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Opens `url` with `token` and reads it on a thread until it ends; the receiver gets the time
/// it ended.
fn follow(url: String, token: &str) -> mpsc::Receiver<Instant> {
    let response = agent()
        .get(&url)
        .header("authorization", bearer(token))
        .call()
        .expect("the stream opens");
    assert_eq!(response.status(), 200, "{url}");
    let (ended, when) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = response.into_body().into_reader();
        let mut buf = [0u8; 4096];
        while matches!(reader.read(&mut buf), Ok(n) if n > 0) {}
        let _ = ended.send(Instant::now());
    });
    when
}

#[test]
fn revoking_a_token_ends_the_streams_it_opened_within_a_second() {
    let node = Closed::start(&[]);
    let url = &node.p.url;
    let doomed = make_token(url, &node.admin, "doomed", &["read"]);
    let streams = [
        format!("{url}/v1/functions/hello/logs?follow=true"),
        format!("{url}/v1/dashboard/events"),
    ];
    let ending: Vec<_> = streams.iter().map(|s| follow(s.clone(), &doomed)).collect();
    let going_on: Vec<_> = streams
        .iter()
        .map(|s| follow(s.clone(), &node.read))
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    for stream in ending.iter().chain(&going_on) {
        assert!(
            stream.try_recv().is_err(),
            "a stream ended before any revocation"
        );
    }
    let revoked = send(
        "DELETE",
        &format!("{url}/v1/tokens/doomed"),
        &[("authorization", &bearer(&node.admin))],
        b"",
    );
    assert_eq!(revoked.status, 200, "{}", revoked.body);
    let at = Instant::now();
    for (stream, what) in ending.iter().zip(&streams) {
        let ended = stream
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|_| panic!("{what} went on after its token was revoked"));
        let took = ended.saturating_duration_since(at);
        assert!(
            took < Duration::from_secs(1),
            "{what} ended {took:?} after the revocation"
        );
    }
    std::thread::sleep(Duration::from_millis(1500));
    for (stream, what) in going_on.iter().zip(&streams) {
        assert!(
            stream.try_recv().is_err(),
            "{what} of another token ended too"
        );
    }
    // The revoked token opens nothing new.
    let again = send(
        "GET",
        &streams[0],
        &[("authorization", &bearer(&doomed))],
        b"",
    );
    assert_eq!(again.status, 401, "{}", again.body);
}
