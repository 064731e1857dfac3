//! The hand-off protocol: plain cases, a stress run on real threads, and (under `--cfg loom`,
//! `scripts/test` runs it) every interleaving of a small model.

// The model runs on loom's `Mutex`, a stand-in for std's; parking_lot's has no loom twin, and
// this crate takes no lock outside its tests.
#![allow(clippy::disallowed_types)]

use super::*;

#[cfg(loom)]
use loom::sync::{Arc, Mutex, atomic::AtomicUsize};
#[cfg(not(loom))]
use std::sync::{Arc, Mutex, atomic::AtomicUsize};

/// A queue with a count that runs ahead of it, as the node's does: a submitter counts before it
/// enqueues, a taker uncounts after it dequeues.
#[derive(Default)]
struct Queue {
    items: Mutex<std::collections::VecDeque<u32>>,
    len: AtomicUsize,
}

impl Queue {
    fn push(&self, item: u32) {
        self.len.fetch_add(1, Ordering::SeqCst);
        self.items.lock().unwrap().push_back(item);
    }
}

impl Waiting for Queue {
    type Work = u32;

    fn is_empty(&self) -> bool {
        self.len.load(Ordering::SeqCst) == 0
    }

    fn take(&self) -> Option<u32> {
        if self.is_empty() {
            return None;
        }
        let item = self.items.lock().unwrap().pop_front()?;
        self.len.fetch_sub(1, Ordering::SeqCst);
        Some(item)
    }
}

/// Runs `work` on `core` and whatever the core is handed next, recording each item; ends with
/// the core released.
fn run_from(cores: &CoreSet, queue: &Queue, ran: &Mutex<Vec<u32>>, core: usize, work: u32) {
    let (mut core, mut work) = (core, work);
    loop {
        ran.lock().unwrap().push(work);
        match cores.release(core, queue) {
            Some((next_core, next)) => (core, work) = (next_core, next),
            None => return,
        }
    }
}

#[cfg(not(loom))]
mod plain {
    use super::*;

    #[test]
    fn cores_are_taken_once_and_come_back() {
        for count in [1, 2, 64, 70, 130] {
            let cores = CoreSet::new(count);
            let mut taken: Vec<usize> = std::iter::from_fn(|| cores.take()).collect();
            assert_eq!(taken.len(), count);
            taken.sort_unstable();
            taken.dedup();
            assert_eq!(taken.len(), count, "a core was taken twice");
            assert_eq!(cores.free(), 0);
            let queue = Queue::default();
            for core in taken {
                assert!(cores.release(core, &queue).is_none());
            }
            assert_eq!(cores.free(), count);
        }
    }

    #[test]
    fn a_released_core_goes_to_what_waits_and_none_is_taken_past_the_queue() {
        let cores = CoreSet::new(1);
        let queue = Queue::default();
        let held = cores.take_if_idle(&queue).unwrap();
        queue.push(7);
        assert_eq!(cores.dispatch(&queue), None, "the only core is held");
        assert_eq!(cores.release(held, &queue), Some((held, 7)));
        assert_eq!(cores.release(held, &queue), None);
        queue.push(8);
        assert_eq!(
            cores.take_if_idle(&queue),
            None,
            "a call waits: it goes first"
        );
        assert_eq!(cores.dispatch(&queue), Some((held, 8)));
    }

    /// Submitters and holders on real threads: every item runs once, never more items at once
    /// than cores, and nothing is left waiting beside a free core.
    #[test]
    fn no_work_is_lost_or_run_twice_across_threads() {
        const CORES: usize = 2;
        let cores = Arc::new(CoreSet::new(CORES));
        let queue = Arc::new(Queue::default());
        let ran = Arc::new(Mutex::new(Vec::new()));
        let threads: Vec<_> = (0..4u32)
            .map(|t| {
                let (cores, queue, ran) = (cores.clone(), queue.clone(), ran.clone());
                std::thread::spawn(move || {
                    for i in 0..20_000u32 {
                        let item = t * 1_000_000 + i;
                        match cores.take_if_idle(&*queue) {
                            Some(core) => run_from(&cores, &queue, &ran, core, item),
                            None => {
                                queue.push(item);
                                if let Some((core, work)) = cores.dispatch(&*queue) {
                                    run_from(&cores, &queue, &ran, core, work);
                                }
                            }
                        }
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert!(queue.is_empty(), "work was left waiting");
        assert_eq!(cores.free(), CORES);
        let mut ran = ran.lock().unwrap().clone();
        assert_eq!(ran.len(), 80_000);
        ran.sort_unstable();
        ran.dedup();
        assert_eq!(ran.len(), 80_000, "an item ran twice");
    }
}

#[cfg(loom)]
mod model {
    use super::*;

    /// Explores every interleaving with up to three preemptions of a thread (loom's bound for
    /// models of this size; unbounded, the loops of a release make it run for hours).
    fn model(f: impl Fn() + Sync + Send + 'static) {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(f);
    }

    /// Two cores, both held: one holder releases while a submitter queues two items and looks
    /// for a core, then the other holder releases. In every interleaving both items run once
    /// and, at the end, nothing waits and both cores are free.
    #[test]
    fn a_release_and_a_submit_leave_nothing_waiting() {
        model(|| {
            let cores = Arc::new(CoreSet::new(2));
            let queue = Arc::new(Queue::default());
            let ran = Arc::new(Mutex::new(Vec::new()));
            let held = cores.take().unwrap();
            let other = cores.take().unwrap();
            let releaser = {
                let (cores, queue, ran) = (cores.clone(), queue.clone(), ran.clone());
                loom::thread::spawn(move || {
                    if let Some((core, work)) = cores.release(held, &*queue) {
                        run_from(&cores, &queue, &ran, core, work);
                    }
                })
            };
            let submitter = {
                let (cores, queue, ran) = (cores.clone(), queue.clone(), ran.clone());
                loom::thread::spawn(move || {
                    for item in [1, 2] {
                        queue.push(item);
                        if let Some((core, work)) = cores.dispatch(&*queue) {
                            run_from(&cores, &queue, &ran, core, work);
                        }
                    }
                })
            };
            releaser.join().unwrap();
            submitter.join().unwrap();
            // The other core's holder finishes last, and takes whatever still waits.
            if let Some((core, work)) = cores.release(other, &*queue) {
                run_from(&cores, &queue, &ran, core, work);
            }
            let mut ran = ran.lock().unwrap().clone();
            ran.sort_unstable();
            assert_eq!(ran, vec![1, 2]);
            assert!(queue.is_empty());
            assert_eq!(cores.free(), 2);
        });
    }

    /// One core, held: a reader that wants to run where it is and a submitter race its
    /// release. The reader never takes the core past queued work, and the work runs.
    #[test]
    fn a_reader_never_takes_a_core_past_waiting_work() {
        model(|| {
            let cores = Arc::new(CoreSet::new(1));
            let queue = Arc::new(Queue::default());
            let ran = Arc::new(Mutex::new(Vec::new()));
            let held = cores.take().unwrap();
            let submitter = {
                let (cores, queue, ran) = (cores.clone(), queue.clone(), ran.clone());
                loom::thread::spawn(move || {
                    queue.push(1);
                    if let Some((core, work)) = cores.dispatch(&*queue) {
                        run_from(&cores, &queue, &ran, core, work);
                    }
                })
            };
            let reader = {
                let (cores, queue, ran) = (cores.clone(), queue.clone(), ran.clone());
                loom::thread::spawn(move || {
                    if let Some(core) = cores.take_if_idle(&*queue) {
                        run_from(&cores, &queue, &ran, core, 2);
                    }
                })
            };
            if let Some((core, work)) = cores.release(held, &*queue) {
                run_from(&cores, &queue, &ran, core, work);
            }
            submitter.join().unwrap();
            reader.join().unwrap();
            let ran = ran.lock().unwrap().clone();
            assert!(ran.contains(&1), "the queued item ran: {ran:?}");
            assert!(queue.is_empty());
            assert_eq!(cores.free(), 1);
        });
    }
}
