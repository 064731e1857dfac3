//! `graph-bfs`: breadth-first search from node 0 of a Barabási–Albert graph, modelling SeBS's
//! 503.graph-bfs (igraph's `Graph.Barabasi(size, 10)` then `bfs(0)`), one of the shortest
//! functions of the suite.
//!
//! Request: `seed=42 size=23000` (nodes). Answer: `nodes=… edges=… visited=… max_depth=…
//! depth_sum=…`; a Barabási–Albert graph is connected, so `visited` equals `nodes`.

use std::collections::VecDeque;

use suite_input::Params;

/// Nodes of the default graph: BFS is the cheapest of the three graph functions per node, so its
/// default graph is the largest.
const DEFAULT_NODES: u64 = 23_000;

fn graph_bfs(body: &[u8]) -> Vec<u8> {
    let params = Params::parse(body);
    let graph = suite_graph::from_params(&params, DEFAULT_NODES);
    let adjacency = graph.adjacency();
    let depths = bfs(&adjacency, graph.nodes, 0);
    let reached = || depths.iter().filter(|&&d| d != UNREACHED);
    format!(
        "seed={} nodes={} edges={} visited={} max_depth={} depth_sum={}\n",
        params.seed(),
        graph.nodes,
        graph.edges.len(),
        reached().count(),
        reached().max().copied().unwrap_or(0),
        reached().map(|&d| u64::from(d)).sum::<u64>(),
    )
    .into_bytes()
}

const UNREACHED: u32 = u32::MAX;

/// The hop count from `start` to every node, [`UNREACHED`] where there is no path.
fn bfs(adjacency: &suite_graph::Adjacency, nodes: usize, start: usize) -> Vec<u32> {
    let mut depth = vec![UNREACHED; nodes];
    let mut queue = VecDeque::with_capacity(nodes);
    depth[start] = 0;
    queue.push_back(start as u32);
    while let Some(v) = queue.pop_front() {
        let next = depth[v as usize] + 1;
        for &u in adjacency.neighbours(v as usize) {
            if depth[u as usize] == UNREACHED {
                depth[u as usize] = next;
                queue.push_back(u);
            }
        }
    }
    depth
}

mote_sdk::handler!(graph_bfs);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visits_every_node_of_the_default_graph() {
        let out = String::from_utf8(graph_bfs(b"")).unwrap();
        assert!(out.contains("nodes=23000 "), "{out}");
        assert!(out.contains("visited=23000 "), "{out}");
        assert_eq!(out, String::from_utf8(graph_bfs(b"seed=42")).unwrap());
        assert_ne!(out, String::from_utf8(graph_bfs(b"seed=43")).unwrap());
    }

    #[test]
    fn finds_depths_on_a_path() {
        let g = suite_graph::Graph {
            nodes: 4,
            edges: vec![(1, 0), (2, 1), (3, 2)],
        };
        assert_eq!(bfs(&g.adjacency(), 4, 0), vec![0, 1, 2, 3]);
        let g = suite_graph::Graph {
            nodes: 3,
            edges: vec![(1, 0)],
        };
        assert_eq!(bfs(&g.adjacency(), 3, 0), vec![0, 1, UNREACHED]);
    }
}
