//! `graph-pagerank`: PageRank of a Barabási–Albert graph by power iteration to a tolerance.
//! Models SeBS's 501.graph-pagerank (igraph's `Graph.Barabasi(size, 10)` then `pagerank()`), one
//! of the shortest functions of the suite.
//!
//! Request: `seed=42 size=5000` (nodes). Answer: `nodes=… edges=… iterations=… top=… top_rank=…
//! checksum=…`. In a preferential-attachment graph the top node is one of the oldest, and the
//! checksum (Σ (v + 1)·rank(v)) catches any change to the ranks.

use suite_input::Params;

/// Nodes of the default graph.
const DEFAULT_NODES: u64 = 5_000;
/// igraph's and the original paper's damping factor.
const DAMPING: f64 = 0.85;
/// Stop when the ranks move less than this in total (L1) in one iteration.
const TOLERANCE: f64 = 1e-10;
/// A bound that only a pathological graph would reach; power iteration converges geometrically.
const MAX_ITERATIONS: usize = 200;

fn graph_pagerank(body: &[u8]) -> Vec<u8> {
    let params = Params::parse(body);
    let graph = suite_graph::from_params(&params, DEFAULT_NODES);
    let (ranks, iterations) = pagerank(&graph.adjacency(), graph.nodes);
    let (top, top_rank) = ranks
        .iter()
        .copied()
        .enumerate()
        .fold(
            (0, f64::MIN),
            |best, (v, r)| if r > best.1 { (v, r) } else { best },
        );
    let checksum: f64 = ranks
        .iter()
        .enumerate()
        .map(|(v, r)| (v + 1) as f64 * r)
        .sum();
    format!(
        "seed={} nodes={} edges={} iterations={iterations} top={top} top_rank={top_rank:.6} \
         checksum={checksum:.6}\n",
        params.seed(),
        graph.nodes,
        graph.edges.len(),
    )
    .into_bytes()
}

/// The PageRank of every node (summing to 1) and the number of iterations it took. Every edge
/// counts in both directions, as igraph does for an undirected graph; the rank of nodes without
/// edges is spread over all nodes so that none is lost.
fn pagerank(adjacency: &suite_graph::Adjacency, nodes: usize) -> (Vec<f64>, usize) {
    let n = nodes as f64;
    let mut rank = vec![1.0 / n; nodes];
    let mut next = vec![0.0; nodes];
    // Each node's rank divided by its degree, computed once per iteration: the pull loop below
    // then does one load and one add per edge.
    let mut share = vec![0.0; nodes];
    for iteration in 1..=MAX_ITERATIONS {
        let mut dangling = 0.0;
        for v in 0..nodes {
            match adjacency.degree(v) {
                0 => {
                    dangling += rank[v];
                    share[v] = 0.0;
                }
                d => share[v] = rank[v] / d as f64,
            }
        }
        let base = (1.0 - DAMPING) / n + DAMPING * dangling / n;
        let mut change = 0.0;
        for v in 0..nodes {
            let pulled: f64 = adjacency
                .neighbours(v)
                .iter()
                .map(|&u| share[u as usize])
                .sum();
            next[v] = base + DAMPING * pulled;
            change += (next[v] - rank[v]).abs();
        }
        std::mem::swap(&mut rank, &mut next);
        if change < TOLERANCE {
            return (rank, iteration);
        }
    }
    (rank, MAX_ITERATIONS)
}

mote_sdk::handler!(graph_pagerank);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_sum_to_one_and_hubs_win() {
        let graph = suite_graph::from_params(&Params::parse(b""), DEFAULT_NODES);
        let adjacency = graph.adjacency();
        let (ranks, iterations) = pagerank(&adjacency, graph.nodes);
        assert!(iterations < MAX_ITERATIONS);
        assert!((ranks.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        let top = (0..graph.nodes)
            .max_by(|&a, &b| ranks[a].total_cmp(&ranks[b]))
            .unwrap();
        assert!(adjacency.degree(top) > 50, "a hub has the highest rank");
    }

    #[test]
    fn symmetric_graph_has_equal_ranks() {
        // A triangle plus an isolated node: the triangle's nodes share the rank equally.
        let g = suite_graph::Graph {
            nodes: 4,
            edges: vec![(1, 0), (2, 1), (2, 0)],
        };
        let (ranks, _) = pagerank(&g.adjacency(), 4);
        assert!((ranks[0] - ranks[1]).abs() < 1e-12 && (ranks[1] - ranks[2]).abs() < 1e-12);
        assert!((ranks.iter().sum::<f64>() - 1.0).abs() < 1e-9);
    }
}
