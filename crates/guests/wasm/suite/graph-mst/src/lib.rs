//! `graph-mst`: minimum spanning tree of a Barabási–Albert graph with random edge weights, by
//! Kruskal's algorithm with union–find. Models SeBS's 502.graph-mst (igraph's
//! `Graph.Barabasi(size, 10)` then `spanning_tree()`), one of the shortest functions of the suite.
//!
//! Request: `seed=42 size=9000` (nodes). Answer: `nodes=… edges=… tree_edges=… total_weight=…`;
//! the graph is connected, so `tree_edges` is `nodes - 1`. Weights are integers in 1..=1000 so the
//! total is exact and ties cannot change it.

use suite_input::{Params, Rng};

/// Nodes of the default graph.
const DEFAULT_NODES: u64 = 9_000;
const MAX_WEIGHT: u64 = 1000;

fn graph_mst(body: &[u8]) -> Vec<u8> {
    let params = Params::parse(body);
    let graph = suite_graph::from_params(&params, DEFAULT_NODES);
    // A second stream, so the weights do not shift the graph's own random draws.
    let mut rng = Rng::new(params.seed() ^ 0x5745_4947_4854_5321);
    let weighted: Vec<(u32, u32, u32)> = graph
        .edges
        .iter()
        .map(|&(a, b)| (1 + rng.below(MAX_WEIGHT) as u32, a, b))
        .collect();
    let (tree_edges, total_weight) = kruskal(graph.nodes, weighted);
    format!(
        "seed={} nodes={} edges={} tree_edges={tree_edges} total_weight={total_weight}\n",
        params.seed(),
        graph.nodes,
        graph.edges.len(),
    )
    .into_bytes()
}

/// The number of edges and the total weight of a minimum spanning forest of `(weight, a, b)`
/// edges over `nodes` nodes.
fn kruskal(nodes: usize, mut edges: Vec<(u32, u32, u32)>) -> (usize, u64) {
    edges.sort_unstable();
    let mut sets = UnionFind::new(nodes);
    let (mut count, mut total) = (0, 0);
    for (weight, a, b) in edges {
        if sets.union(a, b) {
            count += 1;
            total += u64::from(weight);
            if count + 1 == nodes {
                break;
            }
        }
    }
    (count, total)
}

/// Disjoint sets with path halving and union by size: near-constant time per operation.
struct UnionFind {
    parent: Vec<u32>,
    size: Vec<u32>,
}

impl UnionFind {
    fn new(n: usize) -> Self {
        Self {
            parent: (0..n as u32).collect(),
            size: vec![1; n],
        }
    }

    fn find(&mut self, mut x: u32) -> u32 {
        while self.parent[x as usize] != x {
            let grandparent = self.parent[self.parent[x as usize] as usize];
            self.parent[x as usize] = grandparent;
            x = grandparent;
        }
        x
    }

    /// Merges the sets of `a` and `b`; false if they were already one.
    fn union(&mut self, a: u32, b: u32) -> bool {
        let (mut a, mut b) = (self.find(a), self.find(b));
        if a == b {
            return false;
        }
        if self.size[a as usize] < self.size[b as usize] {
            std::mem::swap(&mut a, &mut b);
        }
        self.parent[b as usize] = a;
        self.size[a as usize] += self.size[b as usize];
        true
    }
}

mote_sdk::handler!(graph_mst);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_the_default_graph() {
        let out = String::from_utf8(graph_mst(b"")).unwrap();
        assert!(out.contains("tree_edges=8999 "), "{out}");
    }

    #[test]
    fn picks_the_lightest_edges() {
        // A square with a heavy diagonal: the tree is three of the sides.
        let edges = vec![(1, 1, 0), (2, 2, 1), (3, 3, 2), (4, 3, 0), (9, 2, 0)];
        assert_eq!(kruskal(4, edges), (3, 6));
        assert_eq!(kruskal(3, vec![(5, 1, 0)]), (1, 5));
    }
}
