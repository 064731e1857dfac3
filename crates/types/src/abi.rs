//! Names of the mote guest ABI v1, the contract between the host and a guest module.
//!
//! `docs/abi.md` is the prose description; these constants are what both sides compile against,
//! so a rename cannot drift between the runtime and the guest SDK.

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
pub const IMPORT_LOG: &str = "log";

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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn pack_then_unpack_is_identity(ptr: u32, len: u32) {
            prop_assert_eq!(unpack_response(pack_response(ptr, len)), (ptr, len));
        }
    }
}
