//! Admission to the microtask share classes (the microtask paper, `000_…`): per class, how many
//! microtasks run in it and a queue of those waiting, ordered by the node's policy, with the
//! cores split across the classes by a [`CoreSplit`] whenever a microtask enters or leaves one.
//!
//! A class given `n` cores runs up to `n × 1000 / share` microtasks. A class that lost cores at
//! a split is not preempted: it drains to its new size. [`ClassAdmission`] decides and does no
//! I/O: the node keeps it behind its own lock and steps it, and a step that admits waiting
//! microtasks hands each to the `admit` closure the caller gave, which delivers it and says
//! whether anyone was still waiting for it (a microtask whose call was cancelled while it
//! queued takes no room).
//!
//! Invariants after every step: the shares of the running microtasks add up to at most the
//! node's cores (while a class that lost cores drains, no other class is admitted past the
//! total, so the cores are never oversubscribed), and no class has both room and a microtask
//! waiting.

use crate::{
    CLASSES, CallQueue, CoreSplit, FunctionHistory, FunctionKey, RankBasis, Ranked, SHARE_LEVELS,
    SplitMismatch, SplitMode,
};
use std::time::{Duration, Instant};

/// The share classes' running microtasks and waiting queues, and the split of cores across them.
pub struct ClassAdmission<T> {
    /// `None` when task-based: every core is in the whole-core class.
    split: Option<CoreSplit>,
    /// The node's cores in permille: what the running microtasks' shares may add up to.
    budget: u32,
    cores: [u32; CLASSES],
    running: [u32; CLASSES],
    waiting: [CallQueue<T>; CLASSES],
    preemptions: [u64; CLASSES],
}

impl<T> ClassAdmission<T> {
    /// Admission on `cores` cores split by `split` across the classes (`None`: task-based, one
    /// class of whole cores), each class's waiting microtasks in a queue `queue` makes.
    pub fn new(
        cores: u32,
        split: Option<SplitMode>,
        mut queue: impl FnMut() -> CallQueue<T>,
    ) -> Result<Self, SplitMismatch> {
        let (split, cores_per_class) = match split {
            Some(split) => (Some(CoreSplit::new(cores, split)?), [0; CLASSES]),
            None => (None, [cores, 0, 0, 0]),
        };
        let mut admission = Self {
            split,
            budget: cores * 1000,
            cores: cores_per_class,
            running: [0; CLASSES],
            waiting: std::array::from_fn(|_| queue()),
            preemptions: [0; CLASSES],
        };
        admission.rebalance(&mut |_| true);
        Ok(admission)
    }

    /// A microtask of `function` that arrived at `arrival` asks to run in `class`. If it is the
    /// only one waiting there and there is room, it runs at once: `Some`, with what its rank is
    /// computed from. Otherwise it waits as `item`, which `admit` is given once it is admitted
    /// (maybe within this step).
    pub fn arrive(
        &mut self,
        class: usize,
        function: FunctionKey,
        arrival: Instant,
        item: T,
        mut admit: impl FnMut(Ranked<T>) -> bool,
    ) -> Option<RankBasis> {
        self.waiting[class].push(function, arrival, item);
        if self.waiting[class].len() == 1 && self.has_room(class) {
            let taken = self.waiting[class].pop_ranked().expect("just queued");
            self.running[class] += 1;
            self.rebalance(&mut admit);
            return Some(taken.basis);
        }
        self.rebalance(&mut admit);
        None
    }

    /// A microtask of `function` that held a share of `class` for `held` has left it.
    pub fn leave(
        &mut self,
        class: usize,
        function: FunctionKey,
        held: Duration,
        mut admit: impl FnMut(Ranked<T>) -> bool,
    ) {
        self.running[class] -= 1;
        self.waiting[class].complete(function, held);
        self.rebalance(&mut admit);
    }

    /// Whether a microtask waiting in `class` ranks better than `rank`.
    pub fn outranked(&self, class: usize, rank: u64) -> bool {
        self.waiting[class]
            .best_rank()
            .is_some_and(|best| best < rank)
    }

    /// Takes the share of a microtask running in `class` back for a better-ranked one waiting
    /// there ([`ClassAdmission::outranked`]): it waits again as `item`, ranked from `basis`
    /// after holding its share for `held`.
    pub fn preempt(
        &mut self,
        class: usize,
        basis: RankBasis,
        held: Duration,
        item: T,
        mut admit: impl FnMut(Ranked<T>) -> bool,
    ) {
        self.running[class] -= 1;
        self.preemptions[class] += 1;
        self.waiting[class].requeue(basis, held.as_nanos() as u64, item);
        self.rebalance(&mut admit);
    }

    /// The rank of the best microtask waiting in `class`.
    pub fn best_rank(&self, class: usize) -> Option<u64> {
        self.waiting[class].best_rank()
    }

    /// Drops what the classes know about a function that was replaced or removed.
    pub fn forget(&mut self, function: FunctionKey) {
        for queue in &mut self.waiting {
            queue.forget(function);
        }
    }

    /// Cores `class` has now.
    pub fn cores(&self, class: usize) -> u32 {
        self.cores[class]
    }

    /// Microtasks `class` may run at once: its cores × 1000 / share (task-based, one per core).
    pub fn capacity(&self, class: usize) -> u32 {
        self.cores[class] * (1000 / u32::from(SHARE_LEVELS[class]))
    }

    /// Microtasks running in `class`.
    pub fn running(&self, class: usize) -> u32 {
        self.running[class]
    }

    /// Microtasks waiting for `class`.
    pub fn waiting(&self, class: usize) -> usize {
        self.waiting[class].len()
    }

    /// Microtasks that gave their share of `class` up to a better-ranked one.
    pub fn preemptions(&self, class: usize) -> u64 {
        self.preemptions[class]
    }

    /// What `class` knows of how long `function`'s microtasks held their share there.
    pub fn history(&self, class: usize, function: FunctionKey) -> Option<&FunctionHistory> {
        self.waiting[class].history(function)
    }

    /// Whether one more microtask fits in `class`: under its capacity, and within the node's
    /// cores counting every class's running shares. A class that lost cores at a split may
    /// still run more than its new capacity; the second check keeps the others from adding
    /// to that until it has drained, so the cores are never oversubscribed.
    fn has_room(&self, class: usize) -> bool {
        let committed: u32 = (0..CLASSES)
            .map(|c| self.running[c] * u32::from(SHARE_LEVELS[c]))
            .sum();
        self.running[class] < self.capacity(class)
            && committed + u32::from(SHARE_LEVELS[class]) <= self.budget
    }

    /// Splits the cores again from the work in each class and admits what now fits. A
    /// microtask whose call was cancelled while it waited was counted in the split but takes
    /// no room: if admission reached one, the cores are split again without it, or a class
    /// left with no core could wait while nothing runs.
    fn rebalance(&mut self, admit: &mut impl FnMut(Ranked<T>) -> bool) {
        loop {
            if let Some(split) = &mut self.split {
                let microtasks: [u64; CLASSES] = std::array::from_fn(|c| {
                    u64::from(self.running[c]) + self.waiting[c].len() as u64
                });
                self.cores = split.split(microtasks);
            }
            let mut cancelled = false;
            for c in 0..CLASSES {
                while self.has_room(c) {
                    let Some(taken) = self.waiting[c].pop_ranked() else {
                        break;
                    };
                    match admit(taken) {
                        true => self.running[c] += 1,
                        false => cancelled = true,
                    }
                }
            }
            // Each pass that meets a cancelled microtask drops it, so this ends.
            if !cancelled || self.split.is_none() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DEFAULT_AGING, Policy};
    use proptest::prelude::*;
    use std::collections::{BTreeMap, HashSet};

    fn queue(preemptive: bool) -> CallQueue<u32> {
        let window = Duration::from_secs(60);
        match preemptive {
            true => CallQueue::preemptive(Policy::Sept, window, DEFAULT_AGING),
            false => CallQueue::new(Policy::Fifo, window),
        }
    }

    #[test]
    fn a_class_that_lost_cores_drains_before_another_is_admitted_past_the_cores() {
        let mut a = ClassAdmission::new(2, Some(SplitMode::Dynamic), || queue(false)).unwrap();
        let now = Instant::now();
        let light = 3;
        for id in 0..15 {
            a.arrive(light, 1, now, id, |_| true);
        }
        // 15 microtasks of 100‰ hold both cores.
        assert_eq!((a.cores(light), a.running(light)), (2, 15));
        let mut admitted = Vec::new();
        let mut admit = |r: Ranked<u32>| {
            admitted.push(r.call);
            true
        };
        assert!(a.arrive(0, 2, now, 99, &mut admit).is_none());
        // The whole-core class gets a core at once, but waits until the light class has
        // drained to the 10 its one core runs.
        assert_eq!((a.cores(0), a.cores(light)), (1, 1));
        for _ in 0..4 {
            a.leave(light, 1, Duration::from_millis(1), &mut admit);
        }
        assert_eq!(a.running(0), 0, "the cores would be oversubscribed");
        a.leave(light, 1, Duration::from_millis(1), &mut admit);
        assert_eq!(admitted, [99]);
        assert_eq!((a.running(0), a.running(light)), (1, 10));
    }

    /// Found by `every_waiting_microtask_is_admitted_as_the_running_ones_leave` when the
    /// admission moved here from the node: on one core, a microtask waiting for the half-core
    /// class was cancelled; the split still counted it and gave that class the core, admission
    /// then dropped it, and the microtask waiting for the whole-core class was left with no
    /// core while nothing ran, until some other microtask arrived.
    #[test]
    fn a_cancelled_microtask_does_not_keep_the_cores_from_the_others() {
        let mut a = ClassAdmission::new(1, Some(SplitMode::Dynamic), || queue(false)).unwrap();
        let now = Instant::now();
        let cancelled = 2;
        let mut admitted = Vec::new();
        let mut admit = |r: Ranked<u32>| {
            let live = r.call != cancelled;
            if live {
                admitted.push(r.call);
            }
            live
        };
        assert!(a.arrive(0, 1, now, 0, &mut admit).is_some());
        assert!(a.arrive(0, 1, now, 1, &mut admit).is_none());
        assert!(a.arrive(1, 1, now, cancelled, &mut admit).is_none());
        a.leave(0, 1, Duration::from_millis(1), &mut admit);
        assert_eq!(
            admitted,
            [1],
            "the whole-core microtask waits while nothing runs"
        );
        assert_eq!((a.cores(0), a.running(0), a.waiting(1)), (1, 1, 0));
    }

    /// One step of a node's microtasks.
    #[derive(Clone, Debug)]
    enum Step {
        /// A microtask of `function` arrives for `class`.
        Arrive { class: usize, function: FunctionKey },
        /// A running microtask (the n-th, modulo) leaves.
        Leave(usize),
        /// A running microtask is preempted, if a microtask waiting in its class outranks it.
        Preempt(usize),
        /// The call of a waiting microtask is cancelled: it takes no room when admitted.
        Cancel(usize),
    }

    fn steps() -> impl Strategy<Value = Vec<Step>> {
        let step = prop_oneof![
            4 => (0..CLASSES, 0u64..3)
                .prop_map(|(class, function)| Step::Arrive { class, function }),
            3 => any::<usize>().prop_map(Step::Leave),
            1 => any::<usize>().prop_map(Step::Preempt),
            1 => any::<usize>().prop_map(Step::Cancel),
        ];
        prop::collection::vec(step, 1..200)
    }

    /// How cores are split: dynamically, statically (the four counts add up to `cores`), or
    /// task-based.
    fn split(cores: u32) -> impl Strategy<Value = Option<SplitMode>> {
        let static_split = prop::array::uniform3(0..=cores).prop_map(move |[a, b, c]| {
            let mut cut = [a, b, c];
            cut.sort_unstable();
            SplitMode::Static([cut[0], cut[1] - cut[0], cut[2] - cut[1], cores - cut[2]])
        });
        prop_oneof![
            Just(Some(SplitMode::Dynamic)),
            static_split.prop_map(Some),
            Just(None),
        ]
    }

    /// What the node knows of its microtasks, kept beside the admission to check it against.
    #[derive(Default)]
    struct Model {
        /// Running microtasks: id -> (class, function, rank basis).
        running: BTreeMap<u32, (usize, FunctionKey, RankBasis)>,
        /// Waiting microtasks (cancelled ones too, until admission reaches them): id -> class.
        waiting: BTreeMap<u32, usize>,
        /// Every microtask's class and function.
        of: BTreeMap<u32, (usize, FunctionKey)>,
        cancelled: HashSet<u32>,
        delivered_twice: bool,
    }

    impl Model {
        /// Takes an admission: false if its call was cancelled.
        fn admit(&mut self, taken: Ranked<u32>) -> bool {
            let id = taken.call;
            self.delivered_twice |= self.waiting.remove(&id).is_none();
            if self.cancelled.contains(&id) {
                return false;
            }
            let (class, function) = self.of[&id];
            self.running.insert(id, (class, function, taken.basis));
            true
        }

        fn nth_running(&self, n: usize) -> Option<(u32, (usize, FunctionKey, RankBasis))> {
            let len = self.running.len();
            (len > 0).then(|| {
                let (&id, &r) = self.running.iter().nth(n % len).expect("in range");
                (id, r)
            })
        }
    }

    /// Runs `steps`, checking the invariants after each; returns the admission and the model.
    fn run(
        cores: u32,
        split: Option<SplitMode>,
        preemptive: bool,
        steps: &[Step],
    ) -> Result<(ClassAdmission<u32>, Model), TestCaseError> {
        let mut a = ClassAdmission::new(cores, split, || queue(preemptive)).unwrap();
        let mut m = Model::default();
        let origin = Instant::now();
        let held = Duration::from_micros(300);
        for (i, step) in steps.iter().enumerate() {
            let at = origin + Duration::from_micros(i as u64);
            match *step {
                Step::Arrive { class, function } => {
                    // Task-based, every phase runs in the one class of whole cores.
                    let class = if split.is_none() { 0 } else { class };
                    let id = i as u32;
                    m.of.insert(id, (class, function));
                    m.waiting.insert(id, class);
                    if let Some(basis) = a.arrive(class, function, at, id, |t| m.admit(t)) {
                        m.waiting.remove(&id);
                        m.running.insert(id, (class, function, basis));
                    }
                }
                Step::Leave(n) => {
                    if let Some((id, (class, function, _))) = m.nth_running(n) {
                        m.running.remove(&id);
                        a.leave(class, function, held, |t| m.admit(t));
                    }
                }
                Step::Preempt(n) => {
                    if let Some((id, (class, _, basis))) = m.nth_running(n) {
                        let rank = basis.rank(held.as_nanos() as u64);
                        if a.outranked(class, rank) {
                            m.running.remove(&id);
                            m.waiting.insert(id, class);
                            a.preempt(class, basis, held, id, |t| m.admit(t));
                        }
                    }
                }
                Step::Cancel(n) => {
                    let waiting: Vec<u32> = m.waiting.keys().copied().collect();
                    if !waiting.is_empty() {
                        m.cancelled.insert(waiting[n % waiting.len()]);
                    }
                }
            }
            check(&a, &m, cores)?;
        }
        Ok((a, m))
    }

    fn check(a: &ClassAdmission<u32>, m: &Model, cores: u32) -> Result<(), TestCaseError> {
        prop_assert!(!m.delivered_twice, "a microtask was admitted twice");
        prop_assert_eq!((0..CLASSES).map(|c| a.cores(c)).sum::<u32>(), cores);
        let committed: u32 = (0..CLASSES)
            .map(|c| a.running(c) * u32::from(SHARE_LEVELS[c]))
            .sum();
        prop_assert!(committed <= cores * 1000, "{committed}‰ on {cores} cores");
        for c in 0..CLASSES {
            let running = m.running.values().filter(|r| r.0 == c).count();
            let waiting = m.waiting.values().filter(|&&w| w == c).count();
            prop_assert_eq!(a.running(c) as usize, running, "class {}", c);
            prop_assert_eq!(a.waiting(c), waiting, "class {}", c);
            prop_assert!(
                !(a.has_room(c) && a.waiting(c) > 0),
                "class {} has room and a microtask waiting",
                c
            );
        }
        Ok(())
    }

    proptest! {
        /// Whatever arrives, leaves, is preempted or cancelled: the running shares never exceed
        /// the cores, every core is in one class, a class with room has nothing waiting, the
        /// counts are the node's, and no microtask is admitted twice.
        #[test]
        fn the_cores_are_never_oversubscribed_and_room_is_never_left_idle(
            (cores, split) in (1u32..5).prop_flat_map(|cores| (Just(cores), split(cores))),
            preemptive in any::<bool>(),
            steps in steps(),
        ) {
            run(cores, split, preemptive, &steps)?;
        }

        /// Once calls stop arriving and the running ones leave, every waiting microtask is
        /// admitted in turn (or skipped, if its call was cancelled): nothing is stranded in a
        /// queue while cores are idle.
        #[test]
        fn every_waiting_microtask_is_admitted_as_the_running_ones_leave(
            cores in 1u32..5,
            task_based in any::<bool>(),
            preemptive in any::<bool>(),
            steps in steps(),
        ) {
            let split = (!task_based).then_some(SplitMode::Dynamic);
            let (mut a, mut m) = run(cores, split, preemptive, &steps)?;
            let held = Duration::from_micros(300);
            while let Some((id, (class, function, _))) = m.nth_running(0) {
                m.running.remove(&id);
                a.leave(class, function, held, |t| m.admit(t));
                check(&a, &m, cores)?;
            }
            prop_assert!(m.waiting.is_empty(), "stranded: {:?}", m.waiting);
            for c in 0..CLASSES {
                prop_assert_eq!(a.waiting(c), 0);
            }
        }
    }
}
