//! The relay against real runtimes and really confined threads.

use super::*;
use crate::{Filter, Role};
use std::time::{Duration, Instant};

/// A runtime with an I/O driver, as the node's readers and its I/O runtime have: a task that
/// waits sleeps in `epoll_wait`, and waking it writes to an eventfd.
fn runtime_with_io() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `f` on a new thread confined as a guest thread; its result, or `Err` if it panicked.
fn on_guest_thread<R: Send + 'static>(
    f: impl FnOnce() -> R + Send + 'static,
) -> std::thread::JoinHandle<R> {
    let filter = Filter::new(Role::Guest).unwrap();
    std::thread::spawn(move || {
        filter.confine_this_thread().unwrap();
        f()
    })
}

/// Polls `future` to its end on this thread, parking between wake-ups (a futex, which a
/// confined thread may use).
fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut Context::from_waker(&waker)) {
            return out;
        }
        std::thread::park();
    }
}

#[test]
fn a_confined_thread_completes_a_relayed_wait_on_a_runtime_with_io() {
    let relay = Relay::start("test-relay").unwrap();
    let runtime = runtime_with_io();
    let (tx, rx) = oneshot::channel::<u32>();
    let sender = on_guest_thread(move || {
        // Long enough for the runtime to be asleep in epoll_wait.
        std::thread::sleep(Duration::from_millis(50));
        tx.send(7).unwrap();
    });
    let asked = Instant::now();
    let got = runtime
        .block_on(async { tokio::time::timeout(Duration::from_secs(5), relay.relayed(rx)).await });
    assert_eq!(got.unwrap().unwrap(), 7);
    assert!(
        asked.elapsed() < Duration::from_secs(1),
        "{:?}",
        asked.elapsed()
    );
    sender.join().expect("the confined sender panicked");
}

/// Why the relay exists: without it, the confined thread's wake-up panics in the runtime's
/// driver (its eventfd write is refused), and the waiting task sleeps on until something
/// else wakes it.
#[test]
fn without_the_relay_a_confined_thread_cannot_wake_a_runtime_with_io() {
    let runtime = runtime_with_io();
    let (tx, rx) = oneshot::channel::<u32>();
    let sender = on_guest_thread(move || {
        std::thread::sleep(Duration::from_millis(50));
        let _ = tx.send(7);
    });
    let asked = Instant::now();
    let got =
        runtime.block_on(async { tokio::time::timeout(Duration::from_millis(600), rx).await });
    assert!(sender.join().is_err(), "the confined wake-up did not fail");
    // The value was there, but only the timer woke the task to see it.
    assert_eq!(got.unwrap().unwrap(), 7);
    assert!(
        asked.elapsed() >= Duration::from_millis(500),
        "{:?}",
        asked.elapsed()
    );
}

#[test]
fn a_confined_thread_spawns_on_another_runtime_through_the_relay() {
    let relay = Arc::new(Relay::start("test-relay").unwrap());
    let io = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let handle = io.handle().clone();
    let spawner = {
        let relay = relay.clone();
        on_guest_thread(move || {
            // The task sleeps on the I/O runtime's timer, so it is woken there, and answers.
            block_on(relay.spawn(&handle, async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                std::fs::metadata("/").is_ok()
            }))
        })
    };
    assert!(
        spawner.join().unwrap().unwrap(),
        "the task ran unconfined on the I/O runtime"
    );
    let lost = relay.spawn(io.handle(), async { panic!("on purpose") });
    assert!(block_on(lost).is_err());
}

#[test]
fn a_relayed_future_is_woken_once_per_burst() {
    let relay = Relay::start("test-relay").unwrap();
    let runtime = runtime_with_io();
    let notify = Arc::new(tokio::sync::Notify::new());
    let wait = relay.relayed(notify.clone().notified_owned());
    let waker = wait.slot.waker.clone();
    for _ in 0..1000 {
        waker.wake_by_ref();
    }
    assert!(
        relay.shared.jobs.len() <= 1,
        "{} jobs",
        relay.shared.jobs.len()
    );
    notify.notify_one();
    runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(5), wait)
            .await
            .unwrap();
    });
}
