//! Write mote functions in Rust.
//!
//! A function is a plain `fn(&[u8]) -> Vec<u8>`; [`handler!`] exports it under the mote ABI v1
//! (`mote_alloc`, `mote_handle`, see `docs/abi.md`). [`log`] writes a line to the platform's log.
//!
//! A function may also declare microtasks (`docs/abi.md`, "Microtasks"): [`phase`] says how much
//! of a core the work from here on needs, [`sleep_us`] waits without holding one, and [`object`]
//! reads and writes the node's object storage, giving the core up while the I/O is under way.
//! Each host import is linked only if the function uses it, so a function that calls none of these
//! keeps the synchronous path and pays nothing for them.
//!
//! ```ignore
//! fn greet(body: &[u8]) -> Vec<u8> {
//!     mote_sdk::log("greeting someone");
//!     format!("Hello, {}!", String::from_utf8_lossy(body)).into_bytes()
//! }
//! mote_sdk::handler!(greet);
//! ```
//!
//! mote runs every call in a fresh instance and throws it away afterwards, so the SDK never frees
//! the request or response buffers: the whole linear memory is discarded with the instance.
//!
//! A data-parallel job (`docs/jobs.md`) is written with [`mod@job`] instead: a driver that declares
//! datasets and stages, and task functions that run on one partition at a time in instances that
//! keep their partitions between tasks.

/// Exports `f: fn(&[u8]) -> Vec<u8>` as this module's mote ABI v1 handler.
#[macro_export]
macro_rules! handler {
    ($f:path) => {
        #[unsafe(no_mangle)]
        pub extern "C" fn mote_alloc(len: i32) -> i32 {
            $crate::__private::alloc(len)
        }

        #[unsafe(no_mangle)]
        pub extern "C" fn mote_handle(ptr: i32, len: i32) -> i64 {
            $crate::__private::handle(ptr, len, $f)
        }
    };
}

pub mod job;
pub mod object;

/// Appends `line` to the function's log on the platform.
pub fn log(line: &str) {
    #[cfg(target_family = "wasm")]
    {
        #[link(wasm_import_module = "mote")]
        unsafe extern "C" {
            #[link_name = mote_abi::import_name!(log)]
            fn mote_log(ptr: i32, len: i32);
        }
        // SAFETY: the host only reads `len` bytes at `ptr`, which are valid for this call.
        unsafe { mote_log(line.as_ptr() as i32, line.len() as i32) }
    }
    #[cfg(not(target_family = "wasm"))]
    eprintln!("{line}");
}

/// Declares that the call, from now until the next `phase` or its end, needs `cpu_permille`
/// thousandths of a core: 1000 for work that keeps a core busy, 100 for work that mostly waits
/// (reading and writing objects). The node rounds it up to its share levels and may make the call
/// wait for room in that class. A value outside 1..=1000 fails the call.
///
/// Natively (unit tests) there is no scheduler to tell, so this does nothing.
pub fn phase(cpu_permille: u16) {
    #[cfg(target_family = "wasm")]
    {
        #[link(wasm_import_module = "mote")]
        unsafe extern "C" {
            #[link_name = mote_abi::import_name!(phase)]
            fn mote_phase(cpu_permille: i32);
        }
        // SAFETY: takes a plain value; the host checks its range.
        unsafe { mote_phase(i32::from(cpu_permille)) }
    }
    #[cfg(not(target_family = "wasm"))]
    let _ = cpu_permille;
}

/// Waits `us` microseconds without holding a core: the call gives its share up meanwhile, so other
/// calls' phases run.
///
/// Natively (unit tests) this is `std::thread::sleep`.
pub fn sleep_us(us: u64) {
    #[cfg(target_family = "wasm")]
    {
        #[link(wasm_import_module = "mote")]
        unsafe extern "C" {
            #[link_name = mote_abi::import_name!(sleep_us)]
            fn mote_sleep_us(us: i64);
        }
        // Past i64::MAX µs (292,000 years) the call's timeout ends the wait anyway.
        let us = i64::try_from(us).unwrap_or(i64::MAX);
        // SAFETY: takes a plain, non-negative value.
        unsafe { mote_sleep_us(us) }
    }
    #[cfg(not(target_family = "wasm"))]
    std::thread::sleep(std::time::Duration::from_micros(us));
}

#[doc(hidden)]
pub mod __private {
    /// Returns a buffer of `len` bytes for the host to write the request, or an object call's
    /// result, into. [`crate::object`] takes the latter back with `Vec::from_raw_parts(ptr, len,
    /// len)`, which relies on this allocating exactly `Vec::<u8>::with_capacity(len)`.
    pub fn alloc(len: i32) -> i32 {
        // Leaked on purpose: the instance, and with it this memory, ends with the call.
        let mut buf = core::mem::ManuallyDrop::new(Vec::<u8>::with_capacity(len.max(0) as usize));
        buf.as_mut_ptr() as usize as i32
    }

    /// Runs `f` on the request at `ptr..ptr+len` and returns the packed response location.
    pub fn handle(ptr: i32, len: i32, f: fn(&[u8]) -> Vec<u8>) -> i64 {
        let input: &[u8] = if len <= 0 {
            &[]
        } else {
            // SAFETY: the host wrote exactly `len` bytes at `ptr`, a buffer from `alloc(len)`.
            unsafe { core::slice::from_raw_parts(ptr as usize as *const u8, len as usize) }
        };
        let out = f(input).leak();
        // Guest memory is 32-bit, so the address and the length fit.
        mote_abi::pack_response(out.as_ptr() as usize as u32, out.len() as u32)
    }
}
