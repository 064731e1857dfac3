//! The relay: an unconfined thread that wakes tasks and starts futures on behalf of confined
//! threads.
//!
//! A task of an async runtime with an I/O driver sleeps in `epoll_wait`; waking it writes to the
//! runtime's eventfd. A confined thread may not write (that rule would let it write into any
//! socket or file of the process), so whatever a confined thread can complete (a reply, a log
//! line, a core handed on, a message for a job's outbox) is awaited through the relay:
//!
//! - [`Relay::relayed`] wraps the future that waits. Its wake-ups, from whichever thread, push
//!   the future's slot onto the relay's queue and unpark the relay's thread (a futex); the
//!   relay then calls the real waker. A slot already queued is not queued again, so a burst of
//!   wake-ups costs one.
//! - [`Relay::spawn`] starts a future on another runtime: the relay's thread spawns it there,
//!   itself relayed, so that a confined thread that feeds it (a request body, an outbound
//!   connection) wakes it through the relay too. Its output comes back over a channel the
//!   runtime's thread completes, which a confined thread's task may wait on.
//! - [`Relay::wake`] wakes one waker through the relay, for a hand-off the caller makes itself.
//!
//! Invariants: a job is pushed before the relay's thread is unparked, and the thread empties
//! the queue before it parks; `park` keeps an unpark that came first, so no job waits for a
//! later one. Every job runs under `catch_unwind`: a panicking waker does not stop the relay.

use crossbeam_queue::SegQueue;
use futures_util::task::AtomicWaker;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{JoinHandle, Thread};
use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// What the relay's thread does for a confined thread.
enum Job {
    /// Wake the task waiting in a [`Relayed`] future.
    Slot(Arc<Slot>),
    /// Wake this waker.
    Waker(Waker),
    /// Run this (a spawn onto another runtime).
    Run(Box<dyn FnOnce() + Send>),
}

struct Shared {
    jobs: SegQueue<Job>,
    thread: Thread,
    stopping: AtomicBool,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay").finish_non_exhaustive()
    }
}

impl Shared {
    fn push(&self, job: Job) {
        self.jobs.push(job);
        self.thread.unpark();
    }
}

/// The relay: its thread runs until the relay is dropped.
pub struct Relay {
    shared: Arc<Shared>,
    handle: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay").finish_non_exhaustive()
    }
}

impl Relay {
    /// Starts the relay's thread, named `name`.
    pub fn start(name: &str) -> std::io::Result<Self> {
        let (tx, rx) = std::sync::mpsc::channel();
        let handle = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                let shared = Arc::new(Shared {
                    jobs: SegQueue::new(),
                    thread: std::thread::current(),
                    stopping: AtomicBool::new(false),
                });
                let _ = tx.send(shared.clone());
                run(&shared);
            })?;
        let shared = rx
            .recv()
            .map_err(|_| std::io::Error::other("the relay's thread ended as it started"))?;
        Ok(Self {
            shared,
            handle: Some(handle),
        })
    }

    /// `future`, whose wake-ups go through the relay: what a task waits on when a confined
    /// thread may complete it.
    pub fn relayed<F: Future>(&self, future: F) -> Relayed<F> {
        Relayed {
            slot: self.slot(),
            inner: future,
        }
    }

    /// A task's way to be woken through the relay, for a future that polls what a confined
    /// thread may complete itself ([`RelaySlot::poll`]).
    pub fn slot(&self) -> RelaySlot {
        let slot = Arc::new(Slot {
            waker: AtomicWaker::new(),
            queued: AtomicBool::new(false),
            relay: self.shared.clone(),
        });
        RelaySlot {
            waker: Waker::from(slot.clone()),
            slot,
        }
    }

    /// Runs `future` on `runtime`, relayed, and resolves to its output (or [`Lost`] if it
    /// panicked or the runtime dropped it). Dropping the returned future leaves it running.
    pub fn spawn<F>(&self, runtime: &Handle, future: F) -> Spawned<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let future = self.relayed(future);
        let runtime = runtime.clone();
        self.shared.push(Job::Run(Box::new(move || {
            drop(runtime.spawn(async move {
                let _ = tx.send(future.await);
            }));
        })));
        Spawned { rx }
    }

    /// Wakes `waker` from the relay's thread.
    pub fn wake(&self, waker: Waker) {
        self.shared.push(Job::Waker(waker));
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        self.shared.thread.unpark();
        if let Some(handle) = self.handle.take()
            && handle.thread().id() != std::thread::current().id()
        {
            let _ = handle.join();
        }
    }
}

/// The relay's thread: runs jobs until it is stopped, then the jobs still queued.
fn run(shared: &Shared) {
    loop {
        while let Some(job) = shared.jobs.pop() {
            let ran = std::panic::catch_unwind(AssertUnwindSafe(|| match job {
                Job::Slot(slot) => {
                    slot.queued.store(false, Ordering::SeqCst);
                    slot.waker.wake();
                }
                Job::Waker(waker) => waker.wake(),
                Job::Run(f) => f(),
            }));
            if ran.is_err() {
                tracing::error!("a job on the relay's thread panicked");
            }
        }
        if shared.stopping.load(Ordering::SeqCst) && shared.jobs.is_empty() {
            return;
        }
        std::thread::park();
    }
}

/// Where a [`Relayed`] future's task is woken from.
#[derive(Debug)]
struct Slot {
    waker: AtomicWaker,
    /// On the relay's queue and not yet woken: later wake-ups add nothing.
    queued: AtomicBool,
    relay: Arc<Shared>,
}

impl Wake for Slot {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.queued.swap(true, Ordering::SeqCst) {
            self.relay.push(Job::Slot(self.clone()));
        }
    }
}

/// Where a task is woken from through the relay ([`Relay::slot`]).
#[derive(Debug)]
pub struct RelaySlot {
    waker: Waker,
    slot: Arc<Slot>,
}

impl RelaySlot {
    /// Runs `poll` (a poll of what the task waits on) with a waker that goes through the relay
    /// to the task that polls now.
    pub fn poll<T>(
        &self,
        cx: &mut Context<'_>,
        poll: impl FnOnce(&mut Context<'_>) -> Poll<T>,
    ) -> Poll<T> {
        self.slot.waker.register(cx.waker());
        poll(&mut Context::from_waker(&self.waker))
    }
}

pin_project_lite::pin_project! {
    /// A future whose wake-ups go through the relay ([`Relay::relayed`]).
    pub struct Relayed<F> {
        slot: RelaySlot,
        #[pin]
        inner: F,
    }
}

impl<F: Future> Future for Relayed<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        this.slot.poll(cx, |cx| this.inner.poll(cx))
    }
}

/// A future started on another runtime by [`Relay::spawn`].
pub struct Spawned<T> {
    rx: oneshot::Receiver<T>,
}

/// A future started by [`Relay::spawn`] ended without an output: it panicked, or its runtime
/// shut down first.
#[derive(Debug, thiserror::Error)]
#[error(
    "a task started on the node's I/O runtime ended without an answer (it panicked or the runtime stopped)"
)]
pub struct Lost;

impl<T> Future for Spawned<T> {
    type Output = Result<T, Lost>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.rx).poll(cx).map(|r| r.map_err(|_| Lost))
    }
}

#[cfg(test)]
mod tests;
