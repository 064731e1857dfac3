//! How a task function becomes what the host calls, and back: each function is wrapped in an
//! entry whose function-table index the driver hands the host ([`task_id`], [`run_id`]), and
//! which the task entry point calls with the index the host passes back. Also what a task
//! function returns ([`Outcome`]) and how an error fails the task ([`fail`]).

use super::Task;
use std::any::type_name;
#[cfg(not(target_family = "wasm"))]
use std::cell::RefCell;
use std::sync::Once;

/// What the host calls: every task function is wrapped in one of these, so the task entry point
/// calls a single function type, and a signal's answer reaches the host as its return value.
pub(super) type Entry = fn(&mut Task) -> bool;

/// What a task function returns: nothing, or a `Result` whose error fails the job.
pub trait Outcome {
    /// The error's message, if the task failed.
    fn error(self) -> Option<String>;
}

impl Outcome for () {
    fn error(self) -> Option<String> {
        None
    }
}

impl<E: std::fmt::Display> Outcome for Result<(), E> {
    fn error(self) -> Option<String> {
        self.err().map(|e| e.to_string())
    }
}

/// Fails the running task: function `F`, a task or operator function, returned `error`. The
/// message names `F` by its type (a fn item's path, or the path of the function a closure is
/// written in); the host's adds the stage and the partition. Not a panic, whose message would
/// name this line of the SDK: the message is logged (the host quotes a trap's last log line)
/// and the task unwinds without the panic hook, which aborts in WebAssembly.
pub(super) fn fail<F>(error: &str) -> ! {
    let message = format!("{} returned an error: {error}", type_name::<F>());
    crate::log(&message);
    std::panic::resume_unwind(Box::new(message))
}

/// The table index of the entry for task function `F`.
pub(super) fn task_id<F: Fn(&mut Task) -> R + Copy + 'static, R: Outcome>(_: F) -> i32 {
    fn entry<F: Fn(&mut Task) -> R, R: Outcome>(task: &mut Task) -> bool {
        if let Some(error) = conjure::<F>()(task).error() {
            fail::<F>(&error);
        }
        false
    }
    entry_id(entry::<F, R>)
}

/// A task the SDK composes from types alone, as [`flow`] does for a stage of operators: the
/// type is all that travels with the table index.
pub(super) trait Run: 'static {
    fn run(task: &mut Task);
}

/// The table index of the entry for task `R`.
pub(super) fn run_id<R: Run>() -> i32 {
    fn entry<R: Run>(task: &mut Task) -> bool {
        R::run(task);
        false
    }
    entry_id(entry::<R>)
}

/// The table index of the entry for signal function `F`.
pub(super) fn signal_id<F: Fn(&mut Task) -> bool + Copy + 'static>(_: F) -> i32 {
    fn entry<F: Fn(&mut Task) -> bool>(task: &mut Task) -> bool {
        conjure::<F>()(task)
    }
    entry_id(entry::<F>)
}

#[cfg(target_family = "wasm")]
pub(super) fn entry_id(entry: Entry) -> i32 {
    // In WebAssembly a function pointer is the function's index in the module's table, the same
    // in every instance of the module, which is what lets the host hand it to another instance.
    entry as usize as i32
}

#[cfg(not(target_family = "wasm"))]
thread_local! {
    /// Natively a function pointer does not fit an i32: an entry's id is its place in this
    /// thread's list, plus one (no id is 0, as no table index is). A [`local`] run's driver and
    /// tasks run on one thread, so the ids it hands out are the ones its tasks look up.
    pub(super) static ENTRIES: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
}

#[cfg(not(target_family = "wasm"))]
pub(super) fn entry_id(entry: Entry) -> i32 {
    ENTRIES.with_borrow_mut(|entries| {
        let at = match entries.iter().position(|e| std::ptr::fn_addr_eq(*e, entry)) {
            Some(at) => at,
            None => {
                entries.push(entry);
                entries.len() - 1
            }
        };
        i32::try_from(at + 1).expect("a thread registers fewer than 2^31 task functions")
    })
}

/// The value of a zero-sized function type, which a task's entry calls: the function a stage
/// named is a type parameter of the entry, as no value can travel with a table index.
pub(super) fn conjure<F>() -> F {
    const {
        assert!(
            size_of::<F>() == 0,
            "a task function must be a fn item or a closure that captures nothing"
        )
    };
    // SAFETY: `F` has no bytes (checked above), so any value of it is this one, and as a fn item
    // or a closure that captures nothing it has no invariant to break (`core::mem::conjure_zst`).
    unsafe { std::mem::zeroed() }
}

pub(super) fn install_panic_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            // One line, where the default message spans two.
            let message = info.payload_as_str().unwrap_or("no message");
            match info.location() {
                Some(at) => crate::log(&format!("panicked at {at}: {message}")),
                None => crate::log(&format!("panicked: {message}")),
            }
        }))
    });
}
