//! The microsecond benchmark: the language-isolation paper's Table 1 (warm and cold invocation
//! latency, throughput) and Figure 2 (throughput against the preemption quantum), with an
//! in-tree process-isolation baseline measured side by side in the same run.
//!
//! - Warm: a synchronous dispatcher thread, confined to run guest code as the node's own
//!   threads are, calls `functions` resident no-op functions at random through a node with one
//!   core ([`Node::invoke_on`]: the call runs on the dispatcher's thread when the core is free
//!   and nothing waits, as a call runs on the thread that read it); latency runs from the
//!   dispatcher's clock reading before it makes the call to the moment the guest's entry point
//!   is called (a fresh instance each time), and separately until the reply is back. As in the
//!   paper's benchmark, the dispatcher sends a call when the core is free (its previous
//!   instance torn down). The same loop without that wait (back to back: each call made as soon
//!   as the previous reply is in) is measured beside it, and so are the
//!   Fair-Choice policy's ranked queue (a heap behind a mutex, against the lock-free queue of
//!   arrival order) and the runtime alone (instance and call on the caller's thread, no
//!   dispatch).
//! - Throughput: the same dispatcher's calls, one after another, on the one core.
//! - Cold: `cold_functions` distinct functions are deployed under a resident budget that holds
//!   few of them; calls in least-recently-called order each load their compiled artefact (mmap),
//!   link, queue and instantiate. Only calls the node reports as cold are counted. The same
//!   artefacts are then loaded by a runtime alone in the process, to show what the other core's
//!   running thread costs a load (each change of memory permissions interrupts it).
//! - Process baseline: each function is a resident process woken over a pipe (warm), or a process
//!   started with fork/exec for one request (cold), running the same no-op.
//! - Budgets: a guest that never returns, with a 100 µs budget, until the node stops it.
//! - Preemption: the `sha512` guest's throughput with the epoch ticker at each quantum, against
//!   an engine that compiles no epoch checks at all.
//!
//! The report's table for humans, beside the paper's figures, is `table`'s.

mod table;

use crate::call_path::Latency;
use crate::stats::median;
use bytes::Bytes;
use hdrhistogram::Histogram;
use mote_confine::{Filter, Role};
use mote_node::{Caller, ExecutorsConfig, Node, NodeConfig, PreemptConfig};
use mote_runtime::{CallError, Runtime, RuntimeConfig, TickerPeriods};
use mote_sched::Policy;
use mote_testbed::KilledOnDrop;
use mote_types::{FunctionName, Limits};
use serde::Serialize;
use std::io::{Read, Write};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the dispatcher polls for a reply before it blocks.
const REPLY_SPIN: Duration = Duration::from_millis(1);

/// What to run.
#[derive(Clone, Debug)]
pub struct MicroConfig {
    /// Warm calls measured (each of mote and the runtime alone).
    pub warm_calls: u64,
    /// Resident functions the warm calls pick from at random (the paper preloads 200).
    pub functions: usize,
    /// Functions deployed for the cold-start run.
    pub cold_functions: usize,
    /// Cold calls measured.
    pub cold_calls: usize,
    /// Warm calls of the process baseline.
    pub process_calls: u64,
    /// Resident processes of the process baseline.
    pub processes: usize,
    /// Processes started with fork/exec for the cold baseline.
    pub process_cold_calls: usize,
    /// Runaway calls stopped by a 100 µs budget.
    pub budget_runs: u32,
    /// Ticker quanta of the preemption run, in microseconds.
    pub quanta_us: Vec<u64>,
    /// SHA-512 rounds per call in the preemption run.
    pub sha_rounds: u64,
    /// Calls per quantum (and for the engine without epochs) in each of `sha_repeats` rounds.
    pub sha_calls: u32,
    /// Rounds of the preemption run; configurations alternate within a round, so drift in the
    /// machine's speed hits them all alike, and the median over the rounds is reported.
    pub sha_repeats: u32,
    /// The program and arguments that run [`process_worker`] (the `mote` binary's hidden
    /// `bench process-worker` command); `--once` is appended for the cold baseline.
    pub worker: Vec<String>,
    /// Whether the Fair-Choice node preempts (`mote up`'s default), so its calls pay whatever
    /// preemption costs a call that ends within its quantum.
    pub preempt: bool,
}

impl MicroConfig {
    /// The full run (a few minutes on two cores).
    pub fn full(worker: Vec<String>) -> Self {
        Self {
            warm_calls: 200_000,
            functions: 200,
            cold_functions: 5_000,
            cold_calls: 2_000,
            process_calls: 20_000,
            processes: 200,
            process_cold_calls: 200,
            budget_runs: 2_000,
            quanta_us: vec![3, 5, 10, 20, 50, 100],
            sha_rounds: 2_000,
            sha_calls: 20,
            sha_repeats: 5,
            worker,
            preempt: true,
        }
    }

    /// A short run that exercises every part (for the test command).
    pub fn smoke(worker: Vec<String>) -> Self {
        Self {
            warm_calls: 5_000,
            functions: 20,
            cold_functions: 200,
            cold_calls: 100,
            process_calls: 1_000,
            processes: 4,
            process_cold_calls: 5,
            budget_runs: 100,
            quanta_us: vec![20, 100],
            sha_rounds: 500,
            sha_calls: 5,
            sha_repeats: 1,
            worker,
            preempt: true,
        }
    }
}

/// One point of the preemption run.
#[derive(Clone, Debug, Serialize)]
pub struct QuantumPoint {
    /// The ticker's period.
    pub quantum_us: u64,
    /// SHA-512 blocks hashed per second (median over the rounds).
    pub hashes_per_s: f64,
    /// `hashes_per_s` over the engine without epoch checks.
    pub ratio: f64,
}

/// The results: the flat fields the issue names, then the distributions behind them.
#[derive(Clone, Debug, Serialize)]
pub struct MicroReport {
    /// Warm call to a free executor, dispatcher to guest start, median.
    pub warm_p50_us: f64,
    /// Warm call to a free executor, dispatcher to guest start, 99th percentile.
    pub warm_p99_us: f64,
    /// Warm calls completed per second by one executor core.
    pub warm_calls_per_s_per_core: f64,
    /// Cold call (artefact not resident), dispatcher to guest start, median.
    pub cold_p50_us: f64,
    /// Process baseline, warm round trip over a pipe, median.
    pub process_warm_p50_us: f64,
    /// Process baseline, fork/exec to response, median.
    pub process_cold_p50_us: f64,
    /// Time from a runaway call's start until it was stopped, 100 µs budget, 99th percentile.
    pub budget_kill_p99_us: f64,
    /// SHA-512 throughput at a 20 µs quantum over the engine without epoch checks.
    pub epoch_throughput_ratio_20us: Option<f64>,
    /// `process_warm_p50_us / warm_p50_us`.
    pub process_to_warm_ratio: f64,
    /// The machine: CPU model and cores.
    pub machine: String,
    /// Warm, dispatcher to guest start, each call sent to a free executor.
    pub warm_start: Latency,
    /// Warm, dispatcher to guest start, each call sent as soon as the previous reply is in.
    pub warm_back_to_back: Latency,
    /// Warm, dispatcher to guest start, to a free executor, under the Fair-Choice policy
    /// (`mote up`'s default), whose ranked queue is a heap behind a mutex.
    pub warm_fair_choice: Latency,
    /// Whether the Fair-Choice node preempted.
    pub preempt: bool,
    /// Warm, dispatcher until the reply is back.
    pub warm_round_trip: Latency,
    /// Baseline without dispatch: the runtime alone on the caller's thread, call start to guest
    /// start.
    pub runtime_only_start: Latency,
    /// Runtime alone: calls per second on one thread, teardown included.
    pub runtime_only_calls_per_s: f64,
    /// Cold, dispatcher to guest start.
    pub cold_start: Latency,
    /// Cold: loading the artefact alone (mmap and link).
    pub cold_load: Latency,
    /// Loading the same artefacts with no other thread of the process running.
    pub cold_load_alone: Latency,
    /// Functions deployed during the cold run.
    pub cold_functions: usize,
    /// Process baseline, warm round trip.
    pub process_warm: Latency,
    /// Process baseline, fork/exec to response.
    pub process_cold: Latency,
    /// Runaway calls: start to stop.
    pub budget_kill: Latency,
    /// The preemption run.
    pub quanta: Vec<QuantumPoint>,
    /// SHA-512 blocks per second on the engine without epoch checks.
    pub no_epoch_hashes_per_s: f64,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram bounds")
}

fn ns(d: Duration) -> u64 {
    d.as_nanos().try_into().unwrap_or(u64::MAX)
}

/// A module that does nothing, distinct per `i` (so every function is its own module).
fn noop_wat(i: usize) -> String {
    format!(
        r#"(module (memory (export "memory") 1) (global i32 (i32.const {i}))
        (func (export "mote_alloc") (param i32) (result i32) i32.const 0)
        (func (export "mote_handle") (param i32 i32) (result i64) i64.const 0))"#
    )
}

const RUNAWAY: &str = r#"(module (memory (export "memory") 1)
    (func (export "mote_alloc") (param i32) (result i32) i32.const 0)
    (func (export "mote_handle") (param i32 i32) (result i64) (loop $l (br $l)) i64.const 0))"#;

/// A cheap random index (xorshift), so picking a function costs nothing measurable.
struct Pick(u64);

impl Pick {
    fn next(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

async fn deploy_noops(node: &Node, n: usize, prefix: &str) -> anyhow::Result<Vec<String>> {
    let mut names = Vec::with_capacity(n);
    for i in 0..n {
        let name = format!("{prefix}-{i}");
        let wasm = Bytes::from(wat::parse_str(noop_wat(i))?);
        node.deploy(FunctionName::new(&name)?, wasm, Limits::default())
            .await?;
        names.push(name);
    }
    Ok(names)
}

/// Runs the benchmark.
pub fn run(config: &MicroConfig) -> anyhow::Result<MicroReport> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let dir = tempfile::tempdir()?;

    // Warm, throughput and budgets: one core; the dispatcher is a confined thread. Arrival
    // order (the lock-free queue), named because the library's default is Fair-Choice, which
    // `warm_fair_choice` measures beside it.
    let executors = ExecutorsConfig {
        policy: Policy::Fifo,
        quarantine_after: 0,
        ..ExecutorsConfig::new(1)
    };
    let node = rt.block_on(Node::start_embedded(&dir.path().join("warm"), executors))?;
    let names = rt.block_on(deploy_noops(&node, config.functions, "noop"))?;
    let ((warm_start, warm_round_trip), (warm_back_to_back, _), warm_calls_per_s) =
        on_confined_thread(&node, |caller| {
            Ok((
                warm(&node, caller, &names, config.warm_calls, Dispatch::ToFree)?,
                warm(
                    &node,
                    caller,
                    &names,
                    config.warm_calls,
                    Dispatch::BackToBack,
                )?,
                throughput(&node, caller, &names, config.warm_calls)?,
            ))
        })?;
    let budget_kill = budget_kills(&rt, &node, config.budget_runs)?;
    drop(node);

    let ranked = ExecutorsConfig {
        policy: Policy::Fc,
        preempt: config.preempt.then(PreemptConfig::default),
        ..ExecutorsConfig::new(1)
    };
    let node = rt.block_on(Node::start_embedded(&dir.path().join("ranked"), ranked))?;
    let names = rt.block_on(deploy_noops(&node, config.functions, "noop"))?;
    let (warm_fair_choice, _) = on_confined_thread(&node, |caller| {
        warm(&node, caller, &names, config.warm_calls, Dispatch::ToFree)
    })?;
    drop(node);

    let (runtime_only_start, runtime_only_calls_per_s) =
        runtime_only(&dir.path().join("runtime-only"), config.warm_calls)?;
    let (cold_start, cold_load, cold_load_alone) = cold(&rt, &dir.path().join("cold"), config)?;
    let process_warm = process_warm(config)?;
    let process_cold = process_cold(config)?;
    let (quanta, no_epoch_hashes_per_s) = preemption(&dir.path().join("sha"), config)?;

    let (warm_start, warm_round_trip) = (Latency::of(&warm_start), Latency::of(&warm_round_trip));
    let process_warm = Latency::of(&process_warm);
    Ok(MicroReport {
        warm_p50_us: warm_start.p50_us,
        warm_p99_us: warm_start.p99_us,
        warm_calls_per_s_per_core: warm_calls_per_s,
        cold_p50_us: Latency::of(&cold_start).p50_us,
        process_warm_p50_us: process_warm.p50_us,
        process_cold_p50_us: Latency::of(&process_cold).p50_us,
        budget_kill_p99_us: Latency::of(&budget_kill).p99_us,
        epoch_throughput_ratio_20us: quanta.iter().find(|q| q.quantum_us == 20).map(|q| q.ratio),
        process_to_warm_ratio: process_warm.p50_us / warm_start.p50_us,
        machine: machine(),
        warm_start,
        warm_round_trip,
        warm_back_to_back: Latency::of(&warm_back_to_back),
        warm_fair_choice: Latency::of(&warm_fair_choice),
        preempt: config.preempt,
        runtime_only_start: Latency::of(&runtime_only_start),
        runtime_only_calls_per_s,
        cold_start: Latency::of(&cold_start),
        cold_load: Latency::of(&cold_load),
        cold_load_alone: Latency::of(&cold_load_alone),
        cold_functions: config.cold_functions,
        process_warm,
        process_cold: Latency::of(&process_cold),
        budget_kill: Latency::of(&budget_kill),
        quanta,
        no_epoch_hashes_per_s,
    })
}

/// When the warm dispatcher sends its next call.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Dispatch {
    /// Once the executor is free, as the paper's dispatcher does.
    ToFree,
    /// As soon as the previous reply is in.
    BackToBack,
}

/// Runs `dispatch` on a thread of its own, confined to run guest code, so that the calls it
/// makes may run on it.
fn on_confined_thread<T: Send>(
    node: &Node,
    dispatch: impl FnOnce(&Caller) -> anyhow::Result<T> + Send,
) -> anyhow::Result<T> {
    let filter = Filter::new(Role::Guest)?;
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                filter.confine_this_thread()?;
                dispatch(&node.caller()?)
            })
            .join()
            .map_err(|_| anyhow::anyhow!("the dispatcher's thread panicked"))?
    })
}

/// Sequential warm calls at random over `names` by `caller`: dispatcher to guest start, and
/// round trip.
fn warm(
    node: &Node,
    caller: &Caller,
    names: &[String],
    calls: u64,
    dispatch: Dispatch,
) -> anyhow::Result<(Histogram<u64>, Histogram<u64>)> {
    let mut pick = Pick(0x9e37_79b9_7f4a_7c15);
    let (mut start, mut round_trip) = (histogram(), histogram());
    for i in 0..calls + calls / 10 {
        let name = &names[pick.next(names.len())];
        if dispatch == Dispatch::ToFree {
            while node.busy_executors() >= node.cores() {
                std::hint::spin_loop();
            }
        }
        let t = Instant::now();
        let reply = node.invoke_on(caller, name, Bytes::new(), REPLY_SPIN)?;
        let back = t.elapsed();
        reply.result?;
        anyhow::ensure!(reply.cold_start.is_none(), "`{name}` was not resident");
        let entered = reply
            .entered
            .expect("a call that succeeded entered its guest");
        // The first tenth warms caches and the ticker; it is not recorded.
        if i >= calls / 10 {
            start.saturating_record(ns(entered.saturating_duration_since(t)));
            round_trip.saturating_record(ns(back));
        }
    }
    Ok((start, round_trip))
}

/// Calls per second of the one core, made one after another by `caller`.
fn throughput(node: &Node, caller: &Caller, names: &[String], calls: u64) -> anyhow::Result<f64> {
    let mut pick = Pick(0x2545_f491_4f6c_dd1d);
    let started = Instant::now();
    for _ in 0..calls {
        let name = &names[pick.next(names.len())];
        node.invoke_on(caller, name, Bytes::new(), REPLY_SPIN)?
            .result?;
    }
    Ok(calls as f64 / started.elapsed().as_secs_f64())
}

/// Runaway calls under a 100 µs budget: time from the call's start on its core to its stop.
fn budget_kills(
    rt: &tokio::runtime::Runtime,
    node: &Node,
    runs: u32,
) -> anyhow::Result<Histogram<u64>> {
    let limits = Limits {
        timeout_us: 100,
        ..Limits::default()
    };
    rt.block_on(node.deploy(
        FunctionName::new("runaway")?,
        Bytes::from(wat::parse_str(RUNAWAY)?),
        limits,
    ))?;
    let mut h = histogram();
    for i in 0..runs + runs / 10 {
        // The dispatcher blocks rather than polls for these replies: on two cores a polling
        // dispatcher and the running guest would leave the ticker thread no core to tick on.
        let reply = node.invoke_blocking("runaway", Bytes::new(), Duration::ZERO)?;
        anyhow::ensure!(
            matches!(
                reply.result,
                Err(mote_node::InvokeError::Call(CallError::Timeout { .. }))
            ),
            "the runaway call was not stopped by its budget: {:?}",
            reply.result
        );
        if i >= runs / 10 {
            h.saturating_record(ns(reply.processing));
        }
    }
    Ok(h)
}

/// The baseline without dispatch: instance and call on this thread.
fn runtime_only(dir: &std::path::Path, calls: u64) -> anyhow::Result<(Histogram<u64>, f64)> {
    let runtime = Runtime::new(RuntimeConfig::new(dir, 1))?;
    let function = runtime.compile(&wat::parse_str(noop_wat(0))?)?;
    let name: Arc<str> = Arc::from("noop");
    let mut h = histogram();
    for _ in 0..calls / 10 {
        runtime.call(&function, &name, Limits::default(), b"")?;
    }
    let started = Instant::now();
    for _ in 0..calls {
        let t = Instant::now();
        let out = runtime.call(&function, &name, Limits::default(), b"")?;
        h.saturating_record(ns(out.entered.saturating_duration_since(t)));
    }
    Ok((h, calls as f64 / started.elapsed().as_secs_f64()))
}

/// Cold starts among `cold_functions` deployed functions under a budget that holds few.
///
/// Then the same artefacts are loaded again by a runtime alone in the process, with no executor
/// polling on the other core: loading changes memory permissions, and each change must
/// interrupt every core running a thread of the process, so this shows what that costs.
fn cold(
    rt: &tokio::runtime::Runtime,
    dir: &std::path::Path,
    config: &MicroConfig,
) -> anyhow::Result<(Histogram<u64>, Histogram<u64>, Histogram<u64>)> {
    let node_config = NodeConfig {
        resident_mb: 1,
        ..ExecutorsConfig {
            policy: Policy::Fifo,
            ..ExecutorsConfig::new(1)
        }
        .into()
    };
    let node = rt.block_on(Node::start_embedded(dir, node_config))?;
    let names = rt.block_on(deploy_noops(&node, config.cold_functions, "cold"))?;
    let (mut start, mut load) = (histogram(), histogram());
    // Calling in deploy order makes each call's function the least recently used, which the
    // 1 MiB budget evicted long ago.
    let mut i = 0;
    let mut attempts = 0;
    while (start.len() as usize) < config.cold_calls {
        attempts += 1;
        anyhow::ensure!(
            attempts <= 2 * config.cold_calls,
            "fewer than half the calls were cold; is the resident budget too large?"
        );
        let name = &names[i % names.len()];
        i += 1;
        let t = Instant::now();
        let reply = node.invoke_blocking(name, Bytes::new(), REPLY_SPIN)?;
        reply.result?;
        if let (Some(loading), Some(entered)) = (reply.cold_start, reply.entered) {
            start.saturating_record(ns(entered.saturating_duration_since(t)));
            load.saturating_record(ns(loading));
        }
    }
    let shas = names[..i.min(names.len())]
        .iter()
        .map(|name| node.get(name).map(|f| f.sha256))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| anyhow::anyhow!("a cold function disappeared"))?;
    drop(node);
    let runtime = Runtime::new(RuntimeConfig::new(dir.join("artifacts"), 1))?;
    let mut alone = histogram();
    for sha in &shas {
        let t = Instant::now();
        let code = runtime.load(sha, || {
            Err(std::io::Error::other("the benchmark keeps every artefact"))
        })?;
        alone.saturating_record(ns(t.elapsed()));
        drop(code);
    }
    Ok((start, load, alone))
}

/// A resident worker process of the process baseline.
struct Worker {
    child: KilledOnDrop,
    stdin: ChildStdin,
    stdout: ChildStdout,
}

impl Worker {
    fn spawn(config: &MicroConfig, once: bool) -> anyhow::Result<Self> {
        let (program, args) = config
            .worker
            .split_first()
            .ok_or_else(|| anyhow::anyhow!("no worker command for the process baseline"))?;
        let mut command = Command::new(program);
        command.args(args);
        if once {
            command.arg("--once");
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        Ok(Self {
            child: KilledOnDrop::new(child),
            stdin,
            stdout,
        })
    }

    /// Sends an empty request and reads the (empty) response.
    fn call(&mut self) -> anyhow::Result<()> {
        self.stdin.write_all(&0u32.to_le_bytes())?;
        let mut len = [0u8; 4];
        self.stdout.read_exact(&mut len)?;
        anyhow::ensure!(u32::from_le_bytes(len) == 0, "the worker answered garbage");
        Ok(())
    }
}

/// The process baseline, warm: `processes` resident processes, each woken over a pipe.
fn process_warm(config: &MicroConfig) -> anyhow::Result<Histogram<u64>> {
    let mut workers = (0..config.processes)
        .map(|_| Worker::spawn(config, false))
        .collect::<anyhow::Result<Vec<_>>>()?;
    for w in &mut workers {
        w.call()?;
    }
    let mut pick = Pick(0x1234_5678_9abc_def1);
    let mut h = histogram();
    for i in 0..config.process_calls + config.process_calls / 10 {
        let n = workers.len();
        let worker = &mut workers[pick.next(n)];
        let t = Instant::now();
        worker.call()?;
        if i >= config.process_calls / 10 {
            h.saturating_record(ns(t.elapsed()));
        }
    }
    Ok(h)
}

/// The process baseline, cold: fork/exec a process for one request, until its response.
fn process_cold(config: &MicroConfig) -> anyhow::Result<Histogram<u64>> {
    let mut h = histogram();
    for _ in 0..config.process_cold_calls {
        let t = Instant::now();
        let mut worker = Worker::spawn(config, true)?;
        worker.call()?;
        h.saturating_record(ns(t.elapsed()));
        worker.child.wait()?;
    }
    Ok(h)
}

/// The worker of the process baseline: answers length-prefixed requests on stdin with the
/// no-op's (empty) response on stdout; with `once`, answers one and exits.
pub fn process_worker(once: bool) -> std::io::Result<()> {
    let (mut stdin, mut stdout) = (std::io::stdin().lock(), std::io::stdout().lock());
    let mut len = [0u8; 4];
    let mut body = Vec::new();
    loop {
        match stdin.read_exact(&mut len) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        }
        body.resize(u32::from_le_bytes(len) as usize, 0);
        stdin.read_exact(&mut body)?;
        stdout.write_all(&0u32.to_le_bytes())?;
        stdout.flush()?;
        if once {
            return Ok(());
        }
    }
}

/// SHA-512 throughput at each quantum, against an engine without epoch checks. Configurations
/// alternate within each round; the median over the rounds of each is reported.
fn preemption(
    dir: &std::path::Path,
    config: &MicroConfig,
) -> anyhow::Result<(Vec<QuantumPoint>, f64)> {
    let input = format!("n={}", config.sha_rounds);
    let mut setups = vec![(None, {
        let mut c = RuntimeConfig::new(dir.join("none"), 1);
        c.epoch_interruption = false;
        c
    })];
    for &q in &config.quanta_us {
        let mut c = RuntimeConfig::new(dir.join(format!("q{q}")), 1);
        let period = Duration::from_micros(q);
        c.epoch_tick = TickerPeriods {
            coarse: period,
            fine: period,
        };
        setups.push((Some(q), c));
    }
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); setups.len()];
    let name: Arc<str> = Arc::from("sha512");
    for _ in 0..config.sha_repeats.max(1) {
        for (i, (_, runtime_config)) in setups.iter().enumerate() {
            // One runtime (and ticker) at a time, so a spinning ticker never competes with
            // another configuration's.
            let runtime = Runtime::new(runtime_config.clone())?;
            let function = runtime.compile(mote_guests::SHA512.wasm)?;
            // Kept, so the next rounds map it instead of compiling: a compile keeps both cores
            // busy for a second, and the rounds right after it measured up to a third slower.
            runtime.keep(&function)?;
            runtime.call(&function, &name, Limits::default(), input.as_bytes())?;
            let started = Instant::now();
            for _ in 0..config.sha_calls {
                let out = runtime.call(&function, &name, Limits::default(), input.as_bytes())?;
                anyhow::ensure!(out.body.len() == 128, "sha512 returned a bad digest");
            }
            let hashes = f64::from(config.sha_calls) * config.sha_rounds as f64;
            rates[i].push(hashes / started.elapsed().as_secs_f64());
        }
    }
    let no_round = || anyhow::anyhow!("the preemption run measured no round");
    let baseline = median(&rates[0]).ok_or_else(no_round)?;
    let mut points = Vec::new();
    for ((quantum, _), rounds) in setups.iter().zip(&rates) {
        let Some(quantum_us) = *quantum else {
            continue;
        };
        let hashes_per_s = median(rounds).ok_or_else(no_round)?;
        points.push(QuantumPoint {
            quantum_us,
            hashes_per_s,
            ratio: hashes_per_s / baseline,
        });
    }
    Ok((points, baseline))
}

/// The CPU and how many cores this process may run on.
fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{}, {cores} cores", crate::results::cpu_model())
}
