//! TLS and the cluster secret (issue 23): a node started with `--tls-self-signed` serves https
//! only, with a certificate it makes once and keeps; two nodes with TLS and one cluster secret
//! form a cluster (their store replicas pulling from each other over TLS) and forward calls to
//! each other; a node keeps its records in a `mote store` it reaches over TLS; and in the edge
//! set-up a node with another secret gets none of the others'
//! records, while they log its refused pulls with its address.

use crate::cluster::{pose_as_node, wait_until};
use crate::fixtures;
use crate::platform::{Platform, mote_bin, wait};
use crate::store::Reaper;
use mote_api::DeployParams;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const SECRET: &str = "e2e-cluster-secret-0123456789abcdef";

/// A request to `url` that must fail before any HTTP answer.
fn fails(agent: &ureq::Agent, url: &str) -> bool {
    agent.get(format!("{url}/healthz")).call().is_err()
}

#[test]
fn a_self_signed_node_serves_https_only_and_keeps_its_certificate_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let cert = data.join("tls").join("cert.pem");
    let node = Platform::start_in(&data, &["--tls-self-signed"]).trusting(&cert);
    assert!(node.url.starts_with("https://127.0.0.1:"), "{}", node.url);
    let key = std::fs::metadata(data.join("tls").join("key.pem")).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&key.permissions()) & 0o777,
        0o600,
        "the key is readable by its owner only"
    );

    node.deploy("busy", &fixtures::busy(10), &DeployParams::default());
    let reply = node.invoke("busy", b"");
    assert_eq!(reply.status, 200, "{}", reply.text());

    // Plain HTTP on the same port is told to use https, and gets nothing else; https from a
    // client that does not trust the certificate gets no answer.
    let plain = node.url.replacen("https://", "http://", 1);
    let mut told = Platform::agent_trusting(Some(&cert))
        .get(format!("{plain}/v1/functions"))
        .call()
        .unwrap();
    assert_eq!(told.status(), 400);
    let told = told.body_mut().read_to_string().unwrap();
    assert!(told.contains("use an https:// URL"), "{told}");
    assert!(!told.contains("busy"), "{told}");
    assert!(fails(&Platform::agent_trusting(None), &node.url));
    // The node still serves after those failed handshakes.
    assert_eq!(node.get("/healthz").status, 200);
    // The CLI reaches it when told to trust the certificate, and says why it cannot otherwise.
    let cli = |trust: Option<&Path>| {
        let mut command = Command::new(mote_bin());
        command.args(["ls", "--server", &node.url]);
        if let Some(ca) = trust {
            command.arg("--tls-ca").arg(ca);
        }
        command.env_remove("MOTE_TLS_CA").output().unwrap()
    };
    let listed = cli(Some(&cert));
    assert!(listed.status.success(), "{listed:?}");
    assert!(String::from_utf8_lossy(&listed.stdout).contains("busy"));
    let refused = cli(None);
    assert!(!refused.status.success(), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("cannot reach mote"),
        "{refused:?}"
    );

    let first = std::fs::read(&cert).unwrap();
    node.stop();
    let node = Platform::start_in(&data, &["--tls-self-signed"]).trusting(&cert);
    assert_eq!(
        std::fs::read(&cert).unwrap(),
        first,
        "a restart made a new certificate"
    );
    let reply = node.invoke("busy", b"");
    assert_eq!(reply.status, 200, "{}", reply.text());
}

/// A certificate and key for 127.0.0.1 that every node of a test shares, in `dir`.
fn shared_certificate(dir: &Path) -> (String, String) {
    let names = ["localhost".to_owned(), "127.0.0.1".to_owned()];
    let identity = mote_tls::Identity::self_signed(dir, &names).unwrap();
    let cert = identity.cert_path().display().to_string();
    let key = dir.join(mote_tls::SELF_SIGNED_KEY).display().to_string();
    (cert, key)
}

/// `mote up` arguments for node `name` of an edge cluster whose replicas' peer APIs are on
/// `ports` (`scheme` says whether they serve TLS), its own at `ports[i]`.
fn edge_args(name: &str, i: usize, ports: &[u16], scheme: &str) -> Vec<String> {
    let peers: Vec<String> = ports
        .iter()
        .enumerate()
        .map(|(j, port)| format!("n{}={scheme}://127.0.0.1:{port}", j + 1))
        .collect();
    [
        "--node",
        name,
        "--store-peer-listen",
        &format!("127.0.0.1:{}", ports[i]),
        "--store-peers",
        &peers.join(","),
        "--cores",
        "1",
        "--lease-ttl-s",
        "2",
    ]
    .map(|s| s.to_owned())
    .to_vec()
}

fn members(node: &Platform) -> usize {
    wait(node.api().cluster()).nodes.len()
}

#[test]
fn two_nodes_with_tls_and_one_secret_form_a_cluster_and_forward_calls() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = shared_certificate(&dir.path().join("tls"));
    let ports = mote_testbed::free_ports(2).unwrap();
    let nodes: Vec<Platform> = (0..2)
        .map(|i| {
            let name = format!("n{}", i + 1);
            let mut args = edge_args(&name, i, &ports, "https");
            args.extend(["--tls-cert", &cert, "--tls-key", &key, "--homes", "1"].map(String::from));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            Platform::start_in_with_env(
                &dir.path().join(&name),
                &args,
                &[("MOTE_CLUSTER_SECRET", SECRET)],
            )
            .trusting(Path::new(&cert))
        })
        .collect();
    for node in &nodes {
        assert!(node.url.starts_with("https://"), "{}", node.url);
        wait_until(&format!("{} sees both nodes", node.url), || {
            members(node) == 2
        });
    }
    nodes[0].deploy("busy", &fixtures::busy(10), &DeployParams::default());
    wait_until("n2 lists the deploy", || {
        nodes[1].function_names() == ["busy"]
    });
    // With one home per function, the node that is not its home sends it its calls.
    let mut forwarded = false;
    for (i, node) in nodes.iter().enumerate() {
        for _ in 0..5 {
            let reply = node.invoke("busy", b"");
            assert_eq!(reply.status, 200, "{}", reply.text());
            forwarded |= reply.node.as_deref() != Some(&format!("n{}", i + 1));
        }
    }
    assert!(forwarded, "no call was forwarded over https");
}

#[test]
fn an_edge_node_with_another_secret_gets_nothing_and_its_pulls_are_logged_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ports = mote_testbed::free_ports(3).unwrap();
    let start = |i: usize, secret: &str| {
        let name = format!("n{}", i + 1);
        let file = dir.path().join(format!("{name}.secret"));
        std::fs::write(&file, format!("{secret}\n")).unwrap();
        let mut args = edge_args(&name, i, &ports, "http");
        args.extend([
            "--cluster-secret-file".to_owned(),
            file.display().to_string(),
        ]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let log = dir.path().join(format!("{name}.log"));
        Platform::start_in_logging(&dir.path().join(&name), &args, &log)
    };
    let n1 = start(0, SECRET);
    let n2 = start(1, SECRET);
    let n3 = start(2, "not-the-cluster-secret-0123456789");
    n1.deploy("busy", &fixtures::busy(10), &DeployParams::default());
    wait_until("n2 lists the deploy", || n2.function_names() == ["busy"]);
    // n3 pulls every 20 ms: by now it has tried many times.
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        n3.function_names().is_empty(),
        "a replica with another secret got the cluster's records"
    );
    assert_eq!(members(&n3), 1, "n3 learned of the other nodes");

    let log = |name: &str| std::fs::read_to_string(dir.path().join(format!("{name}.log"))).unwrap();
    wait_until("n1 logs n3's refused pull", || {
        log("n1").contains("refused a store peer's pull")
    });
    let n1_log = log("n1");
    let refusal = n1_log
        .lines()
        .find(|l| l.contains("refused a store peer's pull"))
        .unwrap();
    assert!(
        refusal.contains("peer=127.0.0.1:") && refusal.contains("wrong cluster secret"),
        "{refusal}"
    );
    wait_until("n3 logs why its pulls fail", || {
        log("n3").contains("carries a wrong cluster secret")
    });
}

/// `mote store` with a self-signed certificate in `data/tls`, serving both ports over TLS and
/// requiring `secret`: the process and its etcd API's URL.
fn tls_store(data: &Path, secret: &Path) -> (Reaper, String) {
    let mut child = Command::new(mote_bin())
        .args([
            "store",
            "--name",
            "s1",
            "--log",
            "warn",
            "--tls-self-signed",
        ])
        .args(["--listen", "127.0.0.1:0", "--peer-listen", "127.0.0.1:0"])
        .arg("--cluster-secret-file")
        .arg(secret)
        .arg("--data")
        .arg(data)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("starting mote store");
    let stdout = child.stdout.take().unwrap();
    let reaper = Reaper(Some(child));
    let mut lines = BufReader::new(stdout).lines();
    let url = loop {
        let line = lines
            .next()
            .expect("mote store exited before it was up")
            .unwrap();
        if let Some(rest) = line.split("etcd v3 API on ").nth(1) {
            break rest.split([',', ' ']).next().unwrap().to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    (reaper, url)
}

#[test]
fn a_node_keeps_its_records_in_a_store_it_reaches_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("cluster.secret");
    std::fs::write(&secret, SECRET).unwrap();
    let store_data = dir.path().join("store");
    let (_store, url) = tls_store(&store_data, &secret);
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let ca = store_data.join("tls").join("cert.pem");
    let ca = ca.to_str().unwrap();
    let data = dir.path().join("node");
    let node = Platform::start_in(&data, &["--store", &url, "--tls-ca", ca]);
    node.deploy("busy", &fixtures::busy(10), &DeployParams::default());
    node.stop();
    // A restart reads the record back from the store, over TLS again.
    let node = Platform::start_in(&data, &["--store", &url, "--tls-ca", ca]);
    assert_eq!(node.function_names(), ["busy"]);
    assert_eq!(node.invoke("busy", b"").status, 200);
}

/// A plain-HTTP server on loopback that answers every request with an empty log and keeps the
/// request heads it was sent.
fn recording_peer() -> (String, std::sync::Arc<parking_lot::Mutex<Vec<String>>>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let heads = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
    let kept = heads.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            stream
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).is_ok_and(|n| n == 1) {
                head.push(byte[0]);
            }
            kept.lock()
                .push(String::from_utf8_lossy(&head).into_owned());
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
        }
    });
    (url, heads)
}

#[test]
fn a_node_that_serves_tls_sends_its_cluster_secret_to_no_plain_http_peer() {
    // The same set-up without TLS is the control: there the secret does go to the peer, so the
    // recording server would see it if the TLS node sent it.
    for tls in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let args: &[&str] = match tls {
            true => &["--tls-self-signed", "--cores", "1"],
            false => &["--cores", "1"],
        };
        let node = Platform::start_in_with_env(&data, args, &[("MOTE_CLUSTER_SECRET", SECRET)]);
        let node = match tls {
            true => node.trusting(&data.join("tls").join("cert.pem")),
            false => node,
        };
        node.deploy("busy", &fixtures::busy(10), &DeployParams::default());
        // A peer that says it is a node of the cluster at a plain http:// URL: anyone who can
        // write to the store, or a node an operator misconfigured.
        let (peer, heads) = recording_peer();
        let endpoint = wait(node.api().cluster()).store.endpoints;
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let mut etcd = crate::store::client(&endpoint).await;
            pose_as_node(&mut etcd, "plain", &peer).await;
        });
        wait_until("the node sees the plain peer", || members(&node) == 2);
        // Reading a function's log asks every peer for theirs, on the cluster secret's route.
        let logs = node.get("/v1/functions/busy/logs");
        assert_eq!(logs.status, 200, "{}", logs.text());
        let heads = heads.lock().clone();
        let sent = heads.iter().any(|h| h.contains(SECRET));
        if tls {
            assert!(!sent, "a TLS node sent its secret in clear: {heads:?}");
            assert!(
                logs.text().contains("is not sent to") && logs.text().contains(&peer),
                "the log does not say why the peer was not asked: {}",
                logs.text()
            );
        } else {
            assert!(
                sent,
                "the control did not reach the peer with the secret: {heads:?}"
            );
        }
    }
}
