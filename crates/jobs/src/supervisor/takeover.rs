//! A job another node takes over when its controller's node is gone. What the record in the
//! cluster's store keeps of a running job ([`Resumable`]: the generation, the map and the last
//! complete snapshot) is enough: the new controller restarts every worker whose node is alive,
//! under itself, and rolls them back to that snapshot in a new generation, as after a lost
//! worker. With no complete snapshot there is nothing to resume from, and the job fails,
//! saying so.

use super::{Action, LiveNodes, SetupError, Supervisor, WorkerSetup};
use crate::cursor::Cursor;
use crate::map::{PartitionMap, WorkerId};
use crate::message::JobSpec;
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// What another node needs to take a running job over, besides its spec and workers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Resumable {
    /// The generation the job ran in.
    pub generation: u32,
    /// Who held what in it.
    pub map: PartitionMap,
    /// The last complete snapshot, if any.
    pub snapshot: Option<SnapshotPoint>,
}

/// A complete snapshot: where every worker's cursor was at its barrier.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SnapshotPoint {
    /// The iteration it was taken at.
    pub iteration: u64,
    /// The cursor there.
    pub cursor: Cursor,
}

impl Supervisor {
    /// What a takeover would resume from, now.
    pub fn resumable(&self) -> Resumable {
        Resumable {
            generation: self.generation,
            map: self.map.clone(),
            snapshot: self.snapshots.complete().map(|c| SnapshotPoint {
                iteration: c.iteration,
                cursor: c.cursor.clone(),
            }),
        }
    }

    /// Takes over a job whose controller is gone (`reason` says how): `spec` names the new
    /// controller, `workers` are the job's, in its order, and `nodes` the nodes alive now. Every
    /// worker on a live node is started again and restored to the last complete snapshot; the
    /// others are gone. Answers the supervisor, running, and what to carry out: a restore, or
    /// the job's end when it cannot resume. The caller stops every worker before it carries
    /// them out, since the workers of the old controller may still run.
    pub fn take_over(
        now: Instant,
        spec: JobSpec,
        workers: Vec<WorkerSetup>,
        rebalance: bool,
        resumed: Resumable,
        nodes: &LiveNodes,
        reason: String,
    ) -> Result<(Self, Vec<Action>), SetupError> {
        let spec = JobSpec {
            map: resumed.map,
            generation: resumed.generation,
            ..spec
        };
        let mut s = Self::new(now, spec, workers, rebalance)?;
        if let Some(point) = resumed.snapshot {
            s.snapshots
                .resume(&mut s.history, point.iteration, point.cursor);
        }
        s.running(now);
        let mut back = Vec::new();
        for (w, state) in s.workers.iter_mut().enumerate() {
            state.live = false;
            if let Some(node) = nodes.named(&state.name) {
                state.url = node.url.clone();
                back.push(WorkerId(w as u16));
            }
        }
        let actions = s.recover(now, Vec::new(), back, reason);
        Ok((s, actions))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supervisor::tests::{job, name, spec, url};
    use crate::supervisor::{LiveNode, Outcome, RestoreOrder};

    fn setups(workers: usize) -> Vec<WorkerSetup> {
        (0..workers)
            .map(|w| WorkerSetup {
                name: name(w),
                url: url(w),
                cores: 1,
            })
            .collect()
    }

    fn nodes(up: &[usize]) -> LiveNodes {
        LiveNodes {
            nodes: up
                .iter()
                .map(|&w| LiveNode {
                    name: name(w),
                    url: format!("http://moved-{w}"),
                })
                .collect(),
        }
    }

    #[test]
    fn a_takeover_restarts_the_live_workers_from_the_last_snapshot() {
        let (s, t0) = job(3, true, false);
        let resumed = Resumable {
            snapshot: Some(SnapshotPoint {
                iteration: 20,
                cursor: Cursor::new(),
            }),
            ..s.resumable()
        };
        let spec = JobSpec {
            controller: "http://new".into(),
            ..spec(3, true)
        };
        let reason = "the controller's node n0 left the cluster".to_owned();
        let (s, actions) =
            Supervisor::take_over(t0, spec, setups(3), false, resumed, &nodes(&[1, 2]), reason)
                .unwrap();
        let [Action::Restore(RestoreOrder { start, to, .. })] = &actions[..] else {
            panic!("{actions:?}")
        };
        let started: Vec<u16> = start.iter().map(|(t, _)| t.worker.0).collect();
        assert_eq!(started, [1, 2]);
        assert!(start.iter().all(|(t, spec)| spec.controller == "http://new"
            && spec.me == t.worker
            && t.url.starts_with("http://moved-")));
        assert_eq!(to.len(), 2);
        assert!(!s.workers()[0].live && s.workers()[1].live && s.workers()[2].live);
        assert_eq!(s.generation(), 1);
        assert!(s.history().restores[0].reason.contains("left the cluster"));
        assert_eq!(s.resumable().snapshot.map(|p| p.iteration), Some(20));
    }

    #[test]
    fn without_a_complete_snapshot_a_takeover_fails_the_job_saying_why() {
        let (s, t0) = job(2, true, false);
        let reason = "the controller's node n0 left the cluster".to_owned();
        let (s, actions) = Supervisor::take_over(
            t0,
            spec(2, true),
            setups(2),
            false,
            s.resumable(),
            &nodes(&[1]),
            reason,
        )
        .unwrap();
        let [
            Action::End {
                outcome: Outcome::Failed(error),
                ..
            },
        ] = &actions[..]
        else {
            panic!("{actions:?}")
        };
        assert!(error.contains("left the cluster"), "{error}");
        assert!(error.contains("no snapshot was complete yet"), "{error}");
        assert!(s.outcome().is_some());
    }
}
