//! Running one call: a fresh `Store` and instance from the pool, the deadline armed, the entry
//! path (`entry`) run on the calling thread ([`Runtime::call_then`]) or as a future
//! ([`Runtime::call_async`]), and the outcome settled by the same code for both.
//!
//! The store and instance are dropped when the call returns, whatever happened, which returns
//! the instance's slot (and its memory) to the pool: no state survives from one call to the next.
//! [`Runtime::call_then`] hands the result to the caller before that teardown, so the reply does
//! not wait for the memory reset (about 40% of a microsecond call).

use crate::engine::Runtime;
use crate::entry::{self, CallOutput, Failure, Fiber};
use crate::error::CallError;
use crate::function::{Entry, Function};
use crate::gate::{self, HostIo, MicrotaskState, PhaseGate, Resumed};
use crate::guest_log::GuestLog;
use crate::state::{CallState, Deadline};
use crate::ticker::Running;
use bytes::Bytes;
use mote_types::Limits;
use std::sync::Arc;
use std::time::Instant;
use wasmtime::{Store, Trap, UpdateDeadline};

/// One call to run: the function, the name it is deployed as, its limits, when it began and its
/// request body.
#[derive(Clone, Copy, Debug)]
pub struct Call<'a> {
    /// The compiled function.
    pub function: &'a Function,
    /// The name it is deployed as, for its log lines and its WASI `argv[0]`.
    pub name: &'a Arc<str>,
    /// What it may consume.
    pub limits: Limits,
    /// When the call began, by the caller's clock: its budget runs from here, so the call path
    /// reads the clock once for both.
    pub started: Instant,
    /// The request body.
    pub input: &'a [u8],
}

impl Runtime {
    /// Runs one call of `function` (deployed as `name`) on the current thread, in a fresh
    /// instance, with `input` as the request body.
    pub fn call(
        &self,
        function: &Function,
        name: &Arc<str>,
        limits: Limits,
        input: &[u8],
    ) -> Result<CallOutput, CallError> {
        let call = Call {
            function,
            name,
            limits,
            started: Instant::now(),
            input,
        };
        self.call_then(call, None, |result, _log| result)
    }

    /// Runs `call` on the current thread and gives the result and what the guest logged to
    /// `finish` before the instance is torn down, so a reply sent from `finish` does not wait
    /// for the memory reset. `preemption` is how the thread may take its core back at the
    /// call's epoch ticks and around its sleeps (`None`: it runs to its end).
    pub fn call_then<R>(
        &self,
        call: Call<'_>,
        preemption: Option<&dyn crate::Preemption>,
        finish: impl FnOnce(Result<CallOutput, CallError>, GuestLog) -> R,
    ) -> R {
        assert!(
            !call.function.is_microtask(),
            "{} declares microtasks; run it with Runtime::call_async",
            call.name
        );
        // SAFETY: the store is dropped at the end of this function, on this thread, while the
        // preemption is still borrowed.
        let preemption = preemption.map(|p| unsafe { gate::Lent::new(p) });
        let mut store = self.new_store(&call, None, preemption);
        let _running = self.arm_deadline(&mut store, call.limits, false);
        let result = entry::run_blocking(call.function, &mut store, call.input);
        let (result, log) = entry::finish(call.function, call.limits, &mut store, result);
        let value = finish(result, log);
        drop(store);
        value
    }

    /// Runs `call` as a future, in a fresh instance: when it may run (each phase of a microtask
    /// function, see [`Function::is_microtask`], after each wait, after each epoch tick) is
    /// `gate`'s to say (lent for the call: the caller reads it afterwards), and a microtask function's object calls go through `io` (which it
    /// needs; another function makes none). The future must be polled on a Tokio runtime with
    /// its timer enabled; the budget covers waits. Dropping the future cancels the call. The
    /// result and what the guest logged go to `finish` before the instance is torn down.
    pub async fn call_async<R>(
        &self,
        call: Call<'_>,
        gate: &mut (dyn PhaseGate + '_),
        io: Option<HostIo>,
        finish: impl FnOnce(Result<CallOutput, CallError>, GuestLog) -> R,
    ) -> R {
        // SAFETY: the store is dropped at the end of this future, which borrows `gate`
        // mutably for its whole life.
        let gate = unsafe { gate::LentGate::new(gate) };
        let mut store = self.new_store(&call, Some(MicrotaskState { gate, io }), None);
        let _running = self.arm_deadline(&mut store, call.limits, true);
        let deadline = tokio::time::Instant::from_std(store.data().deadline);
        let run = entry::run::<Fiber>(call.function, &mut store, call.input);
        let result = match tokio::time::timeout_at(deadline, run).await {
            Ok(result) => result,
            // Waiting past the deadline: the guest holds no thread, so no epoch tick stops it.
            Err(_) => {
                store.data_mut().timed_out = true;
                Err(Failure::Known(CallError::Timeout {
                    timeout_us: call.limits.timeout_us,
                }))
            }
        };
        let (result, log) = entry::finish(call.function, call.limits, &mut store, result);
        let value = finish(result, log);
        drop(store);
        value
    }

    /// A store for `call`, with its limits; the caller arms the deadline.
    fn new_store(
        &self,
        call: &Call<'_>,
        microtask: Option<MicrotaskState>,
        preemption: Option<gate::Lent>,
    ) -> Store<CallState> {
        let stdin = match call.function.entry() {
            Some(Entry::WasiCommand { .. }) => Bytes::copy_from_slice(call.input),
            _ => Bytes::new(),
        };
        let state = CallState::new(
            call.name.clone(),
            call.limits.memory_bytes(),
            call.started + call.limits.timeout(),
            stdin,
            self.max_response_bytes(),
            microtask,
            preemption,
        );
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        store
    }

    /// Checks the call's wall-clock deadline at every epoch tick and stops the guest past it.
    /// A blocking call may then be suspended by the [`crate::Preemption`] it was lent. With
    /// `yield_each_tick` (calls that are futures: calls on readers, microtask calls, requests to
    /// components) the guest instead waits without running if its gate preempted it, and
    /// otherwise yields to its thread's other tasks at the ticks its gate asks it to
    /// ([`crate::PhaseGate::yields`]). The ticker ticks while the answer is held: for as long as
    /// the guest may run.
    pub(crate) fn arm_deadline<T: Deadline + 'static>(
        &self,
        store: &mut Store<T>,
        limits: Limits,
        yield_each_tick: bool,
    ) -> Option<Running<'_>> {
        let ticker = self.ticker()?;
        let running = ticker.call_starting(limits.timeout());
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |mut ctx| {
            let state = ctx.data_mut();
            let now = Instant::now();
            if now >= state.deadline() {
                state.time_out();
                return Err(Trap::Interrupt.into());
            }
            if !yield_each_tick {
                if gate::tick(state.preemption(), now, state.deadline()) == Resumed::Expired {
                    state.time_out();
                    return Err(Trap::Interrupt.into());
                }
                return Ok(UpdateDeadline::Continue(1));
            }
            // A yield that waits its turn behind the runtime's I/O: a plain wake-up would run
            // the call again at once, and a runtime that always has it to run looks at its
            // sockets only every few dozen polls (tokio's `event_interval`).
            Ok(match state.preempted(now) {
                Some(wait) => UpdateDeadline::YieldCustom(1, wait),
                None if state.yields(now) => {
                    UpdateDeadline::YieldCustom(1, Box::pin(tokio::task::yield_now()))
                }
                None => UpdateDeadline::Continue(1),
            })
        });
        Some(running)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RuntimeConfig;
    use std::time::Duration;

    fn runtime() -> (Runtime, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        (
            Runtime::new(RuntimeConfig::new(dir.path(), 2)).unwrap(),
            dir,
        )
    }

    fn call(
        rt: &Runtime,
        wat_src: &str,
        limits: Limits,
        input: &[u8],
    ) -> Result<Vec<u8>, CallError> {
        let f = rt.compile(&wat::parse_str(wat_src).unwrap()).unwrap();
        rt.call(&f, &Arc::from("test"), limits, input)
            .map(|o| o.body)
    }

    /// A mote ABI module whose handler body is `body`; memory has one page.
    fn abi(body: &str) -> String {
        format!(
            r#"(module (memory (export "memory") 1)
                (global $calls (mut i32) (i32.const 0))
                (func (export "mote_alloc") (param i32) (result i32) i32.const 1024)
                (func (export "mote_handle") (param i32 i32) (result i64) {body}))"#
        )
    }

    #[test]
    fn echoes_through_guest_memory() {
        let (rt, _d) = runtime();
        let echo = abi(
            "(i64.or (i64.shl (i64.extend_i32_u (local.get 0)) (i64.const 32)) (i64.extend_i32_u (local.get 1)))",
        );
        assert_eq!(
            call(&rt, &echo, Limits::default(), b"ping").unwrap(),
            b"ping"
        );
        assert_eq!(call(&rt, &echo, Limits::default(), b"").unwrap(), b"");
    }

    #[test]
    fn the_result_is_handed_over_before_teardown_with_the_entry_time() {
        // One instance slot: while the call's instance is alive, no other call can start.
        let dir = tempfile::tempdir().unwrap();
        let mut config = RuntimeConfig::new(dir.path(), 1);
        config.instance_slots = 1;
        config.microtask_slots = 0;
        config.proxy_slots = 0;
        let rt = Runtime::new(config).unwrap();
        let f = rt
            .compile(&wat::parse_str(abi("i64.const 0")).unwrap())
            .unwrap();
        let name = Arc::from("t");
        let before = Instant::now();
        let call = Call {
            function: &f,
            name: &name,
            limits: Limits::default(),
            started: before,
            input: b"",
        };
        let (entered, finished, second) = rt.call_then(call, None, |r, _log| {
            let second = rt.call(&f, &name, Limits::default(), b"");
            (r.unwrap().entered, Instant::now(), second)
        });
        assert!(before <= entered && entered <= finished);
        assert!(
            matches!(second, Err(CallError::Instantiate(_))),
            "the instance was already torn down when the result was handed over: {second:?}"
        );
        assert!(rt.call(&f, &name, Limits::default(), b"").is_ok());
    }

    /// A handler that folds 20 million numbers (tens of milliseconds) and returns the 8-byte
    /// result.
    const FOLD: &str = r#"(local $i i64) (local $acc i64)
        (local.set $acc (i64.const 1469598103934665603))
        (block $done (loop $l
          (br_if $done (i64.ge_u (local.get $i) (i64.const 20000000)))
          (local.set $acc (i64.mul (i64.xor (local.get $acc) (local.get $i)) (i64.const 1099511628211)))
          (local.set $i (i64.add (local.get $i) (i64.const 1)))
          (br $l)))
        (i64.store (i32.const 0) (local.get $acc))
        i64.const 8"#;

    /// Suspends the call (sleeps) at its first `suspensions` ticks, counting the ticks, and
    /// counts the waits it was told of, answering `answer` to both.
    struct SleepAtTicks {
        suspensions: u32,
        ticks: std::cell::Cell<u32>,
        waits: Arc<std::sync::atomic::AtomicU32>,
        answer: Resumed,
    }

    impl SleepAtTicks {
        fn new(suspensions: u32, answer: Resumed) -> Self {
            Self {
                suspensions,
                ticks: Default::default(),
                waits: Default::default(),
                answer,
            }
        }
    }

    impl crate::Preemption for SleepAtTicks {
        fn tick(&self, _now: Instant, _deadline: Instant) -> Resumed {
            let n = self.ticks.get();
            self.ticks.set(n + 1);
            if n < self.suspensions {
                std::thread::sleep(Duration::from_millis(5));
                return self.answer;
            }
            Resumed::Running
        }

        fn release_for_wait(&self) -> bool {
            true
        }

        fn wait_ended(&self, _deadline: Instant) -> Resumed {
            self.waits
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.answer
        }
    }

    /// Calls `f` with `input`, lending it `at` to preempt it; returns the answer and how many
    /// ticks `at` saw.
    fn preemptible(
        rt: &Runtime,
        f: &Function,
        input: &[u8],
        at: SleepAtTicks,
    ) -> (Result<Vec<u8>, CallError>, u32) {
        let call = Call {
            function: f,
            name: &Arc::from("t"),
            limits: Limits::default(),
            started: Instant::now(),
            input,
        };
        let answer = rt.call_then(call, Some(&at), |result, _log| result.map(|o| o.body));
        (answer, at.ticks.get())
    }

    #[test]
    fn a_call_suspended_at_its_ticks_returns_what_an_unsuspended_one_does() {
        let (rt, _d) = runtime();
        let f = rt.compile(&wat::parse_str(abi(FOLD)).unwrap()).unwrap();
        let plain = rt
            .call(&f, &Arc::from("t"), Limits::default(), b"")
            .unwrap()
            .body;
        let started = Instant::now();
        let (suspended, ticks) = preemptible(&rt, &f, b"", SleepAtTicks::new(4, Resumed::Running));
        assert_eq!(suspended.unwrap(), plain);
        assert!(ticks >= 4, "{ticks} ticks");
        assert!(
            started.elapsed() >= Duration::from_millis(20),
            "it was suspended 4 times"
        );
    }

    #[test]
    fn a_call_whose_budget_ends_while_suspended_is_stopped_for_it() {
        let (rt, _d) = runtime();
        let f = rt.compile(&wat::parse_str(abi(FOLD)).unwrap()).unwrap();
        let (err, _) = preemptible(&rt, &f, b"", SleepAtTicks::new(1, Resumed::Expired));
        assert!(matches!(err, Err(CallError::Timeout { .. })), "{err:?}");
    }

    /// A WASI command that sleeps 20 ms (`poll_oneoff` on one relative clock), then writes "ok",
    /// or "no" if the poll failed.
    const NAP: &str = r#"(module
        (import "wasi_snapshot_preview1" "poll_oneoff" (func $poll (param i32 i32 i32 i32) (result i32)))
        (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
        (memory (export "memory") 1)
        (data (i32.const 300) "ok")
        (func (export "_start")
          ;; subscription at 0: userdata 7, tag 0 (clock), clock id 1 (monotonic), 20 ms, relative
          (i64.store (i32.const 0) (i64.const 7))
          (i32.store8 (i32.const 8) (i32.const 0))
          (i32.store (i32.const 16) (i32.const 1))
          (i64.store (i32.const 24) (i64.const 20000000))
          (i64.store (i32.const 32) (i64.const 0))
          (i32.store16 (i32.const 40) (i32.const 0))
          (if (call $poll (i32.const 0) (i32.const 128) (i32.const 1) (i32.const 200))
            (then (i32.store16 (i32.const 300) (i32.const 0x6f6e)))) ;; "no": it failed
          (i32.store (i32.const 400) (i32.const 300))
          (i32.store (i32.const 404) (i32.const 2))
          (drop (call $fd_write (i32.const 1) (i32.const 400) (i32.const 1) (i32.const 408)))))"#;

    #[test]
    fn a_sleep_gives_the_core_up_and_asks_for_it_back() {
        let (rt, _d) = runtime();
        let f = rt.compile(&wat::parse_str(NAP).unwrap()).unwrap();
        let at = SleepAtTicks::new(0, Resumed::Running);
        let waits = at.waits.clone();
        let started = Instant::now();
        let (answer, _) = preemptible(&rt, &f, b"", at);
        assert_eq!(answer.unwrap(), b"ok");
        assert!(started.elapsed() >= Duration::from_millis(20), "it slept");
        assert_eq!(waits.load(std::sync::atomic::Ordering::Relaxed), 1);
        // Its budget ran out before it got a core back: it is stopped for it.
        let (err, _) = preemptible(&rt, &f, b"", SleepAtTicks::new(0, Resumed::Expired));
        assert!(matches!(err, Err(CallError::Timeout { .. })), "{err:?}");
        // On a thread whose calls nobody preempts, the sleep is just a sleep.
        let plain = rt
            .call(&f, &Arc::from("t"), Limits::default(), b"")
            .unwrap()
            .body;
        assert_eq!(plain, b"ok");
    }

    #[test]
    fn an_engine_without_epochs_runs_calls_and_no_ticker() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = RuntimeConfig::new(dir.path(), 1);
        config.epoch_interruption = false;
        let rt = Runtime::new(config).unwrap();
        assert!(rt.ticker().is_none());
        assert_eq!(
            call(&rt, &abi("i64.const 0"), Limits::default(), b"x").unwrap(),
            b""
        );
    }

    #[test]
    fn every_call_gets_a_fresh_instance() {
        // The handler bumps a global and a memory cell and reports both: with a fresh instance
        // per call they are 1 every time.
        let (rt, _d) = runtime();
        let counter = abi(
            r#"(global.set $calls (i32.add (global.get $calls) (i32.const 1)))
               (i32.store8 (i32.const 0) (i32.add (i32.load8_u (i32.const 0)) (i32.const 1)))
               (i32.store8 (i32.const 1) (global.get $calls))
               i64.const 2"#,
        );
        let f = rt.compile(&wat::parse_str(&counter).unwrap()).unwrap();
        for _ in 0..50 {
            let out = rt
                .call(&f, &Arc::from("c"), Limits::default(), b"")
                .unwrap()
                .body;
            assert_eq!(out, [1, 1]);
        }
    }

    #[test]
    fn initialize_runs_before_the_handler() {
        let (rt, _d) = runtime();
        let src = r#"(module (memory (export "memory") 1)
            (func (export "_initialize") (i32.store8 (i32.const 0) (i32.const 42)))
            (func (export "mote_alloc") (param i32) (result i32) i32.const 1024)
            (func (export "mote_handle") (param i32 i32) (result i64) i64.const 1))"#;
        assert_eq!(call(&rt, src, Limits::default(), b"").unwrap(), [42]);
    }

    #[test]
    fn timeouts_stop_loops_within_a_few_ticks() {
        let (rt, _d) = runtime();
        let spin = abi("(loop $l (br $l)) i64.const 0");
        let limits = Limits {
            timeout_us: 20_000,
            ..Limits::default()
        };
        // Compiled once, outside the timing: the overshoot is the deadline's, not the compiler's.
        let f = rt.compile(&wat::parse_str(&spin).unwrap()).unwrap();
        let mut overshoots: Vec<Duration> = (0..5)
            .map(|_| {
                let t = Instant::now();
                let err = rt.call(&f, &Arc::from("spin"), limits, b"").unwrap_err();
                assert!(
                    matches!(err, CallError::Timeout { timeout_us: 20_000 }),
                    "{err}"
                );
                t.elapsed().saturating_sub(Duration::from_millis(20))
            })
            .collect();
        overshoots.sort();
        // The ticker runs every 0.5 ms; allow for a loaded machine, but not for a missed deadline.
        assert!(
            overshoots[2] < Duration::from_millis(5),
            "median overshoot {:?}",
            overshoots[2]
        );
    }

    #[test]
    fn microsecond_budgets_switch_the_ticker_to_fine_ticks() {
        // Coarse ticks of a whole second: a 100 µs budget can only be enforced quickly if the
        // call switches the ticker to its fine period.
        let dir = tempfile::tempdir().unwrap();
        let mut config = RuntimeConfig::new(dir.path(), 1);
        config.epoch_tick = crate::TickerPeriods {
            coarse: Duration::from_secs(1),
            fine: Duration::from_micros(100),
        };
        let rt = Runtime::new(config).unwrap();
        let spin = abi("(loop $l (br $l)) i64.const 0");
        let limits = Limits {
            timeout_us: 100,
            ..Limits::default()
        };
        let f = rt.compile(&wat::parse_str(&spin).unwrap()).unwrap();
        for _ in 0..20 {
            let t = Instant::now();
            let err = rt.call(&f, &Arc::from("spin"), limits, b"").unwrap_err();
            assert!(
                matches!(err, CallError::Timeout { timeout_us: 100 }),
                "{err}"
            );
            assert!(
                t.elapsed() < Duration::from_millis(300),
                "{:?}",
                t.elapsed()
            );
        }
    }

    #[test]
    fn memory_limit_fails_growth_and_names_itself_on_trap() {
        let (rt, _d) = runtime();
        let limits = Limits {
            memory_mb: 2,
            ..Limits::default()
        };
        // One page plus 31 more is exactly 2 MiB; one more page fails.
        let grow = abi(
            "(drop (memory.grow (i32.const 31))) (i32.store (i32.const 0) (memory.grow (i32.const 1))) i64.const 4",
        );
        assert_eq!(
            call(&rt, &grow, limits, b"").unwrap(),
            (-1i32).to_le_bytes()
        );
        let bomb = abi(
            "(if (i32.lt_s (memory.grow (i32.const 64)) (i32.const 0)) (then unreachable)) i64.const 0",
        );
        let err = call(&rt, &bomb, limits, b"").unwrap_err();
        assert!(
            matches!(err, CallError::MemoryLimit { memory_mb: 2, .. }),
            "{err}"
        );
    }

    #[test]
    fn abi_violations_are_reported() {
        let (rt, _d) = runtime();
        let outside = abi("i64.const 0x0000fff000001000");
        let err = call(&rt, &outside, Limits::default(), b"").unwrap_err();
        assert!(matches!(err, CallError::Abi(_)), "{err}");
        let bad_alloc = r#"(module (memory (export "memory") 1)
            (func (export "mote_alloc") (param i32) (result i32) i32.const 65530)
            (func (export "mote_handle") (param i32 i32) (result i64) i64.const 0))"#;
        let err = call(&rt, bad_alloc, Limits::default(), b"0123456789").unwrap_err();
        assert!(
            err.to_string().contains("mote_alloc(10) returned 65530"),
            "{err}"
        );
    }

    /// A WASI command that reports the results of `probe` (an expression leaving an i32 errno or
    /// count) as one byte on stdout.
    fn wasi_probe(imports: &str, probe: &str) -> String {
        format!(
            r#"(module
                {imports}
                (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
                (memory (export "memory") 1)
                (func (export "_start")
                  (i32.store8 (i32.const 100) {probe})
                  (i32.store (i32.const 0) (i32.const 100))
                  (i32.store (i32.const 4) (i32.const 1))
                  (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))))"#
        )
    }

    #[test]
    fn wasi_guests_get_no_files_and_no_environment() {
        let (rt, _d) = runtime();
        // fd 3 would be the first preopened directory: there is none (EBADF = 8).
        let prestat = wasi_probe(
            r#"(import "wasi_snapshot_preview1" "fd_prestat_get" (func $prestat (param i32 i32) (result i32)))"#,
            "(call $prestat (i32.const 3) (i32.const 200))",
        );
        assert_eq!(call(&rt, &prestat, Limits::default(), b"").unwrap(), [8]);
        let environ = wasi_probe(
            r#"(import "wasi_snapshot_preview1" "environ_sizes_get" (func $sizes (param i32 i32) (result i32)))"#,
            "(block (result i32) (drop (call $sizes (i32.const 200) (i32.const 204))) (i32.load (i32.const 200)))",
        );
        assert_eq!(call(&rt, &environ, Limits::default(), b"").unwrap(), [0]);
    }

    #[test]
    fn wasi_commands_read_stdin_and_exit_codes_are_errors() {
        let (rt, _d) = runtime();
        let cat = r#"(module
            (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
            (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
            (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
            (memory (export "memory") 1)
            (func (export "_start")
              (i32.store (i32.const 0) (i32.const 100))
              (i32.store (i32.const 4) (i32.const 1000))
              (drop (call $fd_read (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 8)))
              (i32.store (i32.const 4) (i32.load (i32.const 8)))
              (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))
              (if (i32.eq (i32.load8_u (i32.const 100)) (i32.const 33)) (then (call $exit (i32.const 7))))))"#;
        assert_eq!(call(&rt, cat, Limits::default(), b"meow").unwrap(), b"meow");
        let err = call(&rt, cat, Limits::default(), b"!").unwrap_err();
        assert!(matches!(err, CallError::Exit { code: 7, .. }), "{err}");
    }
}
