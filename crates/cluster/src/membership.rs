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
    /// The expected processing time of the queued calls plus what remains of the running ones,
    /// from each function's recent processing times.
    pub work: Duration,
}

impl Load {
    /// Whether a call sent now would find a core free.
    pub fn has_free_core(&self) -> bool {
        self.running.saturating_add(self.queued) < self.cores
    }

    /// The expected work per core: about how long a call queued now would wait.
    pub fn work_per_core(&self) -> Duration {
        self.work / self.cores.max(1)
    }

    /// Calls held (running and queued) per core, in thousandths: what tells nodes apart when
    /// their calls' expected times are not known yet.
    pub fn calls_per_core_milli(&self) -> u64 {
        u64::from(self.running.saturating_add(self.queued)) * 1000 / u64::from(self.cores.max(1))
    }

    fn minus(self, other: Load) -> Load {
        Load {
            cores: self.cores,
            running: self.running.saturating_sub(other.running),
            queued: self.queued.saturating_sub(other.queued),
            work: self.work.saturating_sub(other.work),
        }
    }

    fn plus(self, other: Load) -> Load {
        Load {
            cores: self.cores,
            running: self.running.saturating_add(other.running),
            queued: self.queued.saturating_add(other.queued),
            work: self.work.saturating_add(other.work),
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

/// A node of the cluster, as this node knows it.
#[derive(Clone, Debug)]
pub struct Member {
    report: Report,
    sent: Load,
    heard_at: Duration,
    /// This node could not connect to it since its last report.
    unreachable: bool,
    /// Derived from the name once, for rendezvous hashing.
    pub(crate) seed: u64,
}

impl Member {
    fn new(report: Report, at: Duration) -> Self {
        Self {
            seed: xxhash_rust::xxh3::xxh3_64(report.name.as_str().as_bytes()),
            report,
            sent: Load::default(),
            heard_at: at,
            unreachable: false,
        }
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

    /// Its load as this node expects it at `now`: what it reported counts until its cores
    /// could have done the work it reported (its expected work per core after the report),
    /// then only the calls this node sent it since. Reports come a third of a TTL apart, while
    /// the calls a report caught running mostly end within microseconds to milliseconds: taken
    /// as they are, one call running at report time would make a one-core node look full for a
    /// second. A report with no expected work (its functions never ran there) counts until the
    /// next report.
    pub fn load_at(&self, now: Duration) -> Load {
        let reported = self.report.load;
        let drained = !reported.work.is_zero()
            && now.saturating_sub(self.heard_at) >= reported.work_per_core();
        match drained {
            true => Load {
                cores: reported.cores,
                ..Load::default()
            }
            .plus(self.sent),
            false => reported.plus(self.sent),
        }
    }

    /// Whether this node may send it one more call and expect a free core, when `senders`
    /// nodes share what its report found free: between two reports each sender may fill its
    /// share of the free cores (rounded up), counting the calls it sent since. Without the
    /// share, every node of a large cluster would take a home for free until it had itself sent
    /// it as many calls as it has cores, and a hundred nodes would flood one home before its
    /// next report showed the queue (measured in `mote bench cluster --simulate`).
    pub fn free_for(&self, now: Duration, senders: u32) -> bool {
        let reported = self.load_at(now).minus(self.sent);
        let free = reported
            .cores
            .saturating_sub(reported.running.saturating_add(reported.queued));
        self.sent.queued < free.div_ceil(senders.max(1))
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
    pub fn takes_calls(&self) -> bool {
        !self.report.draining && !self.unreachable
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
                member.report = report;
                member.sent = Load::default();
                member.heard_at = at;
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
            member.sent.work = member.sent.work.saturating_sub(expected);
        }
    }

    /// Sets this node's own load, measured now, in place of what it last reported and what it
    /// counted since: this node knows its own load first hand, where it knows its peers' only
    /// from their reports.
    pub fn set_my_load(&mut self, load: Load, at: Duration) {
        self.now = self.now.max(at);
        if let Some(me) = self.members.get_mut(self.me.as_str()) {
            me.report.load = load;
            me.sent = Load::default();
            me.heard_at = at;
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

    /// Counts a call of expected processing time `expected` sent to `name` (this node included)
    /// until `name` reports again.
    pub(crate) fn sent(&mut self, name: &str, expected: Duration) {
        if let Some(member) = self.members.get_mut(name) {
            member.sent.queued = member.sent.queued.saturating_add(1);
            member.sent.work = member.sent.work.saturating_add(expected);
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
        assert_eq!((load.queued, load.work), (2, Duration::from_millis(10)));
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
            work: Duration::from_millis(1),
        };
        view.set_my_load(measured, Duration::from_secs(1));
        assert_eq!(view.get("n1").unwrap().load(), measured);
    }

    #[test]
    fn a_report_counts_until_its_work_could_be_done() {
        let mut view = Membership::new(idle("n1", 1), Duration::ZERO);
        let mut busy = idle("n2", 2);
        busy.load.running = 2;
        busy.load.work = Duration::from_millis(4);
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
