//! One `Watch` stream: the watchers a client creates and cancels on it, each fed from history
//! (a start revision in the past) and then from the replica's write feed.
//!
//! Beyond events, a stream answers progress requests, sends a progress notification to each
//! watcher that asked for them once an interval passed without events for it, and splits a
//! response too large for one message into fragments for watchers that accept them, all as
//! etcd does.

use crate::engine::KeyRange;
use crate::error::StoreError;
use crate::replica::Replica;
use etcd_client::proto::{
    PbEvent, PbResponseHeader, PbWatchRequest, PbWatchRequestUnion, PbWatchResponse,
};
use prost::Message;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};
use tokio::time::{Instant, MissedTickBehavior};
use tonic::{Status, Streaming};

/// How often a watcher that asked for progress notifications (`progress_notify`) gets one if
/// no event reached it meanwhile: etcd's `--watch-progress-notify-interval`. etcd's default is
/// 10 minutes; a few seconds lets a client see the revision move while costing one small
/// response per idle watcher per interval.
pub const PROGRESS_NOTIFY_INTERVAL: Duration = Duration::from_secs(5);

/// The largest response a watcher that accepts fragments gets in one piece, as on etcd: its
/// request limit (`--max-request-bytes`, 1.5 MiB) plus the 512 KiB it allows gRPC on top.
pub const MAX_RESPONSE_BYTES: usize = 1536 * 1024 + 512 * 1024;

/// `WatchCreateRequest.FilterType`.
const FILTER_NOPUT: i32 = 0;
const FILTER_NODELETE: i32 = 1;
/// `mvccpb.Event.EventType`.
const EVENT_PUT: i32 = 0;
/// The field number of `WatchResponse.events`, to size events as they are encoded.
const EVENTS_FIELD: u32 = 11;
/// The watch id of a response that is about no one watcher (a refused create, an answer to a
/// progress request).
const NO_WATCH: i64 = -1;

struct Watcher {
    range: KeyRange,
    prev_kv: bool,
    no_put: bool,
    no_delete: bool,
    progress_notify: bool,
    fragment: bool,
    /// No event was sent to it since the last progress tick.
    quiet: bool,
    /// Events below this revision were delivered already (or predate the watch).
    from: i64,
}

impl Watcher {
    fn wants(&self, event: &PbEvent) -> bool {
        let Some(kv) = &event.kv else { return false };
        let filtered = match event.r#type {
            EVENT_PUT => self.no_put,
            _ => self.no_delete,
        };
        !filtered && kv.mod_revision >= self.from && self.range.contains(&kv.key)
    }

    fn select(&self, events: &[PbEvent]) -> Vec<PbEvent> {
        events
            .iter()
            .filter(|e| self.wants(e))
            .map(|e| {
                let mut e = e.clone();
                if !self.prev_kv {
                    e.prev_kv = None;
                }
                e
            })
            .collect()
    }

    /// The responses carrying `events` (none if there are none) to this watcher, `id`.
    fn respond(
        &mut self,
        header: PbResponseHeader,
        id: i64,
        events: Vec<PbEvent>,
    ) -> Vec<PbWatchResponse> {
        if events.is_empty() {
            return Vec::new();
        }
        self.quiet = false;
        let whole = PbWatchResponse {
            header: Some(header),
            watch_id: id,
            events,
            ..PbWatchResponse::default()
        };
        match self.fragment {
            true => fragments(whole),
            false => vec![whole],
        }
    }
}

/// `whole` split into responses of fewer than [`MAX_RESPONSE_BYTES`] (a single event may be
/// larger), all but the last marked `fragment`, as etcd splits them; clients join them again.
fn fragments(whole: PbWatchResponse) -> Vec<PbWatchResponse> {
    if whole.encoded_len() < MAX_RESPONSE_BYTES || whole.events.len() < 2 {
        return vec![whole];
    }
    let mut part = PbWatchResponse {
        events: Vec::new(),
        fragment: true,
        ..whole.clone()
    };
    let base = part.encoded_len();
    let mut parts = Vec::new();
    let mut size = base;
    for event in whole.events {
        let len = prost::encoding::message::encoded_len(EVENTS_FIELD, &event);
        if !part.events.is_empty() && size + len >= MAX_RESPONSE_BYTES {
            let next = PbWatchResponse {
                events: Vec::new(),
                ..part.clone()
            };
            parts.push(std::mem::replace(&mut part, next));
            size = base;
        }
        size += len;
        part.events.push(event);
    }
    part.fragment = false;
    parts.push(part);
    parts
}

/// What a `WatchCreateRequest` asks for.
struct Create {
    watch_id: i64,
    start_revision: i64,
    key: Vec<u8>,
    range_end: Vec<u8>,
    prev_kv: bool,
    filters: Vec<i32>,
    progress_notify: bool,
    fragment: bool,
}

/// The watchers of one stream and the replica's feed they read together.
struct Stream {
    replica: Arc<Replica>,
    watchers: BTreeMap<i64, Watcher>,
    /// The next id to try for a watcher the client lets the stream name.
    next_id: i64,
    feed: broadcast::Receiver<Arc<Vec<PbEvent>>>,
}

/// Serves one stream until the client closes it or goes away, or nobody reads `out` any more
/// (the server stopped and ended the response stream).
pub async fn serve(
    replica: Arc<Replica>,
    mut requests: Streaming<PbWatchRequest>,
    out: mpsc::Sender<Result<PbWatchResponse, Status>>,
) {
    // Subscribed once, before any watcher exists: every write after this is in the feed, and
    // each watcher's `from` skips what its history already covered.
    let feed = replica.subscribe();
    let mut stream = Stream {
        replica,
        watchers: BTreeMap::new(),
        next_id: 0,
        feed,
    };
    let start = Instant::now() + PROGRESS_NOTIFY_INTERVAL;
    let mut ticks = tokio::time::interval_at(start, PROGRESS_NOTIFY_INTERVAL);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        let responses = tokio::select! {
            request = requests.message() => match request {
                Ok(Some(request)) => stream.handle(request),
                Ok(None) | Err(_) => return,
            },
            batch = stream.feed.recv() => match batch {
                Ok(events) => stream.deliver(&events),
                Err(broadcast::error::RecvError::Lagged(_)) => stream.catch_up(),
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = ticks.tick() => stream.notify_progress(),
            // Ending here drops the client's request stream, which the server waits for.
            () = out.closed() => return,
        };
        for response in responses {
            if out.send(Ok(response)).await.is_err() {
                return;
            }
        }
    }
}

impl Stream {
    fn header(&self) -> PbResponseHeader {
        self.replica.engine().header()
    }

    /// Hands one write's events to the watchers that want them.
    fn deliver(&mut self, events: &[PbEvent]) -> Vec<PbWatchResponse> {
        let Some(revision) = events
            .iter()
            .filter_map(|e| e.kv.as_ref())
            .map(|kv| kv.mod_revision)
            .max()
        else {
            return Vec::new();
        };
        let header = self.header();
        let mut responses = Vec::new();
        for (id, w) in self.watchers.iter_mut() {
            let events = w.select(events);
            w.from = w.from.max(revision + 1);
            responses.extend(w.respond(header, *id, events));
        }
        responses
    }

    /// The feed overflowed: replay from history what each watcher missed, or cancel the
    /// watchers whose place was compacted away.
    fn catch_up(&mut self) -> Vec<PbWatchResponse> {
        let replica = self.replica.clone();
        let engine = replica.engine();
        self.feed = replica.subscribe();
        let from = self
            .watchers
            .values()
            .map(|w| w.from)
            .min()
            .unwrap_or(i64::MAX);
        let history = engine.events_after(from.saturating_sub(1));
        let (header, compacted) = (engine.header(), engine.compacted());
        drop(engine);
        match history {
            Ok(events) => self.deliver(&events),
            Err(_) => std::mem::take(&mut self.watchers)
                .into_keys()
                .map(|id| compacted_response(header, id, compacted))
                .collect(),
        }
    }

    /// Delivers every write published so far and returns the header a progress response
    /// carries: its revision is the published one read first, so it promises nothing that
    /// was not sent.
    fn drain(&mut self) -> (PbResponseHeader, Vec<PbWatchResponse>) {
        let mut header = self.header();
        header.revision = self.replica.published();
        let mut responses = Vec::new();
        loop {
            match self.feed.try_recv() {
                Ok(events) => responses.extend(self.deliver(&events)),
                Err(broadcast::error::TryRecvError::Lagged(_)) => responses.extend(self.catch_up()),
                Err(_) => break,
            }
        }
        (header, responses)
    }

    /// A progress tick: each watcher that asked for notifications and got no event since the
    /// last tick hears of the current revision.
    fn notify_progress(&mut self) -> Vec<PbWatchResponse> {
        if !self.watchers.values().any(|w| w.progress_notify) {
            return Vec::new();
        }
        let (header, mut responses) = self.drain();
        for (id, w) in self.watchers.iter_mut() {
            if w.progress_notify && w.quiet {
                responses.push(PbWatchResponse {
                    header: Some(header),
                    watch_id: *id,
                    ..PbWatchResponse::default()
                });
            }
            w.quiet = true;
        }
        responses
    }

    fn handle(&mut self, request: PbWatchRequest) -> Vec<PbWatchResponse> {
        match request.request_union {
            Some(PbWatchRequestUnion::CreateRequest(c)) => self.create(Create {
                watch_id: c.watch_id,
                start_revision: c.start_revision,
                key: c.key,
                range_end: c.range_end,
                prev_kv: c.prev_kv,
                filters: c.filters,
                progress_notify: c.progress_notify,
                fragment: c.fragment,
            }),
            Some(PbWatchRequestUnion::CancelRequest(cancel)) => {
                if self.watchers.remove(&cancel.watch_id).is_none() {
                    return Vec::new();
                }
                vec![PbWatchResponse {
                    header: Some(self.header()),
                    watch_id: cancel.watch_id,
                    canceled: true,
                    ..PbWatchResponse::default()
                }]
            }
            Some(PbWatchRequestUnion::ProgressRequest(_)) => {
                // One answer for the whole stream, which clients hand to every watcher.
                let (header, mut responses) = self.drain();
                responses.push(PbWatchResponse {
                    header: Some(header),
                    watch_id: NO_WATCH,
                    ..PbWatchResponse::default()
                });
                responses
            }
            None => Vec::new(),
        }
    }

    /// Creates a watcher from `create`, or refuses it as etcd does: a negative start revision,
    /// a range holding no key, an id already in use.
    fn create(&mut self, create: Create) -> Vec<PbWatchResponse> {
        let engine = self.replica.engine();
        let header = engine.header();
        let refuse = |why: StoreError| {
            vec![PbWatchResponse {
                header: Some(header),
                watch_id: NO_WATCH,
                created: true,
                canceled: true,
                cancel_reason: why.to_string(),
                ..PbWatchResponse::default()
            }]
        };
        if create.start_revision < 0 {
            return refuse(StoreError::Compacted);
        }
        // etcd watches key "\0" for an empty key.
        let key = match create.key.is_empty() {
            true => vec![0],
            false => create.key,
        };
        let end = create.range_end;
        if !end.is_empty() && end != [0] && key >= end {
            return refuse(StoreError::EmptyWatchRange);
        }
        let id = match create.watch_id {
            0 => {
                while self.watchers.contains_key(&self.next_id) {
                    self.next_id += 1;
                }
                self.next_id += 1;
                self.next_id - 1
            }
            id if self.watchers.contains_key(&id) => return refuse(StoreError::DuplicateWatchId),
            id => id,
        };
        let mut watcher = Watcher {
            range: KeyRange::new(&key, &end),
            prev_kv: create.prev_kv,
            no_put: create.filters.contains(&FILTER_NOPUT),
            no_delete: create.filters.contains(&FILTER_NODELETE),
            progress_notify: create.progress_notify,
            fragment: create.fragment,
            quiet: true,
            from: match create.start_revision {
                0 => engine.revision() + 1,
                start => start,
            },
        };
        let created = PbWatchResponse {
            header: Some(header),
            watch_id: id,
            created: true,
            ..PbWatchResponse::default()
        };
        let history = engine.events_after(watcher.from - 1);
        let (now, compacted) = (engine.revision(), engine.compacted());
        drop(engine);
        let Ok(history) = history else {
            return vec![created, compacted_response(header, id, compacted)];
        };
        let mut responses = vec![created];
        let events = watcher.select(&history);
        responses.extend(watcher.respond(header, id, events));
        // History covered everything up to `now`; the feed may still hold those writes.
        watcher.from = watcher.from.max(now + 1);
        self.watchers.insert(id, watcher);
        responses
    }
}

/// What a watcher below the compaction point gets, as etcd sends it: canceled, with the
/// compaction point, no reason, and a header without a revision.
fn compacted_response(header: PbResponseHeader, id: i64, compacted: i64) -> PbWatchResponse {
    PbWatchResponse {
        header: Some(PbResponseHeader {
            revision: 0,
            ..header
        }),
        watch_id: id,
        canceled: true,
        compact_revision: compacted,
        ..PbWatchResponse::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etcd_client::proto::PbKeyValue;

    fn event(key: &str, bytes: usize, revision: i64) -> PbEvent {
        PbEvent {
            r#type: EVENT_PUT,
            kv: Some(PbKeyValue {
                key: key.into(),
                value: vec![b'x'; bytes],
                mod_revision: revision,
                ..PbKeyValue::default()
            }),
            prev_kv: None,
        }
    }

    /// A watcher that accepts fragments gets a large response in pieces under the limit, all
    /// but the last marked, the events in order; one that does not gets it whole.
    #[test]
    fn large_responses_are_fragmented_for_watchers_that_accept_it() {
        let events: Vec<PbEvent> = (0..5)
            .map(|i| event(&format!("k{i}"), 600_000, i + 2))
            .collect();
        let mut watcher = Watcher {
            range: KeyRange::new(b"k", &[0]),
            prev_kv: false,
            no_put: false,
            no_delete: false,
            progress_notify: false,
            fragment: true,
            quiet: true,
            from: 0,
        };
        let parts = watcher.respond(PbResponseHeader::default(), 3, events.clone());
        let sizes: Vec<usize> = parts.iter().map(|p| p.events.len()).collect();
        assert_eq!(sizes, [3, 2]);
        assert!(parts.iter().all(|p| p.encoded_len() < MAX_RESPONSE_BYTES));
        let flags: Vec<bool> = parts.iter().map(|p| p.fragment).collect();
        assert_eq!(flags, [true, false]);
        let joined: Vec<PbEvent> = parts.into_iter().flat_map(|p| p.events).collect();
        assert_eq!(joined, events);
        assert!(!watcher.quiet, "events were sent");

        let one_big = watcher.respond(PbResponseHeader::default(), 3, vec![event("k", 3 << 20, 2)]);
        assert_eq!(one_big.len(), 1, "a single event is never split");
        watcher.fragment = false;
        assert_eq!(
            watcher
                .respond(PbResponseHeader::default(), 3, events)
                .len(),
            1
        );
    }
}
