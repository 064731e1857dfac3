//! Cores handed to tasks that wait for them: a released core goes to the task first in line, a
//! component's call holds a core only while it is polled, and a task that stops waiting gives
//! back a core handed to it meanwhile.

use super::*;
use crate::cores::waiter::gated;
use mote_sched::Policy;
use std::task::Poll;
use std::time::Duration;

fn cores(count: usize) -> Arc<Cores> {
    let pending = Arc::new(Pending::new(
        Policy::Fifo,
        Duration::from_secs(60),
        100,
        Default::default(),
        None,
    ));
    let metrics = Arc::new(NodeMetrics::new());
    let job_cores = Arc::new(JobCores::new(count, mote_runtime::JobShare::default()));
    let relay = Arc::new(Relay::start("test-relay").unwrap());
    Arc::new(Cores::new(count, 0, pending, job_cores, relay, metrics))
}

fn poll_once<F: std::future::Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    std::pin::Pin::new(f).poll(&mut cx)
}

#[test]
fn a_released_core_goes_to_the_task_that_waits_for_it_and_no_further() {
    let cores = cores(1);
    let on = cores.take_if_idle().unwrap();
    assert!(cores.take_if_idle().is_none(), "one core, held");
    let waiter = CoreWaiter::new(&cores);
    cores
        .queue_resumption(1, Instant::now(), Resumption::Task(waiter.clone()))
        .ok()
        .unwrap();
    assert!(waiter.take().is_none(), "the core is still held");
    cores.release(on);
    let (on, _) = waiter
        .take()
        .expect("the released core went to the waiting task");
    assert!(cores.take_if_idle().is_none(), "the task holds it now");
    cores.release(on);
    assert!(cores.take_if_idle().is_some(), "free again");
}

#[test]
fn a_task_that_stopped_waiting_hands_the_core_on() {
    let cores = cores(1);
    let on = cores.take_if_idle().unwrap();
    let gone = CoreWaiter::new(&cores);
    let next = CoreWaiter::new(&cores);
    for waiter in [&gone, &next] {
        cores
            .queue_resumption(1, Instant::now(), Resumption::Task(waiter.clone()))
            .ok()
            .unwrap();
    }
    assert!(gone.leave().is_none());
    cores.release(on);
    assert!(gone.take().is_none());
    assert!(next.take().is_some(), "the core skipped the task that left");
}

#[tokio::test]
async fn a_gated_call_holds_its_core_only_while_it_is_polled_and_ready_to_run() {
    let cores = cores(1);
    let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
    let mut call = Box::pin(gated(&cores, 1, Instant::now(), async move {
        rx.await.unwrap() + 1
    }));
    // Waiting on its channel, the call gives the only core back...
    assert!(poll_once(&mut call).is_pending());
    // ...which another call takes meanwhile.
    let other = cores
        .take_if_idle()
        .expect("the core was free while the call waited");
    tx.send(41).unwrap();
    // Woken, it queues for the core again and runs once the other gives it back.
    assert!(poll_once(&mut call).is_pending());
    assert_eq!(cores.pending().len(), 1);
    cores.release(other);
    match poll_once(&mut call) {
        Poll::Ready(v) => assert_eq!(v, 42),
        Poll::Pending => panic!("the call did not run once the core was free"),
    }
    assert!(
        cores.take_if_idle().is_some(),
        "the finished call holds nothing"
    );
}
