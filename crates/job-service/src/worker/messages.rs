//! What a worker is told: other workers' scatter pieces, signals and partitions, and the
//! controller's map updates, moves and restores. A message of an earlier generation is dropped
//! and one of a later generation waits for the restore that begins it.

use super::inbox::Inbound;
use super::{Local, Worker, WorkerError};
use bytes::Bytes;
use mote_jobs::message::{Envelope, Piece, Report, Restore, Transfer, WorkerMessage};
use mote_jobs::{Entry, GroupId, PartitionKey, PieceItem, Routed, TaskGraph};
use mote_runtime::JobInstance;
use std::sync::atomic::Ordering;

impl Worker {
    /// Takes a message from another worker or the controller, without waiting for the
    /// worker's lock (`inbox`). One of an earlier generation is dropped; one of a later
    /// generation waits for this worker's restore. Instances for arriving partitions are made
    /// here, outside the lock; a message that cannot be applied fails the worker.
    pub fn deliver(&self, envelope: Envelope) -> Result<(), WorkerError> {
        let prepared = match &envelope.message {
            WorkerMessage::Arrive { keys, .. } => keys
                .iter()
                .map(|&k| Ok((k, self.fresh_instance(k)?)))
                .collect::<Result<Vec<_>, WorkerError>>()?,
            WorkerMessage::Restore(_) => return Err(WorkerError::RestoreNotHere),
            _ => Vec::new(),
        };
        self.post(Inbound::Message(Box::new(envelope), prepared));
        Ok(())
    }

    /// Applies a delivered message, under the lock.
    pub(super) fn take_envelope(
        &self,
        local: &mut Local,
        envelope: Envelope,
        prepared: Vec<(PartitionKey, JobInstance)>,
    ) -> Result<(), WorkerError> {
        if envelope.generation < local.generation {
            return Ok(());
        }
        if envelope.generation > local.generation {
            local.later.push(envelope);
            return Ok(());
        }
        self.take_message(local, envelope.message, prepared)
    }

    fn fresh_instance(&self, key: PartitionKey) -> Result<JobInstance, WorkerError> {
        self.engine
            .instance(&self.module, &self.ctx)
            .map_err(|source| WorkerError::Instance {
                worker: self.spec.me,
                key,
                source,
            })
    }

    fn take_message(
        &self,
        local: &mut Local,
        message: WorkerMessage,
        prepared: Vec<(PartitionKey, JobInstance)>,
    ) -> Result<(), WorkerError> {
        match message {
            WorkerMessage::Pieces { seq, group, pieces } => {
                for p in pieces {
                    let key = PartitionKey {
                        group,
                        index: p.index,
                    };
                    let item = (seq, p.source, p.data.map(Bytes::from));
                    let routed = local.exchange.receive(key, p.version, item);
                    self.take(local, routed);
                }
            }
            WorkerMessage::MapUpdate { entries } => {
                for (key, entry) in entries {
                    for routed in local.exchange.update(key, entry) {
                        self.take(local, Some(routed));
                    }
                }
            }
            WorkerMessage::Signal { signal, value } => local.cursor.resolve(signal, value),
            WorkerMessage::Arrive { .. } => local.arriving.extend(prepared),
            WorkerMessage::Leave { entries } => {
                let next = local.cursor.seq();
                for (key, entry) in entries {
                    // A controller's view cannot be older than this worker's, but a partition
                    // not held here has nothing to send.
                    if local.exchange.route(key).worker != self.spec.me {
                        continue;
                    }
                    let Local {
                        handoffs, graph, ..
                    } = local;
                    handoffs.leave(graph, key, entry.worker, entry.version, next);
                }
                self.depart(local);
            }
            WorkerMessage::Transfer(transfer) => self.arrive(local, transfer)?,
            WorkerMessage::Restore(_) => {
                return Err(WorkerError::RestoreNotHere);
            }
        }
        Ok(())
    }

    /// A partition arrives: its instance takes the image, its tasks from `from` on are spawned
    /// here, and the controller hears of it.
    fn arrive(&self, local: &mut Local, transfer: Transfer) -> Result<(), WorkerError> {
        let key = transfer.key;
        let mut instance = match local.arriving.remove(&key) {
            Some(instance) => instance,
            None => self.fresh_instance(key)?,
        };
        instance
            .load_image(&transfer.image)
            .map_err(|source| WorkerError::Transfer {
                key,
                from: transfer.from_worker,
                source,
            })?;
        let early = transfer
            .early
            .into_iter()
            .map(|(seq, pieces)| {
                let pieces = pieces
                    .into_iter()
                    .map(|(source, data)| (source, data.map(Bytes::from)))
                    .collect();
                (seq, pieces)
            })
            .collect();
        local.instances[key.group.0 as usize][key.index as usize] = Some(instance);
        let Local {
            graph,
            cursor,
            exchange,
            ..
        } = local;
        let arrival = mote_jobs::arrive(
            &self.program,
            graph,
            cursor,
            exchange,
            self.spec.me,
            key,
            transfer.version,
            transfer.from,
            early,
        );
        self.tally.hold(&local.graph, false);
        for seq in arrival.scatters {
            *local.scatters_left.entry(seq).or_default() += 1;
        }
        for (seq, signal) in arrival.signals {
            local.signals.insert(seq, signal);
        }
        if !arrival.loads.is_empty() {
            let stage = local.graph.view(arrival.loads[0]).stage;
            local.loads = arrival.loads;
            self.request_loads(local, stage);
        }
        for routed in arrival.forward {
            self.take(local, Some(routed));
        }
        let report = Report::Arrived {
            progress: self.progress(),
            entries: vec![(
                key,
                Entry {
                    worker: self.spec.me,
                    version: transfer.version,
                },
            )],
            bytes: transfer.image.len() as u64,
        };
        self.outbox.to_controller(&self.spec, report);
        tracing::info!(
            job = self.spec.id,
            group = key.group.0,
            index = key.index,
            from = transfer.from_worker.0,
            "a partition arrived at this worker"
        );
        Ok(())
    }

    /// Rolls back to a snapshot: the partitions `restore.map` gives this worker come from
    /// `images` (every one of them), the cursor from the snapshot, and everything else starts
    /// empty in the new generation.
    pub fn restore(
        &self,
        restore: Restore,
        images: Vec<(PartitionKey, Vec<u8>)>,
    ) -> Result<(), WorkerError> {
        let me = self.spec.me;
        let mut instances: Vec<Vec<Option<JobInstance>>> = self
            .program
            .groups
            .sizes()
            .iter()
            .map(|&size| (0..size).map(|_| None).collect())
            .collect();
        for (key, image) in images {
            let instance = self
                .engine
                .restore(&self.module, &self.ctx, &image)
                .map_err(|source| WorkerError::Restore {
                    worker: me,
                    key,
                    source,
                })?;
            instances[key.group.0 as usize][key.index as usize] = Some(instance);
        }
        let graph = TaskGraph::new(&self.program, &restore.map, me);
        for (g, row) in instances.iter().enumerate() {
            for &index in graph.held(GroupId(g as u16)) {
                if row[index as usize].is_none() {
                    let group = GroupId(g as u16);
                    return Err(WorkerError::ImageMissing {
                        worker: me,
                        key: PartitionKey { group, index },
                    });
                }
            }
        }
        let mut cursor = restore.cursor;
        let every = self.spec.snapshots.as_ref().map(|s| s.every);
        cursor.resume(every.map(|every| restore.iteration + every.max(1)));
        let mut fresh = Local::new(
            &self.spec,
            restore.generation,
            cursor,
            graph,
            restore.map,
            instances,
        );
        fresh.live = restore.live;
        fresh.urls = restore.workers;
        self.post(Inbound::Restore(Box::new(fresh)));
        Ok(())
    }

    /// Begins the generation of `fresh`, a restore's state, under the lock, unless this worker
    /// is there or past it already; the messages of that generation that came early apply now.
    pub(super) fn begin_generation(
        &self,
        local: &mut Local,
        fresh: Local,
    ) -> Result<(), WorkerError> {
        if fresh.generation <= local.generation {
            return Ok(());
        }
        let later = std::mem::take(&mut local.later);
        *local = fresh;
        self.tally
            .generation
            .store(local.generation, Ordering::Relaxed);
        self.tally.hold(&local.graph, true);
        self.show_cursor(local);
        for envelope in later {
            if envelope.generation == local.generation {
                self.take_message(local, envelope.message, Vec::new())?;
            } else if envelope.generation > local.generation {
                local.later.push(envelope);
            }
        }
        Ok(())
    }

    /// Uses a piece this worker holds the partition of, or sends it on to the holder.
    fn take(&self, local: &mut Local, routed: Option<Routed<PieceItem>>) {
        match routed {
            Some(Routed::Accept(key, (seq, source, data))) => {
                local.graph.piece(seq, key.group, key.index, source, data)
            }
            Some(Routed::Forward(key, entry, (seq, source, data))) => {
                let piece = Piece {
                    index: key.index,
                    source,
                    version: entry.version,
                    data: data.map(|b| b.to_vec()),
                };
                self.send(
                    local,
                    entry.worker,
                    WorkerMessage::Pieces {
                        seq,
                        group: key.group,
                        pieces: vec![piece],
                    },
                );
            }
            None => {}
        }
    }
}
