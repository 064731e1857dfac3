//! `store_peer`: mote store's peer protocol (`crates/store/proto/peer.proto`), what a replica
//! reads from another. The first byte chooses the message the rest is read as (its low bit):
//! - 0: a `PullRequest`, which a replica answers from its engine
//!   ([`Engine::changes_after`]): the answer names each key once, and only keys it holds;
//! - 1: a `PullResponse`, whose changes the puller's cursor takes and its engine merges
//!   ([`Engine::merge`]): merging the same changes again changes nothing, and a write made here
//!   after the merge wins over everything merged, when merged again too (the replica's clock
//!   stays ahead of every stamp it has seen).
//!
//! Both are decoded with prost as the gRPC service decodes them, must not allocate more than
//! the bytes justify, and must come back equal from their own encoding.

use crate::alloc;
use mote_store::Engine;
use mote_store::engine::PullCursor;
use mote_store::pb::{Change, PullRequest, PullResponse};
use prost::Message;
use std::collections::BTreeSet;

/// The widest element per byte of input is an empty change in `PullResponse::changes` (two
/// bytes: the field's tag and a zero length) in a `Vec` that doubles; every other field's bytes
/// are checked against the input before they are copied.
const PER_BYTE: usize = size_of::<Change>();

/// The wall clock of the served replica's writes, and of the puller's own write after a merge.
const WALL_MS: u64 = 1_700_000_000_000;

/// Runs the target on `data`.
pub fn store_peer(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    match first & 1 {
        0 => pull_request(rest),
        _ => pull_response(rest),
    }
}

fn decoded<M: Message + Default + PartialEq>(bytes: &[u8], what: &str) -> Option<M> {
    let (read, allocated) = alloc::peak(|| M::decode(bytes));
    alloc::assert_within(what, bytes.len(), allocated, PER_BYTE, 1024);
    let message = read.ok()?;
    let again = M::decode(message.encode_to_vec().as_slice()).expect("an encoded message decodes");
    assert!(again == message, "{what} changed on a round trip");
    Some(message)
}

fn pull_request(bytes: &[u8]) {
    let Some(req) = decoded::<PullRequest>(bytes, "a pull request") else {
        return;
    };
    let served = served();
    let resp = served.changes_after(
        req.since,
        &req.resume_key,
        req.limit as usize,
        req.max_bytes as usize,
    );
    // Every key the replica has a state for, deletions included: one page from before the
    // compaction point without bounds.
    let every = served.changes_after(i64::MIN, b"", usize::MAX, usize::MAX);
    let held: BTreeSet<&[u8]> = every.changes.iter().map(|c| c.key.as_slice()).collect();
    let mut named = BTreeSet::new();
    for change in &resp.changes {
        assert!(
            named.insert(change.key.as_slice()),
            "key {:?} twice",
            change.key
        );
        assert!(held.contains(change.key.as_slice()), "key {:?}", change.key);
    }
}

fn pull_response(bytes: &[u8]) {
    let Some(resp) = decoded::<PullResponse>(bytes, "a pull response") else {
        return;
    };
    let mut engine = served();
    let changes = PullCursor::default().advance(resp);
    engine.merge(changes.clone());
    let merged = (engine.digest(), engine.revision());
    let again = engine.merge(changes.clone());
    assert!(again.is_empty(), "merging again applied {again:?}");
    assert_eq!((engine.digest(), engine.revision()), merged);

    let keys: BTreeSet<Vec<u8>> = changes
        .iter()
        .map(|c| c.key.clone())
        .filter(|k| !k.is_empty())
        .take(4)
        .collect();
    for key in &keys {
        put(&mut engine, key, b"here", WALL_MS);
    }
    engine.merge(changes);
    let digest = engine.digest();
    for key in &keys {
        let value = digest.iter().find(|(k, _, _)| k == key).map(|(_, v, _)| v);
        assert_eq!(
            value.map(Vec::as_slice),
            Some(&b"here"[..]),
            "a merge overwrote key {key:?}, written here after it"
        );
    }
}

/// A replica with some history: writes, a deletion, a compaction, and writes after it, so
/// requests reach both the history and the paging through every key.
fn served() -> Engine {
    let mut engine = Engine::new(7);
    for (key, value) in [("a", "1"), ("b", "2"), ("c", "3"), ("a", "4")] {
        put(&mut engine, key.as_bytes(), value.as_bytes(), WALL_MS);
    }
    let req = etcd_client::proto::PbDeleteRequest {
        key: b"b".to_vec(),
        ..Default::default()
    };
    engine
        .delete_range(req, WALL_MS)
        .expect("a delete succeeds");
    engine.compact(3).expect("revision 3 is in history");
    put(&mut engine, b"d", b"5", WALL_MS);
    engine
}

fn put(engine: &mut Engine, key: &[u8], value: &[u8], wall_ms: u64) {
    let req = etcd_client::proto::PbPutRequest {
        key: key.to_vec(),
        value: value.to_vec(),
        ..Default::default()
    };
    engine
        .put(req, wall_ms)
        .expect("a put of a short key succeeds");
}

/// Requests from each place a puller can be (the start, mid-history, behind the compaction
/// point, paging), and answers as a replica gives them.
pub fn seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    let served = served();
    for (since, resume_key) in [
        (0, &b""[..]),
        (2, b""),
        (5, b""),
        (0, b"a"),
        (i64::MAX, b""),
    ] {
        let req = PullRequest {
            replica: 2,
            since,
            limit: 2,
            incarnation: 1,
            resume_key: resume_key.to_vec(),
            max_bytes: 1 << 20,
        };
        seeds.push([&[0u8][..], &req.encode_to_vec()].concat());
        let mut resp = served.changes_after(since, resume_key, 2, 1 << 20);
        resp.incarnation = 1;
        seeds.push([&[1u8][..], &resp.encode_to_vec()].concat());
    }
    // Stamps at the edges of time: the last millisecond a stamp may say, and the last there is.
    for (wall_ms, logical) in [
        (mote_store::clock::MAX_WALL_MS, u32::MAX),
        (u64::MAX, u32::MAX),
    ] {
        let resp = PullResponse {
            changes: vec![Change {
                key: b"a".to_vec(),
                value: b"far".to_vec(),
                stamp: Some(mote_store::pb::Stamp {
                    wall_ms,
                    logical,
                    replica: 9,
                }),
                ..Change::default()
            }],
            next: 9,
            ..PullResponse::default()
        };
        seeds.push([&[1u8][..], &resp.encode_to_vec()].concat());
    }
    seeds
}
