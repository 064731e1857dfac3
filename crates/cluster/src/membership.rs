//! One node's view of the cluster, built from the state store's events.
//!
//! Each node keeps a key alive under a lease with what it reports of itself ([`Report`]: where it
//! listens, its load, whether it is stopping); a put of that key is [`Event::Seen`], its deletion
//! or the lease's expiry [`Event::Gone`]. Time is passed in as the time since an origin the
//! caller picks, so tests and simulations run in virtual time.
//!
//! Invariants:
//! - This node is always a member: a node that lost its key (the store unreachable, its lease
//!   expired) still places calls, on itself at least, until it is seen again. `Gone` for this
//!   node is ignored.
//! - A member's [`Member::load`] is what it last reported plus the calls this node sent it
//!   since (as queued calls with their expected time), so that calls placed between two reports
//!   do not all go to the node that looked idlest. A report replaces both.

use crate::backlog::Backlog;
use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// A node's name, unique in its cluster.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeName(Arc<str>);

impl NodeName {
    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for NodeName {
    fn from(name: &str) -> Self {
        Self(Arc::from(name))
    }
}

impl Borrow<str> for NodeName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for NodeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for NodeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

/// How busy a node is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Load {
    /// Cores that run calls (at most one call each).
    pub cores: u32,
    /// Calls running.
    pub running: u32,
    /// Calls waiting for a core.
    pub queued: u32,
    /// The expected work of the running calls (what remains of it) and of the queued ones, by
    /// what a new call would wait for, from each function's recent processing times.
    pub backlog: Backlog,
}

impl Load {
    /// An idle node's load: `cores` cores, calls ranked as `backlog` says.
    pub fn idle(cores: u32, backlog: Backlog) -> Self {
        Self {
            cores,
            running: 0,
            queued: 0,
            backlog,
        }
    }

    /// Whether a call sent now would find a core free.
    pub fn has_free_core(&self) -> bool {
        self.running.saturating_add(self.queued) < self.cores
    }

    /// All the expected work.
    pub fn work(&self) -> Duration {
        self.backlog.total()
    }

    /// The expected work per core: about how long a call at the back of the queue would wait.
    pub fn work_per_core(&self) -> Duration {
        self.work() / self.cores.max(1)
    }

    /// Calls held (running and queued) per core, in thousandths: what tells nodes apart when
    /// their calls' expected times are not known yet.
    pub fn calls_per_core_milli(&self) -> u64 {
        u64::from(self.running.saturating_add(self.queued)) * 1000 / u64::from(self.cores.max(1))
    }

    fn plus(self, other: Load) -> Load {
        Load {
            cores: self.cores,
            running: self.running.saturating_add(other.running),
            queued: self.queued.saturating_add(other.queued),
            backlog: self.backlog.plus(&other.backlog),
        }
    }
}

/// What a node says of itself under its key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The node.
    pub name: NodeName,
    /// Where its peers reach its API.
    pub url: String,
    /// Its load when it wrote this.
    pub load: Load,
    /// Whether it is stopping: it finishes what it holds but takes no new calls.
    pub draining: bool,
}

/// A change in the cluster, as the state store shows it.
// `Seen` carries a report with its backlog (two hundred bytes) and `Gone` a name: events come
// once a second per node, so boxing the report would cost an allocation for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A node's key was written at `at`: it joined, came back or reported again.
    Seen {
        /// What it reported.
        report: Report,
        /// When this node saw it.
        at: Duration,
    },
    /// A node's key is gone: it left, or its lease expired.
    Gone(NodeName),
}

/// What a node sent a peer since its report: nothing yet, counted the way the peer ranks calls.
fn nothing_sent(report: &Report) -> Load {
    Load::idle(0, Backlog::empty(report.load.backlog.is_ranked()))
}

/// A node of the cluster, as this node knows it.
// `hot` first, in declaration order: placement reads it of every member for each call it
// places, and a thousand members' hot parts then take a thousand cache lines, not three
// thousand (measured in `benches/placement.rs`: 12 µs a decision at 1,000 busy nodes before).
#[repr(C)]
#[derive(Clone, Debug)]
pub struct Member {
    hot: Hot,
    report: Report,
    sent: Load,
    heard_at: Duration,
    /// This node could not connect to it since its last report.
    unreachable: bool,
    /// It gave no call to this node's last pull since its last report.
    pub(crate) dry: bool,
    /// Derived from the name once, for rendezvous hashing.
    pub(crate) seed: u64,
}

/// What placement reads of every member, copied from the rest of [`Member`] whenever that
/// changes ([`Member::refresh`]).
#[derive(Clone, Copy, Debug, Default)]
struct Hot {
    takes_calls: bool,
    cores: u32,
    /// Calls it reported, running and queued.
    reported_calls: u32,
    /// Calls this node sent it since.
    sent_calls: u32,
    /// The work it reported, in ns.
    reported_work_ns: u64,
    /// When it reported, in ns.
    heard_ns: u64,
}

impl Member {
    fn new(report: Report, at: Duration) -> Self {
        let mut member = Self {
            hot: Hot::default(),
            seed: xxhash_rust::xxh3::xxh3_64(report.name.as_str().as_bytes()),
            sent: nothing_sent(&report),
            report,
            heard_at: at,
            unreachable: false,
            dry: false,
        };
        member.refresh();
        member
    }

    /// Copies what placement reads of every member into [`Hot`], after any change.
    fn refresh(&mut self) {
        let load = &self.report.load;
        self.hot = Hot {
            takes_calls: !self.report.draining && !self.unreachable,
            cores: load.cores.max(1),
            reported_calls: load.running.saturating_add(load.queued),
            sent_calls: self.sent.running.saturating_add(self.sent.queued),
            reported_work_ns: load.backlog.total().as_nanos() as u64,
            heard_ns: self.heard_at.as_nanos() as u64,
        };
    }

    /// Its name.
    pub fn name(&self) -> &NodeName {
        &self.report.name
    }

    /// Where its peers reach its API.
    pub fn url(&self) -> &str {
        &self.report.url
    }

    /// Its last reported load, plus the calls this node sent it since.
    pub fn load(&self) -> Load {
        self.report.load.plus(self.sent)
    }

    /// Its load as this node expects it at `now`: what it reported, less the work its cores
    /// could have done since (best-ranked first, [`Backlog::drained`]), plus the calls this node
    /// sent it since. Its reported calls count until its reported work could be done: reports
    /// come a third of a TTL apart, while the calls a report caught running mostly end within
    /// microseconds to milliseconds, and taken as they are, one call running at report time
    /// would make a one-core node look full for a second. A report with no expected work (its
    /// functions never ran there) counts until the next report.
    pub fn load_at(&self, now: Duration) -> Load {
        let reported = self.report.load;
        let backlog = reported.backlog.drained(self.done_since(now));
        let reported = match self.reported_calls_at(now) {
            0 => Load::idle(reported.cores, backlog),
            _ => Load {
                backlog,
                ..reported
            },
        };
        reported.plus(self.sent)
    }

    /// The calls it reported, or none once the work it reported could be done.
    #[inline]
    fn reported_calls_at(&self, now: Duration) -> u32 {
        let hot = &self.hot;
        let drained = hot.reported_work_ns != 0 && hot.reported_work_ns <= self.done_ns(now);
        match drained {
            true => 0,
            false => hot.reported_calls,
        }
    }

    /// The work its cores could have done since it reported.
    fn done_since(&self, now: Duration) -> Duration {
        Duration::from_nanos(self.done_ns(now))
    }

    /// [`Member::done_since`] in ns.
    #[inline]
    fn done_ns(&self, now: Duration) -> u64 {
        (now.as_nanos() as u64)
            .saturating_sub(self.hot.heard_ns)
            .saturating_mul(u64::from(self.hot.cores))
    }

    /// How long a call expected to take `expected` would wait for a core there at `now`, if it
    /// found none free: the work ahead of it ([`Member::load_at`]'s, read for one class) spread
    /// over its cores. Constant time, so placement can ask it of a thousand nodes.
    #[inline]
    pub fn wait_at(&self, now: Duration, expected: Duration) -> Duration {
        let ahead =
            self.report
                .load
                .backlog
                .ahead_after(expected, self.done_ns(now), &self.sent.backlog);
        Duration::from_nanos(ahead / u64::from(self.hot.cores))
    }

    /// How long the call that would start last there waits at `now`: all the work it holds,
    /// as [`Member::wait_at`] reads a class, spread over its cores.
    pub fn longest_wait_at(&self, now: Duration) -> Duration {
        // Any time in the last class: an hour is past 17 s.
        self.wait_at(now, Duration::from_secs(3600))
    }

    /// Whether calls may wait there at `now`: it reported some waiting and could not have
    /// worked off what it reported since, or this node sent it calls since. What
    /// `load_at(now).queued > 0` says, without copying the backlog.
    #[inline]
    pub fn has_waiting_at(&self, now: Duration) -> bool {
        (self.report.load.queued > 0 && self.reported_calls_at(now) > 0) || self.sent.queued > 0
    }

    /// Calls held (reported, until their work could be done, and sent since) per core, in
    /// thousandths, at `now`.
    #[inline]
    pub fn calls_per_core_milli_at(&self, now: Duration) -> u64 {
        let calls = self
            .reported_calls_at(now)
            .saturating_add(self.hot.sent_calls);
        u64::from(calls) * 1000 / u64::from(self.hot.cores)
    }

    /// When it will have worked off the work it reported (ns on the view's clock), so its
    /// reported calls stop counting; `None` if it reported no work.
    pub(crate) fn drains_at(&self) -> Option<u64> {
        let hot = &self.hot;
        (hot.reported_work_ns != 0)
            .then(|| hot.heard_ns + hot.reported_work_ns.div_ceil(u64::from(hot.cores)))
    }

    /// Whether this node may send it one more call and expect a free core, when `senders`
    /// nodes share what its report found free: between two reports each sender may fill its
    /// share of the free cores (rounded up), counting the calls it sent since. Without the
    /// share, every node of a large cluster would take a home for free until it had itself sent
    /// it as many calls as it has cores, and a hundred nodes would flood one home before its
    /// next report showed the queue (measured in `mote bench cluster --simulate`).
    #[inline]
    pub fn free_for(&self, now: Duration, senders: u32) -> bool {
        let free = self.hot.cores.saturating_sub(self.reported_calls_at(now));
        self.hot.sent_calls < free.div_ceil(senders.max(1))
    }

    /// Whether it is stopping.
    pub fn draining(&self) -> bool {
        self.report.draining
    }

    /// Whether this node failed to connect to it since it last reported.
    pub fn unreachable(&self) -> bool {
        self.unreachable
    }

    /// Whether calls may be placed on it: it is not stopping, and was not unreachable since it
    /// last reported.
    #[inline]
    pub fn takes_calls(&self) -> bool {
        self.hot.takes_calls
    }

    /// When it last reported.
    pub fn heard_at(&self) -> Duration {
        self.heard_at
    }
}

/// This node's view of the cluster.
#[derive(Clone, Debug)]
pub struct Membership {
    me: NodeName,
    /// The latest time this view was told of.
    now: Duration,
    members: BTreeMap<NodeName, Member>,
    takers_changed: u64,
}

impl Membership {
    /// A view that holds only this node, as it reports itself at `at`.
    pub fn new(me: Report, at: Duration) -> Self {
        let name = me.name.clone();
        Self {
            members: BTreeMap::from([(name.clone(), Member::new(me, at))]),
            me: name,
            now: at,
            takers_changed: 0,
        }
    }

    /// This node's name.
    pub fn me(&self) -> &NodeName {
        &self.me
    }

    /// Applies a change.
    pub fn apply(&mut self, event: Event) {
        match event {
            Event::Seen { report, at } => {
                self.now = self.now.max(at);
                self.seen(report, at);
            }
            Event::Gone(name) if name == self.me => {}
            Event::Gone(name) => {
                if self.members.remove(name.as_str()).is_some() {
                    self.takers_changed += 1;
                }
            }
        }
    }

    /// The latest time this view was told of (by a report or this node's own load).
    pub fn now(&self) -> Duration {
        self.now
    }

    fn seen(&mut self, report: Report, at: Duration) {
        match self.members.get_mut(report.name.as_str()) {
            Some(member) => {
                if member.report.draining != report.draining || member.unreachable {
                    self.takers_changed += 1;
                }
                member.unreachable = false;
                member.dry = false;
                member.sent = nothing_sent(&report);
                member.report = report;
                member.heard_at = at;
                member.refresh();
            }
            None => {
                self.takers_changed += 1;
                self.members
                    .insert(report.name.clone(), Member::new(report, at));
            }
        }
    }

    /// Marks `name` unreachable: this node could not connect to it. It takes no call until it
    /// reports again (a node that died stops reporting, and its key expires a TTL later; one
    /// that was restarting reports again within a third of a TTL).
    pub fn unreachable(&mut self, name: &str) {
        if let Some(member) = self.members.get_mut(name)
            && name != self.me.as_str()
            && !member.unreachable
        {
            member.unreachable = true;
            member.refresh();
            self.takers_changed += 1;
        }
    }

    /// Takes back a call of expected time `expected` counted by [`Membership::sent`] on `name`
    /// once it has been answered, so that a peer that answers fast does not look loaded until
    /// it next reports. A report in between already reset the count; then this changes nothing
    /// below zero.
    pub(crate) fn answered(&mut self, name: &str, expected: Duration) {
        if let Some(member) = self.members.get_mut(name) {
            member.sent.queued = member.sent.queued.saturating_sub(1);
            member.sent.backlog.unqueue(expected);
            member.refresh();
        }
    }

    /// Sets this node's own load, measured now, in place of what it last reported and what it
    /// counted since: this node knows its own load first hand, where it knows its peers' only
    /// from their reports.
    pub fn set_my_load(&mut self, load: Load, at: Duration) {
        self.now = self.now.max(at);
        if let Some(me) = self.members.get_mut(self.me.as_str()) {
            me.report.load = load;
            me.sent = nothing_sent(&me.report);
            me.heard_at = at;
            me.refresh();
        }
    }

    /// Sets this node's own calls, counted at `at`, and forgets those it counted since; its
    /// backlog stays as it last reported it (and ages as a peer's does), for the calls' work
    /// is a pass over its queue while their number is two counters. Calls counted as sent to
    /// this node are dropped: the fresh counts hold them.
    pub fn set_my_calls(&mut self, running: u32, queued: u32, at: Duration) {
        self.now = self.now.max(at);
        if let Some(me) = self.members.get_mut(self.me.as_str()) {
            me.report.load.running = running;
            me.report.load.queued = queued;
            me.sent = nothing_sent(&me.report);
            me.refresh();
        }
    }

    /// A count that moves whenever the set of nodes that take calls (up and not stopping)
    /// changes, so that what was derived from that set can be kept until it does.
    pub(crate) fn takers_changed(&self) -> u64 {
        self.takers_changed
    }

    /// The member called `name`, if it is up.
    pub fn get(&self, name: &str) -> Option<&Member> {
        self.members.get(name)
    }

    /// Every member, by name.
    pub fn members(&self) -> impl Iterator<Item = &Member> {
        self.members.values()
    }

    /// The member called `name`, to change.
    pub(crate) fn get_mut(&mut self, name: &str) -> Option<&mut Member> {
        self.members.get_mut(name)
    }

    /// Counts a call of expected processing time `expected` sent to `name` (this node included)
    /// until `name` reports again.
    pub(crate) fn sent(&mut self, name: &str, expected: Duration) {
        if let Some(member) = self.members.get_mut(name) {
            member.sent.queued = member.sent.queued.saturating_add(1);
            member.sent.backlog.queue(expected);
            member.refresh();
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The report of an idle node `name` with `cores` cores.
    pub(crate) fn idle(name: &str, cores: u32) -> Report {
        Report {
            name: name.into(),
            url: format!("http://{name}:8080"),
            load: Load {
                cores,
                ..Load::default()
            },
            draining: false,
        }
    }

    pub(crate) fn seen(report: Report) -> Event {
        Event::Seen {
            report,
            at: Duration::ZERO,
        }
    }

    #[test]
    fn nodes_join_report_and_leave_but_this_node_stays() {
        let mut view = Membership::new(idle("n1", 1), Duration::ZERO);
        view.apply(seen(idle("n2", 2)));
        let mut busy = idle("n2", 2);
        busy.load.running = 2;
        view.apply(Event::Seen {
            report: busy,
            at: Duration::from_secs(3),
        });
        let n2 = view.get("n2").unwrap();
        assert_eq!(n2.load().running, 2);
        assert_eq!(n2.heard_at(), Duration::from_secs(3));
        assert!(!n2.load().has_free_core());

        view.apply(Event::Gone("n2".into()));
        view.apply(Event::Gone("n1".into()));
        let names: Vec<&str> = view.members().map(|m| m.name().as_str()).collect();
        assert_eq!(names, ["n1"]);
    }

    #[test]
    fn calls_sent_count_until_the_next_report() {
        let mut view = Membership::new(idle("n1", 2), Duration::ZERO);
        view.sent("n1", Duration::from_millis(4));
        view.sent("n1", Duration::from_millis(6));
        let load = view.get("n1").unwrap().load();
        assert_eq!((load.queued, load.work()), (2, Duration::from_millis(10)));
        assert!(!load.has_free_core());
        assert_eq!(load.work_per_core(), Duration::from_millis(5));
        view.apply(seen(idle("n1", 2)));
        assert_eq!(view.get("n1").unwrap().load(), idle("n1", 2).load);

        view.sent("n1", Duration::from_millis(4));
        view.answered("n1", Duration::from_millis(4));
        view.answered("n1", Duration::from_millis(4));
        assert_eq!(view.get("n1").unwrap().load(), idle("n1", 2).load);

        view.sent("n1", Duration::from_millis(4));
        let measured = Load {
            cores: 2,
            running: 1,
            queued: 0,
            backlog: Backlog::all_ahead(Duration::from_millis(1)),
        };
        view.set_my_load(measured, Duration::from_secs(1));
        assert_eq!(view.get("n1").unwrap().load(), measured);
    }

    #[test]
    fn a_report_counts_until_its_work_could_be_done() {
        let mut view = Membership::new(idle("n1", 1), Duration::ZERO);
        let mut busy = idle("n2", 2);
        busy.load.running = 2;
        busy.load.backlog = Backlog::all_ahead(Duration::from_millis(4));
        view.apply(Event::Seen {
            report: busy,
            at: Duration::from_secs(1),
        });
        let n2 = view.get("n2").unwrap();
        let at = |ms: u64| Duration::from_secs(1) + Duration::from_millis(ms);
        assert!(
            !n2.load_at(at(1)).has_free_core(),
            "2 ms of work a core left"
        );
        assert!(
            n2.load_at(at(2)).has_free_core(),
            "the reported calls are done"
        );
        assert_eq!(n2.load_at(at(2)).cores, 2);
        view.sent("n2", Duration::from_millis(1));
        view.sent("n2", Duration::from_millis(1));
        let n2 = view.get("n2").unwrap();
        assert_eq!(n2.load_at(at(5)).queued, 2, "calls sent since still count");

        let mut unknown = idle("n2", 1);
        unknown.load.running = 1;
        view.apply(seen(unknown));
        assert!(
            !view.get("n2").unwrap().load_at(at(60_000)).has_free_core(),
            "a report without expected work counts until the next"
        );
        assert_eq!(view.now(), at(0));
    }
}
