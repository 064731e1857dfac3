//! Three `mote up` nodes as one platform (issue 19): each a real process with `--cores 1`,
//! sharing one state store (a real `mote store` process, the *shared* set-up). Deploys made on
//! one node run on the others, calls sent to one node spread over the cluster, a node killed
//! with SIGKILL leaves the routing table by itself and comes back when restarted, a taken name
//! is refused, and a module a peer sends with the wrong bytes is never compiled.
//!
//! Every wait polls up to a generous [`DEADLINE`]; the one timing the issue names (a dead node
//! gets no call once its lease TTL and a second have passed) is what the kill test checks.

use crate::fixtures;
use crate::platform::{Platform, Reply, mote_bin, wait};
use crate::store::{Link, Store, client};
use mote_api::DeployParams;
use mote_testbed::LocalS3;
use parking_lot::Mutex;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The longest anything that should happen may take on a loaded 2-core machine.
pub(crate) const DEADLINE: Duration = Duration::from_secs(30);
/// The nodes' lease TTL (`--lease-ttl-s`).
const TTL: Duration = Duration::from_secs(2);

/// A store and the nodes that share it.
pub(crate) struct Cluster {
    runtime: tokio::runtime::Runtime,
    /// The shared store, until a test kills it.
    store: Option<Store>,
    store_url: String,
    dir: tempfile::TempDir,
    pub(crate) nodes: Vec<Option<Platform>>,
    /// Flags every node gets beside the cluster's own.
    extra: Vec<String>,
}

impl Cluster {
    /// A `mote store` and `n` nodes, `n1` to `nN`, each with `--cores 1`.
    pub(crate) fn shared(n: usize) -> Cluster {
        Self::shared_with(n, &[])
    }

    /// Like [`Cluster::shared`], each node started with `extra` flags too.
    pub(crate) fn shared_with(n: usize, extra: &[&str]) -> Cluster {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store_data = dir.path().join("store");
        let store = runtime.block_on(Store::start("shared", &store_data, &[]));
        let mut cluster = Cluster {
            runtime,
            store_url: store.url.clone(),
            store: Some(store),
            dir,
            nodes: Vec::new(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
        };
        for i in 1..=n {
            let node = cluster.start_node(&format!("n{i}"));
            cluster.nodes.push(Some(node));
        }
        cluster.wait_for_members(n);
        cluster
    }

    fn data(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn node_args(&self, name: &str) -> Vec<String> {
        let ttl = TTL.as_secs().to_string();
        [
            "--node",
            name,
            "--store",
            &self.store_url,
            "--cores",
            "1",
            "--lease-ttl-s",
            &ttl,
        ]
        .map(str::to_owned)
        .into_iter()
        .chain(self.extra.iter().cloned())
        .collect()
    }

    fn start_node(&self, name: &str) -> Platform {
        let args = self.node_args(name);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Platform::start_in(&self.data(name), &args)
    }

    /// Deploys `wasm` as `name` on n1 and waits until every running node lists it.
    pub(crate) fn deploy_everywhere(&self, name: &str, wasm: &[u8]) {
        self.node(0).deploy(name, wasm, &DeployParams::default());
        for node in self.nodes.iter().flatten() {
            wait_until(&format!("{} lists {name}", node.url), || {
                node.function_names().iter().any(|f| f == name)
            });
        }
    }

    pub(crate) fn node(&self, i: usize) -> &Platform {
        self.nodes[i].as_ref().expect("the node runs")
    }

    /// Waits until every running node lists `n` members.
    fn wait_for_members(&self, n: usize) {
        for node in self.nodes.iter().flatten() {
            wait_until(&format!("{} sees {n} nodes", node.url), || {
                members(node).len() == n
            });
        }
    }
}

/// The names of the nodes `node` sees.
fn members(node: &Platform) -> BTreeSet<String> {
    let view = wait(node.api().cluster());
    view.nodes.into_iter().map(|n| n.name).collect()
}

/// Writes a node key for `name` at `url` as a node does: a draining node, which takes no
/// calls but is asked for modules and logs.
pub(crate) async fn pose_as_node(etcd: &mut etcd_client::Client, name: &str, url: &str) {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let key = serde_json::json!({
        "url": url, "policy": "fc", "cores": 1, "running": 0, "queued": 0,
        "work_us": 0, "draining": true, "written_ms": now_ms,
    });
    etcd.put(format!("/mote/nodes/{name}"), key.to_string(), None)
        .await
        .unwrap();
}

pub(crate) fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < DEADLINE,
            "waited {DEADLINE:?} for: {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends `calls` calls of `name` to `node` from `clients` threads at once.
fn burst(node: &Platform, name: &str, calls: usize, clients: usize) -> Vec<Reply> {
    let url = node.url.clone();
    let replies = Arc::new(Mutex::new(Vec::new()));
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    std::thread::scope(|s| {
        for _ in 0..clients {
            let (replies, next, url) = (replies.clone(), next.clone(), url.clone());
            s.spawn(move || {
                while next.fetch_add(1, Ordering::SeqCst) < calls {
                    let reply = post(&url, &format!("/v1/invoke/{name}"), b"");
                    replies.lock().push(reply);
                }
            });
        }
    });
    Arc::try_unwrap(replies).ok().unwrap().into_inner()
}

/// A POST to `base` + `path`, outside any [`Platform`] (for threads).
pub(crate) fn post(base: &str, path: &str, body: &[u8]) -> Reply {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into();
    let mut r = agent
        .post(format!("{base}{path}"))
        .send(body)
        .expect("request reached the server");
    Reply {
        status: r.status().as_u16(),
        node: r
            .headers()
            .get("mote-node")
            .map(|v| v.to_str().unwrap().to_owned()),
        body: r.body_mut().read_to_vec().unwrap(),
    }
}

fn ran_on(replies: &[Reply]) -> BTreeSet<String> {
    replies.iter().filter_map(|r| r.node.clone()).collect()
}

/// The calls `node` has sent to `peer`, whatever their outcome (`mote_forwarded_calls_total`).
fn sent_to(node: &Platform, peer: &str) -> u64 {
    let metrics = node.get("/metrics").text();
    let label = format!("peer=\"{peer}\"");
    metrics
        .lines()
        .filter(|l| l.starts_with("mote_forwarded_calls_total{") && l.contains(&label))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

/// A call that keeps its core for a few milliseconds.
fn slow() -> Vec<u8> {
    fixtures::busy(3_000_000)
}

#[test]
fn a_function_deployed_on_one_node_runs_on_every_node_and_goes_from_all_when_removed() {
    let cluster = Cluster::shared(3);
    let echo = mote_guests::ALL
        .iter()
        .find(|g| g.name == "echo")
        .expect("the echo example");
    cluster
        .node(0)
        .deploy("echo", echo.wasm, &DeployParams::default());
    let deployed = Instant::now();
    for i in 1..3 {
        let node = cluster.node(i);
        wait_until(&format!("node {i} lists echo"), || {
            node.function_names() == ["echo"]
        });
    }
    // The bound: every node lists a deploy within a second.
    assert!(
        deployed.elapsed() < Duration::from_secs(1),
        "the other nodes listed the deploy {:?} after it",
        deployed.elapsed()
    );
    for i in 1..3 {
        let node = cluster.node(i);
        let reply = node.invoke("echo", b"from afar");
        assert_eq!(reply.status, 200, "{}", reply.text());
        assert_eq!(reply.body, b"from afar");
        assert!(
            reply.node.is_some(),
            "every call names the node that ran it"
        );
    }
    // The nodes that adopted the record fetched the module from a peer and keep it.
    let sha = wait(cluster.node(0).api().function("echo")).sha256;
    for i in 1..3 {
        let reply = cluster.node(i).get(&format!("/v1/internal/modules/{sha}"));
        assert_eq!(reply.status, 200, "node {i} holds the module");
        assert_eq!(reply.body, echo.wasm);
    }

    let removed = cluster.node(1).delete("/v1/functions/echo");
    assert_eq!(removed.status, 200, "{}", removed.text());
    for i in 0..3 {
        let node = cluster.node(i);
        wait_until(&format!("node {i} no longer lists echo"), || {
            node.function_names().is_empty()
        });
        let reply = node.invoke("echo", b"x");
        assert_eq!(reply.status, 404, "{}", reply.text());
        assert!(
            reply.error().contains("`echo` is not deployed"),
            "{}",
            reply.error()
        );
    }
}

#[test]
fn a_burst_sent_to_one_node_runs_on_several_and_a_redeploy_is_seen_everywhere() {
    let cluster = Cluster::shared(3);
    cluster.deploy_everywhere("slow", &slow());
    let replies = burst(cluster.node(0), "slow", 60, 8);
    for r in &replies {
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let nodes = ran_on(&replies);
    assert!(nodes.len() >= 2, "the burst ran on {nodes:?} only");
    let metrics = cluster.node(0).get("/metrics").text();
    assert!(
        metrics.contains("mote_forwarded_calls_total{peer=\"n")
            && metrics.contains("outcome=\"answered\""),
        "{metrics}"
    );
    // The dashboard says where the calls ran: here, and on each peer as many as were sent.
    let snap = cluster.node(0).get("/v1/dashboard").json();
    let here = replies
        .iter()
        .filter(|r| r.node.as_deref() == Some("n1"))
        .count();
    for row in snap["nodes"].as_array().unwrap() {
        let name = row["name"].as_str().unwrap();
        match row["me"].as_bool().unwrap() {
            true => assert_eq!(row["ran_here"], here as u64, "{row}"),
            false => {
                let sent = replies
                    .iter()
                    .filter(|r| r.node.as_deref() == Some(name))
                    .count();
                assert_eq!(row["forwarded"]["answered"], sent as u64, "{row}");
                assert_eq!(
                    row["forwarded"]["answered"],
                    sent_to(cluster.node(0), name),
                    "{row}"
                );
            }
        }
    }

    // A new module under the same name replaces the old one on every node.
    cluster.node(2).deploy(
        "slow",
        &fixtures::busy(1_000),
        &DeployParams {
            timeout_ms: Some(500),
            ..Default::default()
        },
    );
    for i in 0..3 {
        let node = cluster.node(i);
        wait_until(&format!("node {i} has the redeploy"), || {
            wait(node.api().function("slow")).timeout_ms == 500
        });
    }
}

#[test]
fn a_killed_node_leaves_the_routing_table_and_rejoins_when_restarted() {
    let mut cluster = Cluster::shared(3);
    cluster.deploy_everywhere("slow", &slow());
    // Load on n1 from two clients for the whole test.
    let stop = Arc::new(AtomicBool::new(false));
    let replies = Arc::new(Mutex::new(Vec::<(Instant, Reply)>::new()));
    let url = cluster.node(0).url.clone();
    let load: Vec<_> = (0..3)
        .map(|_| {
            let (stop, replies, url) = (stop.clone(), replies.clone(), url.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let reply = post(&url, "/v1/invoke/slow", b"");
                    replies.lock().push((Instant::now(), reply));
                }
            })
        })
        .collect();
    wait_until("n3 runs some of the load", || {
        replies
            .lock()
            .iter()
            .any(|(_, r)| r.node.as_deref() == Some("n3"))
    });

    cluster.nodes[2].take().unwrap().kill();
    let killed = Instant::now();
    wait_until("n1 no longer sees n3", || {
        !members(cluster.node(0)).contains("n3")
    });
    assert!(
        killed.elapsed() < TTL + Duration::from_secs(1),
        "n3 left n1's table {:?} after it was killed; the TTL is {TTL:?}",
        killed.elapsed()
    );
    // From the TTL and a second after the kill on, n1 sends n3 nothing, not even an attempt
    // that fails over to another node.
    if let Some(wait) =
        (killed + TTL + Duration::from_secs(1)).checked_duration_since(Instant::now())
    {
        std::thread::sleep(wait);
    }
    let attempts = sent_to(cluster.node(0), "n3");
    let ok_before = replies.lock().len();
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        sent_to(cluster.node(0), "n3"),
        attempts,
        "n1 still sent calls to n3 a TTL and a second after it died"
    );
    assert!(
        replies.lock().len() > ok_before,
        "no call completed while n3 was dead"
    );

    let restarted = cluster.start_node("n3");
    cluster.nodes[2] = Some(restarted);
    cluster.wait_for_members(3);
    let back = Instant::now();
    wait_until("n3 runs calls again", || {
        replies
            .lock()
            .iter()
            .any(|(at, r)| *at > back && r.node.as_deref() == Some("n3"))
    });
    stop.store(true, Ordering::SeqCst);
    for thread in load {
        thread.join().unwrap();
    }

    let replies = replies.lock();
    for (at, reply) in replies.iter() {
        if reply.status == 200 {
            continue;
        }
        // Only calls that n3 held when it died may fail, and they say so.
        assert_eq!(reply.status, 502, "{}", reply.text());
        assert!(reply.error().contains("node `n3`"), "{}", reply.error());
        assert!(
            *at < killed + TTL + Duration::from_secs(1),
            "a late failure: {}",
            reply.text()
        );
    }
    let ok = replies.iter().filter(|(_, r)| r.status == 200).count();
    assert!(ok > 10, "only {ok} calls succeeded");
}

#[test]
fn a_name_another_node_holds_is_refused_at_start() {
    let cluster = Cluster::shared(1);
    let args = cluster.node_args("n1");
    let output = Platform::up_command(&cluster.data("impostor"), &[])
        .args(&args)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("node name `n1` is taken by the node at")
            && stderr.contains(&cluster.node(0).url),
        "{stderr}"
    );
    assert!(
        !String::from_utf8_lossy(&output.stdout).contains("mote is up"),
        "the impostor started"
    );
    assert_eq!(members(cluster.node(0)), BTreeSet::from(["n1".to_owned()]));
}

/// Serves `bytes` to every request on a loopback port, as a peer that lies about a module.
fn lying_peer(bytes: Vec<u8>) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            use std::io::{BufRead, Write};
            let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                bytes.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&bytes);
        }
    });
    url
}

#[test]
fn a_module_a_peer_sends_with_other_bytes_is_refused() {
    let cluster = Cluster::shared(1);
    let node = cluster.node(0);
    let real = fixtures::busy(10);
    node.deploy("honest", &real, &DeployParams::default());
    let record_of = |name: &str| format!("/mote//mote/functions/{name}");
    // A record for a module that no real node holds (its sha256 is of other bytes), and a
    // peer that answers every request with the honest module's bytes instead.
    let wanted = fixtures::busy(20);
    let wanted_sha = sha256_hex(&wanted);
    let liar = lying_peer(real.clone());
    let store_url = cluster.store_url.clone();
    cluster.runtime.block_on(async {
        let mut etcd = client(&store_url).await;
        let honest = etcd.get(record_of("honest"), None).await.unwrap();
        let mut record: serde_json::Value =
            serde_json::from_slice(honest.kvs()[0].value()).unwrap();
        record["name"] = "forged".into();
        record["sha256"] = wanted_sha.clone().into();
        etcd.put(record_of("forged"), record.to_string(), None)
            .await
            .unwrap();
    });
    // The liar reports as a node does, three times a TTL (a draining node: it takes no calls,
    // but it is asked for modules).
    let _liar_reports = cluster.runtime.spawn(async move {
        let mut etcd = client(&store_url).await;
        loop {
            pose_as_node(&mut etcd, "liar", &liar).await;
            tokio::time::sleep(TTL / 3).await;
        }
    });
    wait_until("n1 sees the liar", || members(node).contains("liar"));
    wait_until("n1 adopts the forged record", || {
        node.function_names().contains(&"forged".to_owned())
    });
    let reply = node.invoke("forged", b"");
    assert_eq!(reply.status, 500, "{}", reply.text());
    let error = reply.error();
    assert!(
        error.contains("node `liar`") && error.contains("refused") && error.contains(&wanted_sha),
        "{error}"
    );
    assert!(
        !blob_exists(&node.data, &wanted_sha),
        "the lying bytes were stored"
    );
    // The node keeps serving.
    assert_eq!(node.invoke("honest", b"").status, 200);
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

fn blob_exists(data: &Path, sha256: &str) -> bool {
    data.join("modules").join(format!("{sha256}.wasm")).exists()
}

#[test]
fn mote_nodes_lists_the_cluster() {
    let cluster = Cluster::shared(2);
    let output = std::process::Command::new(mote_bin())
        .args(["nodes", "--server", &cluster.node(1).url])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("NODE"), "{stdout}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("n1 ") && l.contains(" up ")),
        "{stdout}"
    );
    assert!(lines.iter().any(|l| l.starts_with("n2*")), "{stdout}");
    assert!(stdout.contains("answers"), "{stdout}");
}

/// Three nodes in the edge set-up: each embeds a store replica that pulls from the others'
/// through a [`Link`] per direction, so a test can partition one node's replica away.
struct Edge {
    runtime: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
    nodes: Vec<Platform>,
    /// `links[i][j]`: node `i`'s replica pulls from node `j`'s through it.
    links: Vec<Vec<Option<Link>>>,
}

impl Edge {
    fn start(n: usize) -> Edge {
        Self::start_with_ttl(n, TTL)
    }

    /// Nodes whose leases last `ttl`: a node keeps a member it no longer hears for that long.
    fn start_with_ttl(n: usize, ttl: Duration) -> Edge {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ports = mote_testbed::free_ports(n).unwrap();
        let links: Vec<Vec<Option<Link>>> = (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| {
                        (i != j).then(|| {
                            let link = runtime.block_on(Link::new());
                            link.point_to(([127, 0, 0, 1], ports[j]).into());
                            link
                        })
                    })
                    .collect()
            })
            .collect();
        let ttl = ttl.as_secs().to_string();
        let nodes = (0..n)
            .map(|i| {
                // Every node's list names it too, as `--initial-cluster` does for etcd.
                let peers: Vec<String> = (0..n)
                    .map(|j| match &links[i][j] {
                        None => format!("n{}=http://127.0.0.1:{}", j + 1, ports[j]),
                        Some(link) => format!("n{}=http://{}", j + 1, link.addr),
                    })
                    .collect();
                let (name, listen) = (format!("n{}", i + 1), format!("127.0.0.1:{}", ports[i]));
                let args = [
                    "--node",
                    &name,
                    "--store-peer-listen",
                    &listen,
                    "--store-peers",
                    &peers.join(","),
                    "--cores",
                    "1",
                    "--lease-ttl-s",
                    &ttl,
                ];
                Platform::start_in(&dir.path().join(&name), &args)
            })
            .collect();
        let edge = Edge {
            runtime,
            _dir: dir,
            nodes,
            links,
        };
        for node in &edge.nodes {
            wait_until(&format!("{} sees {n} nodes", node.url), || {
                members(node).len() == n
            });
        }
        edge
    }

    /// Cuts (or heals) every link to and from node `i`'s replica.
    fn isolate(&self, i: usize, cut: bool) {
        for (a, row) in self.links.iter().enumerate() {
            for (b, link) in row.iter().enumerate() {
                if let Some(link) = link
                    && (a == i || b == i)
                {
                    match cut {
                        true => self.runtime.block_on(link.cut()),
                        false => link.heal(),
                    }
                }
            }
        }
    }
}

fn lists(node: &Platform, name: &str) -> bool {
    node.function_names().iter().any(|f| f == name)
}

#[test]
fn edge_nodes_serve_on_both_sides_of_a_store_partition_and_converge_after_it_heals() {
    let edge = Edge::start(3);
    let [n1, n2, n3] = [&edge.nodes[0], &edge.nodes[1], &edge.nodes[2]];
    n1.deploy("before", &fixtures::busy(10), &DeployParams::default());
    wait_until("n3 has `before`", || lists(n3, "before"));
    assert_eq!(n3.invoke("before", b"").status, 200);

    edge.isolate(2, true);
    n1.deploy("majority", &fixtures::busy(11), &DeployParams::default());
    n3.deploy("minority", &fixtures::busy(12), &DeployParams::default());
    wait_until("n2 has the majority's deploy", || lists(n2, "majority"));
    wait_until("n3 no longer hears n1 and n2", || {
        members(n3) == BTreeSet::from(["n3".to_owned()])
    });
    wait_until("n1 no longer hears n3", || !members(n1).contains("n3"));
    // Each side works on its own state: the minority runs what it knows, the majority too.
    for _ in 0..5 {
        let reply = n3.invoke("before", b"");
        assert_eq!(reply.status, 200, "{}", reply.text());
        assert_eq!(reply.node.as_deref(), Some("n3"));
        assert_eq!(n3.invoke("minority", b"").status, 200);
        assert_eq!(n1.invoke("majority", b"").status, 200);
    }
    assert!(!lists(n3, "majority"), "the partition let a record through");
    assert!(!lists(n1, "minority"), "the partition let a record through");
    // The dashboard shows n3's replica falling behind the others.
    wait_until("n3's dashboard shows it behind n1 and n2", || {
        let replicas = replicas(n3);
        replicas.len() == 2
            && replicas
                .iter()
                .all(|(_, behind, failing)| *failing || *behind > 1000)
    });

    edge.isolate(2, false);
    for (i, node) in edge.nodes.iter().enumerate() {
        wait_until(&format!("node {i} converges"), || {
            node.function_names() == ["before", "majority", "minority"]
        });
        wait_until(&format!("node {i} sees every node again"), || {
            members(node).len() == 3
        });
        for function in ["before", "majority", "minority"] {
            let reply = node.invoke(function, b"");
            assert_eq!(
                reply.status,
                200,
                "{function} on node {i}: {}",
                reply.text()
            );
        }
        wait_until(&format!("node {i}'s dashboard shows it caught up"), || {
            let replicas = replicas(node);
            replicas.len() == 2
                && replicas
                    .iter()
                    .all(|(_, behind, failing)| !failing && *behind < 1000)
        });
    }
    let names: Vec<String> = replicas(n3).into_iter().map(|(name, _, _)| name).collect();
    assert_eq!(names, ["n1", "n2"]);
}

#[test]
fn a_call_forwarded_to_a_peer_that_has_not_heard_of_the_function_runs_elsewhere() {
    // The long lease keeps n2 among n1's members while n2's replica cannot hear n1's.
    let edge = Edge::start_with_ttl(2, Duration::from_secs(60));
    let [n1, n2] = [&edge.nodes[0], &edge.nodes[1]];
    edge.isolate(1, true);
    n1.deploy("fresh", &slow(), &DeployParams::default());
    let replies = burst(n1, "fresh", 24, 4);
    assert!(!lists(n2, "fresh"), "the partition let the record through");
    assert!(
        members(n1).contains("n2"),
        "n1 dropped n2 before the burst ended"
    );
    assert!(
        sent_to(n1, "n2") > 0,
        "n1 never placed a call on n2, so the test proves nothing"
    );
    for reply in &replies {
        assert_eq!(reply.status, 200, "{}", reply.text());
        assert_eq!(reply.node.as_deref(), Some("n1"));
    }
    // A peer's own refusal says the function is not deployed there, marked for the sender.
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let refused = agent
        .post(format!("{}/v1/invoke/fresh", n2.url))
        .header(mote_peers::FORWARDED_BY, "n1")
        .send(&b""[..])
        .unwrap();
    assert_eq!(refused.status().as_u16(), 404);
    assert!(
        refused
            .headers()
            .contains_key(mote_peers::NOT_DEPLOYED_HERE)
    );
    let asked = n2.invoke("fresh", b"");
    assert_eq!(asked.status, 404, "{}", asked.text());
    assert!(
        asked.error().contains("`fresh` is not deployed"),
        "{}",
        asked.text()
    );
}

/// The store replicas `node`'s dashboard lists: name, ms behind (`u64::MAX` before the first
/// complete pull), whether pulls fail.
fn replicas(node: &Platform) -> Vec<(String, u64, bool)> {
    let snap = node.get("/v1/dashboard").json();
    snap["store"]["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_owned(),
                r["behind_ms"].as_u64().unwrap_or(u64::MAX),
                r.get("error").is_some(),
            )
        })
        .collect()
}

#[test]
fn a_node_joins_a_running_edge_cluster_by_naming_one_member() {
    let edge = Edge::start(2);
    let dir = tempfile::tempdir().unwrap();
    edge.nodes[0].deploy("early", &fixtures::busy(10), &DeployParams::default());
    // n3 knows only n1's replica; n2 learns of n3's from n3's node key, which reaches it
    // through n1.
    let n1_peer = edge.links[1][0].as_ref().unwrap().addr;
    let ttl = TTL.as_secs().to_string();
    let peers = format!("n1=http://{n1_peer}");
    let n3 = Platform::start_in(
        &dir.path().join("n3"),
        &[
            "--node",
            "n3",
            "--store-peer-listen",
            "127.0.0.1:0",
            "--store-peers",
            &peers,
            "--cores",
            "1",
            "--lease-ttl-s",
            &ttl,
        ],
    );
    wait_until("n3 has the cluster's functions", || lists(&n3, "early"));
    assert_eq!(n3.invoke("early", b"").status, 200);
    for node in [&edge.nodes[0], &edge.nodes[1], &n3] {
        wait_until(&format!("{} sees 3 nodes", node.url), || {
            members(node).len() == 3
        });
    }
    n3.deploy("late", &fixtures::busy(13), &DeployParams::default());
    wait_until("n2, which was never told of n3, has n3's deploy", || {
        lists(&edge.nodes[1], "late")
    });
    assert_eq!(edge.nodes[1].invoke("late", b"").status, 200);
    wait_until("n2's dashboard lists the replica it learned of", || {
        replicas(&edge.nodes[1])
            .iter()
            .any(|(name, behind, _)| name == "n3" && *behind < 1000)
    });
}

#[test]
fn a_rolling_restart_under_load_loses_no_call() {
    let mut cluster = Cluster::shared(3);
    cluster.deploy_everywhere("slow", &slow());
    // Clients send to the nodes that are not being restarted (as a load balancer would): the
    // calls those nodes forward to the one stopping must not be lost.
    let targets = Arc::new(Mutex::new(
        (1..3)
            .map(|j| cluster.node(j).url.clone())
            .collect::<Vec<_>>(),
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let replies = Arc::new(Mutex::new(Vec::<Reply>::new()));
    let load: Vec<_> = (0..4)
        .map(|client| {
            let (targets, stop, replies) = (targets.clone(), stop.clone(), replies.clone());
            std::thread::spawn(move || {
                let mut turn = client;
                while !stop.load(Ordering::SeqCst) {
                    let target = {
                        let targets = targets.lock();
                        turn += 1;
                        targets[turn % targets.len()].clone()
                    };
                    let reply = post(&target, "/v1/invoke/slow", b"");
                    replies.lock().push(reply);
                }
            })
        })
        .collect();
    for i in 0..3 {
        *targets.lock() = (0..3)
            .filter(|&j| j != i)
            .map(|j| cluster.node(j).url.clone())
            .collect();
        std::thread::sleep(Duration::from_millis(500));
        let name = format!("n{}", i + 1);
        let before = replies.lock().len();
        cluster.nodes[i].take().unwrap().stop();
        cluster.nodes[i] = Some(cluster.start_node(&name));
        cluster.wait_for_members(3);
        let node = cluster.node(i);
        wait_until(&format!("{name} is back with its functions"), || {
            node.function_names() == ["slow"]
        });
        assert!(
            replies.lock().len() > before,
            "no call completed while {name} restarted"
        );
    }
    *targets.lock() = (0..3).map(|j| cluster.node(j).url.clone()).collect();
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::SeqCst);
    for thread in load {
        thread.join().unwrap();
    }
    let replies = replies.lock();
    for reply in replies.iter() {
        assert_eq!(reply.status, 200, "{}", reply.text());
    }
    assert_eq!(ran_on(&replies).len(), 3, "every node ran calls");
}

#[test]
fn a_node_that_loses_the_store_keeps_serving_and_says_so() {
    let mut cluster = Cluster::shared(2);
    cluster.deploy_everywhere("slow", &fixtures::busy(10));
    assert_eq!(cluster.node(1).get("/healthz").text(), "ok\n");

    cluster.store.take().unwrap().kill();
    let node = cluster.node(1);
    wait_until("n2 says its store is gone", || {
        node.get("/healthz").text().starts_with("degraded:")
    });
    let health = node.get("/healthz");
    assert_eq!(health.status, 200);
    assert!(
        health.text().contains("has not answered"),
        "{}",
        health.text()
    );
    let view = wait(node.api().cluster());
    assert!(!view.store.reachable, "{view:?}");
    for i in 0..2 {
        let reply = cluster.node(i).invoke("slow", b"");
        assert_eq!(reply.status, 200, "node {i}: {}", reply.text());
    }
    // A deploy needs the store: it fails and says why, and the node keeps serving.
    let refused = node.put("/v1/functions/new", &fixtures::busy(11));
    assert_eq!(refused.status, 500, "{}", refused.text());
    assert!(
        refused.error().contains("state store"),
        "{}",
        refused.error()
    );
    assert_eq!(node.invoke("slow", b"").status, 200);
}

#[test]
fn a_module_no_peer_holds_is_fetched_from_object_storage() {
    let binary = std::env::var("MOTE_S3S_FS").expect(
        "MOTE_S3S_FS must name the s3s-fs binary: run ./scripts/test, or ./scripts/s3s-fs and export it",
    );
    let s3 = LocalS3::start(binary.as_ref(), "mote-modules").unwrap();
    let cluster = Cluster::shared(0);
    let credentials = [
        ("MOTE_S3_ACCESS_KEY", LocalS3::ACCESS_KEY),
        ("MOTE_S3_SECRET_KEY", LocalS3::SECRET_KEY),
    ];
    let start = |name: &str, with_s3: bool| {
        let mut args = cluster.node_args(name);
        if with_s3 {
            args.extend(["--s3-endpoint".to_owned(), s3.url().to_owned()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Platform::start_in_with_env(&cluster.data(name), &args, &credentials)
    };
    let wasm = fixtures::busy(14);
    let n1 = start("n1", true);
    n1.deploy("kept", &wasm, &DeployParams::default());
    let sha = sha256_hex(&wasm);
    assert!(
        s3.dir()
            .join("mote-modules")
            .join(format!("{sha}.wasm"))
            .exists(),
        "the deploy put no copy in object storage"
    );
    // The only node that held the module is gone when the next two start.
    n1.stop();

    let n2 = start("n2", true);
    wait_until("n2 lists kept", || lists(&n2, "kept"));
    let reply = n2.invoke("kept", b"");
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert!(
        blob_exists(&n2.data, &sha),
        "n2 did not keep the fetched module"
    );

    let n3 = start("n3", false);
    wait_until("n3 lists kept", || lists(&n3, "kept"));
    wait_until("n3 sees n2", || members(&n3).contains("n2"));
    // n3 has no object storage, but n2 now holds the module and sends it.
    let reply = n3.invoke("kept", b"");
    assert_eq!(reply.status, 200, "{}", reply.text());
    n2.stop();
    wait_until("n3 no longer sees n2", || !members(&n3).contains("n2"));
    n3.deploy("unkept", &fixtures::busy(15), &DeployParams::default());
    n3.stop();
    let n4 = start("n4", true);
    wait_until("n4 lists unkept", || lists(&n4, "unkept"));
    let reply = n4.invoke("unkept", b"");
    assert_eq!(reply.status, 500, "{}", reply.text());
    let error = reply.error();
    assert!(
        error.contains("this node knows no other node") && error.contains("bucket `mote-modules`"),
        "{error}"
    );
}
