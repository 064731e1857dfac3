//! Jobs across nodes: three `mote up` processes with `--cores 1` each, sharing one state store
//! (a `mote store` process) and one object directory. A job with `--workers 2` or `3` splits
//! its partitions over that many nodes, so its scatters cross nodes and its signals are
//! broadcast, and its result is still the reference's.

use super::failures::compute_job;
use super::{
    assert_all_close, assert_ranks, edge_objects, edges_of, job, kmeans_lines, lr_lines, output,
    parse_centroids, parse_ranks, parse_weights, put_objects, reference, request, run_ok,
    split_objects, start, wait_ended,
};
use crate::cluster::wait_until;
use crate::platform::{Platform, wait};
use crate::store::Store;
use mote_api::{DeployParams, JobState, JobStatus, WorkerChoice};
use std::path::PathBuf;

/// A store, the nodes sharing it, and their object directory. Fields drop in order: the nodes
/// go before the store they use.
pub(super) struct Cluster {
    pub(super) nodes: Vec<Platform>,
    pub(super) objects: PathBuf,
    store: Store,
    _runtime: tokio::runtime::Runtime,
    dir: tempfile::TempDir,
}

impl Cluster {
    /// `n` nodes, `n1` to `nN`, each with `--cores 1`, once every one sees all of them.
    pub(super) fn start(n: usize) -> Cluster {
        Self::start_with(n, &[])
    }

    /// [`Cluster::start`], each node with the flags `extra` too.
    pub(super) fn start_with(n: usize, extra: &[&str]) -> Cluster {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store = runtime.block_on(Store::start("jobs", &dir.path().join("store"), &[]));
        let objects = dir.path().join("objects");
        let nodes: Vec<Platform> = (1..=n)
            .map(|i| Self::node(dir.path(), &store.url, &objects, i, extra))
            .collect();
        for node in &nodes {
            wait_until(&format!("{} sees {n} nodes", node.url), || {
                wait(node.api().cluster()).nodes.len() == n
            });
        }
        Cluster {
            nodes,
            objects,
            store,
            _runtime: runtime,
            dir,
        }
    }

    /// Node `n{i}` on its data directory under `dir`.
    fn node(
        dir: &std::path::Path,
        store: &str,
        objects: &std::path::Path,
        i: usize,
        extra: &[&str],
    ) -> Platform {
        let name = format!("n{i}");
        let mut args = vec![
            "--node",
            &name,
            "--store",
            store,
            "--cores",
            "1",
            "--objects-dir",
            objects.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        Platform::start_in(&dir.join(&name), &args)
    }

    /// Kills node `n{i}` (1-based) with SIGKILL.
    pub(super) fn kill(&mut self, i: usize) {
        self.nodes.remove(i - 1).kill();
    }

    /// Starts node `n{i}` again on its data directory after [`Cluster::kill`]; it listens on a
    /// new port.
    pub(super) fn restart(&mut self, i: usize) {
        let node = Self::node(self.dir.path(), &self.store.url, &self.objects, i, &[]);
        self.nodes.insert(i - 1, node);
    }

    /// Deploys `wasm` as `name` on the first node and waits until every node lists it.
    pub(super) fn deploy(&self, name: &str, wasm: &[u8]) {
        self.nodes[0].deploy(name, wasm, &DeployParams::default());
        for node in &self.nodes {
            wait_until(&format!("{} lists {name}", node.url), || {
                node.function_names().iter().any(|f| f == name)
            });
        }
    }
}

/// Asserts the job ran on the nodes named `names`, in that order, each holding some of its
/// `partitions` (every group's, summed), each done.
fn assert_spread(status: &JobStatus, names: &[&str], partitions: usize) {
    let workers = &status.workers;
    let listed: Vec<&str> = workers.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(listed, names, "{status:?}");
    for w in workers {
        assert_eq!(w.cores, 1, "{w:?}");
        assert!(w.partitions > 0, "{status:?}");
        assert!(w.tasks > 0, "{status:?}");
        assert!(w.done, "{status:?}");
    }
    let held: usize = workers.iter().map(|w| w.partitions).sum();
    assert_eq!(held, partitions, "{status:?}");
    let tasks: u64 = workers.iter().map(|w| w.tasks).sum();
    assert_eq!(status.tasks, tasks, "{status:?}");
}

#[test]
fn jobs_across_two_and_three_nodes_match_the_reference() {
    let cluster = Cluster::start(3);
    cluster.deploy("lr", mote_guests::LR.wasm);
    cluster.deploy("pagerank", mote_guests::PAGERANK.wasm);
    cluster.deploy("kmeans", mote_guests::KMEANS.wasm);
    let objects = &cluster.objects;
    let (lines, points) = lr_lines(120, 5);
    put_objects(objects, "data", "train", &split_objects(&lines, &[50, 40]));
    let graph = edge_objects();
    put_objects(objects, "data", "graph", &graph);
    let (lines, clustered) = kmeans_lines(90, 8);
    put_objects(objects, "data", "points", &split_objects(&lines, &[45]));
    put_objects(objects, "results", "", &[]);

    // lr on n1 and n2 (`--workers 2`: this node first, then the others by name), from n1.
    // P = 2 partitions per core * 2 cores; lr's groups are the training data's (P) and the
    // weights' (1).
    let status = run_ok(
        &cluster.nodes[0],
        &request(
            "lr",
            Some(WorkerChoice::Count(2)),
            2,
            &[("input", "data/train"), ("output", "results/lr")],
        ),
    );
    assert_eq!(status.partitions, 4, "{status:?}");
    assert_spread(&status, &["n1", "n2"], 4 + 1);
    let weights = parse_weights(&output(objects, "results", "lr"));
    assert_all_close(
        "weights",
        &weights,
        &reference::logistic_regression(&points, 10, 1.0),
    );

    // pagerank on all three, started from n2 (which lists itself first). P = 6; its groups
    // are the edges' (P), the graph's (P), the totals' (1) and the result's (1).
    let status = run_ok(
        &cluster.nodes[1],
        &request(
            "pagerank",
            Some(WorkerChoice::Count(3)),
            2,
            &[("input", "data/graph"), ("output", "results/ranks")],
        ),
    );
    assert_eq!(status.partitions, 6, "{status:?}");
    assert_spread(&status, &["n2", "n1", "n3"], 6 + 6 + 1 + 1);
    let ranks = parse_ranks(&output(objects, "results", "ranks"));
    assert_ranks(&ranks, &reference::pagerank(&edges_of(&graph), 10));

    // kmeans on two nodes named in a list, neither of them the controller's.
    let status = run_ok(
        &cluster.nodes[0],
        &request(
            "kmeans",
            Some(WorkerChoice::List(vec!["n3".to_owned(), "n2".to_owned()])),
            2,
            &[
                ("input", "data/points"),
                ("k", "3"),
                ("output", "results/kmeans"),
            ],
        ),
    );
    assert_spread(&status, &["n3", "n2"], 4 + 1);
    let centroids = parse_centroids(&output(objects, "results", "kmeans"));
    let want = reference::kmeans(&clustered, 3, 10);
    assert_eq!(centroids.len(), 3, "{centroids:?}");
    for (i, (got, want)) in centroids.iter().zip(&want).enumerate() {
        assert_all_close(&format!("centroid {i}"), got, want);
    }

    // A task that traps on the third node fails the job on every node, and a cancel stops a
    // job on all three; the nodes then run the next job.
    cluster.deploy(
        "trap",
        &compute_job("(if (i32.eq (local.get $index) (i32.const 5)) (then unreachable))"),
    );
    cluster.deploy("busy", mote_guests::BUSY.wasm);
    let failed = start(
        &cluster.nodes[0],
        &request("trap", Some(WorkerChoice::Count(3)), 2, &[]),
    );
    let status = wait_ended(&cluster.nodes[0], &failed.id);
    assert_eq!(status.state, JobState::Failed, "{status:?}");
    let error = status
        .error
        .as_deref()
        .unwrap_or_else(|| panic!("a failed job says why: {status:?}"));
    assert!(
        error.contains("on worker n3: compute stage 0")
            && error.contains("partition 5 of")
            && error.contains("unreachable"),
        "{error}"
    );
    let busy = start(
        &cluster.nodes[2],
        &request(
            "busy",
            Some(WorkerChoice::Count(3)),
            1,
            &[("stages", "100000000")],
        ),
    );
    let id = &busy.id;
    wait_until("the busy job runs on every node", || {
        let status = job(&cluster.nodes[2], id);
        assert_eq!(status.state, JobState::Running, "{status:?}");
        status.workers.iter().all(|w| w.tasks > 0)
    });
    // Cancelled from another node than its controller's, through the cluster's store.
    let cancelled = wait(cluster.nodes[0].api().cancel_job(id));
    assert_eq!(cancelled.state, JobState::Cancelled, "{cancelled:?}");
    assert_eq!(cancelled.controller, "n3", "{cancelled:?}");
    // Every node lists every job, from the cluster's records, oldest first.
    let on = |i: usize| -> Vec<String> {
        wait(cluster.nodes[i].api().jobs())
            .iter()
            .map(|j| format!("{} {:?}", j.function, j.state))
            .collect()
    };
    let all = [
        "lr Succeeded",
        "pagerank Succeeded",
        "kmeans Succeeded",
        "trap Failed",
        "busy Cancelled",
    ];
    for i in 0..3 {
        // Waited for by hand, so that a timeout says what the node listed.
        let start = std::time::Instant::now();
        loop {
            let seen = on(i);
            if seen == all {
                break;
            }
            assert!(
                start.elapsed() < crate::cluster::DEADLINE,
                "n{} listed {seen:?}, not {all:?}, for {:?}",
                i + 1,
                crate::cluster::DEADLINE
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    let status = run_ok(
        &cluster.nodes[2],
        &request(
            "lr",
            Some(WorkerChoice::Count(3)),
            1,
            &[("generate", "90"), ("iterations", "3")],
        ),
    );
    assert_eq!(status.iteration, 3, "{status:?}");
}
