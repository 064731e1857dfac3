//! A partition's instance image: what moves with a partition between workers and what a
//! snapshot stores of it, so it arrives from peers and from object storage and is untrusted.
//!
//! The format: `MOTEIMG1`; the globals (a count, then each global's name as a length and UTF-8
//! bytes, a type tag and 16 bytes of value); the memory's length and bytes; nothing after.
//! Integers are little-endian. The runtime converts its values to and from [`Value`]: this
//! crate does not know wasmtime.
//!
//! [`decode`] allocates only for what the bytes hold (a name's bytes, one entry per global
//! read), never for what a count or length claims, and borrows the memory from its input.

/// The value of one exported mutable global: the numeric types of WebAssembly, floats as their
/// bits so that every value (NaNs included) comes back exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value {
    /// `i32`.
    I32(i32),
    /// `i64`.
    I64(i64),
    /// `f32`, as bits.
    F32(u32),
    /// `f64`, as bits.
    F64(u64),
    /// `v128`.
    V128(u128),
}

impl Value {
    fn tag_and_bits(self) -> (u8, u128) {
        match self {
            Value::I32(v) => (0, v as u32 as u128),
            Value::I64(v) => (1, v as u64 as u128),
            Value::F32(v) => (2, v as u128),
            Value::F64(v) => (3, v as u128),
            Value::V128(v) => (4, v),
        }
    }

    /// The value a tag and its 16 bytes stand for, if the tag is known. Bits beyond the type's
    /// width must be zero, so that each value has exactly one encoding.
    fn from_tag_and_bits(tag: u8, bits: u128) -> Option<Value> {
        let value = match tag {
            0 => Value::I32(bits as u32 as i32),
            1 => Value::I64(bits as u64 as i64),
            2 => Value::F32(bits as u32),
            3 => Value::F64(bits as u64),
            4 => Value::V128(bits),
            _ => return None,
        };
        (value.tag_and_bits().1 == bits).then_some(value)
    }
}

/// An image, read: the globals by name and the memory, borrowed from the encoded bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image<'a> {
    /// The exported mutable globals, in the order they were saved.
    pub globals: Vec<(String, Value)>,
    /// The linear memory's bytes.
    pub memory: &'a [u8],
}

/// Why bytes are not an image.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    /// The magic is missing: the bytes are something else.
    #[error("it does not start with MOTEIMG1")]
    NotAnImage,
    /// It ends before what it declares.
    #[error("it is truncated: {what} needs {needed} bytes, {left} are left")]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// How many bytes it needs.
        needed: u64,
        /// How many remain.
        left: usize,
    },
    /// A global's name is not UTF-8.
    #[error("the name of global {index} is not UTF-8")]
    Name {
        /// The global's position.
        index: u32,
    },
    /// A global's type is unknown, or its value has bits its type does not.
    #[error("global `{name}` has type tag {tag}, which is unknown or does not fit its value")]
    Value {
        /// The global.
        name: String,
        /// Its type tag.
        tag: u8,
    },
    /// Bytes follow the memory.
    #[error("{0} bytes follow its memory")]
    Trailing(usize),
}

const MAGIC: &[u8; 8] = b"MOTEIMG1";

/// The image of `globals` and `memory`.
pub fn encode(globals: &[(String, Value)], memory: &[u8]) -> Vec<u8> {
    let names: usize = globals.iter().map(|(name, _)| 4 + name.len() + 17).sum();
    let mut out = Vec::with_capacity(MAGIC.len() + 4 + names + 8 + memory.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(globals.len() as u32).to_le_bytes());
    for (name, value) in globals {
        let (tag, bits) = value.tag_and_bits();
        out.extend_from_slice(&(name.len() as u32).to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        out.push(tag);
        out.extend_from_slice(&bits.to_le_bytes());
    }
    out.extend_from_slice(&(memory.len() as u64).to_le_bytes());
    out.extend_from_slice(memory);
    out
}

/// Reads an image.
pub fn decode(image: &[u8]) -> Result<Image<'_>, ImageError> {
    let mut reader = Reader(image.strip_prefix(MAGIC).ok_or(ImageError::NotAnImage)?);
    let count = reader.u32("the global count")?;
    let mut globals = Vec::new();
    for index in 0..count {
        let len = reader.u32("a global's name length")?;
        let name = reader.take(len.into(), "a global's name")?;
        let name = String::from_utf8(name.to_vec()).map_err(|_| ImageError::Name { index })?;
        let tag = reader.take(1, "a global's type tag")?[0];
        let bits = u128::from_le_bytes(reader.array("a global's value")?);
        let value = Value::from_tag_and_bits(tag, bits).ok_or(ImageError::Value {
            name: name.clone(),
            tag,
        })?;
        globals.push((name, value));
    }
    let len = u64::from_le_bytes(reader.array("the memory's length")?);
    let memory = reader.take(len, "the memory")?;
    match reader.0.len() {
        0 => Ok(Image { globals, memory }),
        trailing => Err(ImageError::Trailing(trailing)),
    }
}

/// The bytes not read yet.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, needed: u64, what: &'static str) -> Result<&'a [u8], ImageError> {
        let truncated = ImageError::Truncated {
            what,
            needed,
            left: self.0.len(),
        };
        let n = usize::try_from(needed).map_err(|_| truncated.clone())?;
        let (head, tail) = self.0.split_at_checked(n).ok_or(truncated)?;
        self.0 = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], ImageError> {
        let bytes = self.take(N as u64, what)?;
        Ok(bytes.try_into().expect("take returned N bytes"))
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, ImageError> {
        self.array(what).map(u32::from_le_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<i32>().prop_map(Value::I32),
            any::<i64>().prop_map(Value::I64),
            any::<u32>().prop_map(Value::F32),
            any::<u64>().prop_map(Value::F64),
            any::<u128>().prop_map(Value::V128),
        ]
    }

    proptest! {
        #[test]
        fn decode_inverts_encode(
            globals in proptest::collection::vec((".{0,12}", value()), 0..6),
            memory in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let bytes = encode(&globals, &memory);
            let image = decode(&bytes).unwrap();
            prop_assert_eq!(&image.globals, &globals);
            prop_assert_eq!(image.memory, &memory[..]);
        }
    }

    #[test]
    fn what_is_not_an_image_is_refused_with_the_reason() {
        let good = encode(&[("sp".into(), Value::I32(-1))], b"abc");
        assert_eq!(decode(b"MOTEIMG0"), Err(ImageError::NotAnImage));
        assert_eq!(
            decode(&good[..good.len() - 1]).unwrap_err().to_string(),
            "it is truncated: the memory needs 3 bytes, 2 are left"
        );
        let mut trailing = good.clone();
        trailing.push(0);
        assert_eq!(decode(&trailing), Err(ImageError::Trailing(1)));
        // An i32 whose 16 value bytes say more than 32 bits.
        let mut wide = good.clone();
        let high = MAGIC.len() + 4 + 4 + 2 + 1 + 4;
        wide[high] = 1;
        assert_eq!(
            decode(&wide),
            Err(ImageError::Value {
                name: "sp".into(),
                tag: 0
            })
        );
    }

    /// A count or a length is only a claim: reading four billion globals or an exabyte of
    /// memory from a few bytes fails at the first one the bytes do not hold.
    #[test]
    fn a_claimed_count_or_length_is_not_trusted() {
        let mut many = MAGIC.to_vec();
        many.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            decode(&many),
            Err(ImageError::Truncated {
                what: "a global's name length",
                ..
            })
        ));
        let mut huge = MAGIC.to_vec();
        huge.extend_from_slice(&0u32.to_le_bytes());
        huge.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            decode(&huge),
            Err(ImageError::Truncated {
                what: "the memory",
                needed: u64::MAX,
                left: 0
            })
        ));
    }
}
