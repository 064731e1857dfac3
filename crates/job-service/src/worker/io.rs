//! A worker's object I/O task: the loads and stores its executors hand over, and the snapshot
//! images they copy at a barrier, done on the node's async runtime (the input's splitting is
//! [`crate::input`]'s; a store writes to the job's staging, [`crate::output`]).

use super::{IoRequest, SnapshotImages, Worker, WorkerError};
use crate::input::{bucket_and_prefix, read_shares};
use crate::output::staged_key;
use bytes::Bytes;
use mote_objects::Objects;
use std::sync::{Arc, Weak};
use tokio::sync::mpsc;

/// Serves a worker's loads and stores until the worker, which owns the requests' sender, is
/// dropped.
pub(crate) fn serve_io(
    worker: Weak<Worker>,
    mut requests: mpsc::UnboundedReceiver<IoRequest>,
    objects: Option<Arc<Objects>>,
    relay: &mote_confine::Relay,
) {
    tokio::spawn(relay.relayed(async move {
        while let Some(request) = requests.recv().await {
            let Some(worker) = worker.upgrade() else {
                return;
            };
            let objects = objects.clone();
            tokio::spawn(async move {
                let Some(objects) = objects else {
                    if let IoRequest::Snapshot(_) | IoRequest::Store { .. } = request {
                        worker.stored();
                    }
                    worker.fail(WorkerError::NoObjectStorage);
                    return;
                };
                match request {
                    IoRequest::Load {
                        generation,
                        arg,
                        value,
                        tasks,
                        partitions,
                    } => {
                        let Some(value) = value else {
                            worker.fail(WorkerError::ArgMissing { arg });
                            return;
                        };
                        let indices: Vec<u32> = tasks.iter().map(|(_, i)| *i).collect();
                        match read_shares(&objects, &value, &indices, partitions).await {
                            Ok(shares) => {
                                for ((task, _), data) in tasks.into_iter().zip(shares) {
                                    worker.input(generation, task, data);
                                }
                            }
                            Err(source) => worker.fail(WorkerError::Load {
                                arg,
                                source: Box::new(source),
                            }),
                        }
                    }
                    IoRequest::Store {
                        generation,
                        arg,
                        value,
                        index,
                        bytes,
                    } => {
                        let Some(value) = value else {
                            worker.stored();
                            worker.fail(WorkerError::ArgMissing { arg });
                            return;
                        };
                        let Some((bucket, prefix)) = bucket_and_prefix(&value) else {
                            worker.stored();
                            worker.fail(WorkerError::NotBucketPrefix { arg, value });
                            return;
                        };
                        let key = staged_key(prefix, &worker.spec().id, index);
                        let written = objects.put(bucket, &key, Bytes::from(bytes)).await;
                        worker.stored();
                        match written {
                            Ok(()) => worker.acknowledged(generation),
                            Err(source) => worker.fail(WorkerError::Write {
                                bucket: bucket.to_owned(),
                                key,
                                source: Box::new(source),
                            }),
                        }
                    }
                    IoRequest::Snapshot(snapshot) => {
                        let SnapshotImages {
                            progress,
                            iteration,
                            cursor,
                            images,
                            barrier,
                        } = *snapshot;
                        let spec = worker.spec();
                        let Some(plan) = &spec.snapshots else {
                            worker.stored();
                            return;
                        };
                        let mut keys = Vec::with_capacity(images.len());
                        let mut bytes = 0;
                        let stores = images.into_iter().map(|(key, image)| {
                            let object = plan.object(&spec.id, iteration, key);
                            keys.push(key);
                            bytes += image.len() as u64;
                            let objects = objects.clone();
                            async move {
                                objects
                                    .put(&plan.bucket, &object, Bytes::from(image))
                                    .await
                                    .map_err(|source| WorkerError::Write {
                                        bucket: plan.bucket.clone(),
                                        key: object,
                                        source: Box::new(source),
                                    })
                            }
                        });
                        let stored = futures_util::future::join_all(stores).await;
                        // A snapshot not stored leaves the job going on: the snapshot stays
                        // incomplete, and the controller shows why.
                        let error = stored
                            .into_iter()
                            .find_map(Result::err)
                            .map(|e| e.to_string());
                        worker.stored();
                        let report = mote_jobs::message::Report::Snapshotted {
                            progress,
                            iteration,
                            keys,
                            bytes,
                            write_us: barrier.elapsed().as_micros() as u64,
                            cursor,
                            error,
                        };
                        worker.report(report);
                    }
                }
            });
        }
    }));
}
