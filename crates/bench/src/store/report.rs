//! The measurements ([`Measurement`]: one `benchmark` run) and what they say: per system, size and operation the medians over repetitions, the
//! mote / etcd ratios within each repetition, the floors, every run, the whole report in
//! Markdown, and the paper's Figure 2 as a PNG.

use super::config::{Operation, StoreBenchConfig, System};
use super::machine::Machine;
use super::parse::BenchSummary;
use crate::plot::{ErrorBar, Line, Panel, PlotError, error_bar_png};
use crate::stats::median;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// One `benchmark` run of one system at one size.
#[derive(Clone, Debug, Serialize)]
pub struct Measurement {
    /// The repetition, from 0.
    pub run: usize,
    /// Whether this system ran first (0) or second (1) at this size in this repetition.
    pub position: usize,
    /// The store.
    pub system: System,
    /// Its members.
    pub size: usize,
    /// The request.
    pub operation: Operation,
    /// What `benchmark` reported; `None` if the run (or the cluster) failed.
    pub summary: Option<BenchSummary>,
    /// Why it failed.
    pub error: Option<String>,
    /// CPU seconds the cluster's processes used during the run.
    pub server_cpu_s: f64,
    /// CPU seconds the `benchmark` process used.
    pub client_cpu_s: f64,
    /// CPU seconds every other process on the machine used meanwhile (other engineers' builds
    /// and tests on a shared machine): all busy CPU time minus the two above.
    pub other_cpu_s: f64,
    /// The machine's one-minute load average just before the run.
    pub load_before: f64,
}

impl Measurement {
    pub(super) fn throughput(&self) -> Option<f64> {
        self.summary.as_ref().map(|s| s.requests_per_s)
    }

    pub(super) fn median_ms(&self) -> Option<f64> {
        self.summary.as_ref()?.percentile_ms(50.0)
    }
}

/// Everything measured, and what it says.
#[derive(Clone, Debug, Serialize)]
pub struct StoreReport {
    /// The command that produced it.
    pub command: String,
    /// What ran.
    pub config: StoreBenchConfig,
    /// Where and when.
    pub machine: Machine,
    /// Wall-clock seconds of the whole experiment.
    pub elapsed_s: f64,
    /// Every run, in the order they ran.
    pub measurements: Vec<Measurement>,
}

/// One system, size and operation summarised over the repetitions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Aggregate {
    /// Median requests per second.
    pub throughput: f64,
    /// Lowest and highest requests per second over the repetitions.
    pub throughput_range: (f64, f64),
    /// Median of the runs' p10, p50 and p90 latencies, ms.
    pub p10_ms: f64,
    /// The median latency, ms.
    pub p50_ms: f64,
    /// The 90th percentile, ms.
    pub p90_ms: f64,
    /// Repetitions that succeeded.
    pub runs: usize,
}

/// A floor of the issue, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Floor {
    /// What it asks.
    pub name: &'static str,
    /// The measured value, in words.
    pub measured: String,
    /// `None` if it could not be checked (a size or run missing).
    pub met: Option<bool>,
}

impl StoreReport {
    fn successful(
        &self,
        system: System,
        size: usize,
        op: Operation,
    ) -> impl Iterator<Item = &Measurement> {
        self.measurements.iter().filter(move |m| {
            m.system == system && m.size == size && m.operation == op && m.summary.is_some()
        })
    }

    /// The median over repetitions of `system` at `size` doing `op`.
    pub fn aggregate(&self, system: System, size: usize, op: Operation) -> Option<Aggregate> {
        let runs: Vec<&BenchSummary> = self
            .successful(system, size, op)
            .filter_map(|m| m.summary.as_ref())
            .collect();
        let of = |f: &dyn Fn(&BenchSummary) -> Option<f64>| {
            median(&runs.iter().filter_map(|s| f(s)).collect::<Vec<_>>())
        };
        let rates: Vec<f64> = runs.iter().map(|s| s.requests_per_s).collect();
        Some(Aggregate {
            throughput: of(&|s| Some(s.requests_per_s))?,
            throughput_range: (
                rates.iter().copied().fold(f64::INFINITY, f64::min),
                rates.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            ),
            p10_ms: of(&|s| s.percentile_ms(10.0)).unwrap_or(f64::NAN),
            p50_ms: of(&|s| s.percentile_ms(50.0))?,
            p90_ms: of(&|s| s.percentile_ms(90.0)).unwrap_or(f64::NAN),
            runs: runs.len(),
        })
    }

    /// Per repetition in which both succeeded, `f(mote) / f(etcd)` at `size` for `op`.
    fn ratios(&self, size: usize, op: Operation, f: fn(&Measurement) -> Option<f64>) -> Vec<f64> {
        (0..self.config.runs)
            .filter_map(|run| {
                let get = |system| {
                    self.successful(system, size, op)
                        .find(|m| m.run == run)
                        .and_then(f)
                };
                Some(get(System::Mote)? / get(System::Etcd)?)
            })
            .collect()
    }

    /// Per repetition, mote's put throughput at `to` nodes over that at `from` nodes.
    fn scaling(&self, system: System, op: Operation, from: usize, to: usize) -> Vec<f64> {
        (0..self.config.runs)
            .filter_map(|run| {
                let get = |size| {
                    self.successful(system, size, op)
                        .find(|m| m.run == run)
                        .and_then(Measurement::throughput)
                };
                Some(get(to)? / get(from)?)
            })
            .collect()
    }

    /// The floors of the issue, each judged on the median over repetitions of a ratio taken
    /// within each repetition.
    pub fn floors(&self) -> Vec<Floor> {
        let judge = |name, ratios: Vec<f64>, what: &str, ok: fn(f64) -> bool| {
            let met_in = ratios.iter().filter(|&&r| ok(r)).count();
            let each: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
            match median(&ratios) {
                None => Floor {
                    name,
                    measured: "not measured".into(),
                    met: None,
                },
                Some(m) => Floor {
                    name,
                    measured: format!(
                        "{what} {m:.2} ({}: {}; met in {met_in})",
                        runs(ratios.len()),
                        each.join(", ")
                    ),
                    met: Some(ok(m)),
                },
            }
        };
        vec![
            judge(
                "put throughput of 3 mote replicas >= 3x that of 3 etcd members",
                self.ratios(3, Operation::Put, Measurement::throughput),
                "mote / etcd put throughput at 3 nodes:",
                |r| r >= 3.0,
            ),
            judge(
                "mote's put throughput does not fall from 1 to 3 replicas",
                self.scaling(System::Mote, Operation::Put, 1, 3),
                "mote put throughput, 3 replicas / 1 replica:",
                |r| r >= 1.0,
            ),
            judge(
                "median put latency of 3 mote replicas <= 1/3 of etcd's",
                self.ratios(3, Operation::Put, Measurement::median_ms),
                "mote / etcd median put latency at 3 nodes:",
                |r| r <= 1.0 / 3.0,
            ),
        ]
    }

    /// The failed measurements, as `system size op: error` lines.
    pub fn failures(&self) -> Vec<String> {
        self.measurements
            .iter()
            .filter_map(|m| {
                let e = m.error.as_ref()?;
                Some(format!(
                    "run {} {} x{} {}: {e}",
                    m.run + 1,
                    m.system.name(),
                    m.size,
                    m.operation.short()
                ))
            })
            .collect()
    }

    /// The results table: per system, size and operation the medians over repetitions, and on
    /// mote's rows the mote / etcd ratios (medians of the per-repetition ratios).
    pub fn table(&self) -> String {
        let mut s = String::from(
            "| operation | nodes | system | throughput (req/s) | median latency (ms) | p10 (ms) | p90 (ms) | mote / etcd throughput | mote / etcd median latency |\n\
             |---|---|---|---|---|---|---|---|---|\n",
        );
        for op in Operation::ALL {
            for &size in &self.config.sizes {
                for system in [System::Etcd, System::Mote] {
                    let (tput_ratio, lat_ratio) = match system {
                        System::Etcd => (String::new(), String::new()),
                        System::Mote => (
                            ratio_cell(self.ratios(size, op, Measurement::throughput)),
                            ratio_cell(self.ratios(size, op, Measurement::median_ms)),
                        ),
                    };
                    let row = match self.aggregate(system, size, op) {
                        Some(a) => format!(
                            "{} | {:.2} | {:.2} | {:.2}",
                            thousands(a.throughput),
                            a.p50_ms,
                            a.p10_ms,
                            a.p90_ms
                        ),
                        None => "failed | | |".into(),
                    };
                    let _ = writeln!(
                        s,
                        "| {} | {size} | {} | {row} | {tput_ratio} | {lat_ratio} |",
                        op.name(),
                        system.name()
                    );
                }
            }
        }
        s
    }

    /// Every measurement, in the order they ran.
    pub fn runs_table(&self) -> String {
        let mut s = String::from(
            "| run | order | system | nodes | operation | req/s | p10 | p50 | p90 | p99 (ms) | failed requests | server CPU (s) | client CPU (s) | others' CPU (s) | load |\n\
             |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        );
        for m in &self.measurements {
            let cells = match &m.summary {
                Some(b) => {
                    let p = |pct| {
                        b.percentile_ms(pct)
                            .map_or("-".into(), |v| format!("{v:.2}"))
                    };
                    format!(
                        "{} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.2}",
                        thousands(b.requests_per_s),
                        p(10.0),
                        p(50.0),
                        p(90.0),
                        p(99.0),
                        b.errors,
                        m.server_cpu_s,
                        m.client_cpu_s,
                        m.other_cpu_s
                    )
                }
                None => format!(
                    "failed: {} | | | | | | | |",
                    m.error.as_deref().unwrap_or("?").replace('|', "/")
                ),
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {cells} | {:.1} |",
                m.run + 1,
                if m.position == 0 { "first" } else { "second" },
                m.system.name(),
                m.size,
                m.operation.short(),
                m.load_before
            );
        }
        s
    }

    /// The whole report in Markdown: what ran, where, the table, the floors and every run.
    pub fn markdown(&self, plot: Option<&str>) -> String {
        let c = &self.config;
        let m = &self.machine;
        let mut s =
            String::from("# mote store against etcd: `benchmark` put and serializable range\n\n");
        let _ = writeln!(s, "Command: `{}`\n", self.command);
        let _ = writeln!(
            s,
            "Machine: {}, {} cores, {:.0} GiB, Linux {}; {}; started {}, load average (1/5/15 min) {} at the start and {} at the end; {:.0} s in all.\n",
            m.cpu,
            m.cores,
            m.memory_gib,
            m.kernel,
            m.etcd_version,
            m.started,
            m.load_at_start,
            m.load_at_end,
            self.elapsed_s
        );
        let _ = writeln!(
            s,
            "Each cluster size runs etcd and mote store back to back (which goes first alternates), in {}; each starts the cluster afresh on loopback with its data on disk, then runs, with every member as an endpoint:\n",
            runs(c.runs)
        );
        for op in Operation::ALL {
            let _ = writeln!(
                s,
                "    benchmark {}",
                c.benchmark_args("<every member>", op).join(" ")
            );
        }
        let _ = writeln!(
            s,
            "\nFigures are medians over the runs; ratios are taken within a run (the two systems back to back) and their median is shown. Server and client share the machine's cores.\n"
        );
        s += "## Results\n\n";
        s += &self.table();
        s += "\n## Floors\n\n";
        for f in self.floors() {
            let verdict = match f.met {
                Some(true) => "**met**",
                Some(false) => "**not met**",
                None => "**not checked**",
            };
            let _ = writeln!(s, "- {}: {verdict}; {}", f.name, f.measured);
        }
        if let Some(plot) = plot {
            let _ = writeln!(
                s,
                "\n## Figure\n\n![median latency (p10-p90) and throughput by cluster size]({plot})"
            );
        }
        let failures = self.failures();
        if !failures.is_empty() {
            s += "\n## Failures\n\n";
            for f in failures {
                let _ = writeln!(s, "- {f}");
            }
        }
        s += "\n## Every run\n\nLatencies in ms; CPU is user + system time during the `benchmark` run, of all the cluster's processes, of the `benchmark` client, and of every other process on the machine (busy time in `/proc/stat` minus the two); load is the one-minute load average before the run.\n\n";
        s += &self.runs_table();
        s
    }

    /// Draws the paper's Figure 2 for both systems: (a) median latency with p10-p90 whiskers,
    /// (b) throughput with whiskers from the lowest to the highest run, against cluster size.
    pub fn write_plot(&self, path: &Path) -> Result<(), PlotError> {
        let sizes = &self.config.sizes;
        let categories: Vec<String> = sizes.iter().map(usize::to_string).collect();
        let categories: Vec<&str> = categories.iter().map(String::as_str).collect();
        let keys: Vec<(System, Operation)> = Operation::ALL
            .iter()
            .flat_map(|&op| [System::Mote, System::Etcd].map(|s| (s, op)))
            .collect();
        let labels: Vec<String> = keys
            .iter()
            .map(|(s, op)| format!("{} {}", s.name(), op.name()))
            .collect();
        let points = |f: &dyn Fn(Aggregate) -> ErrorBar| -> Vec<Vec<Option<ErrorBar>>> {
            keys.iter()
                .map(|&(s, op)| {
                    sizes
                        .iter()
                        .map(|&n| self.aggregate(s, n, op).map(f))
                        .collect()
                })
                .collect()
        };
        let latency = points(&|a| ErrorBar {
            value: a.p50_ms,
            low: a.p10_ms,
            high: a.p90_ms,
        });
        let throughput = points(&|a| ErrorBar {
            value: a.throughput,
            low: a.throughput_range.0,
            high: a.throughput_range.1,
        });
        let (latency, throughput) = (lines(&labels, &latency), lines(&labels, &throughput));
        let runs = self.config.runs;
        let throughput_title = match runs {
            1 => "(b) throughput".to_owned(),
            _ => format!("(b) median throughput, bars: lowest-highest of {runs} runs"),
        };
        let panels = [
            Panel {
                title: "(a) median latency, bars at p10 and p90",
                y_label: "latency (ms)",
                lines: &latency,
                log_scale: true,
            },
            Panel {
                title: &throughput_title,
                y_label: "requests / s",
                lines: &throughput,
                log_scale: false,
            },
        ];
        error_bar_png(
            path,
            "cluster size (nodes)",
            &categories,
            &panels,
            (1400, 560),
        )
    }
}

/// The lines of one panel: a label and its points each.
fn lines<'a>(labels: &'a [String], points: &'a [Vec<Option<ErrorBar>>]) -> Vec<Line<'a>> {
    labels
        .iter()
        .zip(points)
        .map(|(label, points)| Line { label, points })
        .collect()
}

/// `1 run`, `3 runs`.
fn runs(n: usize) -> String {
    match n {
        1 => "1 run".into(),
        _ => format!("{n} runs"),
    }
}

fn ratio_cell(ratios: Vec<f64>) -> String {
    median(&ratios).map_or(String::new(), |r| format!("{r:.2}x"))
}

/// 12345.6 → `12,346`.
fn thousands(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The line a measurement prints as it completes.
pub(super) fn progress_line(m: &Measurement) -> String {
    match &m.summary {
        Some(s) => format!(
            "  run {} {:>10} x{} {:<5} {:>9.0} req/s  p10 {:>7.2} p50 {:>7.2} p90 {:>7.2} ms  cpu s: server {:.1} client {:.1} others {:.1}  load {:.1}",
            m.run + 1,
            m.system.name(),
            m.size,
            format!("{:?}", m.operation).to_lowercase(),
            s.requests_per_s,
            s.percentile_ms(10.0).unwrap_or(f64::NAN),
            s.percentile_ms(50.0).unwrap_or(f64::NAN),
            s.percentile_ms(90.0).unwrap_or(f64::NAN),
            m.server_cpu_s,
            m.client_cpu_s,
            m.other_cpu_s,
            m.load_before,
        ),
        None => format!(
            "  run {} {:>10} x{} {:?}: FAILED: {}",
            m.run + 1,
            m.system.name(),
            m.size,
            m.operation,
            m.error.as_deref().unwrap_or("?")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measurement(run: usize, system: System, size: usize, rate: f64, p50: f64) -> Measurement {
        Measurement {
            run,
            position: 0,
            system,
            size,
            operation: Operation::Put,
            summary: Some(BenchSummary {
                requests_per_s: rate,
                percentiles: vec![(10.0, p50 / 2.0), (50.0, p50), (90.0, p50 * 2.0)],
                ..BenchSummary::default()
            }),
            error: None,
            server_cpu_s: 1.0,
            client_cpu_s: 1.0,
            other_cpu_s: 0.5,
            load_before: 2.0,
        }
    }

    fn report(measurements: Vec<Measurement>, runs: usize) -> StoreReport {
        let config = StoreBenchConfig {
            runs,
            ..StoreBenchConfig::full("mote".into(), "tools".into())
        };
        StoreReport {
            command: "mote bench store".into(),
            machine: Machine {
                cpu: "cpu".into(),
                cores: 2,
                kernel: "6.18".into(),
                memory_gib: 24.0,
                etcd_version: "etcd Version: 3.6.8".into(),
                started: "1970-01-01 00:00 UTC".into(),
                load_at_start: "1 1 1".into(),
                load_at_end: "1 1 1".into(),
            },
            config,
            elapsed_s: 1.0,
            measurements,
        }
    }

    #[test]
    fn floors_use_ratios_within_each_run() {
        use System::{Etcd, Mote};
        let r = report(
            vec![
                measurement(0, Etcd, 1, 8_000.0, 10.0),
                measurement(0, Mote, 1, 10_000.0, 4.0),
                measurement(0, Etcd, 3, 5_000.0, 18.0),
                measurement(0, Mote, 3, 16_000.0, 5.0),
                // A slower second run: the ratio within it is what counts.
                measurement(1, Etcd, 1, 4_000.0, 20.0),
                measurement(1, Mote, 1, 5_000.0, 8.0),
                measurement(1, Etcd, 3, 2_000.0, 36.0),
                measurement(1, Mote, 3, 7_000.0, 10.0),
            ],
            2,
        );
        let floors = r.floors();
        // 16/5 = 3.2 and 7/2 = 3.5: met.
        assert_eq!(floors[0].met, Some(true), "{floors:?}");
        assert!(
            floors[0].measured.contains("3.35"),
            "{}",
            floors[0].measured
        );
        // 16/10 and 7/5: grows.
        assert_eq!(floors[1].met, Some(true));
        // 5/18 and 10/36 < 1/3.
        assert_eq!(floors[2].met, Some(true));
        let a = r.aggregate(Mote, 3, Operation::Put).unwrap();
        assert_eq!(a.throughput, 11_500.0);
        assert_eq!(a.throughput_range, (7_000.0, 16_000.0));
        assert_eq!(a.p50_ms, 7.5);

        let table = r.table();
        assert!(
            table.contains("| put | 3 | mote store | 11,500 | 7.50 |"),
            "{table}"
        );
        assert!(table.contains("3.35x"), "{table}");
        let md = r.markdown(Some("figure2.png"));
        assert!(
            md.contains("**met**") && !md.contains("**not met**"),
            "{md}"
        );

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("figure2.png");
        r.write_plot(&path).unwrap();
        assert!(std::fs::read(&path).unwrap().starts_with(b"\x89PNG"));
    }

    #[test]
    fn floors_not_met_or_not_measured_are_said_so() {
        use System::{Etcd, Mote};
        let r = report(
            vec![
                measurement(0, Etcd, 3, 5_000.0, 18.0),
                measurement(0, Mote, 3, 9_000.0, 9.0),
            ],
            1,
        );
        let floors = r.floors();
        assert_eq!(floors[0].met, Some(false));
        assert_eq!(floors[1].met, None, "no 1-replica run");
        assert_eq!(floors[2].met, Some(false));
        assert!(r.markdown(None).contains("**not checked**"));
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(1_234_567.4), "1,234,567");
        assert_eq!(thousands(999.6), "1,000");
        assert_eq!(thousands(12.0), "12");
    }
}
