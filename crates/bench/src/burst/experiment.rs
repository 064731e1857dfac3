//! The burst experiment as `mote bench burst` asks for it: which policies, intensities, seeds and
//! functions ([`BurstOptions`]), and the [`Experiment`] they make, defaults filled in, with how
//! often each function is called.

use super::{BurstConfig, PaperLoad, Scheduler, SuiteEntry};
use mote_sched::Policy;
use std::time::Duration;

/// What `mote bench burst` was asked for; [`run`] fills in the experiment's defaults.
#[derive(Clone, Debug)]
pub struct BurstOptions {
    /// Policies to compare. None means SEPT and FC under `fairness`, every policy with `all`,
    /// and is an error otherwise.
    pub policies: Vec<Policy>,
    /// Every policy, over intensities 30, 40, 60, 90 and 120 unless `intensities` are given.
    pub all: bool,
    /// Whether the ranking policies run preemptive, as they are, or both.
    pub preempt: Preempt,
    /// The quantum under preemption.
    pub quantum: Duration,
    /// The aging factor under preemption.
    pub aging: u64,
    /// Executor cores.
    pub cores: usize,
    /// Running calls allowed under the baseline policy.
    pub baseline_cap: usize,
    /// The paper's intensities: each function gets `cores * intensity / 10` calls per 60 s.
    /// None means 40, or the five above with `all`.
    pub intensities: Vec<u32>,
    /// Which load an intensity stands for.
    pub load: PaperLoad,
    /// The burst window, seconds; the call count scales with it, so the load stays the same.
    pub window_s: f64,
    /// Seeds of the call sequence, the same for every policy; none means seed 1.
    pub seeds: Vec<u64>,
    /// Calls per function when measuring idle response times.
    pub idle_calls: usize,
    /// Fair-Choice's window T, seconds (at least 1).
    pub fc_window_s: u64,
    /// The suite functions to run; none means the whole suite.
    pub functions: Vec<String>,
    /// The fairness experiment (paper VII-D): the longest function is rare (weight 1) among
    /// the others, each called ten times as often.
    pub fairness: bool,
}

/// Which schedulers a ranking policy is run as (`fifo` and `baseline` never preempt).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preempt {
    /// As the paper: every call to its end.
    Off,
    /// Preemptive.
    On,
    /// Both, side by side.
    Both,
}

impl std::str::FromStr for Preempt {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "off" => Ok(Self::Off),
            "on" => Ok(Self::On),
            "both" => Ok(Self::Both),
            _ => Err(format!("unknown --preempt `{s}`: use off, on or both")),
        }
    }
}

impl BurstOptions {
    /// The suite the burst runs: `mote_guests::SUITE` (shortest first), or the named functions
    /// of it.
    pub(super) fn suite(&self) -> anyhow::Result<Vec<SuiteEntry>> {
        let known: Vec<&str> = mote_guests::SUITE.iter().map(|f| f.name).collect();
        if let Some(unknown) = self.functions.iter().find(|n| !known.contains(&n.as_str())) {
            anyhow::bail!(
                "--function {unknown}: not in the suite; choose from {}",
                known.join(", ")
            );
        }
        Ok(mote_guests::SUITE
            .iter()
            .filter(|f| self.functions.is_empty() || self.functions.iter().any(|n| n == f.name))
            .map(|f| SuiteEntry {
                name: f.name,
                wasm: f.wasm,
                input: f.default_input,
            })
            .collect())
    }

    /// The experiment these options ask for over `suite`, with the defaults filled in.
    pub(super) fn experiment(&self, suite: &[SuiteEntry]) -> anyhow::Result<Experiment> {
        let policies = match (self.policies.is_empty(), self.fairness) {
            (false, _) => self.policies.clone(),
            (true, true) => vec![Policy::Sept, Policy::Fc],
            (true, false) if self.all => Policy::ALL.to_vec(),
            (true, false) => {
                anyhow::bail!("name a --policy (or several), or run them all with --all")
            }
        };
        let intensities = match (self.intensities.is_empty(), self.all) {
            (false, _) => self.intensities.clone(),
            (true, true) => vec![30, 40, 60, 90, 120],
            (true, false) => vec![40],
        };
        let weights = match self.fairness {
            true => fairness_weights(suite.len()),
            false => vec![1; suite.len()],
        };
        anyhow::ensure!(self.window_s > 0.0, "--window must be positive");
        let schedulers = policies
            .into_iter()
            .flat_map(|policy| {
                let modes: &[bool] = match (policy.arrival_order(), self.preempt) {
                    (true, _) | (false, Preempt::Off) => &[false],
                    (false, Preempt::On) => &[true],
                    (false, Preempt::Both) => &[false, true],
                };
                modes
                    .iter()
                    .map(move |&preempt| Scheduler { policy, preempt })
            })
            .collect();
        Ok(Experiment {
            schedulers,
            intensities,
            seeds: match self.seeds.is_empty() {
                true => vec![1],
                false => self.seeds.clone(),
            },
            base: BurstConfig {
                scheduler: Scheduler {
                    policy: Policy::Fifo,
                    preempt: false,
                },
                quantum: self.quantum,
                aging: self.aging,
                cores: self.cores,
                intensity: 0,
                window: Duration::from_secs_f64(self.window_s),
                seed: 0,
                baseline_cap: self.baseline_cap,
                fc_window: Duration::from_secs(self.fc_window_s.max(1)),
                idle_calls: self.idle_calls,
                weights,
                load: self.load,
            },
        })
    }
}

/// The fairness experiment's mix over a suite of `n` functions, shortest first: the last (the
/// longest) is rare (weight 1), every other function is called ten times as often.
fn fairness_weights(n: usize) -> Vec<u32> {
    (0..n).map(|i| if i + 1 == n { 1 } else { 10 }).collect()
}

/// A whole experiment: every policy, intensity and seed, with the same call sequences.
#[derive(Clone, Debug)]
pub(super) struct Experiment {
    /// Policies to compare, each preemptive or not.
    pub(super) schedulers: Vec<Scheduler>,
    /// Intensities.
    pub(super) intensities: Vec<u32>,
    /// Seeds (one call sequence each).
    pub(super) seeds: Vec<u64>,
    /// The settings shared by every run (its policy, intensity and seed are overridden).
    pub(super) base: BurstConfig,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> BurstOptions {
        BurstOptions {
            policies: vec![],
            all: false,
            preempt: Preempt::Off,
            quantum: Duration::from_millis(2),
            aging: 16,
            cores: 2,
            baseline_cap: 8,
            intensities: vec![],
            load: PaperLoad::Nominal,
            window_s: 60.0,
            seeds: vec![],
            idle_calls: 3,
            fc_window_s: 0,
            functions: vec![],
            fairness: false,
        }
    }

    #[test]
    fn defaults_follow_the_mode_asked_for() {
        let suite = options().suite().unwrap();
        assert_eq!(suite.len(), mote_guests::SUITE.len());
        let err = options().experiment(&suite).unwrap_err();
        assert!(err.to_string().contains("--all"), "{err}");

        let all = BurstOptions {
            all: true,
            ..options()
        };
        let e = all.experiment(&suite).unwrap();
        let plain = |p: Policy| Scheduler {
            policy: p,
            preempt: false,
        };
        assert_eq!(e.schedulers, Policy::ALL.map(plain));
        assert_eq!(e.intensities, [30, 40, 60, 90, 120]);
        assert_eq!(e.seeds, [1]);
        assert_eq!(e.base.fc_window, Duration::from_secs(1));
        assert!(e.base.weights.iter().all(|&w| w == 1));

        let fairness = BurstOptions {
            fairness: true,
            intensities: vec![60],
            seeds: vec![4, 5],
            ..options()
        };
        let e = fairness.experiment(&suite).unwrap();
        assert_eq!(e.schedulers, [plain(Policy::Sept), plain(Policy::Fc)]);

        let both = BurstOptions {
            policies: vec![Policy::Fifo, Policy::Sept],
            preempt: Preempt::Both,
            ..options()
        };
        let names: Vec<_> = both
            .experiment(&suite)
            .unwrap()
            .schedulers
            .into_iter()
            .map(Scheduler::name)
            .collect();
        assert_eq!(
            names,
            ["fifo", "sept", "sept-preempt"],
            "fifo never preempts"
        );
        assert_eq!(e.intensities, [60]);
        assert_eq!(e.seeds, [4, 5]);
        let (rare, frequent) = e.base.weights.split_last().unwrap();
        assert_eq!(*rare, 1);
        assert!(frequent.iter().all(|&w| w == 10));
    }

    #[test]
    fn unknown_functions_and_empty_windows_are_refused_naming_the_flag() {
        let unknown = BurstOptions {
            functions: vec!["nope".into()],
            ..options()
        };
        let err = unknown.suite().unwrap_err().to_string();
        assert!(
            err.contains("--function nope") && err.contains("choose from"),
            "{err}"
        );

        let name = mote_guests::SUITE[0].name;
        let one = BurstOptions {
            functions: vec![name.into()],
            ..options()
        };
        assert_eq!(one.suite().unwrap().len(), 1);

        let empty = BurstOptions {
            policies: vec![Policy::Fifo],
            window_s: 0.0,
            ..options()
        };
        let err = empty.experiment(&[]).unwrap_err().to_string();
        assert!(err.contains("--window"), "{err}");
    }
}
