//! Where a call that arrived at this node runs.
//!
//! Each function has a few *home* nodes, the first [`PlacementConfig::homes`] of the nodes that
//! take calls, ranked by rendezvous hashing of the function's name with each node's: every node
//! computes the same homes from the same members, a node joining or leaving moves only the
//! functions it is (or becomes) a home of, and a home that cannot take calls is replaced by the
//! next node in the function's ranking. Keeping a function on its homes keeps its code resident
//! there, as OpenWhisk's home invoker does.
//!
//! A call from a client runs, in this order of preference:
//! 1. here, if this node is a home with a free core (no forwarding cost);
//! 2. on the first home with a free core: for a peer, one of the free cores its last report
//!    showed, of which each of the cluster's nodes may fill its share until the next report;
//! 3. otherwise where it is expected to finish first: on a node with a free core it starts at
//!    once; on a busy one it waits for the work ahead of it there ([`Member::wait_at`]: the
//!    node's [`crate::Backlog`] as reported, worked off since, plus what this node sent it),
//!    which under a ranking policy is the work of calls expected to be as short or shorter. A
//!    peer adds the forwarding cost, a node that is not a home [`PlacementConfig::away`]; among
//!    equals, the node with the fewest calls a core, a home, this node.
//!
//! So a short call goes to a home busy with long calls when that node would run it next, and
//! leaves its homes for an idle peer only when the wait it saves is worth the trip.
//!
//! A call a peer forwarded runs here, whatever this node's load: it is never forwarded twice.
//! Nodes that are stopping, and those the caller could not reach for this call (`exclude`),
//! take no call; when no node can, the call is refused.

mod pull;

use crate::membership::{Member, Membership, NodeName};
use std::collections::HashMap;
use std::time::Duration;

/// The most home nodes a function can have.
pub const MAX_HOMES: usize = 8;

/// How calls are placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlacementConfig {
    /// Home nodes per function (1 to [`MAX_HOMES`]).
    pub homes: usize,
    /// What running a call on a peer adds to its response, there and back (`mote bench
    /// cluster` measures it: about 150 µs on loopback).
    pub forward: Duration,
    /// What running a call away from its function's homes is taken to cost: its code may not
    /// be resident there, and each call that leaves them spreads it further. A call leaves its
    /// homes when that saves it more than this.
    pub away: Duration,
    /// Busy nodes drawn at random, beside the homes and this node, to compare when no home
    /// has a core free (0: every node; at most [`MAX_CHOICES`]).
    pub choices: usize,
}

/// The most busy nodes drawn for a call.
pub const MAX_CHOICES: usize = 8;

impl Default for PlacementConfig {
    fn default() -> Self {
        Self {
            homes: 2,
            forward: Duration::from_micros(150),
            away: Duration::from_millis(1),
            choices: 2,
        }
    }
}

/// Where a call came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A client: the call may be forwarded.
    Client,
    /// A peer that forwarded it: it runs here.
    Peer,
}

/// Where a call runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// On this node.
    Here,
    /// On this peer.
    Forward(NodeName),
    /// Nowhere: every node is stopping or was unreachable for this call.
    Refuse,
}

/// Places calls over this node's view of the cluster.
#[derive(Clone, Debug)]
pub struct Placement {
    view: Membership,
    homes: usize,
    forward: Duration,
    away: Duration,
    /// Each function's homes while the set of takers stays as it was at `ranked_at`: ranking
    /// hashes the function with every node, a cost that grows with the cluster (measured in
    /// `benches/placement.rs`), while the set changes only when nodes join, leave or stop. One
    /// entry per function placed: the node places only calls of functions it knows.
    ranked: HashMap<Box<str>, Vec<NodeName>>,
    ranked_at: u64,
    /// The nodes that take calls, as of `ranked_at`: busy ones are drawn from them, and each
    /// may send to a peer its share of the peer's free cores.
    taker_names: Vec<NodeName>,
    choices: usize,
    /// How many draws were made: the seed of the next.
    draws: u64,
    /// When the last scan found no peer with a core free: the earliest time (ns on the view's
    /// clock) one could have worked off what it reported. Until then no peer can have a core
    /// free, unless it reports or answers (then [`Placement::may_be_free`] looks at it) or the
    /// takers change (then it is forgotten): sending calls only fills cores. So a decision
    /// need not scan every node to find a free one.
    all_busy: Option<u64>,
}

impl Placement {
    /// Places calls over `view`.
    pub fn new(view: Membership, config: PlacementConfig) -> Self {
        let taker_names: Vec<NodeName> = view
            .members()
            .filter(|m| m.takes_calls())
            .map(|m| m.name().clone())
            .collect();
        Self {
            taker_names,
            choices: config.choices.min(MAX_CHOICES),
            draws: 0,
            all_busy: None,
            ranked_at: view.takers_changed(),
            view,
            homes: config.homes.clamp(1, MAX_HOMES),
            forward: config.forward,
            away: config.away,
            ranked: HashMap::new(),
        }
    }

    /// This node's view of the cluster.
    pub fn view(&self) -> &Membership {
        &self.view
    }

    /// Applies a change in the cluster.
    pub fn apply(&mut self, event: crate::Event) {
        let reported = match &event {
            crate::Event::Seen { report, .. } => Some(report.name.clone()),
            crate::Event::Gone(_) => None,
        };
        self.view.apply(event);
        if let Some(peer) = reported {
            self.may_be_free(peer.as_str());
        }
    }

    /// Says that `peer` could not be reached: it takes no call until it reports again.
    pub fn unreachable(&mut self, peer: &str) {
        self.view.unreachable(peer);
    }

    /// Says that a call of expected time `expected` forwarded to `peer` has been answered: it
    /// no longer counts on the peer's load.
    pub fn answered(&mut self, peer: &str, expected: Duration) {
        self.view.answered(peer, expected);
        self.may_be_free(peer);
    }

    /// Keeps [`Placement::all_busy`] true after `peer` reported or answered: forgotten if it
    /// now has a core free for this node, brought forward if it could have one sooner.
    fn may_be_free(&mut self, peer: &str) {
        let (Some(until), Some(member)) = (self.all_busy, self.view.get(peer)) else {
            return;
        };
        if member.name() == self.view.me() || !member.takes_calls() {
            return;
        }
        let now = self.view.now();
        let now_ns = now.as_nanos() as u64;
        self.all_busy = match member.free_for(now, self.senders()) {
            true => None,
            false => match member.drains_at().filter(|&at| at > now_ns) {
                Some(at) => Some(until.min(at)),
                None => Some(until),
            },
        };
    }

    /// Sets this node's own load, measured at `at` (see [`Membership::set_my_load`]).
    pub fn set_my_load(&mut self, load: crate::Load, at: Duration) {
        self.view.set_my_load(load, at);
    }

    /// Sets this node's own calls, counted at `at`, keeping the backlog it last reported (see
    /// [`Membership::set_my_calls`]).
    pub fn set_my_calls(&mut self, running: u32, queued: u32, at: Duration) {
        self.view.set_my_calls(running, queued, at);
    }

    /// The home nodes of `function`, best first.
    pub fn homes(&self, function: &str) -> Vec<NodeName> {
        let homes = self.ranked_homes(function, &[]);
        homes.iter().flatten().map(|m| m.name().clone()).collect()
    }

    /// Where a call of `function`, expected to take `expected`, runs; `exclude` names the nodes
    /// already tried for this call that could not be reached. The call counts on the chosen
    /// node's load until that node reports again.
    pub fn place(
        &mut self,
        function: &str,
        expected: Duration,
        origin: Origin,
        exclude: &[NodeName],
    ) -> Decision {
        let me = self.view.me().clone();
        let chosen = match origin {
            Origin::Peer => me.clone(),
            Origin::Client => match self.choose(function, expected, exclude) {
                Some(name) => name,
                None => return Decision::Refuse,
            },
        };
        self.view.sent(chosen.as_str(), expected);
        match chosen == me {
            true => Decision::Here,
            false => Decision::Forward(chosen),
        }
    }

    fn choose(
        &mut self,
        function: &str,
        expected: Duration,
        exclude: &[NodeName],
    ) -> Option<NodeName> {
        self.refresh();
        self.draws = self.draws.wrapping_add(1);
        let homes = match exclude.is_empty() {
            true => {
                self.rank(function);
                self.ranked_homes_cached(function)
            }
            false => self.ranked_homes(function, exclude),
        };
        let homes = || homes.iter().flatten().copied();
        let now = self.view.now();
        let now_ns = now.as_nanos() as u64;
        let senders = self.senders();
        // By address: a scan over a thousand members should not read a thousand names.
        let me: &Member = self.view.get(self.view.me().as_str())?;
        let is_me = |m: &Member| std::ptr::eq(m, me);
        // This node knows its own load first hand; a peer's free cores are shared among the
        // nodes that send to it.
        let free = |m: &Member| match is_me(m) {
            true => m.load().has_free_core(),
            false => m.free_for(now, senders),
        };
        let is_home = |m: &Member| homes().any(|h| std::ptr::eq(h, m));
        if let Some(home) = homes()
            .find(|m| is_me(m) && free(m))
            .or_else(|| homes().find(|m| free(m)))
        {
            return Some(home.name().clone());
        }
        // Busy nodes are compared only among the homes, this node and a few drawn at random:
        // every node of the cluster decides from reports of the same age, and if each sent
        // its calls to the one busy node that looked best, they would all send them to the
        // same one until its next report (power of d choices).
        let drawn = self.drawn(self.draws, exclude);
        let is_drawn = |m: &Member| match &drawn {
            None => true,
            Some(drawn) => drawn.iter().flatten().any(|d| std::ptr::eq(*d, m)),
        };
        let key = |m: &Member, free: bool| {
            let (home, mine) = (is_home(m), is_me(m));
            // A function that never ran has no expected time, so nothing tells how long it
            // would wait: its calls spread by count.
            let finish = match (expected.is_zero(), free) {
                (true, _) => Duration::ZERO,
                (false, true) => self.cost(home, mine),
                (false, false) => m.wait_at(now, expected) + self.cost(home, mine),
            };
            // Last the name's hash: which of two equals wins must not hang on the order they
            // were looked at in.
            (finish, m.calls_per_core_milli_at(now), !home, !mine, m.seed)
        };
        // Only when a few are drawn: with every node a candidate, the scan is the comparison.
        let all_busy = drawn.is_some()
            && exclude.is_empty()
            && self.all_busy.is_some_and(|until| now_ns < until);
        let (chosen, busy_until) = match all_busy {
            // No peer can have a core free: only the candidates need looking at.
            true => {
                let candidates = homes()
                    .chain(std::iter::once(me))
                    .chain(drawn.iter().flatten().flatten().copied())
                    .filter(|m| m.takes_calls());
                let best = candidates
                    .map(|m| (m, key(m, free(m))))
                    .min_by_key(|(_, k)| *k);
                (best.map(|(m, _)| m), self.all_busy)
            }
            false => {
                // Also learns whether some peer has a core free, and if none does, the
                // earliest time one could, by working off what it reported.
                let mut until = Some(u64::MAX);
                let best = self
                    .takers(exclude)
                    .filter_map(|m| {
                        let free = free(m);
                        if !is_me(m) {
                            // A peer whose report is worked off already is busy with the calls
                            // this node sent it, which only an answer or a report takes back.
                            let drains = m.drains_at().filter(|&at| at > now_ns);
                            until = match free {
                                true => None,
                                false => until.map(|u| u.min(drains.unwrap_or(u64::MAX))),
                            };
                        }
                        let candidate = free || is_home(m) || is_me(m) || is_drawn(m);
                        candidate.then(|| (m, key(m, free)))
                    })
                    .min_by_key(|(_, k)| *k);
                (best.map(|(m, _)| m), until)
            }
        };
        let chosen = chosen?.name().clone();
        // A scan that skipped the excluded nodes cannot tell whether one of them is free.
        if exclude.is_empty() {
            self.all_busy = busy_until;
        }
        Some(chosen)
    }

    /// [`PlacementConfig::choices`] takers drawn at random (with repeats) from the draw
    /// `draw`; `None` when every taker is to be compared (no choices, or a cluster that
    /// small).
    fn drawn(&self, draw: u64, exclude: &[NodeName]) -> Option<[Option<&Member>; MAX_CHOICES]> {
        let mut drawn = [None; MAX_CHOICES];
        let takers = self.taker_names.len();
        if self.choices == 0 || takers <= self.choices + self.homes + 1 {
            return None;
        }
        for (i, slot) in drawn.iter_mut().take(self.choices).enumerate() {
            let seed = draw.wrapping_mul(MAX_CHOICES as u64).wrapping_add(i as u64);
            let pick = xxhash_rust::xxh3::xxh3_64(&seed.to_le_bytes()) as usize % takers;
            let name = &self.taker_names[pick];
            if !exclude.contains(name) {
                *slot = self.view.get(name.as_str());
            }
        }
        Some(drawn)
    }

    /// Forgets that every peer was busy, so the next decision scans them all.
    #[cfg(test)]
    fn forget_busy(&mut self) {
        self.all_busy = None;
    }

    /// The nodes that send calls to a peer and share its free cores: the takers.
    fn senders(&self) -> u32 {
        u32::try_from(self.taker_names.len()).unwrap_or(u32::MAX)
    }

    /// What running a call on a node costs beyond its wait there.
    fn cost(&self, home: bool, mine: bool) -> Duration {
        let forward = if mine { Duration::ZERO } else { self.forward };
        let away = if home { Duration::ZERO } else { self.away };
        forward + away
    }

    /// Forgets the rankings and recounts the takers once the set of takers changed.
    fn refresh(&mut self) {
        if self.ranked_at != self.view.takers_changed() {
            self.ranked.clear();
            self.ranked_at = self.view.takers_changed();
            self.taker_names = self.takers(&[]).map(|m| m.name().clone()).collect();
            self.all_busy = None;
        }
    }

    /// Ranks `function`'s homes among every taker, unless they are ranked for this set of
    /// takers already ([`Placement::refresh`] first).
    fn rank(&mut self, function: &str) {
        if !self.ranked.contains_key(function) {
            let homes = self.homes(function);
            self.ranked.insert(function.into(), homes);
        }
    }

    /// `function`'s homes as [`Placement::rank`] left them.
    fn ranked_homes_cached(&self, function: &str) -> [Option<&Member>; MAX_HOMES] {
        let mut homes = [None; MAX_HOMES];
        for (slot, name) in homes.iter_mut().zip(&self.ranked[function]) {
            *slot = self.view.get(name.as_str());
        }
        homes
    }

    /// The nodes that may take a call: up, not stopping, not excluded; by name.
    fn takers<'a>(&'a self, exclude: &'a [NodeName]) -> impl Iterator<Item = &'a Member> + 'a {
        self.view
            .members()
            .filter(move |m| m.takes_calls() && !exclude.contains(m.name()))
    }

    /// The first `homes` takers in `function`'s rendezvous ranking, best first.
    fn ranked_homes<'a>(
        &'a self,
        function: &str,
        exclude: &'a [NodeName],
    ) -> [Option<&'a Member>; MAX_HOMES] {
        let mut best: [Option<(u64, &Member)>; MAX_HOMES] = [None; MAX_HOMES];
        for member in self.takers(exclude) {
            let score = xxhash_rust::xxh3::xxh3_64_with_seed(function.as_bytes(), member.seed);
            // Insertion into the sorted prefix of length `homes`; ties go to the smaller name,
            // which comes first in `takers`, so every node ranks alike.
            let mut entry = Some((score, member));
            for slot in best.iter_mut().take(self.homes) {
                match (*slot, entry) {
                    (None, _) => {
                        *slot = entry;
                        break;
                    }
                    (Some((held, _)), Some((new, _))) if new > held => {
                        entry = std::mem::replace(slot, entry);
                    }
                    _ => {}
                }
            }
        }
        best.map(|slot| slot.map(|(_, member)| member))
    }
}

#[cfg(test)]
mod tests;
