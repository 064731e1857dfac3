use super::*;
use crate::program::tests::{compute, logistic_regression, scatter};
use crate::program::{DatasetId, ProgramBuilder};
use proptest::prelude::*;

fn drain(graph: &mut TaskGraph) -> Vec<TaskView> {
    let mut ran = Vec::new();
    while let Some(t) = graph.pop() {
        ran.push(graph.view(t));
        graph.complete(t);
    }
    ran
}

#[test]
fn a_task_waits_for_the_last_writer_and_a_writer_for_the_readers() {
    let mut b = ProgramBuilder::new(1);
    let x = b.dataset("x", true);
    let y = b.dataset("y", true);
    b.stage(compute(1, &[], &[x])).unwrap(); // writes x
    b.stage(compute(2, &[x], &[y])).unwrap(); // reads x
    b.stage(compute(3, &[], &[x])).unwrap(); // writes x again: after the read
    let p = b.finish().unwrap();
    let map = PartitionMap::assign(p.groups.sizes(), &[1]);
    let mut g = TaskGraph::new(&p, &map, WorkerId(0));
    let mut loads = Vec::new();
    for s in 0..3 {
        g.declare(&p, s, StageId(s as u32), &mut loads);
    }
    let first = g.pop().unwrap();
    assert_eq!(g.view(first).func, 1);
    assert_eq!(g.pop(), None, "the read waits for the write");
    g.complete(first);
    let read = g.pop().unwrap();
    assert_eq!(g.view(read).func, 2);
    assert_eq!(g.pop(), None, "the second write waits for the read");
    g.complete(read);
    assert_eq!(
        drain(&mut g).iter().map(|v| v.func).collect::<Vec<_>>(),
        [3]
    );
    assert_eq!(g.live(), 0);
}

#[test]
fn independent_stages_run_out_of_program_order() {
    let mut b = ProgramBuilder::new(2);
    let a = b.dataset("a", true);
    let c = b.dataset("c", true);
    let total = b.dataset("total", false);
    b.stage(scatter(1, &[a], 2, &[total])).unwrap(); // seq 0: gather waits on the network
    b.stage(compute(3, &[c], &[c])).unwrap(); // seq 1: independent of it
    let p = b.finish().unwrap();
    // Two workers; this one holds a[0], c[0] and total; worker 1 holds a[1] and c[1].
    let map = PartitionMap::assign(p.groups.sizes(), &[1, 1]);
    let mut g = TaskGraph::new(&p, &map, WorkerId(0));
    let mut loads = Vec::new();
    g.declare(&p, 0, StageId(0), &mut loads);
    g.declare(&p, 1, StageId(1), &mut loads);
    let ran = drain(&mut g);
    assert_eq!(
        ran.iter().map(|v| (v.kind, v.func)).collect::<Vec<_>>(),
        [(TaskKind::Scatter, 1), (TaskKind::Compute, 3)],
        "stage 1 ran while stage 0's gather waits for worker 1's piece"
    );
    let to = p.gather_group_of(p.stage(StageId(0)));
    g.piece(0, to, 0, 0, Some(Bytes::from_static(b"mine")));
    assert_eq!(g.pop(), None, "one of two pieces");
    g.piece(0, to, 0, 1, None);
    let gather = g.pop().unwrap();
    assert_eq!(g.view(gather).kind, TaskKind::Gather);
    let inputs = g.take_inputs(gather);
    assert_eq!(inputs.len(), 1, "an empty piece counts but carries nothing");
    g.complete(gather);
    assert_eq!(g.live(), 0);
}

#[test]
fn pieces_that_arrive_before_their_gather_is_declared_are_kept() {
    let p = logistic_regression(4, 1);
    let map = PartitionMap::assign(p.groups.sizes(), &[1, 1]);
    // Worker 0 holds the one-partition group, and partitions 0 and 1 of the others.
    let mut g = TaskGraph::new(&p, &map, WorkerId(0));
    let to = p.gather_group_of(p.stage(StageId(2)));
    for source in [3, 0, 1, 2] {
        g.piece(2, to, 0, source, Some(Bytes::from(vec![source as u8])));
    }
    let mut loads = Vec::new();
    g.declare(&p, 0, StageId(0), &mut loads);
    for l in loads.drain(..) {
        g.input(l, Bytes::new());
    }
    g.declare(&p, 1, StageId(1), &mut loads);
    g.declare(&p, 2, StageId(2), &mut loads);
    let mut gathered = None;
    while let Some(t) = g.pop() {
        if g.view(t).kind == TaskKind::Gather {
            let sources: Vec<u32> = g.take_inputs(t).iter().map(|i| i.source).collect();
            gathered = Some(sources);
        }
        g.complete(t);
    }
    assert_eq!(gathered, Some(vec![0, 1, 2, 3]), "in source order");
}

#[test]
fn the_oldest_gather_waiting_for_pieces_is_known_until_its_last_piece() {
    let mut b = ProgramBuilder::new(2);
    let a = b.dataset("a", true);
    let total = b.dataset("total", false);
    b.stage(scatter(1, &[a], 2, &[total])).unwrap();
    let p = b.finish().unwrap();
    let map = PartitionMap::assign(p.groups.sizes(), &[1, 1]);
    // This worker holds a[0] and total: each gather waits for a piece from a[0] (its own
    // scatter's, which the worker delivers) and one from a[1] (the other worker's).
    let mut g = TaskGraph::new(&p, &map, WorkerId(0));
    let mut loads = Vec::new();
    assert_eq!(g.oldest_waiting_gather(), None);
    for seq in 0..3 {
        g.declare(&p, seq, StageId(0), &mut loads);
    }
    drain(&mut g);
    let to = p.gather_group_of(p.stage(StageId(0)));
    for seq in 0..3 {
        g.piece(seq, to, 0, 0, None);
    }
    assert_eq!(
        g.oldest_waiting_gather(),
        Some(0),
        "no piece came from the other worker"
    );
    g.piece(0, to, 0, 1, None);
    assert_eq!(g.oldest_waiting_gather(), Some(1));
    g.piece(2, to, 0, 1, None);
    assert_eq!(
        g.oldest_waiting_gather(),
        Some(1),
        "occurrence 1 still waits"
    );
    g.piece(1, to, 0, 1, None);
    assert_eq!(g.oldest_waiting_gather(), None);
}

#[test]
fn tasks_of_one_instance_never_run_at_once() {
    let mut b = ProgramBuilder::new(1);
    let x = b.dataset("x", true);
    let y = b.dataset("y", true);
    b.stage(compute(1, &[x], &[])).unwrap();
    b.stage(compute(2, &[x, y], &[])).unwrap();
    let p = b.finish().unwrap();
    let map = PartitionMap::assign(p.groups.sizes(), &[1]);
    let mut g = TaskGraph::new(&p, &map, WorkerId(0));
    let mut loads = Vec::new();
    g.declare(&p, 0, StageId(0), &mut loads);
    g.declare(&p, 1, StageId(1), &mut loads);
    let first = g.pop().unwrap();
    assert_eq!(g.pop(), None, "both read only, but share one instance");
    g.complete(first);
    assert!(g.pop().is_some());
}

proptest! {
    /// Under any order of completions, a random program's tasks run in an order that
    /// respects every read-after-write, write-after-read and write-after-write on each
    /// partition, and every task runs exactly once.
    #[test]
    fn any_completion_order_respects_every_dependency(
        stages in proptest::collection::vec(
            (proptest::collection::vec(0u32..4, 0..3), proptest::collection::vec(0u32..4, 1..3)),
            1..25,
        ),
        picks in proptest::collection::vec(0usize..100, 200),
    ) {
        let mut b = ProgramBuilder::new(3);
        let ds: Vec<DatasetId> = (0..4).map(|i| b.dataset(&format!("d{i}"), true)).collect();
        for (n, (reads, writes)) in stages.iter().enumerate() {
            let r: Vec<_> = reads.iter().map(|&i| ds[i as usize]).collect();
            let w: Vec<_> = writes.iter().map(|&i| ds[i as usize]).collect();
            b.stage(compute(n as u32, &r, &w)).unwrap();
        }
        let p = b.finish().unwrap();
        let map = PartitionMap::assign(p.groups.sizes(), &[1]);
        let mut g = TaskGraph::new(&p, &map, WorkerId(0));
        let mut loads = Vec::new();
        for s in 0..stages.len() {
            g.declare(&p, s as u64, StageId(s as u32), &mut loads);
        }
        let mut running: Vec<TaskRef> = Vec::new();
        let mut finished: Vec<(u32, u32)> = Vec::new(); // (stage, index) in completion order
        let mut picks = picks.into_iter().cycle();
        while g.live() > 0 {
            while let Some(t) = g.pop() {
                running.push(t);
            }
            prop_assert!(!running.is_empty(), "live tasks but none ready: a lost wake-up");
            let t = running.swap_remove(picks.next().unwrap() % running.len());
            let v = g.view(t);
            // Everything before it in program order that conflicts on its partitions has
            // finished.
            for earlier in 0..v.func {
                let (er, ew) = &stages[earlier as usize];
                let (r, w) = &stages[v.func as usize];
                let conflict = ew.iter().any(|d| r.contains(d) || w.contains(d))
                    || er.iter().any(|d| w.contains(d));
                if conflict {
                    prop_assert!(finished.contains(&(earlier, v.index)),
                        "stage {} ran on partition {} before stage {}", v.func, v.index, earlier);
                }
            }
            finished.push((v.func, v.index));
            g.complete(t);
        }
        prop_assert_eq!(finished.len(), stages.len() * 3);
    }
}
