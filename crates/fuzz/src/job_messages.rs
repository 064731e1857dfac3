//! `job_messages`: what a node's internal job routes read from peers. The first byte chooses
//! the decoder the rest feeds (its value modulo 3):
//! - 0: a worker message ([`decode_envelope`], postcard), as `POST .../messages` reads it;
//! - 1: a [`JobSpec`] in JSON, as `PUT /v1/internal/jobs/{id}` reads it;
//! - 2: a [`Report`] in JSON, as `POST .../reports` reads it.
//!
//! Each must not panic, must allocate no more than the bytes justify, and whatever it reads
//! must come back equal from its own encoding: `decode(encode(x)) == x` for every `x` that
//! decodes, so `encode(decode(b))` decodes to what `b` did.

use crate::alloc;
use mote_jobs::message::{
    Envelope, JobSpec, Piece, Progress, Report, Transfer, WorkerMessage, decode_envelope,
    encode_envelope,
};
use mote_jobs::{Cursor, Entry, GroupId, PartitionKey, PartitionMap, WorkerId};

/// serde preallocates a sequence or map from the length the input claims, up to 1 MiB
/// (`serde::__private::size_hint::cautious`); a decoder that fails after claiming has at most
/// one such allocation open per level of nesting, and the deepest of the wire types nests three
/// (`Transfer::early`'s pieces' bytes). That is postcard's and serde's ceiling, whatever the
/// input; anything above it was reserved from a claim.
const SERDE_CLAIMS: usize = 4 << 20;

/// What an element can take in memory for each byte it takes on the wire, doubled for a
/// growing `Vec`: the widest is an empty `String` (24 bytes in memory, one on the wire).
const POSTCARD_PER_BYTE: usize = 64;

/// serde_json claims nothing ahead; its widest element per byte is an empty `Vec` (`[]`, two
/// bytes and a comma, 24 bytes in memory), doubled.
const JSON_PER_BYTE: usize = 32;

/// Runs the target on `data`.
pub fn job_messages(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    match first % 3 {
        0 => envelope(rest),
        1 => json::<JobSpec>(rest, "a job spec"),
        _ => json::<Report>(rest, "a job report"),
    }
}

fn envelope(bytes: &[u8]) {
    let (read, allocated) = alloc::peak(|| decode_envelope(bytes));
    alloc::assert_within(
        "a worker message",
        bytes.len(),
        allocated,
        POSTCARD_PER_BYTE,
        SERDE_CLAIMS,
    );
    let Ok(envelope) = read else {
        return;
    };
    let encoded = encode_envelope(&envelope);
    let again = decode_envelope(&encoded).expect("an encoded envelope decodes");
    assert_eq!(again, envelope, "from {bytes:?}");
}

fn json<T>(bytes: &[u8], what: &str)
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let (read, allocated) = alloc::peak(|| serde_json::from_slice::<T>(bytes));
    alloc::assert_within(what, bytes.len(), allocated, JSON_PER_BYTE, 4096);
    let Ok(value) = read else {
        return;
    };
    let encoded = serde_json::to_vec(&value).expect("a wire type writes as JSON");
    let again: T = serde_json::from_slice(&encoded).expect("written JSON reads back");
    assert_eq!(again, value, "from {:?}", String::from_utf8_lossy(bytes));
}

/// One of each message, spec and report, as the job service sends them.
pub fn seeds() -> Vec<Vec<u8>> {
    let key = PartitionKey {
        group: GroupId(1),
        index: 3,
    };
    let entry = Entry {
        worker: WorkerId(1),
        version: 2,
    };
    let map = PartitionMap::assign(&[4, 1], &[2, 2]);
    let messages = [
        WorkerMessage::Pieces {
            seq: 7,
            group: GroupId(0),
            pieces: vec![
                Piece {
                    index: 1,
                    source: 0,
                    version: 1,
                    data: Some(b"0.5 1.5".to_vec()),
                },
                Piece {
                    index: 2,
                    source: 0,
                    version: 1,
                    data: None,
                },
            ],
        },
        WorkerMessage::MapUpdate {
            entries: vec![(key, entry)],
        },
        WorkerMessage::Signal {
            signal: 3,
            value: true,
        },
        WorkerMessage::Arrive { keys: vec![key] },
        WorkerMessage::Leave {
            entries: vec![(key, entry)],
        },
        WorkerMessage::Transfer(Transfer {
            key,
            from_worker: WorkerId(0),
            version: 2,
            from: 9,
            early: vec![(9, vec![(0, Some(b"abc".to_vec())), (1, None)])],
            image: mote_jobs::image::encode(
                &[("sp".into(), mote_jobs::image::Value::I32(1024))],
                b"memory",
            ),
        }),
        WorkerMessage::Restore(mote_jobs::message::Restore {
            generation: 2,
            iteration: 10,
            cursor: Cursor::new(),
            map: map.clone(),
            live: vec![true, false],
            workers: vec!["http://127.0.0.1:1".into(), "https://[::1]:2".into()],
        }),
    ];
    let mut seeds: Vec<Vec<u8>> = messages
        .into_iter()
        .map(|message| {
            let envelope = Envelope {
                generation: 1,
                message,
            };
            [&[0u8][..], &encode_envelope(&envelope)].concat()
        })
        .collect();
    let spec = JobSpec {
        id: "j1".into(),
        function: "kmeans".into(),
        sha256: "ab".repeat(32),
        args: vec![("k".into(), "3".into())],
        partitions: 4,
        workers: vec!["http://127.0.0.1:1".into(), "http://127.0.0.1:2".into()],
        me: WorkerId(1),
        map,
        controller: "http://127.0.0.1:1".into(),
        generation: 1,
        live: vec![true, true],
        snapshots: Some(mote_jobs::message::SnapshotPlan {
            every: 5,
            bucket: "snaps".into(),
            prefix: "jobs/".into(),
        }),
    };
    seeds.push(
        [
            &[1u8][..],
            &serde_json::to_vec(&spec).expect("a spec writes"),
        ]
        .concat(),
    );
    let progress = Progress {
        worker: WorkerId(1),
        generation: 1,
        tasks: 10,
        partitions: vec![(key, 40)],
        ..Progress::default()
    };
    let reports = [
        Report::Progress(progress.clone()),
        Report::Failed {
            progress: progress.clone(),
            error: "the task trapped".into(),
        },
        Report::Snapshotted {
            progress: progress.clone(),
            iteration: 5,
            keys: vec![key],
            bytes: 100,
            write_us: 20,
            cursor: Cursor::new(),
            error: None,
        },
        Report::Arrived {
            progress: progress.clone(),
            entries: vec![(key, entry)],
            bytes: 64,
        },
        Report::Unreachable {
            progress,
            peer: WorkerId(0),
            error: "refused".into(),
        },
    ];
    for report in reports {
        seeds.push(
            [
                &[2u8][..],
                &serde_json::to_vec(&report).expect("a report writes"),
            ]
            .concat(),
        );
    }
    seeds
}
