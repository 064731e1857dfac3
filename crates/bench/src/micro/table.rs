//! The microsecond benchmark's report as a table for humans, beside the paper's reference
//! figures.

use super::MicroReport;
use crate::call_path::Latency;

/// The paper's reference figures, measured on this machine with its own code
/// (efficient/microservices_microbenchmarks): the issue gives them.
const PAPER: [(&str, &str); 4] = [
    ("warm, 200 preloaded libraries, no isolation", "0.18 / 0.99"),
    ("warm, process woken over a pipe", "13"),
    ("cold, dlopen", "62"),
    ("cold, fork/exec", "7,900"),
];

impl MicroReport {
    /// A table for humans.
    pub fn table(&self) -> String {
        let row = |name: &str, d: &Latency| {
            format!(
                "{name:<52} {:>9.2} {:>9.2} {:>9.2} {:>8}\n",
                d.p50_us, d.p99_us, d.mean_us, d.calls
            )
        };
        let mut s = format!("microsecond path on {}\n", self.machine);
        s += &format!(
            "{:<52} {:>9} {:>9} {:>9} {:>8}\n",
            "latency (µs)", "p50", "p99", "mean", "samples"
        );
        s += &row("mote warm: dispatcher → guest start", &self.warm_start);
        s += &row("mote warm: dispatcher → reply", &self.warm_round_trip);
        s += &row(
            "mote warm, back to back: dispatcher → guest start",
            &self.warm_back_to_back,
        );
        let fair_choice = match self.preempt {
            true => "mote warm, fair-choice queue, preemptive: dispatcher → start",
            false => "mote warm, fair-choice queue: dispatcher → start",
        };
        s += &row(fair_choice, &self.warm_fair_choice);
        s += &row(
            "runtime alone (no dispatch): call → guest start",
            &self.runtime_only_start,
        );
        s += &row(
            &format!(
                "mote cold ({} deployed): dispatcher → guest start",
                self.cold_functions
            ),
            &self.cold_start,
        );
        s += &row("mote cold: artefact load (mmap + link)", &self.cold_load);
        s += &row(
            "artefact load, no other thread running",
            &self.cold_load_alone,
        );
        s += &row("process baseline warm: pipe round trip", &self.process_warm);
        s += &row(
            "process baseline cold: fork/exec → response",
            &self.process_cold,
        );
        s += &row(
            "budget 100 µs: runaway call start → stop",
            &self.budget_kill,
        );
        s += &format!(
            "throughput: mote, 1 executor core {:>12.0} calls/s\n",
            self.warm_calls_per_s_per_core
        );
        s += &format!(
            "baseline: runtime alone, 1 thread {:>12.0} calls/s\n",
            self.runtime_only_calls_per_s
        );
        s += &format!(
            "process warm / mote warm (p50)    {:>12.1}x\n",
            self.process_to_warm_ratio
        );
        s += "preemption: sha512 (64-byte blocks), throughput against an engine without epochs\n";
        s += &format!(
            "  no epochs {:>12.0} hashes/s\n",
            self.no_epoch_hashes_per_s
        );
        for q in &self.quanta {
            s += &format!(
                "  {:>5} µs  {:>12.0} hashes/s  {:>6.3}x\n",
                q.quantum_us, q.hashes_per_s, q.ratio
            );
        }
        s += "paper's code on this machine (reference, µs p50[/p99]):\n";
        for (what, figure) in PAPER {
            s += &format!("  {what:<46} {figure}\n");
        }
        s
    }
}
