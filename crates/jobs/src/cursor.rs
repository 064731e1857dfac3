//! A worker's position in its copy of the program (section 4.1): the next stage to declare, the
//! counters of the loops it is in, and the signals it has heard.
//!
//! Every stage a cursor passes gets the next sequence number; since every worker takes the same
//! branches (they all wait for the same signals), the same number names the same occurrence of
//! a stage on every worker, which is how scatter pieces find their gather.

use crate::program::{Op, Program, StageId};
use rustc_hash::FxHashMap;

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
    /// The program has ended.
    Done,
}

/// A worker's position in the program.
#[derive(Debug)]
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
        }
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
                        self.end_loop(program, start)
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
}
