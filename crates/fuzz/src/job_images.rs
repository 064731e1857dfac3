//! `job_images`: a partition's instance image ([`mote_jobs::image`]), which a worker reads from
//! a peer's transfer or from a snapshot in object storage.
//!
//! The bytes are read twice:
//! - as an image: [`decode`] must not panic, must allocate no more than the bytes hold, and an
//!   image it reads must encode back to exactly the same bytes (the format has one encoding per
//!   image);
//! - as a recipe for one ([`arbitrary`]): globals and memory made from the bytes must encode to
//!   an image that decodes to them.

use crate::alloc;
use arbitrary::{Arbitrary, Unstructured};
use mote_jobs::image::{Image, Value, decode, encode};

/// A global read is a `(String, Value)` of 64 bytes in a `Vec` that doubles (from four), for
/// at least 21 bytes of input (a name's length, a tag, the value); its name takes what the
/// input holds, and is copied once more into the error that refuses its value.
const PER_BYTE: usize = 16;

/// Runs the target on `data`.
pub fn job_images(data: &[u8]) {
    read(data);
    made(data);
}

fn read(bytes: &[u8]) {
    let (read, allocated) = alloc::peak(|| decode(bytes));
    alloc::assert_within("an image", bytes.len(), allocated, PER_BYTE, 256);
    if let Ok(Image { globals, memory }) = read {
        assert_eq!(encode(&globals, memory), bytes);
    }
}

fn made(bytes: &[u8]) {
    let mut recipe = Unstructured::new(bytes);
    let Ok((globals, memory)) = <(Vec<(String, Bits)>, Vec<u8>)>::arbitrary(&mut recipe) else {
        return;
    };
    let globals: Vec<(String, Value)> = globals
        .into_iter()
        .map(|(name, bits)| (name, bits.0))
        .collect();
    let image = encode(&globals, &memory);
    let read = decode(&image).expect("an encoded image decodes");
    assert_eq!(read.globals, globals);
    assert_eq!(read.memory, memory);
}

/// A [`Value`] made from bytes: `mote_jobs` does not depend on `arbitrary` for this target.
struct Bits(Value);

impl<'a> Arbitrary<'a> for Bits {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(Bits(match u.int_in_range(0..=4u8)? {
            0 => Value::I32(u.arbitrary()?),
            1 => Value::I64(u.arbitrary()?),
            2 => Value::F32(u.arbitrary()?),
            3 => Value::F64(u.arbitrary()?),
            _ => Value::V128(u.arbitrary()?),
        }))
    }
}

/// Images as workers make them, with every type of global, and no globals or memory at all.
pub fn seeds() -> Vec<Vec<u8>> {
    vec![
        encode(&[], &[]),
        encode(
            &[
                ("__stack_pointer".into(), Value::I32(65536)),
                ("calls".into(), Value::I64(-3)),
                ("scale".into(), Value::F32(1.5f32.to_bits())),
                ("mean".into(), Value::F64(f64::NAN.to_bits())),
                ("lanes".into(), Value::V128(u128::MAX)),
            ],
            &[7; 300],
        ),
        encode(&[("π".into(), Value::I32(0))], b"\0\x01\x02"),
    ]
}
