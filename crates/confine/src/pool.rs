//! A few confined threads that run blocking closures for async code ([`ConfinedPool`]): where a
//! job's driver runs, and its modules' initializers, instead of on an async runtime's blocking
//! pool, whose threads are not confined. The answer comes back through the relay.

use crate::filter::{ConfineError, Filter};
use crate::relay::{Relay, Relayed};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use tokio::sync::oneshot;

type Job = Box<dyn FnOnce() + Send>;

struct Queue {
    jobs: Mutex<(VecDeque<Job>, bool)>,
    ready: Condvar,
}

/// Threads confined by one [`Filter`] that run closures handed to them, one at a time each.
pub struct ConfinedPool {
    queue: Arc<Queue>,
    relay: Arc<Relay>,
    threads: Vec<JoinHandle<()>>,
}

/// The pool stopped before it ran a closure, or the closure panicked.
#[derive(Debug, thiserror::Error)]
#[error("the confined thread running it {0}")]
pub struct PoolStopped(&'static str);

impl ConfinedPool {
    /// Starts `threads` threads named `name-N`, each confined by `filter` (a guest thread's,
    /// waived if `None`: `mote up --seccomp off`) before it takes a closure; answers go
    /// through `relay`.
    pub fn start(
        name: &str,
        threads: usize,
        filter: Option<Arc<Filter>>,
        relay: Arc<Relay>,
    ) -> Result<Self, ConfineError> {
        let queue = Arc::new(Queue {
            jobs: Mutex::new((VecDeque::new(), false)),
            ready: Condvar::new(),
        });
        let (confined_tx, confined) = std::sync::mpsc::channel();
        let mut pool = Self {
            queue: queue.clone(),
            relay,
            threads: Vec::new(),
        };
        for i in 0..threads.max(1) {
            let (queue, filter, confined_tx) = (queue.clone(), filter.clone(), confined_tx.clone());
            let thread = std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || {
                    let result = match filter {
                        Some(filter) => filter.confine_this_thread(),
                        None => {
                            crate::waive(crate::Role::Guest);
                            Ok(())
                        }
                    };
                    let ok = result.is_ok();
                    let _ = confined_tx.send(result);
                    drop(confined_tx);
                    if ok {
                        serve(&queue);
                    }
                })
                .map_err(|e| ConfineError::from_spawn(&e))?;
            pool.threads.push(thread);
        }
        drop(confined_tx);
        // Dropping the pool on failure stops the threads that did start.
        for result in confined.iter() {
            result?;
        }
        Ok(pool)
    }

    /// Runs `f` on one of the pool's threads; resolves to its result.
    pub fn run<R: Send + 'static>(&self, f: impl FnOnce() -> R + Send + 'static) -> PoolRun<R> {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move || {
            match std::panic::catch_unwind(AssertUnwindSafe(f)) {
                Ok(r) => {
                    let _ = tx.send(Ok(r));
                }
                Err(_) => {
                    let _ = tx.send(Err(PoolStopped("panicked")));
                }
            };
        });
        let mut jobs = self.queue.jobs.lock();
        jobs.0.push_back(job);
        drop(jobs);
        self.queue.ready.notify_one();
        PoolRun {
            rx: self.relay.relayed(rx),
        }
    }
}

impl Drop for ConfinedPool {
    fn drop(&mut self) {
        self.queue.jobs.lock().1 = true;
        self.queue.ready.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A pool thread's loop: runs closures until the pool stops.
fn serve(queue: &Queue) {
    loop {
        let job = {
            let mut jobs = queue.jobs.lock();
            loop {
                if let Some(job) = jobs.0.pop_front() {
                    break job;
                }
                if jobs.1 {
                    return;
                }
                queue.ready.wait(&mut jobs);
            }
        };
        job();
    }
}

/// A closure running on a [`ConfinedPool`].
pub struct PoolRun<R> {
    rx: Relayed<oneshot::Receiver<Result<R, PoolStopped>>>,
}

impl<R> Future for PoolRun<R> {
    type Output = Result<R, PoolStopped>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `rx` is never moved out of a pinned `PoolRun`; this projects the pin to it.
        let rx = unsafe { self.map_unchecked_mut(|s| &mut s.rx) };
        rx.poll(cx)
            .map(|r| r.unwrap_or(Err(PoolStopped("stopped before it ran"))))
    }
}

impl ConfineError {
    fn from_spawn(e: &std::io::Error) -> Self {
        Self::new(format!("cannot start a confined thread: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Role;

    #[test]
    fn closures_run_confined_and_answer_a_runtime_with_io() {
        let relay = Arc::new(Relay::start("test-relay").unwrap());
        let filter = Arc::new(Filter::new(Role::Guest).unwrap());
        let pool = ConfinedPool::start("test-pool", 2, Some(filter), relay).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (opened, sum) = runtime.block_on(async {
            let opened = pool
                .run(|| std::fs::File::open("/etc/hostname").is_ok())
                .await
                .unwrap();
            let sum = pool.run(|| (1..=10u32).sum::<u32>()).await.unwrap();
            (opened, sum)
        });
        assert!(!opened, "a pool thread opened a file");
        assert_eq!(sum, 55);
        let panicked = runtime.block_on(pool.run(|| panic!("on purpose")));
        assert!(panicked.is_err());
        // The thread that panicked's closure is still there for the next one.
        assert_eq!(runtime.block_on(pool.run(|| 1)).unwrap(), 1);
    }
}
