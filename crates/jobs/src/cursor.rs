//! A worker's position in its copy of the program (section 4.1): the next stage to declare, the
//! counters of the loops it is in, and the signals it has heard.
//!
//! Every stage a cursor passes gets the next sequence number; since every worker takes the same
//! branches (they all wait for the same signals), the same number names the same occurrence of
//! a stage on every worker, which is how scatter pieces find their gather.
//!
//! A cursor can pause at the end of an iteration of the program's top-level loop (a barrier,
//! where a worker snapshots its partitions), and it keeps the value of every signal it used,
//! so that it can list the occurrences it declared since any point (a partition arriving from
//! another worker needs their tasks) and so that a snapshot of it resumes anywhere.

use crate::program::{Op, Program, StageId};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

/// What the worker should do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Declare this occurrence of a stage.
    Stage {
        /// Its sequence number.
        seq: u64,
        /// The stage.
        stage: StageId,
    },
    /// The program reached a signal: declare its stage (the worker holding its dataset runs
    /// it and broadcasts the value), then wait for [`Cursor::resolve`] of `signal`.
    Signal {
        /// Its sequence number as a stage.
        seq: u64,
        /// The signal stage.
        stage: StageId,
        /// Its number among the signals the program has reached.
        signal: u64,
    },
    /// Waiting for a signal's value.
    Wait,
    /// Paused at the end of this iteration of the top-level loop, until [`Cursor::resume`].
    Barrier {
        /// Iterations finished.
        iteration: u64,
    },
    /// The program has ended.
    Done,
}

/// An occurrence a cursor declared: its sequence number, its stage, and the signal's number
/// when it is a signal stage.
pub type Declared = (u64, StageId, Option<u64>);

/// A worker's position in the program.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cursor {
    pc: usize,
    seq: u64,
    /// Loop counters of the `Repeat`s the cursor is in, innermost last.
    repeats: Vec<u64>,
    /// Signals reached so far.
    signals: u64,
    /// Iterations of the program's top-level loops finished so far.
    iterations: u64,
    /// The signal the cursor waits at, once its stage was declared.
    waiting: Option<u64>,
    /// The cursor passed the program's last op.
    done: bool,
    /// Values heard, by signal number, including those that arrived before the cursor got
    /// there.
    heard: FxHashMap<u64, bool>,
    /// Values used, by signal number.
    used: Vec<bool>,
    /// The iteration to pause after, if any.
    pause: Option<u64>,
    /// Paused there.
    paused: bool,
}

impl Default for Cursor {
    fn default() -> Self {
        Self::new()
    }
}

impl Cursor {
    /// At the start of the program.
    pub fn new() -> Self {
        Self {
            pc: 0,
            seq: 0,
            repeats: Vec::new(),
            signals: 0,
            iterations: 0,
            waiting: None,
            done: false,
            heard: FxHashMap::default(),
            used: Vec::new(),
            pause: None,
            paused: false,
        }
    }

    /// Pauses at the end of iteration `iteration` of the top-level loop (none: never), and
    /// goes on if paused.
    pub fn resume(&mut self, pause: Option<u64>) {
        self.pause = pause;
        self.paused = false;
    }

    /// The occurrences this cursor declared from sequence number `from` on, in order, found by
    /// stepping a fresh copy through the program with the signal values this one used.
    pub fn declared_since(&self, program: &Program, from: u64) -> Vec<Declared> {
        let mut replay = Cursor::new();
        let mut declared = Vec::new();
        while replay.seq < self.seq {
            match replay.next(program) {
                Next::Stage { seq, stage } if seq >= from => declared.push((seq, stage, None)),
                Next::Stage { .. } => {}
                Next::Signal { seq, stage, signal } => {
                    if seq >= from {
                        declared.push((seq, stage, Some(signal)));
                    }
                    if let Some(&value) = self.used.get(signal as usize) {
                        replay.resolve(signal, value);
                    }
                }
                Next::Wait | Next::Barrier { .. } | Next::Done => break,
            }
        }
        declared
    }

    /// Stages declared so far.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Iterations of the program's top-level loops this cursor finished declaring.
    pub fn iterations(&self) -> u64 {
        self.iterations
    }

    /// Whether [`Cursor::next`] reached the program's end.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Records signal `signal`'s value, which may come before the cursor gets there.
    pub fn resolve(&mut self, signal: u64, value: bool) {
        self.heard.insert(signal, value);
    }

    /// Steps through control flow to the next stage or signal.
    pub fn next(&mut self, program: &Program) -> Next {
        if self.paused {
            return Next::Barrier {
                iteration: self.iterations,
            };
        }
        loop {
            let Some(op) = program.ops.get(self.pc) else {
                self.done = true;
                return Next::Done;
            };
            match *op {
                Op::Stage(stage) => {
                    self.pc += 1;
                    let seq = self.seq;
                    self.seq += 1;
                    return Next::Stage { seq, stage };
                }
                Op::Repeat { times, end } => {
                    if times == 0 {
                        self.pc = end + 1;
                    } else {
                        self.repeats.push(times);
                        self.pc += 1;
                    }
                }
                Op::While { signal, end } => match self.at_signal(signal) {
                    Ok(true) => self.pc += 1,
                    Ok(false) => self.pc = end + 1,
                    Err(next) => return next,
                },
                Op::If {
                    signal, otherwise, ..
                } => match self.at_signal(signal) {
                    Ok(true) => self.pc += 1,
                    Ok(false) => self.pc = otherwise + 1,
                    Err(next) => return next,
                },
                Op::Else { end } => self.pc = end + 1,
                Op::End { start } => match program.ops[start] {
                    Op::Repeat { .. } | Op::While { .. } if program.depth[start] == 0 => {
                        self.iterations += 1;
                        self.end_loop(program, start);
                        if self.pause == Some(self.iterations) {
                            self.paused = true;
                            return Next::Barrier {
                                iteration: self.iterations,
                            };
                        }
                    }
                    Op::Repeat { .. } | Op::While { .. } => self.end_loop(program, start),
                    _ => self.pc += 1,
                },
            }
        }
    }

    /// At the `End` of the loop opened at `start`: back to its head, or past its end.
    fn end_loop(&mut self, program: &Program, start: usize) {
        match program.ops[start] {
            Op::Repeat { .. } => {
                let left = self
                    .repeats
                    .last_mut()
                    .expect("a repeat pushed its counter");
                *left -= 1;
                if *left == 0 {
                    self.repeats.pop();
                    self.pc += 1;
                } else {
                    self.pc = start + 1;
                }
            }
            Op::While { .. } => self.pc = start,
            _ => unreachable!("only loops are ended here"),
        }
    }

    /// At a `While` or `If`: the signal's value if known; otherwise what to tell the worker.
    fn at_signal(&mut self, stage: StageId) -> Result<bool, Next> {
        let number = match self.waiting {
            Some(number) => number,
            None => {
                let number = self.signals;
                self.signals += 1;
                self.waiting = Some(number);
                let seq = self.seq;
                self.seq += 1;
                return Err(Next::Signal {
                    seq,
                    stage,
                    signal: number,
                });
            }
        };
        match self.heard.remove(&number) {
            Some(value) => {
                self.waiting = None;
                self.used.push(value);
                Ok(value)
            }
            None => Err(Next::Wait),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::ProgramBuilder;
    use crate::program::tests::{compute, logistic_regression};

    fn run(program: &Program, mut signal: impl FnMut(u64) -> bool) -> Vec<u32> {
        let mut cursor = Cursor::new();
        let mut stages = Vec::new();
        let mut expected_seq = 0;
        loop {
            match cursor.next(program) {
                Next::Stage { seq, stage } => {
                    assert_eq!(seq, expected_seq);
                    expected_seq += 1;
                    stages.push(stage.0);
                }
                Next::Signal { seq, signal: n, .. } => {
                    assert_eq!(seq, expected_seq);
                    expected_seq += 1;
                    assert_eq!(cursor.next(program), Next::Wait);
                    cursor.resolve(n, signal(n));
                }
                Next::Wait => panic!("waiting with no signal outstanding"),
                Next::Barrier { .. } => panic!("no pause was asked for"),
                Next::Done => return stages,
            }
        }
    }

    #[test]
    fn repeat_runs_its_body_the_given_times() {
        let p = logistic_regression(2, 3);
        let stages = run(&p, |_| unreachable!());
        assert_eq!(stages, [0, 1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4]);
        let p = logistic_regression(2, 0);
        assert_eq!(run(&p, |_| unreachable!()), [0]);
    }

    #[test]
    fn while_loops_until_the_signal_is_false_and_if_takes_one_branch() {
        let mut b = ProgramBuilder::new(2);
        let flag = b.dataset("flag", false);
        let d = b.dataset("d", true);
        b.while_signal(9, flag).unwrap(); // stage 0
        b.stage(compute(1, &[d], &[d])).unwrap(); // stage 1
        b.end().unwrap();
        b.if_signal(8, flag).unwrap(); // stage 2
        b.stage(compute(2, &[d], &[d])).unwrap(); // stage 3
        b.otherwise().unwrap();
        b.stage(compute(3, &[d], &[d])).unwrap(); // stage 4
        b.end().unwrap();
        let p = b.finish().unwrap();
        // Signals 0..3 are the while's (true, true, false); signal 3 is the if's.
        assert_eq!(run(&p, |n| n < 2), [1, 1, 4]);
        assert_eq!(run(&p, |n| n < 2 || n == 3), [1, 1, 3]);
        assert_eq!(run(&p, |_| false), [4]);
    }

    #[test]
    fn iterations_count_the_top_level_loop_only() {
        let mut b = ProgramBuilder::new(1);
        let d = b.dataset("d", true);
        b.repeat(3);
        b.repeat(4);
        b.stage(compute(1, &[d], &[d])).unwrap();
        b.end().unwrap();
        b.end().unwrap();
        let p = b.finish().unwrap();
        let mut cursor = Cursor::new();
        while cursor.next(&p) != Next::Done {}
        assert_eq!(cursor.iterations(), 3);
        assert_eq!(cursor.seq(), 12);
    }

    #[test]
    fn a_value_heard_before_the_cursor_arrives_is_kept() {
        let mut b = ProgramBuilder::new(1);
        let flag = b.dataset("flag", false);
        b.if_signal(1, flag).unwrap();
        b.stage(compute(2, &[flag], &[flag])).unwrap();
        b.end().unwrap();
        let p = b.finish().unwrap();
        let mut cursor = Cursor::new();
        cursor.resolve(0, true);
        assert!(matches!(cursor.next(&p), Next::Signal { signal: 0, .. }));
        assert!(matches!(cursor.next(&p), Next::Stage { seq: 1, .. }));
        assert_eq!(cursor.next(&p), Next::Done);
    }

    #[test]
    fn a_cursor_pauses_at_the_barrier_it_was_given_and_resumes() {
        let p = logistic_regression(2, 5);
        let mut cursor = Cursor::new();
        cursor.resume(Some(2));
        let mut stages = 0;
        loop {
            match cursor.next(&p) {
                Next::Stage { .. } => stages += 1,
                Next::Barrier { iteration } => {
                    assert_eq!(iteration, 2);
                    break;
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(stages, 1 + 2 * 4, "the load, then two iterations");
        assert_eq!(
            cursor.next(&p),
            Next::Barrier { iteration: 2 },
            "it stays paused"
        );
        let snapshot = cursor.clone();
        cursor.resume(None);
        assert!(matches!(cursor.next(&p), Next::Stage { seq: 9, .. }));
        let mut restored = snapshot;
        restored.resume(None);
        assert!(
            matches!(restored.next(&p), Next::Stage { seq: 9, .. }),
            "a copy taken at the barrier goes on from there"
        );
    }

    #[test]
    fn declared_since_replays_the_branches_taken() {
        let mut b = ProgramBuilder::new(2);
        let flag = b.dataset("flag", false);
        let d = b.dataset("d", true);
        b.while_signal(9, flag).unwrap(); // stage 0
        b.stage(compute(1, &[d], &[d])).unwrap(); // stage 1
        b.end().unwrap();
        let p = b.finish().unwrap();
        let mut cursor = Cursor::new();
        let mut seen = Vec::new();
        for _ in 0..20 {
            match cursor.next(&p) {
                Next::Stage { seq, stage } => seen.push((seq, stage, None)),
                Next::Signal { seq, stage, signal } => {
                    seen.push((seq, stage, Some(signal)));
                    if signal < 3 {
                        cursor.resolve(signal, true);
                    }
                }
                Next::Wait => break,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(cursor.seq(), 7, "three loops and the fourth signal");
        assert_eq!(cursor.declared_since(&p, 0), seen);
        assert_eq!(cursor.declared_since(&p, 4), seen[4..].to_vec());
        assert_eq!(cursor.declared_since(&p, 7), vec![]);
    }
}
