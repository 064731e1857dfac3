//! The node's object storage: buckets of keyed objects, read and written whole (`docs/abi.md`,
//! "Objects"). Each call gives the call's core share up while the I/O is under way.
//!
//! [`get`], [`put`], [`list`], [`list_after`] and [`delete`] wrap the host's `object_*`
//! imports; [`list_all`] pages through a listing of any length. The host answers
//! with a status and a buffer it allocated through this module's `mote_alloc` (so these functions
//! only work in a module exported with [`crate::handler!`]): the result on success, a message
//! naming the bucket, key or server otherwise. Failures come back as an [`ObjectError`] whose
//! [`ObjectErrorKind`] is the status. A listing arrives encoded; [`Listing::decode`] reads it and
//! is a pure function, tested natively.
//!
//! Natively (unit tests) there is no storage, and every call panics saying so.

use std::fmt;

/// What went wrong in an object call: the host's status code (`docs/abi.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectErrorKind {
    /// Status 1: no object with that key.
    NoSuchKey,
    /// Status 2: the bucket does not exist (mote never creates one).
    NoSuchBucket,
    /// Status 3: the object is larger than the call's memory limit.
    TooLarge,
    /// Status 4: the bucket or key breaks S3's naming rules.
    InvalidName,
    /// Status 5: the storage server cannot be reached.
    Unreachable,
    /// Status 6: the storage server refused the node's credentials.
    AccessDenied,
    /// Status 7, or a status this SDK does not know (a newer host): any other storage failure.
    Other,
    /// The host's answer does not follow the ABI (a host and SDK that disagree on the format).
    Malformed,
}

impl ObjectErrorKind {
    fn from_status(status: i32) -> Self {
        match status {
            mote_abi::OBJECT_NO_SUCH_KEY => Self::NoSuchKey,
            mote_abi::OBJECT_NO_SUCH_BUCKET => Self::NoSuchBucket,
            mote_abi::OBJECT_TOO_LARGE => Self::TooLarge,
            mote_abi::OBJECT_INVALID_NAME => Self::InvalidName,
            mote_abi::OBJECT_UNREACHABLE => Self::Unreachable,
            mote_abi::OBJECT_DENIED => Self::AccessDenied,
            _ => Self::Other,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Self::NoSuchKey => "no such key",
            Self::NoSuchBucket => "no such bucket",
            Self::TooLarge => "object too large",
            Self::InvalidName => "invalid bucket or key name",
            Self::Unreachable => "storage unreachable",
            Self::AccessDenied => "storage access denied",
            Self::Other => "storage failure",
            Self::Malformed => "malformed answer from the host",
        }
    }
}

/// A failed object call: its kind and the host's message, which names the bucket, key or server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectError {
    /// What went wrong, for code that handles some failures (a missing key) differently.
    pub kind: ObjectErrorKind,
    /// The host's explanation, for people.
    pub message: String,
}

impl fmt::Display for ObjectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.describe(), self.message)
    }
}

impl std::error::Error for ObjectError {}

/// One object in a [`Listing`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The object's key.
    pub key: String,
    /// The object's size in bytes.
    pub size: u64,
}

/// The objects whose keys start with a prefix, in key order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Listing {
    /// The objects found, in key order.
    pub entries: Vec<Entry>,
    /// True if more objects matched than the listing's limit let through.
    pub truncated: bool,
}

impl Listing {
    /// Reads a listing as the host encodes it: one byte, 1 if it was truncated at its limit, else
    /// 0; then per object its key's length (u32 LE), the key (UTF-8) and its size (u64 LE).
    /// Anything else, including trailing bytes, is an error of kind
    /// [`ObjectErrorKind::Malformed`] saying where it went wrong.
    pub fn decode(bytes: &[u8]) -> Result<Self, ObjectError> {
        let malformed = |message: String| ObjectError {
            kind: ObjectErrorKind::Malformed,
            message,
        };
        let (&flag, mut rest) = bytes
            .split_first()
            .ok_or_else(|| malformed("the listing is empty, not even a truncated flag".into()))?;
        let truncated = match flag {
            0 => false,
            1 => true,
            other => {
                return Err(malformed(format!(
                    "the listing's truncated flag is {other}"
                )));
            }
        };
        let mut entries = Vec::new();
        while !rest.is_empty() {
            let at = bytes.len() - rest.len();
            let entry = format!("entry {} (byte {at})", entries.len());
            let (len, after) = rest
                .split_first_chunk::<4>()
                .ok_or_else(|| malformed(format!("{entry} ends inside its key length")))?;
            let len = u32::from_le_bytes(*len) as usize;
            if after.len() < len {
                return Err(malformed(format!(
                    "{entry} has a key of {len} bytes but only {} follow",
                    after.len()
                )));
            }
            let (key, after) = after.split_at(len);
            let key = std::str::from_utf8(key)
                .map_err(|_| malformed(format!("{entry} has a key that is not UTF-8")))?;
            let (size, after) = after
                .split_first_chunk::<8>()
                .ok_or_else(|| malformed(format!("{entry} ends inside its size")))?;
            entries.push(Entry {
                key: key.to_owned(),
                size: u64::from_le_bytes(*size),
            });
            rest = after;
        }
        Ok(Self { entries, truncated })
    }
}

/// Reads the whole object at `bucket`/`key`.
pub fn get(bucket: &str, key: &str) -> Result<Vec<u8>, ObjectError> {
    // SAFETY: the host only reads the two strings, valid for the call, and writes 8 bytes at `out`.
    call(|out| unsafe {
        imports::object_get(addr(bucket), size(bucket), addr(key), size(key), out)
    })
}

/// Writes `data` as the object at `bucket`/`key`, replacing any object there.
pub fn put(bucket: &str, key: &str, data: &[u8]) -> Result<(), ObjectError> {
    // SAFETY: as in `get`, with `data` read as well.
    call(|out| unsafe {
        imports::object_put(
            addr(bucket),
            size(bucket),
            addr(key),
            size(key),
            addr(data),
            size(data),
            out,
        )
    })
    .map(drop)
}

/// Lists the objects in `bucket` whose keys start with `prefix`, in key order, at most `limit` of
/// them (0 means the host's maximum, 1000, which also caps larger limits).
pub fn list(bucket: &str, prefix: &str, limit: u32) -> Result<Listing, ObjectError> {
    let limit = i32::try_from(limit).unwrap_or(i32::MAX);
    // SAFETY: as in `get`.
    let bytes = call(|out| unsafe {
        imports::object_list(
            addr(bucket),
            size(bucket),
            addr(prefix),
            size(prefix),
            limit,
            out,
        )
    })?;
    Listing::decode(&bytes)
}

/// As [`list`], but only the keys after `after` (S3's `start-after`): a truncated listing
/// continues with `list_after(bucket, prefix, last_key, limit)`.
pub fn list_after(
    bucket: &str,
    prefix: &str,
    after: &str,
    limit: u32,
) -> Result<Listing, ObjectError> {
    let limit = i32::try_from(limit).unwrap_or(i32::MAX);
    // SAFETY: as in `get`.
    let bytes = call(|out| unsafe {
        imports::object_list_after(
            addr(bucket),
            size(bucket),
            addr(prefix),
            size(prefix),
            addr(after),
            size(after),
            limit,
            out,
        )
    })?;
    Listing::decode(&bytes)
}

/// Every object in `bucket` whose key starts with `prefix`, in key order, however many: pages of
/// the host's maximum (1000) through [`list_after`], each from the last key of the one before.
pub fn list_all(bucket: &str, prefix: &str) -> Result<Vec<Entry>, ObjectError> {
    let mut all: Vec<Entry> = Vec::new();
    loop {
        let after = all.last().map_or("", |e| e.key.as_str());
        let page = list_after(bucket, prefix, after, 0)?;
        all.extend(page.entries);
        if !page.truncated {
            return Ok(all);
        }
    }
}

/// Deletes the object at `bucket`/`key`; deleting a key that is not there succeeds.
pub fn delete(bucket: &str, key: &str) -> Result<(), ObjectError> {
    // SAFETY: as in `get`.
    call(|out| unsafe {
        imports::object_delete(addr(bucket), size(bucket), addr(key), size(key), out)
    })
    .map(drop)
}

/// Runs one object import with an 8-byte result location and takes its answer back: the result
/// on status 0, else an error carrying the host's message.
fn call(import: impl FnOnce(i32) -> i32) -> Result<Vec<u8>, ObjectError> {
    let mut location = [0u8; 8];
    // From a mutable borrow, so the compiler knows the host may write there.
    let status = import(location.as_mut_ptr() as usize as i32);
    let [p0, p1, p2, p3, l0, l1, l2, l3] = location;
    let (ptr, len) = (
        u32::from_le_bytes([p0, p1, p2, p3]),
        u32::from_le_bytes([l0, l1, l2, l3]),
    );
    let bytes = if len == 0 {
        Vec::new()
    } else {
        // SAFETY: the host got `ptr` from this module's `mote_alloc(len)`, which leaks a
        // `Vec::<u8>::with_capacity(len)` (exactly `len` bytes), and filled all of them; nothing
        // else refers to that buffer.
        unsafe { Vec::from_raw_parts(ptr as usize as *mut u8, len as usize, len as usize) }
    };
    match status {
        mote_abi::OBJECT_OK => Ok(bytes),
        status => Err(ObjectError {
            kind: ObjectErrorKind::from_status(status),
            message: String::from_utf8_lossy(&bytes).into_owned(),
        }),
    }
}

/// A guest address as the ABI passes it: guest memory is 32-bit, so the pointer fits.
fn addr<T: ?Sized>(value: &T) -> i32 {
    value as *const T as *const u8 as usize as i32
}

/// A length as the ABI passes it; the host reads it back as a u32.
fn size(bytes: impl AsRef<[u8]>) -> i32 {
    bytes.as_ref().len() as u32 as i32
}

#[cfg(target_family = "wasm")]
mod imports {
    #[link(wasm_import_module = "mote")]
    unsafe extern "C" {
        #[link_name = mote_abi::import_name!(object_get)]
        pub fn object_get(
            bucket_ptr: i32,
            bucket_len: i32,
            key_ptr: i32,
            key_len: i32,
            out: i32,
        ) -> i32;
        #[link_name = mote_abi::import_name!(object_put)]
        pub fn object_put(
            bucket_ptr: i32,
            bucket_len: i32,
            key_ptr: i32,
            key_len: i32,
            data_ptr: i32,
            data_len: i32,
            out: i32,
        ) -> i32;
        #[link_name = mote_abi::import_name!(object_list)]
        pub fn object_list(
            bucket_ptr: i32,
            bucket_len: i32,
            prefix_ptr: i32,
            prefix_len: i32,
            limit: i32,
            out: i32,
        ) -> i32;
        #[link_name = mote_abi::import_name!(object_list_after)]
        #[allow(clippy::too_many_arguments)]
        pub fn object_list_after(
            bucket_ptr: i32,
            bucket_len: i32,
            prefix_ptr: i32,
            prefix_len: i32,
            after_ptr: i32,
            after_len: i32,
            limit: i32,
            out: i32,
        ) -> i32;
        #[link_name = mote_abi::import_name!(object_delete)]
        pub fn object_delete(
            bucket_ptr: i32,
            bucket_len: i32,
            key_ptr: i32,
            key_len: i32,
            out: i32,
        ) -> i32;
    }
}

/// Stand-ins with the imports' signatures, so the code above compiles natively; there is no
/// storage outside mote, so any use is a mistake worth stopping at.
#[cfg(not(target_family = "wasm"))]
mod imports {
    fn unavailable(import: &str) -> ! {
        panic!("mote.{import} exists only inside mote (wasm32); native code has no object storage")
    }

    pub unsafe fn object_get(_: i32, _: i32, _: i32, _: i32, _: i32) -> i32 {
        unavailable("object_get")
    }

    pub unsafe fn object_put(_: i32, _: i32, _: i32, _: i32, _: i32, _: i32, _: i32) -> i32 {
        unavailable("object_put")
    }

    pub unsafe fn object_list(_: i32, _: i32, _: i32, _: i32, _: i32, _: i32) -> i32 {
        unavailable("object_list")
    }

    #[allow(clippy::too_many_arguments)]
    pub unsafe fn object_list_after(
        _: i32,
        _: i32,
        _: i32,
        _: i32,
        _: i32,
        _: i32,
        _: i32,
        _: i32,
    ) -> i32 {
        unavailable("object_list_after")
    }

    pub unsafe fn object_delete(_: i32, _: i32, _: i32, _: i32, _: i32) -> i32 {
        unavailable("object_delete")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encodes as the host does (`crates/runtime/src/microtask.rs`), so the decoder is checked
    /// against the format rather than against itself.
    fn encode(truncated: bool, entries: &[(&str, u64)]) -> Vec<u8> {
        let mut out = vec![u8::from(truncated)];
        for (key, size) in entries {
            out.extend_from_slice(&(key.len() as u32).to_le_bytes());
            out.extend_from_slice(key.as_bytes());
            out.extend_from_slice(&size.to_le_bytes());
        }
        out
    }

    fn kind_and_message(bytes: &[u8]) -> (ObjectErrorKind, String) {
        let e = Listing::decode(bytes).expect_err("malformed listing decoded");
        (e.kind, e.message)
    }

    #[test]
    fn listings_decode_in_order_with_their_truncated_flag() {
        let bytes = encode(true, &[("a/1", 100), ("a/2", 0), ("ä/€", u64::MAX)]);
        let listing = Listing::decode(&bytes).unwrap();
        assert!(listing.truncated);
        let got: Vec<_> = listing
            .entries
            .iter()
            .map(|e| (e.key.as_str(), e.size))
            .collect();
        assert_eq!(got, [("a/1", 100), ("a/2", 0), ("ä/€", u64::MAX)]);

        assert_eq!(Listing::decode(&[0]).unwrap(), Listing::default());
        assert_eq!(
            Listing::decode(&encode(false, &[("", 7)])).unwrap().entries,
            [Entry {
                key: String::new(),
                size: 7
            }]
        );
    }

    #[test]
    fn malformed_listings_are_errors_saying_where() {
        let (kind, message) = kind_and_message(&[]);
        assert_eq!(kind, ObjectErrorKind::Malformed);
        assert!(message.contains("empty"), "{message}");
        assert!(kind_and_message(&[2]).1.contains("flag is 2"));

        let whole = encode(false, &[("abc", 5), ("de", 6)]);
        // Every cut inside the entries ends inside a length, a key or a size.
        for cut in 1..whole.len() {
            let Ok(listing) = Listing::decode(&whole[..cut]) else {
                continue;
            };
            // The only cuts that decode fall between whole entries.
            assert!(cut == 1 || cut == 1 + 4 + 3 + 8, "cut {cut}: {listing:?}");
        }
        assert!(
            kind_and_message(&whole[..3])
                .1
                .contains("entry 0 (byte 1) ends inside its key length")
        );
        assert!(
            kind_and_message(&whole[..7])
                .1
                .contains("key of 3 bytes but only 2 follow")
        );
        assert!(
            kind_and_message(&whole[..10])
                .1
                .contains("entry 0 (byte 1) ends inside its size")
        );
        assert!(
            kind_and_message(&whole[..20])
                .1
                .contains("entry 1 (byte 16)")
        );

        let mut huge = vec![0];
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(
            kind_and_message(&huge)
                .1
                .contains("key of 4294967295 bytes")
        );

        let mut not_utf8 = encode(false, &[("ab", 1)]);
        not_utf8[5] = 0xff;
        assert!(kind_and_message(&not_utf8).1.contains("not UTF-8"));
    }

    #[test]
    fn errors_carry_the_status_and_the_hosts_message() {
        let kinds: Vec<_> = (1..=8).map(ObjectErrorKind::from_status).collect();
        use ObjectErrorKind::*;
        assert_eq!(
            kinds,
            [
                NoSuchKey,
                NoSuchBucket,
                TooLarge,
                InvalidName,
                Unreachable,
                AccessDenied,
                Other,
                Other
            ]
        );
        let e = ObjectError {
            kind: NoSuchKey,
            message: "no object input/00000 in bucket sort".into(),
        };
        assert_eq!(
            e.to_string(),
            "no such key: no object input/00000 in bucket sort"
        );
    }

    #[test]
    #[should_panic(expected = "mote.object_get exists only inside mote")]
    fn natively_object_calls_panic_naming_the_import() {
        let _ = get("bucket", "key");
    }
}
