//! The mote guest ABI v1: the contract between the host and a guest module, as the names and
//! status codes both sides compile against. The runtime links and checks guests with these; the
//! guest SDK (`crates/guests/wasm/sdk`) declares its imports and reads statuses with them, so a
//! rename or a renumbering cannot drift between the two. `docs/abi.md` is the prose description.
//!
//! `no_std` and dependency-free, so it builds for `wasm32` guests as well as for the host.
//!
//! Rust's `#[link_name = ...]` takes a literal or a macro that expands to one, never a constant:
//! the names of the `mote` imports are therefore [`import_name!`] first, and constants after it.
//! The import module's name is a literal in the SDK's `#[link(wasm_import_module = "mote")]`,
//! which takes no macro either; a guest built against another name is refused at deploy, naming
//! the import (the end-to-end tests deploy the SDK's examples).

#![no_std]

/// The name of a `mote` import, as a literal, for `#[link_name = mote_abi::import_name!(log)]`.
#[macro_export]
macro_rules! import_name {
    (log) => {
        "log"
    };
    (phase) => {
        "phase"
    };
    (sleep_us) => {
        "sleep_us"
    };
    (object_get) => {
        "object_get"
    };
    (object_put) => {
        "object_put"
    };
    (object_list) => {
        "object_list"
    };
    (object_list_after) => {
        "object_list_after"
    };
    (object_delete) => {
        "object_delete"
    };
    (dataset) => {
        "dataset"
    };
    (task_dataset) => {
        "task_dataset"
    };
    (compute) => {
        "compute"
    };
    (scatter) => {
        "scatter"
    };
    (load) => {
        "load"
    };
    (store) => {
        "store"
    };
    (repeat) => {
        "repeat"
    };
    (while_signal) => {
        "while_signal"
    };
    (if_signal) => {
        "if_signal"
    };
    (else_branch) => {
        "else_branch"
    };
    (end) => {
        "end"
    };
    (partitions) => {
        "partitions"
    };
    (arg) => {
        "arg"
    };
    (input_count) => {
        "input_count"
    };
    (input_len) => {
        "input_len"
    };
    (input_read) => {
        "input_read"
    };
    (emit) => {
        "emit"
    };
}

/// The linear memory a mote ABI guest exports, where the host reads and writes bodies.
pub const EXPORT_MEMORY: &str = "memory";
/// `mote_alloc(len: i32) -> i32`: the guest returns a buffer of `len` bytes for the request body.
pub const EXPORT_ALLOC: &str = "mote_alloc";
/// `mote_handle(ptr: i32, len: i32) -> i64`: handles a request, returns `(out_ptr << 32) | out_len`.
pub const EXPORT_HANDLE: &str = "mote_handle";
/// A WASI reactor's constructor; called once per instance, before `mote_handle`, if exported.
pub const EXPORT_INITIALIZE: &str = "_initialize";
/// The entry point of a WASI preview1 command module.
pub const EXPORT_START: &str = "_start";

/// The import module under which the host provides mote's host functions.
pub const IMPORT_MODULE: &str = "mote";
/// `log(ptr: i32, len: i32)`: appends a UTF-8 line to the function's log.
pub const IMPORT_LOG: &str = import_name!(log);

/// `phase(cpu_permille: i32)`: from now until the next phase or the call's end, the call needs
/// this share of a core (1..=1000).
pub const IMPORT_PHASE: &str = import_name!(phase);
/// `sleep_us(us: i64)`: waits without holding a core.
pub const IMPORT_SLEEP_US: &str = import_name!(sleep_us);
/// `object_get(bucket_ptr, bucket_len, key_ptr, key_len, out) -> status`.
pub const IMPORT_OBJECT_GET: &str = import_name!(object_get);
/// `object_put(bucket_ptr, bucket_len, key_ptr, key_len, data_ptr, data_len, out) -> status`.
pub const IMPORT_OBJECT_PUT: &str = import_name!(object_put);
/// `object_list(bucket_ptr, bucket_len, prefix_ptr, prefix_len, limit, out) -> status`.
pub const IMPORT_OBJECT_LIST: &str = import_name!(object_list);
/// `object_list_after(bucket_ptr, bucket_len, prefix_ptr, prefix_len, after_ptr, after_len,
/// limit, out) -> status`: `object_list` of the keys after `after` only, to continue a
/// truncated listing from its last key.
pub const IMPORT_OBJECT_LIST_AFTER: &str = import_name!(object_list_after);
/// `object_delete(bucket_ptr, bucket_len, key_ptr, key_len, out) -> status`.
pub const IMPORT_OBJECT_DELETE: &str = import_name!(object_delete);

/// The `mote` imports that make a function a microtask function: calls that may wait.
pub const MICROTASK_IMPORTS: [&str; 7] = [
    IMPORT_PHASE,
    IMPORT_SLEEP_US,
    IMPORT_OBJECT_GET,
    IMPORT_OBJECT_PUT,
    IMPORT_OBJECT_LIST,
    IMPORT_OBJECT_LIST_AFTER,
    IMPORT_OBJECT_DELETE,
];

/// Whether importing `module`.`name` makes a function a microtask function.
pub fn is_microtask_import(module: &str, name: &str) -> bool {
    module == IMPORT_MODULE && MICROTASK_IMPORTS.contains(&name)
}

/// Object calls' status: success; the result is at the location written to `out`.
pub const OBJECT_OK: i32 = 0;
/// No object has that key.
pub const OBJECT_NO_SUCH_KEY: i32 = 1;
/// The bucket does not exist.
pub const OBJECT_NO_SUCH_BUCKET: i32 = 2;
/// The object is larger than the call's memory limit.
pub const OBJECT_TOO_LARGE: i32 = 3;
/// The bucket or key breaks S3's naming rules.
pub const OBJECT_INVALID_NAME: i32 = 4;
/// The storage server could not be reached.
pub const OBJECT_UNREACHABLE: i32 = 5;
/// The storage server refused the platform's credentials.
pub const OBJECT_DENIED: i32 = 6;
/// Any other storage failure; the message says which.
pub const OBJECT_FAILED: i32 = 7;

/// `mote_job_driver()`: a job module's driver. The host runs it once per worker (and once in
/// the controller) to learn the job's program: it declares datasets and stages through the
/// `mote_job` imports and never touches data.
pub const EXPORT_JOB_DRIVER: &str = "mote_job_driver";
/// `mote_job_task(func: i32, index: i32) -> i32`: runs task function `func` (a function table
/// index the driver passed to a stage) on partition `index` of the instance's partitions. A
/// signal's task returns 1 for true and 0 for false; every other task returns 0.
pub const EXPORT_JOB_TASK: &str = "mote_job_task";

/// The import module of a job module's host functions (`docs/jobs.md`, "The job ABI").
pub const JOB_MODULE: &str = "mote_job";
/// Driver: `dataset(name_ptr, name_len, partitioned) -> id`: a dataset of the job's partition
/// count (`partitioned` 1) or of one partition (0).
pub const JOB_DATASET: &str = import_name!(dataset);
/// Driver: `compute(func, reads_ptr, reads_len, writes_ptr, writes_len)`: one task per
/// partition index over the datasets read and written (arrays of i32 ids, lengths in ids).
pub const JOB_COMPUTE: &str = import_name!(compute);
/// Driver: `scatter(func, reads_ptr, reads_len, gather, writes_ptr, writes_len)`: `func` runs
/// on each partition of the datasets read and emits pieces for partitions of the datasets
/// written; `gather` runs on each of those with the pieces addressed to it.
pub const JOB_SCATTER: &str = import_name!(scatter);
/// Driver: `load(func, dataset, arg_ptr, arg_len)`: `func` runs on each partition of `dataset`
/// with its share of the lines of the objects the argument names (`BUCKET/PREFIX`) as input 0.
pub const JOB_LOAD: &str = import_name!(load);
/// Driver: `store(func, dataset, arg_ptr, arg_len)`: `func` runs on each partition of
/// `dataset` and what it emits is written to `PREFIX/part-NNNNN` under the argument's prefix.
pub const JOB_STORE: &str = import_name!(store);
/// Driver: `repeat(times)`: the stages up to the matching `end` run `times` times.
pub const JOB_REPEAT: &str = import_name!(repeat);
/// Driver: `while_signal(func, dataset)`: the stages up to the matching `end` run for as long as
/// the signal `func` over the one-partition `dataset`, evaluated before each iteration, is true.
pub const JOB_WHILE: &str = import_name!(while_signal);
/// Driver: `if_signal(func, dataset)`: the stages up to the matching `else_branch` or `end` run
/// if the signal is true, those after `else_branch` if it is false.
pub const JOB_IF: &str = import_name!(if_signal);
/// Driver: `else_branch()`.
pub const JOB_ELSE: &str = import_name!(else_branch);
/// Driver: `end()`: closes the innermost `repeat`, `while_signal` or `if_signal`.
pub const JOB_END: &str = import_name!(end);
/// Driver and tasks: `partitions() -> i32`: the job's partition count.
pub const JOB_PARTITIONS: &str = import_name!(partitions);
/// Driver and tasks: `arg(key_ptr, key_len, out_ptr, out_cap) -> len`: the job argument's
/// value's length, copied to `out` if it fits `out_cap`; -1 if the job has no such argument.
pub const JOB_ARG: &str = import_name!(arg);
/// Tasks: `input_count() -> n`: a load task has one input, a gather task one per non-empty piece
/// addressed to its partition (in the order of the partitions that emitted them), others none.
pub const JOB_INPUT_COUNT: &str = import_name!(input_count);
/// Tasks: `input_len(k) -> len`.
pub const JOB_INPUT_LEN: &str = import_name!(input_len);
/// Tasks: `input_read(k, ptr)`: copies input `k` (`input_len(k)` bytes) to `ptr`.
pub const JOB_INPUT_READ: &str = import_name!(input_read);
/// Tasks: `emit(dest, ptr, len)`: a scatter task's piece for partition `dest` of the datasets
/// written (pieces emitted for the same partition are concatenated); a store task's output
/// (`dest` 0).
pub const JOB_EMIT: &str = import_name!(emit);
/// Tasks: `task_dataset(which, k, out_ptr, out_cap) -> len`: the name (as the driver declared
/// it) of the `k`th dataset the task's stage reads (`which` 0) or writes (`which` 1), written
/// to `out_ptr` if it fits in `out_cap` bytes; its length, or -1 past the last. A gather task's
/// stage is its scatter's: it reads what the scatter tasks read and writes what the gather
/// writes. Lets one task function serve stages over different datasets.
pub const JOB_TASK_DATASET: &str = import_name!(task_dataset);

/// The import module of WASI preview1, which mote provides to both guest kinds.
pub const WASI_P1_MODULE: &str = "wasi_snapshot_preview1";

/// Packs a response location the way `mote_handle` returns it.
pub const fn pack_response(ptr: u32, len: u32) -> i64 {
    (((ptr as u64) << 32) | len as u64) as i64
}

/// Splits `mote_handle`'s return value into `(out_ptr, out_len)`.
pub const fn unpack_response(packed: i64) -> (u32, u32) {
    let packed = packed as u64;
    ((packed >> 32) as u32, packed as u32)
}

/// Why the response `mote_handle` returned cannot be taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResponseError {
    /// It is longer than the host takes from one call.
    TooLarge {
        /// Its length.
        len: u32,
        /// The most the host takes.
        limit: usize,
    },
    /// It does not lie inside the guest's memory.
    OutsideMemory {
        /// Where it starts.
        start: u32,
        /// Where it ends (one past its last byte; above `u32::MAX` if the guest said so).
        end: u64,
        /// The memory's size.
        memory_len: usize,
    },
}

impl core::fmt::Display for ResponseError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ResponseError::TooLarge { len, limit } => write!(
                f,
                "mote_handle returned a response of {len} bytes, over the limit of {limit} bytes"
            ),
            ResponseError::OutsideMemory {
                start,
                end,
                memory_len,
            } => write!(
                f,
                "mote_handle returned a response at {start}..{end}, outside its memory of {memory_len} bytes"
            ),
        }
    }
}

/// Where the response `mote_handle` returned as `packed` lies in a guest memory of `memory_len`
/// bytes, if it is at most `limit` bytes long and inside that memory. The guest chooses
/// `packed`, so this is the host's one check before it copies the response out; the end is
/// computed in 64 bits so that no `(ptr, len)` wraps around on any host.
pub const fn response_range(
    packed: i64,
    memory_len: usize,
    limit: usize,
) -> Result<core::ops::Range<usize>, ResponseError> {
    let (start, len) = unpack_response(packed);
    if len as u64 > limit as u64 {
        return Err(ResponseError::TooLarge { len, limit });
    }
    let end = start as u64 + len as u64;
    if end > memory_len as u64 {
        return Err(ResponseError::OutsideMemory {
            start,
            end,
            memory_len,
        });
    }
    // Both fit in usize: `end` is at most `memory_len`.
    Ok(start as usize..end as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn pack_then_unpack_is_identity(ptr: u32, len: u32) {
            prop_assert_eq!(unpack_response(pack_response(ptr, len)), (ptr, len));
        }

        /// A range is given exactly when the response fits both the limit and the memory, and
        /// it is the one the guest packed.
        #[test]
        fn a_response_is_taken_only_inside_memory_and_limit(
            ptr: u32,
            len: u32,
            memory_len in prop_oneof![0..=u32::MAX as usize, Just(usize::MAX)],
            limit in prop_oneof![0..=u32::MAX as usize, Just(usize::MAX)],
        ) {
            let end = ptr as u64 + len as u64;
            match response_range(pack_response(ptr, len), memory_len, limit) {
                Ok(range) => {
                    prop_assert_eq!(range, ptr as usize..end as usize);
                    prop_assert!(len as usize <= limit && end <= memory_len as u64);
                }
                Err(ResponseError::TooLarge { .. }) => prop_assert!(len as usize > limit),
                Err(ResponseError::OutsideMemory { .. }) => {
                    prop_assert!(len as usize <= limit && end > memory_len as u64)
                }
            }
        }
    }

    #[test]
    fn a_response_past_the_end_of_memory_is_refused_with_its_place() {
        assert_eq!(
            response_range(pack_response(65_530, 10), 65_536, 1 << 20),
            Err(ResponseError::OutsideMemory {
                start: 65_530,
                end: 65_540,
                memory_len: 65_536,
            })
        );
    }
}
