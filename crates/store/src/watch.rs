//! One `Watch` stream: the watchers a client creates and cancels on it, each fed from history
//! (a start revision in the past) and then from the replica's write feed.

use crate::engine::KeyRange;
use crate::error::StoreError;
use crate::replica::Replica;
use etcd_client::proto::{
    PbEvent, PbResponseHeader, PbWatchRequest, PbWatchRequestUnion, PbWatchResponse,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::{broadcast, mpsc};
use tonic::{Status, Streaming};

/// `WatchCreateRequest.FilterType`.
const FILTER_NOPUT: i32 = 0;
const FILTER_NODELETE: i32 = 1;
/// `mvccpb.Event.EventType`.
const EVENT_PUT: i32 = 0;

struct Watcher {
    range: KeyRange,
    prev_kv: bool,
    no_put: bool,
    no_delete: bool,
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
}

/// The watchers of one stream and the replica's feed they read together.
struct Stream {
    replica: Arc<Replica>,
    watchers: BTreeMap<i64, Watcher>,
    next_id: i64,
    feed: broadcast::Receiver<Arc<Vec<PbEvent>>>,
}

/// Serves one stream until the client closes it or goes away.
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
            if !events.is_empty() {
                responses.push(PbWatchResponse {
                    header: Some(header),
                    watch_id: *id,
                    events,
                    ..PbWatchResponse::default()
                });
            }
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
        let compacted = engine.compacted();
        drop(engine);
        match history {
            Ok(events) => self.deliver(&events),
            Err(_) => std::mem::take(&mut self.watchers)
                .into_keys()
                .map(|id| compacted_response(self.header(), id, compacted))
                .collect(),
        }
    }

    fn handle(&mut self, request: PbWatchRequest) -> Vec<PbWatchResponse> {
        match request.request_union {
            Some(PbWatchRequestUnion::CreateRequest(create)) => {
                let watcher = Watcher {
                    range: KeyRange::new(&create.key, &create.range_end),
                    prev_kv: create.prev_kv,
                    no_put: create.filters.contains(&FILTER_NOPUT),
                    no_delete: create.filters.contains(&FILTER_NODELETE),
                    from: create.start_revision,
                };
                self.create(create.watch_id, watcher)
            }
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
                // The published revision is read first, then every write published so far (all
                // of them up to that revision) is delivered, so the notification promises
                // nothing that was not sent.
                let mut header = self.header();
                header.revision = self.replica.published();
                let mut responses = Vec::new();
                loop {
                    match self.feed.try_recv() {
                        Ok(events) => responses.extend(self.deliver(&events)),
                        Err(broadcast::error::TryRecvError::Lagged(_)) => {
                            responses.extend(self.catch_up())
                        }
                        Err(_) => break,
                    }
                }
                responses.push(PbWatchResponse {
                    header: Some(header),
                    watch_id: -1,
                    ..PbWatchResponse::default()
                });
                responses
            }
            None => Vec::new(),
        }
    }

    /// Adds `watcher`, whose `from` is the start revision asked for (0: from now on).
    fn create(&mut self, watch_id: i64, mut watcher: Watcher) -> Vec<PbWatchResponse> {
        let id = if watch_id > 0 {
            watch_id
        } else {
            while self.watchers.contains_key(&self.next_id) {
                self.next_id += 1;
            }
            self.next_id
        };
        let engine = self.replica.engine();
        let header = engine.header();
        if self.watchers.contains_key(&id) {
            return vec![PbWatchResponse {
                header: Some(header),
                watch_id: id,
                canceled: true,
                cancel_reason: "etcdserver: duplicate watch ID".into(),
                ..PbWatchResponse::default()
            }];
        }
        if watcher.from <= 0 {
            watcher.from = engine.revision() + 1;
        }
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
        if !events.is_empty() {
            responses.push(PbWatchResponse {
                header: Some(header),
                watch_id: id,
                events,
                ..PbWatchResponse::default()
            });
        }
        // History covered everything up to `now`; the feed may still hold those writes.
        watcher.from = watcher.from.max(now + 1);
        self.watchers.insert(id, watcher);
        self.next_id = self.next_id.max(id + 1);
        responses
    }
}

fn compacted_response(header: PbResponseHeader, id: i64, compacted: i64) -> PbWatchResponse {
    PbWatchResponse {
        header: Some(header),
        watch_id: id,
        canceled: true,
        compact_revision: compacted,
        cancel_reason: StoreError::Compacted.to_string(),
        ..PbWatchResponse::default()
    }
}
