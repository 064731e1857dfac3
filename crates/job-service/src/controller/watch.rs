//! The controller's watch over a running job: silent workers are taken for gone, gone workers
//! whose nodes are back rejoin, and partitions move off a worker markedly slower than the
//! others ([`SLOWER`]), destination first.

use super::Controller;
use super::state::{Action, Inner, LISTED, Move, MoveBatch, Moving, Sample};
use mote_api::{JobState, MigrationStatus};
use mote_jobs::message::{Envelope, WorkerMessage};
use mote_jobs::{Entry, PartitionKey, WorkerId};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A worker silent for this long is taken for gone.
const SILENCE: Duration = Duration::from_secs(3);

/// How often the controller compares the workers' speed.
const WINDOW: Duration = Duration::from_secs(1);

/// A worker whose time per partition is this many times the fastest's gives partitions away.
pub const SLOWER: f64 = 1.3;

impl Controller {
    /// Watches the job until it ends: gone workers (silent ones), workers back, and slow ones.
    pub fn watch(self: &Arc<Self>) {
        let controller = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(250));
            loop {
                tick.tick().await;
                let action = controller.check();
                if controller.ended() {
                    return;
                }
                controller.act(action).await;
            }
        });
    }

    /// One look at the job: a silent worker, a worker back, or a rebalance.
    fn check(self: &Arc<Self>) -> Action {
        let mut inner = self.lock();
        if inner.status.state != JobState::Running || inner.ended.is_some() || inner.restoring {
            return Action::None;
        }
        let silent: Vec<WorkerId> = (0..inner.live.len())
            .filter(|&w| inner.live[w] && inner.heard[w].elapsed() > SILENCE)
            .map(|w| WorkerId(w as u16))
            .collect();
        if !silent.is_empty() {
            let names: Vec<String> = silent
                .iter()
                .map(|w| {
                    let s = &inner.status.workers[w.0 as usize];
                    format!("{} ({})", s.name, s.url)
                })
                .collect();
            return Action::Recover(
                silent,
                format!(
                    "worker {} has not reported for {} s: its node is down or cut off",
                    names.join(", "),
                    SILENCE.as_secs()
                ),
            );
        }
        if self.setup.spec.snapshots.is_some() && inner.live.iter().any(|l| !l) {
            let nodes = self.setup.cluster.nodes();
            for w in 0..inner.live.len() {
                if inner.live[w] || inner.joining.contains(&WorkerId(w as u16)) {
                    continue;
                }
                // A node is the same worker by name: restarted, it may listen elsewhere.
                let name = inner.status.workers[w].name.clone();
                if let Some(node) = nodes.iter().find(|n| n.name == name) {
                    tracing::info!(
                        job = self.id,
                        name,
                        url = node.url,
                        "a gone worker's node is back; it rejoins at the next snapshot"
                    );
                    inner.status.workers[w].url = node.url.clone();
                    inner.joining.push(WorkerId(w as u16));
                }
            }
        }
        if !self.setup.rebalance
            || !inner.moving.is_empty()
            || inner.window_at.elapsed() < WINDOW
            || inner.settled.elapsed() < WINDOW
        {
            return Action::None;
        }
        let (slow, moves) = match rebalance_moves(&inner) {
            Some((slow, moves)) => (Some(slow), moves),
            None => (None, Vec::new()),
        };
        let confirmed = slow.is_some() && slow == inner.slower;
        inner.slower = slow;
        let moves = if confirmed { moves } else { Vec::new() };
        inner.window_at = Instant::now();
        inner.window = inner.progress.iter().map(Sample::of).collect();
        if moves.is_empty() {
            return Action::None;
        }
        self.start_moves(&mut inner, moves)
    }

    /// Records moves and returns the messages that start them: one `Arrive` to each
    /// destination, then one `Leave` to each source.
    fn start_moves(&self, inner: &mut Inner, moves: Vec<Move>) -> Action {
        let mut by_pair: BTreeMap<(u16, u16), Vec<(PartitionKey, Entry)>> = BTreeMap::new();
        let mut reason = String::new();
        for (key, entry, why) in moves {
            let from = inner.map.entry(key).worker;
            by_pair
                .entry((from.0, entry.worker.0))
                .or_default()
                .push((key, entry));
            reason = why;
        }
        let now = Instant::now();
        let mut sends = Vec::new();
        for ((from, to), entries) in by_pair {
            let at_ms = inner.since_start_ms();
            inner.status.migrations.push(MigrationStatus {
                at_ms,
                from: inner.status.workers[from as usize].name.clone(),
                to: inner.status.workers[to as usize].name.clone(),
                partitions: entries.len(),
                bytes: 0,
                ms: None,
                reason: reason.clone(),
            });
            inner.moving.push(Moving {
                keys: entries.iter().map(|(k, _)| *k).collect(),
                started: now,
                record: inner.status.older_migrations + inner.status.migrations.len() - 1,
            });
            if inner.status.migrations.len() > LISTED {
                inner.status.migrations.remove(0);
                inner.status.older_migrations += 1;
            }
            let urls = (
                inner.status.workers[from as usize].url.clone(),
                inner.status.workers[to as usize].url.clone(),
            );
            sends.push((urls, entries));
        }
        Action::Move(sends, inner.generation)
    }

    pub(super) fn arrived(
        &self,
        inner: &mut Inner,
        entries: Vec<(PartitionKey, Entry)>,
        bytes: u64,
    ) -> Action {
        for &(key, entry) in &entries {
            inner.map.apply(key, entry);
        }
        let now = Instant::now();
        let mut took = Vec::new();
        let mut finished = Vec::new();
        for (n, m) in inner.moving.iter_mut().enumerate() {
            let before = m.keys.len();
            for (key, _) in &entries {
                m.keys.remove(key);
            }
            if m.keys.len() < before {
                took.push(m.record);
            }
            if m.keys.is_empty() {
                finished.push(n);
            }
        }
        for record in took {
            if let Some(s) = inner.migration(record) {
                s.bytes += bytes;
            }
        }
        for n in finished.into_iter().rev() {
            let m = inner.moving.remove(n);
            if let Some(s) = inner.migration(m.record) {
                s.ms = Some((now - m.started).as_millis() as u64);
            }
            inner.settled = now;
        }
        inner.refresh_holdings();
        Action::Broadcast(WorkerMessage::MapUpdate { entries })
    }

    pub(super) async fn start(self: &Arc<Self>, moves: Vec<MoveBatch>, generation: u32) {
        for ((from, to), entries) in moves {
            let arrive = Envelope {
                generation,
                message: WorkerMessage::Arrive {
                    keys: entries.iter().map(|(k, _)| *k).collect(),
                },
            };
            // The destination is ready before the source lets go.
            if let Err(e) = self.transport.message(&to, &self.id, &arrive).await {
                tracing::warn!(job = self.id, error = %e, "a move's destination is not ready; the move is dropped");
                self.drop_move(&entries);
                continue;
            }
            let leave = Envelope {
                generation,
                message: WorkerMessage::Leave {
                    entries: entries.clone(),
                },
            };
            if let Err(e) = self.transport.message(&from, &self.id, &leave).await {
                tracing::warn!(job = self.id, error = %e, "a move's source did not take it; the move is dropped");
                self.drop_move(&entries);
            }
        }
    }

    fn drop_move(&self, entries: &[(PartitionKey, Entry)]) {
        let mut inner = self.lock();
        let first = entries[0].0;
        if let Some(n) = inner.moving.iter().position(|m| m.keys.contains(&first)) {
            let m = inner.moving.remove(n);
            if let Some(s) = inner.migration(m.record) {
                s.ms = Some(0);
                s.reason
                    .push_str(" (not started: a worker did not take it)");
            }
        }
    }
}

/// The slowest worker and the moves that even out the workers' time per partition, when it is
/// markedly slower than the fastest, with the reason.
fn rebalance_moves(inner: &Inner) -> Option<(usize, Vec<Move>)> {
    let workers = inner.live.len();
    let live: Vec<usize> = (0..workers).filter(|&w| inner.live[w]).collect();
    if live.len() < 2 {
        return None;
    }
    let units = |w: usize| {
        (0..inner.map.groups())
            .map(|g| {
                inner
                    .map
                    .held_by(WorkerId(w as u16), mote_jobs::GroupId(g as u16))
                    .count()
            })
            .max()
            .unwrap_or(0)
    };
    // Guest time per partition index held, per core, over the window.
    let mut cost: Vec<Option<f64>> = vec![None; workers];
    for &w in &live {
        let p = &inner.progress[w];
        let s = &inner.window[w];
        let dt = p.task_us.saturating_sub(s.task_us);
        let held = units(w);
        if p.wall_us <= s.wall_us || held == 0 || dt == 0 {
            continue;
        }
        cost[w] = Some(dt as f64 / held as f64);
    }
    let known: Vec<f64> = cost.iter().flatten().copied().collect();
    if known.len() < 2 {
        return None;
    }
    let fastest = known.iter().copied().fold(f64::INFINITY, f64::min);
    let slowest = known.iter().copied().fold(0.0, f64::max);
    if slowest < fastest * SLOWER {
        return None;
    }
    let weights: Vec<f64> = (0..workers)
        .map(|w| {
            if !inner.live[w] {
                return 0.0;
            }
            let cores = f64::from(inner.status.workers[w].cores.max(1));
            cores / cost[w].unwrap_or(fastest)
        })
        .collect();
    let slow = (0..workers)
        .max_by(|&a, &b| cost[a].unwrap_or(0.0).total_cmp(&cost[b].unwrap_or(0.0)))
        .expect("some worker");
    let reason = format!(
        "worker {} took {:.1}x the fastest worker's time per partition",
        inner.status.workers[slow].name,
        slowest / fastest
    );
    let moves = inner
        .map
        .rebalance(&weights)
        .into_iter()
        .map(|(k, e)| (k, e, reason.clone()))
        .collect();
    Some((slow, moves))
}
