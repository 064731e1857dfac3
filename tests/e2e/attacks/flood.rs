//! Connections and TLS handshakes were unbounded: a flood of idle connections held a descriptor
//! and a task each, as many as the client could open. Now each listener holds at most
//! `--max-connections` (past that the node accepts nothing until one closes), at most
//! `--max-tls-handshakes` handshakes run at once (unit-tested with a flood of silent clients in
//! the gateway's `listen` module), and an idle connection is closed after a minute.

use crate::platform::Platform;
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// The sockets the process `pid` holds open.
fn sockets(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter(|target| target.to_string_lossy().starts_with("socket:"))
        .count()
}

#[test]
fn a_flood_of_idle_connections_holds_no_more_than_the_bound() {
    let bound = 16;
    let p = Platform::start(&["--max-connections", &bound.to_string()]);
    let addr = p.url.trim_start_matches("http://").to_owned();
    let before = sockets(p.pid());
    let flood: Vec<TcpStream> = (0..200)
        .map(|_| TcpStream::connect(&addr).expect("the kernel's backlog takes the connection"))
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let during = sockets(p.pid());
    assert!(
        during <= before + bound,
        "the node holds {during} sockets with 200 idle clients (it held {before}; the bound is {bound})"
    );
    drop(flood);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = crate::access::send("GET", &format!("{}/healthz", p.url), &[], b"");
        if r.status == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the node did not serve after the flood: {}",
            r.status
        );
    }
}
