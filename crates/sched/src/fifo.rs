//! First in, first out: calls run in arrival order.

use crate::CallQueue;
use std::collections::VecDeque;

/// A FIFO queue over a ring buffer: O(1) push and pop, no allocation once warmed up.
#[derive(Debug)]
pub struct Fifo<T> {
    calls: VecDeque<T>,
}

impl<T> Default for Fifo<T> {
    fn default() -> Self {
        Self {
            calls: VecDeque::with_capacity(1024),
        }
    }
}

impl<T: Send> CallQueue<T> for Fifo<T> {
    fn push(&mut self, call: T) {
        self.calls.push_back(call);
    }

    fn pop(&mut self) -> Option<T> {
        self.calls.pop_front()
    }

    fn len(&self) -> usize {
        self.calls.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Push(u32),
        Pop,
    }

    fn ops() -> impl Strategy<Value = Vec<Op>> {
        prop::collection::vec(
            prop_oneof![any::<u32>().prop_map(Op::Push), Just(Op::Pop)],
            0..200,
        )
    }

    proptest! {
        /// The queue behaves exactly like the model: a sequence, taken from the front.
        #[test]
        fn matches_a_sequence_model(ops in ops()) {
            let mut q = Fifo::default();
            let mut model = std::collections::VecDeque::new();
            for op in ops {
                match op {
                    Op::Push(x) => { q.push(x); model.push_back(x); }
                    Op::Pop => prop_assert_eq!(q.pop(), model.pop_front()),
                }
                prop_assert_eq!(q.len(), model.len());
            }
        }
    }
}
