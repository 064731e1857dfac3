//! `mote bench preempt`: a call that turns long where it was read, and short calls beside it.
//!
//! On `mote up --cores 1` (a real process), `turncoat` answers at once three times, so its
//! history says its calls are short, and its fourth call loops to its budget (4 s), on the reader
//! that read it. Meanwhile `hello` is called `calls` times, one after another, each timed from
//! its request to its whole answer. The same is measured on a node started with `--preempt off`
//! in the same round: the baseline, where the loop keeps the core until its budget ends. The
//! floor (issue 51): with preemption, `hello`'s p99 is at most 10 ms with a 2 ms quantum.

use crate::node_api::NodeApi;
use crate::results::cpu_model;
use crate::stats::median;
use anyhow::{Context, bail};
use mote_api::DeployParams;
use mote_testbed::{Launch, Served};
use serde::Serialize;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

/// The floor on `hello`'s p99 beside the loop, with preemption.
pub const P99_FLOOR: Duration = Duration::from_millis(10);

/// What to run.
#[derive(Clone, Debug)]
pub struct PreemptBenchConfig {
    /// The `mote` binary whose `mote up` is measured.
    pub mote: PathBuf,
    /// Calls of `hello` beside each loop.
    pub calls: usize,
    /// Rounds, each measuring both settings.
    pub rounds: usize,
    /// The loop's budget.
    pub budget: Duration,
    /// The command line, for the report.
    pub command: String,
}

/// One setting's calls in one round.
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    /// `on` or `off`.
    pub preempt: &'static str,
    /// Each call's response time, in µs, in the order sent.
    pub response_us: Vec<u64>,
    /// Their median, 99th percentile and slowest, in µs.
    pub p50_us: u64,
    /// The 99th percentile.
    pub p99_us: u64,
    /// The slowest.
    pub max_us: u64,
    /// Preemptions the node counted while the calls ran.
    pub preemptions: u64,
}

/// What the benchmark measured.
#[derive(Clone, Debug, Serialize)]
pub struct PreemptReport {
    /// The command that ran it.
    pub command: String,
    /// The CPU it ran on.
    pub machine: String,
    /// When (UTC).
    pub date: String,
    /// Calls of `hello` beside each long call.
    pub calls: usize,
    /// The long call's budget.
    pub budget_ms: u64,
    /// Every setting of every round, in the order run.
    pub runs: Vec<Run>,
    /// The median over the rounds of `hello`'s p99 with preemption.
    pub p99_on_us: f64,
    /// The same without.
    pub p99_off_us: f64,
    /// Whether every round's p99 with preemption is within the floor.
    pub floor_met: bool,
}

/// Runs the benchmark, writes `results.json` and `report.md` to `out`.
pub fn run(config: &PreemptBenchConfig, out: &std::path::Path) -> anyhow::Result<PreemptReport> {
    let mut runs = Vec::new();
    for round in 0..config.rounds {
        // Alternate which setting goes first, so that drift in the machine's speed hits both.
        let order = match round % 2 {
            0 => ["on", "off"],
            _ => ["off", "on"],
        };
        for preempt in order {
            let dir = out.join(format!("round-{round}-{preempt}"));
            runs.push(measure(config, preempt, &dir)?);
        }
    }
    let p99 = |setting: &str| {
        let values: Vec<f64> = runs
            .iter()
            .filter(|r| r.preempt == setting)
            .map(|r| r.p99_us as f64)
            .collect();
        median(&values).unwrap_or(f64::NAN)
    };
    let floor_met = runs
        .iter()
        .filter(|r| r.preempt == "on")
        .all(|r| r.p99_us <= P99_FLOOR.as_micros() as u64);
    let report = PreemptReport {
        command: config.command.clone(),
        machine: cpu_model(),
        date: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
        calls: config.calls,
        budget_ms: config.budget.as_millis() as u64,
        p99_on_us: p99("on"),
        p99_off_us: p99("off"),
        floor_met,
        runs,
    };
    crate::results::write_report(out, &report, PreemptReport::table)?;
    Ok(report)
}

/// One setting: a fresh node, `turncoat` taught it is short, then its long call and `hello`'s.
fn measure(
    config: &PreemptBenchConfig,
    preempt: &'static str,
    dir: &std::path::Path,
) -> anyhow::Result<Run> {
    std::fs::create_dir_all(dir)?;
    let server = Launch::mote_up(&config.mote, &dir.join("mote.data"))
        .args(["--cores", "1", "--preempt", preempt])
        .log(dir.join("mote.log"))
        .start()?;
    let api = NodeApi::new(server.url())?;
    let budget = DeployParams {
        timeout_ms: Some(config.budget.as_millis() as u64),
        ..DeployParams::default()
    };
    api.deploy("hello", mote_guests::HELLO.wasm, &DeployParams::default())
        .context("deploying hello")?;
    api.deploy("turncoat", &TURNCOAT, &budget)
        .context("deploying turncoat")?;
    let agent = crate::http::agent();
    let call = |name: &str, body: &'static [u8]| -> anyhow::Result<u16> {
        let url = format!("{}/v1/invoke/{name}", server.url());
        Ok(agent.post(&url).send(body)?.status().as_u16())
    };
    for _ in 0..3 {
        expect(call("turncoat", b"")?, 200, "a short call of turncoat")?;
        expect(call("hello", b"x")?, 200, "hello")?;
    }
    let before = preemptions(&server, &agent)?;
    let (long, response_us) = std::thread::scope(|s| -> anyhow::Result<_> {
        let long = s.spawn(|| call("turncoat", b"now long"));
        wait_busy(&server, &agent)?;
        let mut response_us = Vec::with_capacity(config.calls);
        for _ in 0..config.calls {
            let asked = Instant::now();
            expect(call("hello", b"x")?, 200, "hello")?;
            response_us.push(asked.elapsed().as_micros() as u64);
        }
        let long = long
            .join()
            .map_err(|_| anyhow::anyhow!("the long call's thread panicked"))?;
        Ok((long?, response_us))
    })?;
    expect(long, 504, "the long call of turncoat (to its budget)")?;
    let preemptions = preemptions(&server, &agent)? - before;
    let mut sorted = response_us.clone();
    sorted.sort_unstable();
    let at =
        |q: f64| sorted[((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1];
    Ok(Run {
        preempt,
        p50_us: at(0.5),
        p99_us: at(0.99),
        max_us: *sorted.last().unwrap_or(&0),
        response_us,
        preemptions,
    })
}

fn expect(status: u16, want: u16, what: &str) -> anyhow::Result<()> {
    if status != want {
        bail!("{what} answered {status}, not {want}");
    }
    Ok(())
}

/// Answers at once while its request body is empty; with a body, loops until its budget.
static TURNCOAT: std::sync::LazyLock<Vec<u8>> = std::sync::LazyLock::new(|| {
    wat::parse_str(
        r#"(module (memory (export "memory") 1)
            (func (export "mote_alloc") (param i32) (result i32) i32.const 1024)
            (func (export "mote_handle") (param i32 i32) (result i64)
              (if (local.get 1) (then (loop $l (br $l)))) i64.const 0))"#,
    )
    .expect("turncoat's WAT parses")
});

/// A metric's value from the node's `/metrics`.
fn metric(server: &Served, agent: &ureq::Agent, name: &str) -> anyhow::Result<u64> {
    let text = agent
        .get(format!("{}/metrics", server.url()))
        .call()?
        .body_mut()
        .read_to_string()?;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .with_context(|| format!("no {name} in the node's metrics"))
}

fn preemptions(server: &Served, agent: &ureq::Agent) -> anyhow::Result<u64> {
    metric(server, agent, "mote_preemptions_total")
}

/// Waits until the long call holds the core.
fn wait_busy(server: &Served, agent: &ureq::Agent) -> anyhow::Result<()> {
    let until = Instant::now() + Duration::from_secs(10);
    while metric(server, agent, "mote_executors_busy")? == 0 {
        if Instant::now() > until {
            bail!("the long call did not start within 10 s");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(())
}

impl PreemptReport {
    /// The report for humans.
    pub fn table(&self) -> String {
        let mut out = format!(
            "# A call that turns long where it was read, and {calls} short calls beside it\n\n\
             `{command}` on {machine}, {date}. `mote up --cores 1`; `turncoat` ran short three \
             times, then loops to its {budget} ms budget on the reader that read it; `hello` is \
             called {calls} times, one after another, meanwhile. The same on a node started with \
             `--preempt off`, in the same round.\n\n\
             | round | preempt | p50 | p99 | max | preemptions |\n|---|---|---|---|---|---|\n",
            calls = self.calls,
            command = self.command,
            machine = self.machine,
            date = self.date,
            budget = self.budget_ms,
        );
        for (i, run) in self.runs.iter().enumerate() {
            out += &format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                i / 2 + 1,
                run.preempt,
                us(run.p50_us as f64),
                us(run.p99_us as f64),
                us(run.max_us as f64),
                run.preemptions
            );
        }
        out += &format!(
            "\nMedian p99: {} with preemption, {} without ({:.0}x). Floor (p99 at most {} ms with \
             preemption, every round): {}.\n",
            us(self.p99_on_us),
            us(self.p99_off_us),
            self.p99_off_us / self.p99_on_us,
            P99_FLOOR.as_millis(),
            match self.floor_met {
                true => "met",
                false => "NOT met",
            }
        );
        out
    }
}

fn us(v: f64) -> String {
    match v {
        v if v >= 1e6 => format!("{:.2} s", v / 1e6),
        v if v >= 1e3 => format!("{:.2} ms", v / 1e3),
        v => format!("{v:.0} µs"),
    }
}
