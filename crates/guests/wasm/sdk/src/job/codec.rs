//! Values between tasks: any `serde` type, in postcard's compact binary encoding, so that no job
//! writes a byte format by hand. A piece is one encoded value; [`Task::emit_value`] appends one
//! to a destination's piece and [`Task::input_values`] reads them back, in order, from every
//! input.
//!
//! [`Task::emit_value`]: super::Task::emit_value
//! [`Task::input_values`]: super::Task::input_values

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt;

/// Bytes that do not decode as the type asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// The type asked for.
    pub type_name: &'static str,
    /// The codec's reason.
    pub reason: String,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a piece does not decode as {}: {} (were both ends of the stage given the same type?)",
            self.type_name, self.reason
        )
    }
}

impl std::error::Error for DecodeError {}

/// `value`, encoded and appended to `out`.
pub fn encode_into<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) {
    let taken = std::mem::take(out);
    *out = postcard::to_extend(value, taken)
        .unwrap_or_else(|e| panic!("encoding a {}: {e}", std::any::type_name::<T>()));
}

/// `value`, encoded.
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(value, &mut out);
    out
}

/// The values encoded one after another in `bytes`, in order.
pub fn decode_all<T: DeserializeOwned>(bytes: &[u8]) -> Result<Vec<T>, DecodeError> {
    let mut values = Vec::new();
    decode_each(bytes, |value| values.push(value))?;
    Ok(values)
}

/// Hands `each` the values encoded one after another in `bytes`, in order, without collecting
/// them first.
pub fn decode_each<T: DeserializeOwned>(
    mut bytes: &[u8],
    mut each: impl FnMut(T),
) -> Result<(), DecodeError> {
    while !bytes.is_empty() {
        let (value, rest) = postcard::take_from_bytes(bytes).map_err(|e| DecodeError {
            type_name: std::any::type_name::<T>(),
            reason: e.to_string(),
        })?;
        each(value);
        bytes = rest;
    }
    Ok(())
}

/// The one value encoded in `bytes`.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, DecodeError> {
    let error = |reason: String| DecodeError {
        type_name: std::any::type_name::<T>(),
        reason,
    };
    let (value, rest) = postcard::take_from_bytes(bytes).map_err(|e| error(e.to_string()))?;
    match rest.len() {
        0 => Ok(value),
        n => Err(error(format!("{n} bytes are left after the value"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use std::collections::BTreeMap;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Page {
        title: String,
        rank: f64,
        links: Vec<u32>,
    }

    #[test]
    fn values_round_trip_one_and_many() {
        let page = Page {
            title: "mote".into(),
            rank: 0.15,
            links: vec![1, 2, 70_000],
        };
        assert_eq!(decode::<Page>(&encode(&page)).unwrap(), page);
        let words: Vec<(String, u64)> = vec![("a".into(), 1), ("ü".into(), u64::MAX)];
        let mut piece = Vec::new();
        for w in &words {
            encode_into(w, &mut piece);
        }
        assert_eq!(decode_all::<(String, u64)>(&piece).unwrap(), words);
        assert!(decode_all::<u8>(&[]).unwrap().is_empty());
        let map: BTreeMap<u32, Vec<f64>> = [(3, vec![1.5]), (9, vec![])].into();
        assert_eq!(
            decode::<BTreeMap<u32, Vec<f64>>>(&encode(&map)).unwrap(),
            map
        );
    }

    #[test]
    fn bytes_of_another_type_are_an_error_that_names_the_type() {
        let err = decode::<Page>(&encode(&7u8)).unwrap_err();
        assert!(err.to_string().contains("Page"), "{err}");
        let err = decode::<u8>(&encode(&(1u8, 2u8))).unwrap_err();
        assert!(err.to_string().contains("1 bytes are left"), "{err}");
        assert!(decode_all::<String>(&[5, b'a']).is_err());
    }
}
