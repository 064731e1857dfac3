//! The per-item operators ([`Pipe`]): `map`, `try_map`, `flat_map`, `filter`, `map_with`,
//! each a zero-sized type wrapping the chain before it, run item by item inside a stage's task.

use super::Of;
use super::source::read_name;
use crate::job::{Task, borrow, fail};
use std::cell::Ref;
use std::fmt::Display;

/// A chain of per-item operators, applied to `In`s.
pub trait Pipe<In>: Copy + 'static {
    /// What comes out of the chain.
    type Out;
    /// What the chain holds while a task runs: its broadcasts.
    type State<'t>;
    /// Gets the chain's broadcasts ready; `side` is the position among the datasets the stage
    /// reads of the next one.
    fn open<'t>(self, task: &'t Task, side: &mut usize) -> Self::State<'t>;
    /// Runs `item` through the chain, handing `out` what comes out.
    fn push(self, state: &mut Self::State<'_>, item: In, out: &mut impl FnMut(Self::Out));
}

/// No operator: items pass unchanged.
#[derive(Clone, Copy)]
pub struct Id;

impl<In> Pipe<In> for Id {
    type Out = In;
    type State<'t> = ();
    fn open(self, _: &Task, _: &mut usize) {}
    fn push(self, _: &mut (), item: In, out: &mut impl FnMut(In)) {
        out(item);
    }
}

/// [`Flow::map`]'s operator after the chain `P`.
pub struct Map<P, F, U>(pub(super) P, pub(super) F, pub(super) Of<U>);
/// [`Flow::try_map`]'s.
pub struct TryMap<P, F, U>(pub(super) P, pub(super) F, pub(super) Of<U>);
/// [`Flow::flat_map`]'s.
pub struct FlatMap<P, F, I>(pub(super) P, pub(super) F, pub(super) Of<I>);
/// [`Flow::filter`]'s.
#[derive(Clone, Copy)]
pub struct Filter<P, F>(pub(super) P, pub(super) F);
/// [`Flow::map_with`]'s.
pub struct MapWith<P, F, B, U>(pub(super) P, pub(super) F, pub(super) Of<(B, U)>);

// By hand, as a derive would ask the phantom parameters to be `Copy` too.
macro_rules! copy_operator {
    ($op:ident<$($t:ident),*>) => {
        impl<P: Copy, F: Copy, $($t),*> Clone for $op<P, F, $($t),*> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<P: Copy, F: Copy, $($t),*> Copy for $op<P, F, $($t),*> {}
    };
}

copy_operator!(Map<U>);
copy_operator!(TryMap<U>);
copy_operator!(FlatMap<I>);
copy_operator!(MapWith<B, U>);

impl<In, P, F, U> Pipe<In> for Map<P, F, U>
where
    P: Pipe<In>,
    F: Fn(P::Out) -> U + Copy + 'static,
    U: 'static,
{
    type Out = U;
    type State<'t> = P::State<'t>;
    fn open<'t>(self, task: &'t Task, side: &mut usize) -> Self::State<'t> {
        self.0.open(task, side)
    }
    fn push(self, state: &mut Self::State<'_>, item: In, out: &mut impl FnMut(U)) {
        self.0.push(state, item, &mut |x| out((self.1)(x)));
    }
}

impl<In, P, F, U, E> Pipe<In> for TryMap<P, F, U>
where
    P: Pipe<In>,
    F: Fn(P::Out) -> Result<U, E> + Copy + 'static,
    U: 'static,
    E: Display,
{
    type Out = U;
    type State<'t> = P::State<'t>;
    fn open<'t>(self, task: &'t Task, side: &mut usize) -> Self::State<'t> {
        self.0.open(task, side)
    }
    fn push(self, state: &mut Self::State<'_>, item: In, out: &mut impl FnMut(U)) {
        self.0.push(state, item, &mut |x| match (self.1)(x) {
            Ok(y) => out(y),
            Err(e) => fail::<F>(&e.to_string()),
        });
    }
}

impl<In, P, F, I> Pipe<In> for FlatMap<P, F, I>
where
    P: Pipe<In>,
    F: Fn(P::Out) -> I + Copy + 'static,
    I: IntoIterator + 'static,
{
    type Out = I::Item;
    type State<'t> = P::State<'t>;
    fn open<'t>(self, task: &'t Task, side: &mut usize) -> Self::State<'t> {
        self.0.open(task, side)
    }
    fn push(self, state: &mut Self::State<'_>, item: In, out: &mut impl FnMut(I::Item)) {
        self.0.push(state, item, &mut |x| {
            (self.1)(x).into_iter().for_each(&mut *out)
        });
    }
}

impl<In, P, F> Pipe<In> for Filter<P, F>
where
    P: Pipe<In>,
    F: Fn(&P::Out) -> bool + Copy + 'static,
{
    type Out = P::Out;
    type State<'t> = P::State<'t>;
    fn open<'t>(self, task: &'t Task, side: &mut usize) -> Self::State<'t> {
        self.0.open(task, side)
    }
    fn push(self, state: &mut Self::State<'_>, item: In, out: &mut impl FnMut(P::Out)) {
        self.0.push(state, item, &mut |x| {
            if (self.1)(&x) {
                out(x);
            }
        });
    }
}

impl<In, P, F, B, U> Pipe<In> for MapWith<P, F, B, U>
where
    P: Pipe<In>,
    F: Fn(P::Out, &B) -> U + Copy + 'static,
    B: Default + 'static,
    U: 'static,
{
    type Out = U;
    type State<'t> = (P::State<'t>, Ref<'t, B>, String);
    fn open<'t>(self, task: &'t Task, side: &mut usize) -> Self::State<'t> {
        let inner = self.0.open(task, side);
        let name = read_name(*side);
        *side += 1;
        (inner, borrow(task.cell_named::<B>(&name), &name), name)
    }
    fn push(self, state: &mut Self::State<'_>, item: In, out: &mut impl FnMut(U)) {
        let (inner, value, _) = state;
        self.0.push(inner, item, &mut |x| out((self.1)(x, value)));
    }
}
