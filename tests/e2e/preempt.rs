//! Preemptive call ordering through the real binary: short calls overtake a long one that holds
//! the only core, the node counts what it did, and `--preempt off` runs calls to their end.

use crate::fixtures::busy;
use crate::platform::{Platform, mote_bin};
use mote_api::DeployParams;
use std::time::{Duration, Instant};

/// What [`short_calls_beside_a_long_one`] saw, as times since the long call was sent.
struct Seen {
    /// When each short call answered.
    hellos: Vec<Duration>,
    /// When the long call answered.
    slow: Duration,
    /// How long the long call took alone.
    slow_alone: Duration,
}

/// Starts a one-core SEPT node with `preempt`, teaches it that `hello` is short and `slow` long,
/// then sends three `hello` calls, one after another, while `slow` runs.
fn short_calls_beside_a_long_one(preempt: &str) -> (Platform, Seen) {
    let p = Platform::start(&["--policy", "sept", "--cores", "1", "--preempt", preempt]);
    p.deploy("hello", mote_guests::HELLO.wasm, &DeployParams::default());
    p.deploy("slow", &busy(600_000_000), &DeployParams::default());
    for _ in 0..3 {
        assert_eq!(p.invoke("hello", b"x").status, 200);
    }
    let alone = Instant::now();
    assert_eq!(p.invoke("slow", b"").status, 200);
    let slow_alone = alone.elapsed();
    let (hellos, slow) = while_slow_runs(&p, |started| {
        std::thread::sleep(Duration::from_millis(20));
        (0..3)
            .map(|_| {
                let reply = p.invoke("hello", b"x");
                assert_eq!(reply.status, 200, "{}", reply.text());
                started.elapsed()
            })
            .collect()
    });
    let seen = Seen {
        hellos,
        slow,
        slow_alone,
    };
    (p, seen)
}

/// Sends `slow` and, once it holds the core (nothing queued, an executor busy), runs `beside`
/// with the instant `slow` was sent; returns what `beside` returned and how long `slow` took
/// to answer.
fn while_slow_runs<T>(p: &Platform, beside: impl FnOnce(Instant) -> T) -> (T, Duration) {
    std::thread::scope(|s| {
        let started = Instant::now();
        let slow = s.spawn(move || {
            assert_eq!(p.invoke("slow", b"").status, 200);
            started.elapsed()
        });
        while p.get("/v1/node").json()["queue_length"] != 0 || busy_executors(p) == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
        let seen = beside(started);
        (seen, slow.join().unwrap())
    })
}

fn busy_executors(p: &Platform) -> i64 {
    p.get("/metrics")
        .text()
        .lines()
        .find_map(|l| l.strip_prefix("mote_executors_busy ")?.parse().ok())
        .expect("mote_executors_busy is exported")
}

#[test]
fn short_calls_take_the_core_from_a_long_one_and_the_node_counts_it() {
    let (p, seen) = short_calls_beside_a_long_one("on");
    assert!(
        seen.hellos.iter().all(|&h| h < seen.slow) && seen.hellos[2] < seen.slow_alone / 2,
        "every short call answered early, while the long one ran ({:?}, long {:?}, alone {:?})",
        seen.hellos,
        seen.slow,
        seen.slow_alone
    );
    let node = p.get("/v1/node").json();
    let preempt = &node["preempt"];
    assert!(preempt["preemptions"].as_u64().unwrap() >= 1, "{node}");
    assert_eq!(preempt["suspended"], 0, "{node}");
    assert_eq!(preempt["quantum_us"], 2000, "{node}");
    assert_eq!(
        node["executor_threads"],
        1 + preempt["max_suspended"].as_u64().unwrap()
    );
    let m = p.get("/metrics").text();
    let counter = m
        .lines()
        .find_map(|l| {
            l.strip_prefix("mote_preemptions_total ")?
                .parse::<u64>()
                .ok()
        })
        .unwrap_or_else(|| panic!("no mote_preemptions_total in\n{m}"));
    assert!(counter >= 1);
    assert!(m.contains("mote_suspended_calls 0"), "{m}");
}

/// The recent run times of `name` that the node reports, oldest first.
fn recent_ms(p: &Platform, name: &str) -> Vec<f64> {
    let node = p.get("/v1/node").json();
    let f = node["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("{name} in {node}"))
        .clone();
    f["recent_ms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

/// While `slow` is suspended, two `mid` calls hold the core for a good part of its answer time.
/// The history must learn the time `slow` ran, which is its answer time less theirs; had it
/// counted the suspension it would learn nearly the whole answer time. Both sides are read from
/// the same clocks in the same run, so a loaded machine stretches them alike.
#[test]
fn a_preempted_call_learns_the_time_it_ran_not_the_time_it_waited() {
    let p = Platform::start(&["--policy", "sept", "--cores", "1", "--preempt", "on"]);
    p.deploy("mid", &busy(150_000_000), &DeployParams::default());
    p.deploy("slow", &busy(600_000_000), &DeployParams::default());
    for name in ["mid", "slow"] {
        assert_eq!(p.invoke(name, b"").status, 200);
    }
    let ((), slow_answer) = while_slow_runs(&p, |_| {
        for _ in 0..2 {
            assert_eq!(p.invoke("mid", b"").status, 200);
        }
    });
    let mids = recent_ms(&p, "mid");
    let overtaking: f64 = mids[mids.len() - 2..].iter().sum();
    let slow = *recent_ms(&p, "slow").last().unwrap();
    let answer = slow_answer.as_secs_f64() * 1e3;
    assert!(
        slow < answer - overtaking / 2.0,
        "slow learned {slow:.1} ms of an answer in {answer:.1} ms, while mid ran {overtaking:.1} ms"
    );
}

#[test]
fn without_preemption_short_calls_wait_for_the_long_one() {
    let (p, seen) = short_calls_beside_a_long_one("off");
    assert!(
        seen.hellos[0] > seen.slow_alone / 2,
        "the first short call waited for most of the long one ({:?}, alone {:?})",
        seen.hellos,
        seen.slow_alone
    );
    assert!(p.get("/v1/node").json()["preempt"].is_null());
}

#[test]
fn preemption_flags_are_checked_and_fifo_never_preempts() {
    let o = std::process::Command::new(mote_bin())
        .args(["up", "--preempt", "maybe"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("--preempt") && stderr.contains("[possible values: on, off]"),
        "{stderr}"
    );
    // FIFO never has a better call waiting than the one running: it runs without preemption.
    let p = Platform::start(&["--policy", "fifo", "--cores", "1"]);
    let node = p.get("/v1/node").json();
    assert!(node["preempt"].is_null(), "{node}");
    assert_eq!(node["executor_threads"], 1);
}

/// A function whose calls were short three times runs its fourth, which loops to its 4 s
/// budget, on the thread that read it (a one-core node, the default policy): `hello`, called
/// 50 times one after another meanwhile, takes the core from it after its quantum each time,
/// and nothing waits for the loop's budget. (The floor on `hello`'s p99, 10 ms, is measured by
/// `mote bench preempt`; a test on a shared machine checks the mechanism, not the figure.)
#[test]
fn a_call_that_turns_long_where_it_was_read_gives_its_core_to_short_ones() {
    let p = Platform::start(&["--cores", "1"]);
    p.deploy("hello", mote_guests::HELLO.wasm, &DeployParams::default());
    let four_seconds = DeployParams {
        timeout_ms: Some(4000),
        ..DeployParams::default()
    };
    p.deploy("turncoat", &crate::fixtures::turncoat(), &four_seconds);
    for _ in 0..3 {
        assert_eq!(p.invoke("turncoat", b"").status, 200);
        assert_eq!(p.invoke("hello", b"x").status, 200);
    }
    let inline = |p: &Platform| -> u64 {
        let m = p.get("/metrics").text();
        m.lines()
            .find_map(|l| l.strip_prefix("mote_inline_calls_total ")?.parse().ok())
            .unwrap_or_else(|| panic!("no mote_inline_calls_total in\n{m}"))
    };
    let before = inline(&p);
    let p = &p;
    let (answers, long) = std::thread::scope(|s| {
        let long = s.spawn(move || p.invoke("turncoat", b"now long").status);
        while busy_executors(p) == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
        let answers: Vec<Duration> = (0..50)
            .map(|_| {
                let asked = Instant::now();
                assert_eq!(p.invoke("hello", b"x").status, 200);
                asked.elapsed()
            })
            .collect();
        (answers, long.join().unwrap())
    });
    assert_eq!(long, 504, "the loop ran to its budget");
    let slowest = answers.iter().max().unwrap();
    assert!(
        *slowest < Duration::from_secs(1),
        "a call of hello waited {slowest:?} behind the loop"
    );
    assert!(
        inline(p) > before,
        "the loop did not start where it was read"
    );
    let node = p.get("/v1/node").json();
    assert!(
        node["preempt"]["preemptions"].as_u64().unwrap() >= 50,
        "{node}"
    );
}
