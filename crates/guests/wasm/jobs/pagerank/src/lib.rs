//! `pagerank`: PageRank as networkx's `pagerank` defines it on a `DiGraph` of the input's
//! distinct edges (self-loops included), over the vertices the edges name: ranks start at `1/n`,
//! and each of exactly `iterations` steps takes
//! `r'[v] = (1 - d)/n + d * (sum over u->v of r[u]/outdeg(u) + dangling/n)` with `d = 0.85` and
//! `dangling` the summed rank of the vertices without out-edges.
//!
//! Arguments: `input=BUCKET/PREFIX` (text, an edge `src dst` per line in vertex numbers, `#`
//! starting a comment, as SNAP distributes graphs) or `generate=V` and `seed=S` (a graph of `V`
//! vertices, [`job_data::out_edges`]); `iterations=I` (10), and `output=BUCKET/PREFIX` to store
//! `vertex rank` per line, by vertex, in `part-00000`.
//!
//! Datasets, of the job's `P` partitions unless said: the edges as loaded; the graph, vertex `v`
//! in partition `v % P` with its distinct out-neighbours; the ranks and the contributions to them,
//! alongside the graph; each partition's copy of the vertex count and dangling rank; and of one
//! partition, the vertex count and dangling rank, and the result. Before the loop: a scatter of
//! the edges by source, which also names each destination to its partition (`2P` tasks); the
//! vertex count's scatter and gather (`P + 1`), its broadcast (`1 + P`) and the first ranks (`P`).
//! A step: the dangling rank's scatter and gather (`P + 1`), its broadcast (`1 + P`), the
//! contributions' scatter to the destinations' partitions and gathers (`2P`), and the new ranks
//! (`P`): `5P + 2` tasks. The output adds a scatter of every rank to one partition (`P + 1`).

use std::collections::BTreeMap;

use job_data::{out_edges, parse_edge, share};
use mote_sdk::job::{Dataset, Job, Task, decode_f64s, decode_u64s, encode_f64s, encode_u64s};

const DAMPING: f64 = 0.85;

/// A partition's edges as loaded or generated: any partition's, repeated or not.
const EDGES: Dataset<Vec<(u64, u64)>> = Dataset::partitioned("edges");
/// A partition's vertices and their out-edges.
const GRAPH: Dataset<Graph> = Dataset::partitioned("graph");
/// The ranks of the partition's vertices, in [`Graph::vertices`]' order.
const RANKS: Dataset<Vec<f64>> = Dataset::partitioned("ranks");
/// The contributions to the partition's vertices: pairs of vertex and the sum one partition
/// sent it, in the order of the sending partitions.
const INCOMING: Dataset<Vec<(u64, f64)>> = Dataset::partitioned("incoming");
/// Each partition's copy of [`TOTALS`].
const LOCAL_TOTALS: Dataset<Totals> = Dataset::partitioned("local_totals");
/// The vertex count and the current dangling rank.
const TOTALS: Dataset<Totals> = Dataset::single("totals");
/// Every vertex's rank, by vertex, for the output.
const RESULT: Dataset<Vec<(u64, f64)>> = Dataset::single("result");

#[derive(Default)]
struct Graph {
    /// The partition's vertices, ascending.
    vertices: Vec<u64>,
    /// Each vertex's distinct out-neighbours, ascending.
    out: Vec<Vec<u64>>,
}

#[derive(Default, Clone, Copy)]
struct Totals {
    vertices: u64,
    dangling: f64,
}

fn driver(job: &mut Job) {
    if job.arg("input").is_some() {
        job.load(parse, &EDGES, "input");
    } else if job.arg("generate").is_some() {
        job.compute(generate, &[], &[&EDGES]);
    } else {
        panic!("pagerank needs --arg input=BUCKET/PREFIX or --arg generate=VERTICES");
    }
    job.scatter(send_edges, &[&EDGES], build_graph, &[&GRAPH]);
    job.scatter(send_vertex_count, &[&GRAPH], count_vertices, &[&TOTALS]);
    job.scatter(broadcast, &[&TOTALS], receive_totals, &[&LOCAL_TOTALS]);
    job.compute(first_ranks, &[&GRAPH, &LOCAL_TOTALS], &[&RANKS]);
    job.repeat(job.arg_or("iterations", 10), |job| {
        job.scatter(send_dangling, &[&GRAPH, &RANKS], sum_dangling, &[&TOTALS]);
        job.scatter(broadcast, &[&TOTALS], receive_totals, &[&LOCAL_TOTALS]);
        job.scatter(
            contribute,
            &[&GRAPH, &RANKS],
            add_contributions,
            &[&INCOMING],
        );
        job.compute(update, &[&GRAPH, &INCOMING, &LOCAL_TOTALS], &[&RANKS]);
    });
    if job.arg("output").is_some() {
        job.scatter(send_ranks, &[&GRAPH, &RANKS], collect_ranks, &[&RESULT]);
        job.store(write_ranks, &RESULT, "output");
    }
}

fn parse(task: &mut Task) {
    let text = task.inputs().next().unwrap_or_default();
    let text = String::from_utf8(text).expect("the edges are UTF-8 text");
    *task.get_mut(&EDGES) = text.lines().filter_map(parse_edge).collect();
}

fn generate(task: &mut Task) {
    let vertices: u64 = task.arg_or("generate", 0);
    let seed: u64 = task.arg_or("seed", 0);
    let range = share(vertices, task.partitions(), task.index());
    *task.get_mut(&EDGES) = range.flat_map(|v| out_edges(seed, vertices, v)).collect();
}

fn partition(vertex: u64, partitions: usize) -> usize {
    (vertex % partitions as u64) as usize
}

/// Sends each edge to its source's partition and names each destination to its own, which may
/// have no out-edges: a piece is the number of edges, the edges' pairs, then the vertices named.
fn send_edges(task: &mut Task) {
    let partitions = task.partitions();
    let mut edges = vec![Vec::new(); partitions];
    let mut named = vec![Vec::new(); partitions];
    for &(src, dst) in task.get(&EDGES).iter() {
        edges[partition(src, partitions)].extend([src, dst]);
        named[partition(dst, partitions)].push(dst);
    }
    for (dest, (edges, named)) in edges.into_iter().zip(named).enumerate() {
        if edges.is_empty() && named.is_empty() {
            continue;
        }
        let mut piece = vec![edges.len() as u64 / 2];
        piece.extend(edges);
        piece.extend(named);
        task.emit(dest, &encode_u64s(&piece));
    }
}

fn build_graph(task: &mut Task) {
    let mut edges = Vec::new();
    let mut vertices = Vec::new();
    for piece in task.inputs() {
        let piece = decode_u64s(&piece);
        let (count, rest) = piece
            .split_first()
            .expect("a piece starts with its edge count");
        let (pairs, named) = rest.split_at(2 * *count as usize);
        edges.extend(pairs.chunks(2).map(|e| (e[0], e[1])));
        vertices.extend(named);
    }
    edges.sort_unstable();
    edges.dedup();
    vertices.extend(edges.iter().map(|&(src, _)| src));
    vertices.sort_unstable();
    vertices.dedup();
    let mut out = vec![Vec::new(); vertices.len()];
    let mut i = 0;
    for (src, dst) in edges {
        while vertices[i] != src {
            i += 1;
        }
        out[i].push(dst);
    }
    *task.get_mut(&GRAPH) = Graph { vertices, out };
}

fn send_vertex_count(task: &mut Task) {
    let count = task.get(&GRAPH).vertices.len() as u64;
    task.emit(0, &encode_u64s(&[count]));
}

fn count_vertices(task: &mut Task) {
    let vertices = task.inputs().map(|piece| decode_u64s(&piece)[0]).sum();
    task.get_mut(&TOTALS).vertices = vertices;
}

fn broadcast(task: &mut Task) {
    let totals = *task.get(&TOTALS);
    let bytes = encode_f64s(&[totals.vertices as f64, totals.dangling]);
    for dest in 0..task.partitions() {
        task.emit(dest, &bytes);
    }
}

fn receive_totals(task: &mut Task) {
    let totals = decode_f64s(&task.inputs().next().unwrap_or_default());
    *task.get_mut(&LOCAL_TOTALS) = Totals {
        vertices: totals[0] as u64,
        dangling: totals[1],
    };
}

fn first_ranks(task: &mut Task) {
    let vertices = task.get(&GRAPH).vertices.len();
    let n = task.get(&LOCAL_TOTALS).vertices as f64;
    *task.get_mut(&RANKS) = vec![1.0 / n; vertices];
}

fn send_dangling(task: &mut Task) {
    let graph = task.get(&GRAPH);
    let ranks = task.get(&RANKS);
    let dangling: f64 = graph
        .out
        .iter()
        .zip(ranks.iter())
        .filter(|(out, _)| out.is_empty())
        .map(|(_, rank)| rank)
        .sum();
    task.emit(0, &encode_f64s(&[dangling]));
}

fn sum_dangling(task: &mut Task) {
    let dangling = task.inputs().map(|piece| decode_f64s(&piece)[0]).sum();
    task.get_mut(&TOTALS).dangling = dangling;
}

/// Sends each destination's partition the sum of what this partition's vertices give it, as
/// pairs of vertex and sum, by vertex.
fn contribute(task: &mut Task) {
    let partitions = task.partitions();
    let graph = task.get(&GRAPH);
    let ranks = task.get(&RANKS);
    let mut sums = vec![BTreeMap::<u64, f64>::new(); partitions];
    for (out, rank) in graph.out.iter().zip(ranks.iter()) {
        let share = rank / out.len() as f64;
        for &dst in out {
            *sums[partition(dst, partitions)].entry(dst).or_default() += share;
        }
    }
    for (dest, sums) in sums.into_iter().enumerate() {
        if !sums.is_empty() {
            task.emit(dest, &encode_pairs(sums));
        }
    }
}

fn add_contributions(task: &mut Task) {
    *task.get_mut(&INCOMING) = task
        .inputs()
        .flat_map(|piece| decode_pairs(&piece).collect::<Vec<_>>())
        .collect();
}

fn update(task: &mut Task) {
    let graph = task.get(&GRAPH);
    let mut incoming = vec![0.0; graph.vertices.len()];
    for &(vertex, sum) in task.get(&INCOMING).iter() {
        let i = graph
            .vertices
            .binary_search(&vertex)
            .expect("a contribution goes to a vertex of its partition");
        incoming[i] += sum;
    }
    let totals = *task.get(&LOCAL_TOTALS);
    let n = totals.vertices as f64;
    *task.get_mut(&RANKS) = incoming
        .into_iter()
        .map(|incoming| (1.0 - DAMPING) / n + DAMPING * (incoming + totals.dangling / n))
        .collect();
}

fn send_ranks(task: &mut Task) {
    let graph = task.get(&GRAPH);
    let ranks = task.get(&RANKS);
    let pairs = graph.vertices.iter().copied().zip(ranks.iter().copied());
    task.emit(0, &encode_pairs(pairs));
}

fn collect_ranks(task: &mut Task) {
    let mut result = Vec::new();
    for piece in task.inputs() {
        result.extend(decode_pairs(&piece));
    }
    result.sort_unstable_by_key(|&(vertex, _)| vertex);
    *task.get_mut(&RESULT) = result;
}

fn write_ranks(task: &mut Task) {
    let text: String = task
        .get(&RESULT)
        .iter()
        .map(|(vertex, rank)| format!("{vertex} {rank}\n"))
        .collect();
    task.emit(0, text.as_bytes());
}

/// Encodes pairs of a vertex and a value as little-endian `u64` and `f64`.
fn encode_pairs(pairs: impl IntoIterator<Item = (u64, f64)>) -> Vec<u8> {
    pairs
        .into_iter()
        .flat_map(|(vertex, value)| [vertex.to_le_bytes(), value.to_le_bytes()])
        .flatten()
        .collect()
}

fn decode_pairs(bytes: &[u8]) -> impl Iterator<Item = (u64, f64)> {
    bytes.chunks_exact(16).map(|pair| {
        let (vertex, value) = pair.split_at(8);
        let vertex = u64::from_le_bytes(vertex.try_into().expect("8 bytes"));
        let value = f64::from_le_bytes(value.try_into().expect("8 bytes"));
        (vertex, value)
    })
}

mote_sdk::job!(driver);
