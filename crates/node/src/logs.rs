//! Each function's log: the lines its calls (or a job's tasks) wrote (`mote.log`, stderr) and
//! how its failing calls (or tasks) failed, in a [`LogRing`] bounded in bytes, where the oldest entries go first. The
//! node's [`FunctionLogs`] holds one ring per deployed function, by name: a redeploy keeps the
//! ring (its lines still explain the calls before it), removing the function drops it.
//!
//! A call is written to the ring once, when it settles, under one lock: its lines, then, if it
//! failed (or wrote more lines than a call may keep), one `outcome` entry with why. A call that
//! succeeded without writing anything is not written at all, so the call path pays nothing for
//! logs it does not have.
//!
//! Invariants of a ring: its entries' sequence numbers increase by one from entry to entry
//! (the oldest are dropped from the front); the bytes it counts (each entry's text plus a fixed
//! overhead, [`ENTRY_BYTES`]) never exceed its bound. Followers ([`LogFollower`]) wait on a
//! `watch` channel carrying the last sequence number, which is only sent to while someone
//! follows, and read what is new from the ring itself.

use crate::metrics::Outcome;
use mote_runtime::{GuestLog, LogStream, MAX_LINES};
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Weak};
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::sync::watch;

/// What one entry costs a ring besides its text: the entry itself.
pub const ENTRY_BYTES: usize = std::mem::size_of::<LogEntry>();

/// The default bound of each function's ring.
pub const DEFAULT_FUNCTION_LOG_BYTES: usize = 256 << 10;

/// A call's number on this node, unique while the node runs; shown as `NODE-N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallId(pub u64);

impl CallId {
    /// The id as users see it: the node's name and the number, `NODE-N`.
    pub fn render(self, node: &str) -> String {
        format!("{node}-{}", self.0)
    }
}

/// Who wrote an entry: a call, or a task of a job (the job function's log holds its tasks'
/// lines and failures).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Writer {
    /// A call, by its number.
    Call(CallId),
    /// A job's task, as the log shows it (`job ID, compute stage 0, partition 3`).
    Task(Arc<str>),
}

impl Writer {
    /// The writer as users see it: a call's `NODE-N`, or the task.
    pub fn render(&self, node: &str) -> String {
        match self {
            Self::Call(call) => call.render(node),
            Self::Task(task) => task.to_string(),
        }
    }
}

/// What an entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryStream {
    /// A line the guest wrote (`mote.log`, stdout, stderr).
    Guest(LogStream),
    /// How a call ended, when it failed or lost lines.
    Outcome,
}

impl EntryStream {
    /// Its name, as the logs API shows it: `log`, `stdout`, `stderr` or `outcome`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Guest(stream) => stream.as_str(),
            Self::Outcome => "outcome",
        }
    }
}

/// One entry of a function's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogEntry {
    /// Its number in its ring, increasing by one per entry.
    pub seq: u64,
    /// When its call settled, in milliseconds since the Unix epoch.
    pub unix_ms: u64,
    /// The call or task that wrote it.
    pub call: Writer,
    /// What it is.
    pub stream: EntryStream,
    /// How its call ended.
    pub outcome: Outcome,
    /// The line, or for an `outcome` entry why the call failed.
    pub text: String,
}

impl LogEntry {
    /// What it costs its ring.
    pub fn bytes(&self) -> usize {
        ENTRY_BYTES + self.text.len()
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

/// The entries of one function's log, within a bound in bytes.
#[derive(Debug)]
struct Ring {
    entries: VecDeque<LogEntry>,
    bytes: usize,
    bound: usize,
    next_seq: u64,
}

impl Ring {
    fn new(bound: usize) -> Self {
        Self {
            entries: VecDeque::new(),
            bytes: 0,
            bound,
            next_seq: 1,
        }
    }

    /// Adds `entry` with the next sequence number, dropping the oldest entries to make room;
    /// an entry larger than the whole bound is cut to fit (or, under a bound too small for any
    /// entry, not kept).
    fn push(&mut self, mut entry: LogEntry) {
        let Some(room) = self.bound.checked_sub(ENTRY_BYTES) else {
            return;
        };
        mote_runtime::cut_line(&mut entry.text, room);
        entry.seq = self.next_seq;
        self.next_seq += 1;
        let cost = entry.bytes();
        while self.bytes + cost > self.bound {
            let dropped = self
                .entries
                .pop_front()
                .expect("the bytes counted are entries");
            self.bytes -= dropped.bytes();
        }
        self.bytes += cost;
        self.entries.push_back(entry);
    }

    /// The newest `n` entries.
    fn tail(&self, n: usize) -> Vec<LogEntry> {
        let skip = self.entries.len().saturating_sub(n);
        self.entries.iter().skip(skip).cloned().collect()
    }

    /// The entries numbered above `seq`.
    fn after(&self, seq: u64) -> Vec<LogEntry> {
        let first = self.entries.front().map_or(self.next_seq, |e| e.seq);
        let skip =
            usize::try_from(seq.saturating_add(1).saturating_sub(first)).unwrap_or(usize::MAX);
        self.entries.iter().skip(skip).cloned().collect()
    }
}

/// One function's log.
pub struct LogRing {
    ring: Mutex<Ring>,
    /// The last sequence number written, for followers; sent only while someone follows.
    written: watch::Sender<u64>,
    /// Becomes true when the node stops serving, which ends every follower.
    stopping: watch::Receiver<bool>,
}

impl fmt::Debug for LogRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogRing").field("ring", &self.ring).finish()
    }
}

impl LogRing {
    fn new(bound: usize, stopping: watch::Receiver<bool>) -> Self {
        Self {
            ring: Mutex::new(Ring::new(bound)),
            written: watch::channel(0).0,
            stopping,
        }
    }

    /// Writes what call `call` logged, and why it failed (`error`), if it did.
    pub(crate) fn record(
        &self,
        call: CallId,
        outcome: Outcome,
        error: Option<String>,
        log: GuestLog,
    ) {
        self.write(Writer::Call(call), outcome, error, log);
    }

    /// Writes what a job's task logged, and why it failed (`error`), if it did.
    pub fn record_task(
        &self,
        task: Arc<str>,
        outcome: Outcome,
        error: Option<String>,
        log: GuestLog,
    ) {
        self.write(Writer::Task(task), outcome, error, log);
    }

    fn write(&self, call: Writer, outcome: Outcome, error: Option<String>, log: GuestLog) {
        let unix_ms = now_ms();
        let dropped = log.dropped();
        let entry = |stream, text| LogEntry {
            seq: 0,
            unix_ms,
            call: call.clone(),
            stream,
            outcome,
            text,
        };
        let note = match (error, dropped) {
            (error, 0) => error,
            (error, n) => Some(format!(
                "{}; {n} more lines were dropped (a call keeps at most {MAX_LINES})",
                error.as_deref().unwrap_or(outcome.as_str())
            )),
        };
        let mut ring = self.ring.lock();
        for line in log.into_lines() {
            ring.push(entry(EntryStream::Guest(line.stream), line.text));
        }
        if let Some(note) = note {
            ring.push(entry(EntryStream::Outcome, note));
        }
        let last = ring.next_seq - 1;
        drop(ring);
        // One atomic load when nobody follows.
        if self.written.receiver_count() > 0 {
            self.written.send_replace(last);
        }
    }

    /// The newest `n` entries, oldest first, and the sequence number of the last entry
    /// written (0 before the first), to follow on from.
    pub fn tail(&self, n: usize) -> (Vec<LogEntry>, u64) {
        let ring = self.ring.lock();
        (ring.tail(n), ring.next_seq - 1)
    }

    /// The entries numbered above `seq`, oldest first, and the sequence number of the last
    /// entry written.
    pub fn after(&self, seq: u64) -> (Vec<LogEntry>, u64) {
        let ring = self.ring.lock();
        (ring.after(seq), ring.next_seq - 1)
    }

    /// The bytes its entries count, and its bound.
    pub fn usage(&self) -> (usize, usize) {
        let ring = self.ring.lock();
        (ring.bytes, ring.bound)
    }

    /// Follows the entries numbered above `seq` as they are written.
    pub fn follow(self: &Arc<Self>, seq: u64) -> LogFollower {
        LogFollower {
            // Subscribed before the first read, so that nothing written after it is missed.
            written: self.written.subscribe(),
            stopping: self.stopping.clone(),
            ring: Arc::downgrade(self),
            last: seq,
        }
    }
}

/// Waits for a function's new log entries.
pub struct LogFollower {
    ring: Weak<LogRing>,
    written: watch::Receiver<u64>,
    stopping: watch::Receiver<bool>,
    last: u64,
}

impl LogFollower {
    /// The entries written since the last ones it returned, waiting for some if there are
    /// none; `None` once the function is removed or the node stops. Entries a slow follower
    /// let the ring drop are skipped (their sequence numbers are missing).
    pub async fn next(&mut self) -> Option<Vec<LogEntry>> {
        loop {
            let (entries, _) = self.ring.upgrade()?.after(self.last);
            if let Some(last) = entries.last() {
                self.last = last.seq;
                return Some(entries);
            }
            if *self.stopping.borrow_and_update() {
                return None;
            }
            tokio::select! {
                changed = self.written.changed() => changed.ok()?,
                changed = self.stopping.changed() => changed.ok()?,
            }
        }
    }
}

/// Every deployed function's log on this node.
pub struct FunctionLogs {
    rings: Mutex<HashMap<Arc<str>, Arc<LogRing>>>,
    bound: usize,
    stopping: watch::Sender<bool>,
}

impl FunctionLogs {
    /// Logs of at most `bound` bytes per function.
    pub fn new(bound: usize) -> Self {
        Self {
            rings: Mutex::new(HashMap::new()),
            bound,
            stopping: watch::channel(false).0,
        }
    }

    /// The log of `name`, if it has one (every deployed function does).
    pub fn get(&self, name: &str) -> Option<Arc<LogRing>> {
        self.rings.lock().get(name).cloned()
    }

    /// The log of `name`, new if it has none yet.
    pub(crate) fn ring(&self, name: &Arc<str>) -> Arc<LogRing> {
        self.rings
            .lock()
            .entry(name.clone())
            .or_insert_with(|| Arc::new(LogRing::new(self.bound, self.stopping.subscribe())))
            .clone()
    }

    /// Drops the log of a function that was removed.
    pub(crate) fn remove(&self, name: &str) {
        self.rings.lock().remove(name);
    }

    /// Ends every follower: the node stops serving.
    pub fn stop_following(&self) {
        self.stopping.send_replace(true);
    }

    /// Resolves when the node stops serving ([`FunctionLogs::stop_following`]).
    pub fn stopped(&self) -> impl std::future::Future<Output = ()> + Send + 'static + use<> {
        let mut stopping = self.stopping.subscribe();
        async move {
            // An error means the logs are gone with the node: stopped too.
            let _ = stopping.wait_for(|stopping| *stopping).await;
        }
    }

    /// Each function's bound in bytes.
    pub fn bound(&self) -> usize {
        self.bound
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mote_runtime::LogLine;
    use proptest::prelude::*;

    fn entry(text: &str) -> LogEntry {
        LogEntry {
            seq: 0,
            unix_ms: 0,
            call: Writer::Call(CallId(1)),
            stream: EntryStream::Guest(LogStream::Log),
            outcome: Outcome::Ok,
            text: text.to_owned(),
        }
    }

    proptest! {
        #[test]
        fn a_flood_stays_within_the_bound_and_keeps_the_newest(
            bound in 0usize..4096,
            lines in proptest::collection::vec(0usize..600, 1..300),
        ) {
            let mut ring = Ring::new(bound);
            for (i, len) in lines.iter().enumerate() {
                ring.push(entry(&format!("{i:04}{}", "x".repeat(*len))));
                prop_assert!(ring.bytes <= bound);
                prop_assert_eq!(ring.bytes, ring.entries.iter().map(LogEntry::bytes).sum::<usize>());
            }
            let seqs: Vec<u64> = ring.entries.iter().map(|e| e.seq).collect();
            prop_assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1));
            if let Some(newest) = ring.entries.back() {
                // The last line pushed is the newest kept (cut if it was larger than the bound).
                let last = format!("{:04}{}", lines.len() - 1, "x".repeat(lines[lines.len() - 1]));
                prop_assert!(last.starts_with(&newest.text));
                prop_assert_eq!(newest.seq, lines.len() as u64);
            } else {
                prop_assert!(bound < ENTRY_BYTES);
            }
        }
    }

    #[test]
    fn tail_and_after_read_the_newest_entries_in_order() {
        let mut ring = Ring::new(ENTRY_BYTES * 3 + 3);
        for text in ["a", "b", "c", "d"] {
            ring.push(entry(text));
        }
        let texts =
            |entries: Vec<LogEntry>| entries.into_iter().map(|e| e.text).collect::<Vec<_>>();
        assert_eq!(texts(ring.tail(10)), ["b", "c", "d"]);
        assert_eq!(texts(ring.tail(1)), ["d"]);
        assert_eq!(texts(ring.after(0)), ["b", "c", "d"]);
        assert_eq!(texts(ring.after(3)), ["d"]);
        assert!(ring.after(4).is_empty());
    }

    fn log_of(lines: &[&str]) -> GuestLog {
        GuestLog::from(
            lines
                .iter()
                .map(|line| LogLine {
                    stream: LogStream::Stderr,
                    text: (*line).to_owned(),
                })
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn a_failing_call_leaves_its_error_even_without_lines() {
        let logs = FunctionLogs::new(DEFAULT_FUNCTION_LOG_BYTES);
        let ring = logs.ring(&Arc::from("f"));
        ring.record(
            CallId(7),
            Outcome::Trap,
            Some("function trapped: unreachable".into()),
            GuestLog::default(),
        );
        ring.record(CallId(8), Outcome::Ok, None, log_of(&["hello"]));
        let (entries, last) = ring.tail(10);
        assert_eq!((entries.len(), last), (2, 2));
        assert_eq!(entries[0].stream, EntryStream::Outcome);
        assert_eq!(entries[0].outcome, Outcome::Trap);
        assert_eq!(entries[0].call, Writer::Call(CallId(7)));
        assert_eq!(entries[0].text, "function trapped: unreachable");
        assert_eq!(entries[1].stream.as_str(), "stderr");
        assert_eq!(
            (entries[1].call.clone(), entries[1].seq),
            (Writer::Call(CallId(8)), 2)
        );
    }

    #[tokio::test]
    async fn followers_get_new_entries_and_end_when_the_node_stops() {
        let logs = FunctionLogs::new(DEFAULT_FUNCTION_LOG_BYTES);
        let ring = logs.ring(&Arc::from("f"));
        ring.record(CallId(1), Outcome::Ok, None, log_of(&["before"]));
        let mut follower = ring.follow(1);
        let writer = {
            let ring = ring.clone();
            tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                ring.record(CallId(2), Outcome::Ok, None, log_of(&["after"]));
            })
        };
        let entries = follower.next().await.unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].text, "after");
        writer.await.unwrap();
        logs.stop_following();
        assert!(follower.next().await.is_none());
    }

    #[tokio::test]
    async fn removing_the_function_ends_its_followers() {
        let logs = FunctionLogs::new(DEFAULT_FUNCTION_LOG_BYTES);
        let ring = logs.ring(&Arc::from("f"));
        let mut follower = ring.follow(0);
        logs.remove("f");
        drop(ring);
        assert!(follower.next().await.is_none());
        assert!(logs.get("f").is_none());
    }
}
