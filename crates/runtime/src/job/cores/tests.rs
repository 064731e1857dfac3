//! The count of calls and tasks on a node's cores, driven by threads as calls and workers
//! take them.

use super::*;
use std::sync::Barrier;
use std::thread;
use std::time::Instant;

fn cores(n: usize, share: u8) -> Arc<JobCores> {
    Arc::new(JobCores::new(n, JobShare::new(share).unwrap()))
}

/// Sets its flag when dropped, so that spinning threads stop when a test's assertion fails
/// too, rather than leave the scope waiting for them.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Runs as a worker's executor does on `c`: takes a core, meets the others at `ready`, then
/// spins until `stop`, giving its core up whenever asked, as a task's epoch callback does at
/// each tick; counts the times it was asked in `asked`.
fn run_as_task(c: &JobCores, stop: &AtomicBool, ready: &Barrier, asked: &AtomicU64) {
    c.hold(stop).unwrap();
    ready.wait();
    while !stop.load(Ordering::Relaxed) {
        if c.asked_to_yield() {
            asked.fetch_add(1, Ordering::Relaxed);
            c.hold(stop).ok();
        }
        std::hint::spin_loop();
    }
    c.release();
}

/// Waits up to 5 s for `cond`.
pub(in crate::job) fn eventually(what: &str, cond: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(5);
    while !cond() {
        assert!(Instant::now() < until, "never: {what}");
        thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_share_keeps_whole_cores() {
    assert_eq!(JobShare::default().of(32), 0);
    assert_eq!(JobShare::new(50).unwrap().of(2), 1);
    assert_eq!(JobShare::new(50).unwrap().of(1), 0);
    assert_eq!(JobShare::new(25).unwrap().of(32), 8);
    assert_eq!(JobShare::new(100).unwrap().of(3), 3);
    let e = JobShare::new(101).unwrap_err();
    assert!(e.to_string().contains("0 to 100"), "{e}");
}

#[test]
fn tasks_take_the_cores_calls_leave_and_never_more() {
    let c = cores(2, 0);
    let stopped = AtomicBool::new(false);
    c.hold(&stopped).unwrap();
    assert_eq!(c.tasks_on_cores(), 1);
    let call = c.call();
    // One call in flight leaves one core: a second thread's tasks wait, and give up when the
    // job stops.
    let c2 = c.clone();
    let waited = thread::spawn(move || {
        let stopped = AtomicBool::new(false);
        let stop = || stopped.store(true, Ordering::Relaxed);
        thread::scope(|s| {
            s.spawn(|| {
                thread::sleep(Duration::from_millis(50));
                stop();
            });
            c2.hold(&stopped).is_err()
        })
    });
    assert!(waited.join().unwrap(), "a task took a core a call had");
    assert_eq!(c.tasks_on_cores(), 1);
    drop(call);
    // Holding again without calls over the allowance neither waits nor yields.
    c.hold(&stopped).unwrap();
    assert_eq!((c.tasks_on_cores(), c.yields()), (1, 0));
    c.release();
    c.release();
    assert_eq!(c.tasks_on_cores(), 0);
}

#[test]
fn a_call_takes_a_core_from_running_tasks_and_gives_it_back() {
    let c = cores(2, 0);
    let stop = AtomicBool::new(false);
    let asked = AtomicU64::new(0);
    let ready = Barrier::new(3);
    thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| run_as_task(&c, &stop, &ready, &asked));
        }
        let _stop = StopOnDrop(&stop);
        ready.wait();
        assert_eq!(c.tasks_on_cores(), 2);
        let first = c.call();
        eventually("one task gives way to one call", || c.tasks_on_cores() == 1);
        let second = c.call();
        eventually("both give way to two calls", || c.tasks_on_cores() == 0);
        let third = c.call();
        thread::sleep(Duration::from_millis(20));
        assert_eq!(c.tasks_on_cores(), 0, "a task took a core three calls want");
        drop((first, second));
        eventually("a task takes the core the calls left", || {
            c.tasks_on_cores() == 1
        });
        thread::sleep(Duration::from_millis(20));
        assert_eq!(c.tasks_on_cores(), 1, "a task took the core a call has");
        drop(third);
        eventually("the tasks take both cores back", || c.tasks_on_cores() == 2);
        assert_eq!(c.yields(), 2);
        assert_eq!(asked.load(Ordering::Relaxed), 2);
    });
    assert_eq!(c.tasks_on_cores(), 0);
}

#[test]
fn tasks_keep_their_share_whatever_the_calls_want() {
    let c = cores(4, 50);
    let stop = AtomicBool::new(false);
    let asked = AtomicU64::new(0);
    let ready = Barrier::new(5);
    let calls: Vec<_> = thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| run_as_task(&c, &stop, &ready, &asked));
        }
        let _stop = StopOnDrop(&stop);
        ready.wait();
        let calls: Vec<_> = (0..8).map(|_| c.call()).collect();
        eventually("the tasks come down to the two cores they keep", || {
            c.tasks_on_cores() == 2
        });
        thread::sleep(Duration::from_millis(20));
        assert_eq!(c.tasks_on_cores(), 2);
        calls
    });
    drop(calls);
    assert_eq!(c.tasks_on_cores(), 0);
}
