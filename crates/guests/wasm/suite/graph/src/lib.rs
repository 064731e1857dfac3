//! The graph `graph-bfs`, `graph-mst` and `graph-pagerank` run on.
//!
//! SeBS's graph functions (501.graph-pagerank, 502.graph-mst, 503.graph-bfs) build their input with
//! python-igraph's `Graph.Barabasi(size, 10)`: a scale-free graph grown by preferential
//! attachment, with a few hubs and many low-degree nodes, like social and web graphs. Generating it
//! is part of each SeBS call, and so it is here.

use suite_input::{Params, Rng};

/// Edges each new node brings, as in SeBS (`Graph.Barabasi(size, 10)`).
pub const EDGES_PER_NODE: usize = 10;

/// The largest graph a request may ask for; its edge list and adjacency stay well under the
/// default 128 MiB memory limit.
pub const MAX_NODES: u64 = 1_000_000;

/// An undirected graph as an edge list over nodes `0..nodes`, without self-loops or parallel
/// edges.
#[derive(Debug, Clone)]
pub struct Graph {
    /// The number of nodes.
    pub nodes: usize,
    /// Each edge once, as `(newer node, older node)`.
    pub edges: Vec<(u32, u32)>,
}

/// Compressed adjacency lists: the neighbours of `v` are `targets[offsets[v]..offsets[v + 1]]`.
/// One allocation instead of one per node, which matters for the traversals' cache behaviour.
#[derive(Debug, Clone)]
pub struct Adjacency {
    /// Where each node's neighbours start in `targets`; `nodes + 1` entries.
    pub offsets: Vec<u32>,
    /// Every node's neighbours, node after node.
    pub targets: Vec<u32>,
}

impl Adjacency {
    /// The neighbours of `v`.
    pub fn neighbours(&self, v: usize) -> &[u32] {
        &self.targets[self.offsets[v] as usize..self.offsets[v + 1] as usize]
    }

    /// The number of neighbours of `v`.
    pub fn degree(&self, v: usize) -> usize {
        (self.offsets[v + 1] - self.offsets[v]) as usize
    }
}

/// The graph a request describes: `size=` nodes (`default_nodes` if it names none) grown from
/// `seed=`. Each function has its own default, chosen to make its default call last about as long
/// as the others'.
pub fn from_params(params: &Params, default_nodes: u64) -> Graph {
    let nodes = params.u64_in("size", default_nodes, 1, MAX_NODES) as usize;
    barabasi_albert(nodes, EDGES_PER_NODE, &mut Rng::new(params.seed()))
}

/// Grows a Barabási–Albert graph the way igraph's default does: starting from one node, each new
/// node links to `min(m, existing nodes)` distinct older nodes, each chosen with probability
/// proportional to its degree + 1 (igraph's default "zero appeal" of 1, which lets nodes without
/// edges be chosen at all).
pub fn barabasi_albert(nodes: usize, m: usize, rng: &mut Rng) -> Graph {
    let mut edges = Vec::with_capacity(nodes.saturating_sub(1) * m);
    // Every node once (its appeal of 1) and once more per edge end: a uniform draw from this list
    // is a draw proportional to degree + 1, in O(1), without a sum tree.
    let mut urn: Vec<u32> = Vec::with_capacity(nodes * (2 * m + 1));
    let mut chosen: Vec<u32> = Vec::with_capacity(m);
    for v in 0..nodes as u32 {
        chosen.clear();
        if v as usize <= m {
            chosen.extend(0..v);
        } else {
            while chosen.len() < m {
                let candidate = urn[rng.below(urn.len() as u64) as usize];
                // m is small, so a linear scan beats a set; repeats get rarer as the graph grows.
                if !chosen.contains(&candidate) {
                    chosen.push(candidate);
                }
            }
        }
        for &u in &chosen {
            edges.push((v, u));
            urn.push(u);
            urn.push(v);
        }
        urn.push(v);
    }
    Graph { nodes, edges }
}

impl Graph {
    /// Builds both directions of every edge into compressed adjacency lists.
    pub fn adjacency(&self) -> Adjacency {
        let mut offsets = vec![0u32; self.nodes + 1];
        for &(a, b) in &self.edges {
            offsets[a as usize + 1] += 1;
            offsets[b as usize + 1] += 1;
        }
        for v in 0..self.nodes {
            offsets[v + 1] += offsets[v];
        }
        let mut next = offsets.clone();
        let mut targets = vec![0u32; self.edges.len() * 2];
        for &(a, b) in &self.edges {
            targets[next[a as usize] as usize] = b;
            next[a as usize] += 1;
            targets[next[b as usize] as usize] = a;
            next[b as usize] += 1;
        }
        Adjacency { offsets, targets }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_a_simple_connected_graph_of_the_right_size() {
        let g = barabasi_albert(500, 10, &mut Rng::new(3));
        // 0 + 1 + ... + 10 edges for the first 11 nodes, then 10 each.
        assert_eq!(g.edges.len(), 55 + (500 - 11) * 10);
        let mut seen = std::collections::HashSet::new();
        for &(a, b) in &g.edges {
            assert!(a > b, "edges point from newer to older nodes");
            assert!(seen.insert((a, b)), "no parallel edges");
        }
        let adj = g.adjacency();
        assert_eq!(adj.targets.len(), 2 * g.edges.len());
        assert!((0..500).all(|v| adj.degree(v) >= 1));
        // Preferential attachment makes hubs, far above the mean degree of about 2m.
        let max_degree = (0..500).map(|v| adj.degree(v)).max().unwrap();
        assert!(max_degree > 4 * 2 * 10, "{max_degree}");
    }

    #[test]
    fn tiny_graphs_work() {
        assert_eq!(barabasi_albert(1, 10, &mut Rng::new(1)).edges.len(), 0);
        assert_eq!(barabasi_albert(2, 10, &mut Rng::new(1)).edges, vec![(1, 0)]);
    }
}
