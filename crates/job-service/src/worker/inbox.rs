//! How the node's threads reach a worker without waiting for its lock ([`Inbound`], posted
//! with [`Worker::post`]), and how its executors sleep and wake ([`Doorbell`]).
//!
//! The worker's executors may run in `SCHED_IDLE`, and the kernel lends no priority through a
//! lock: an executor preempted while it holds the worker's lock, on a core another process
//! keeps busy, may not run again for seconds. Had the node's async threads waited for that lock
//! to hand over a message, the node itself would stall with it (measured: its lease expired).
//! So they never wait: what they bring goes into a lock-free queue, and whoever holds the lock
//! applies the queue before it lets go ([`Held`]). A poster that finds the lock free applies
//! the queue itself, so a message waits for no executor when none holds the lock.
//!
//! Why nothing is left in the queue: a poster pushes, then tries the lock; a holder lets go,
//! then looks at the queue. With a sequentially consistent fence between each one's two steps,
//! one of them sees the other's, so either the poster gets the lock or the holder sees the
//! message and takes the lock again.

use super::{Local, Worker};
use bytes::Bytes;
use mote_jobs::message::Envelope;
use mote_jobs::{PartitionKey, TaskRef};
use mote_runtime::JobInstance;
use parking_lot::MutexGuard;
use std::ops::{Deref, DerefMut};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering, fence};
use std::thread::Thread;
use std::time::Duration;

/// What the node's threads hand a worker.
pub(super) enum Inbound {
    /// A message from another worker or the controller, with the instances made for the
    /// partitions it says will arrive.
    Message(Box<Envelope>, Vec<(PartitionKey, JobInstance)>),
    /// The state a restore begins, made outside the lock.
    Restore(Box<Local>),
    /// Something sent or stored in this generation was taken.
    Acknowledged(u32),
    /// A load's input arrived.
    Input(u32, TaskRef, Bytes),
}

/// The worker's lock, held by one of its executors or by a thread applying the inbox; letting
/// go applies what was posted meanwhile.
pub(super) struct Held<'a> {
    worker: &'a Worker,
    guard: Option<MutexGuard<'a, Local>>,
}

impl Deref for Held<'_> {
    type Target = Local;

    fn deref(&self) -> &Local {
        self.guard.as_ref().expect("held until dropped")
    }
}

impl DerefMut for Held<'_> {
    fn deref_mut(&mut self) -> &mut Local {
        self.guard.as_mut().expect("held until dropped")
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        self.worker.apply_if_free();
    }
}

impl Worker {
    /// Takes the worker's lock, waiting for it: only its executors do, never the node's
    /// threads.
    pub(super) fn lock(&self) -> Held<'_> {
        let mut guard = self.local.lock();
        self.apply_inbox(&mut guard);
        Held {
            worker: self,
            guard: Some(guard),
        }
    }

    /// Hands `inbound` over without waiting: applied now if the lock is free, else by the
    /// lock's holder before it lets go.
    pub(super) fn post(&self, inbound: Inbound) {
        self.inbox.push(inbound);
        self.apply_if_free();
    }

    fn apply_if_free(&self) {
        loop {
            fence(Ordering::SeqCst);
            if self.inbox.is_empty() {
                return;
            }
            let Some(mut guard) = self.local.try_lock() else {
                return;
            };
            self.apply_inbox(&mut guard);
        }
    }

    fn apply_inbox(&self, local: &mut Local) {
        let mut took = false;
        while let Some(inbound) = self.inbox.pop() {
            took = true;
            let applied = match inbound {
                Inbound::Message(envelope, prepared) => {
                    self.take_envelope(local, *envelope, prepared)
                }
                Inbound::Restore(fresh) => self.begin_generation(local, *fresh),
                Inbound::Acknowledged(generation) => {
                    if generation == local.generation {
                        local.outstanding -= 1;
                    }
                    Ok(())
                }
                Inbound::Input(generation, task, data) => {
                    if generation == local.generation {
                        local.graph.input(task, data);
                    }
                    Ok(())
                }
            };
            if let Err(error) = applied {
                self.fail(error);
            }
        }
        if took {
            self.ready.store(local.graph.ready(), Ordering::Relaxed);
            self.bell.ring_all();
        }
    }

    /// Lets go of the lock and sleeps executor `me` until it is rung or `timeout` passes.
    pub(super) fn sleep<'a>(&'a self, me: usize, held: Held<'a>, timeout: Duration) -> Held<'a> {
        // Asleep before the lock is let go: an executor that changes the state next, under
        // the lock, then sees this one to ring.
        self.bell.asleep[me].store(true, Ordering::SeqCst);
        drop(held);
        std::thread::park_timeout(timeout);
        self.bell.asleep[me].store(false, Ordering::SeqCst);
        self.lock()
    }
}

/// Wakes a worker's executor threads without a lock. A wake-up that comes before the thread
/// sleeps is not lost: the thread's park token keeps it.
pub(super) struct Doorbell {
    threads: Vec<OnceLock<Thread>>,
    asleep: Vec<AtomicBool>,
}

impl Doorbell {
    /// A bell for `executors` threads, none there yet.
    pub fn new(executors: usize) -> Self {
        Self {
            threads: (0..executors.max(1)).map(|_| OnceLock::new()).collect(),
            asleep: (0..executors.max(1))
                .map(|_| AtomicBool::new(false))
                .collect(),
        }
    }

    /// The calling thread is executor `me`.
    pub fn register(&self, me: usize) {
        let _ = self.threads[me].set(std::thread::current());
    }

    /// Wakes every executor, asleep or about to be.
    pub fn ring_all(&self) {
        for thread in self.threads.iter().filter_map(OnceLock::get) {
            thread.unpark();
        }
    }

    /// Wakes one sleeping executor, if one sleeps.
    pub fn ring_one(&self) {
        for (thread, asleep) in self.threads.iter().zip(&self.asleep) {
            if asleep.swap(false, Ordering::SeqCst)
                && let Some(thread) = thread.get()
            {
                thread.unpark();
                return;
            }
        }
    }
}
