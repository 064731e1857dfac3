//! `abi_response`: the response location a guest's `mote_handle` returns, packed in an `i64`
//! the guest chooses, as the runtime checks it against the guest's memory
//! ([`mote_abi::response_range`]) before copying the response out.
//!
//! The bytes give the packed value, the memory's size and the response limit (little-endian,
//! 8 + 8 + 8 bytes, missing bytes zero). A range is given exactly when the response fits the
//! limit and the memory, it is where the guest packed it, and slicing a memory of that size
//! with it never fails; a refusal names the reason that holds.

use mote_abi::{ResponseError, pack_response, response_range, unpack_response};

/// The largest memory the target slices for real; larger sizes are checked by arithmetic.
const SLICED: usize = 1 << 16;

/// Runs the target on `data`.
pub fn abi_response(data: &[u8]) {
    let mut fields = [0u8; 24];
    let n = data.len().min(fields.len());
    fields[..n].copy_from_slice(&data[..n]);
    let field = |i: usize| u64::from_le_bytes(fields[i * 8..][..8].try_into().expect("8 bytes"));
    let packed = field(0) as i64;
    // Sizes a 32-bit or 64-bit host could have: a wasm32 memory is at most 4 GiB, but the
    // check must hold for any.
    let memory_len = field(1) as usize;
    let limit = field(2) as usize;
    let (ptr, len) = unpack_response(packed);
    assert_eq!(pack_response(ptr, len), packed);
    let end = u64::from(ptr) + u64::from(len);
    match response_range(packed, memory_len, limit) {
        Ok(range) => {
            assert_eq!(range.start as u64, u64::from(ptr));
            assert_eq!(range.end as u64, end);
            assert!(range.len() <= limit && range.end <= memory_len);
            if memory_len <= SLICED {
                static MEMORY: [u8; SLICED] = [0; SLICED];
                assert_eq!(MEMORY[..memory_len][range].len(), len as usize);
            }
        }
        Err(ResponseError::TooLarge {
            len: said,
            limit: l,
        }) => {
            assert_eq!((said, l), (len, limit));
            assert!(u64::from(len) > limit as u64);
        }
        Err(ResponseError::OutsideMemory {
            start,
            end: said,
            memory_len: m,
        }) => {
            assert_eq!((start, said, m), (ptr, end, memory_len));
            assert!(u64::from(len) <= limit as u64 && end > memory_len as u64);
        }
    }
}

/// Responses at the edges: empty, filling memory exactly, one byte past it, at the top of the
/// address space, over the limit.
pub fn seeds() -> Vec<Vec<u8>> {
    let seed = |ptr: u32, len: u32, memory: u64, limit: u64| {
        [
            pack_response(ptr, len).to_le_bytes(),
            memory.to_le_bytes(),
            limit.to_le_bytes(),
        ]
        .concat()
    };
    vec![
        seed(0, 0, 0, 0),
        seed(1024, 64, 65_536, 16 << 20),
        seed(65_472, 64, 65_536, 16 << 20),
        seed(65_473, 64, 65_536, 16 << 20),
        seed(u32::MAX, u32::MAX, u64::MAX, u64::MAX),
        seed(0, (16 << 20) + 1, 1 << 32, 16 << 20),
    ]
}
