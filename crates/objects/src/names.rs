//! Which bucket names and keys are accepted: S3's bucket naming rules, and keys that map to one
//! path in both backends (so the same key cannot mean two objects, or escape a directory).

use crate::ObjectError;

/// The longest key S3 accepts, in bytes.
pub const MAX_KEY_BYTES: usize = 1024;

/// Accepts `bucket` if it follows S3's rules: 3 to 63 characters of lowercase letters, digits,
/// `.` and `-`, starting and ending with a letter or digit, with no `..`.
pub fn check_bucket(bucket: &str) -> Result<(), ObjectError> {
    let why = if !(3..=63).contains(&bucket.len()) {
        Some("it must be 3 to 63 characters long")
    } else if !bucket
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
    {
        Some("it may hold only lowercase letters, digits, `.` and `-`")
    } else if !bucket.starts_with(|c: char| c.is_ascii_alphanumeric())
        || !bucket.ends_with(|c: char| c.is_ascii_alphanumeric())
    {
        Some("it must start and end with a letter or a digit")
    } else if bucket.contains("..") {
        Some("it must not contain `..`")
    } else {
        None
    };
    match why {
        None => Ok(()),
        Some(why) => Err(ObjectError::InvalidBucket {
            bucket: bucket.to_owned(),
            why,
        }),
    }
}

/// Accepts `key` if it is 1 to [`MAX_KEY_BYTES`] bytes of `/`-separated segments, none empty,
/// `.` or `..`, and no control characters.
pub fn check_key(key: &str) -> Result<(), ObjectError> {
    let why = if key.is_empty() {
        Some("it is empty")
    } else if key.len() > MAX_KEY_BYTES {
        Some("it is longer than 1024 bytes")
    } else if key.chars().any(char::is_control) {
        Some("it contains a control character")
    } else if key
        .split('/')
        .any(|segment| segment.is_empty() || segment == "." || segment == "..")
    {
        Some("its `/`-separated parts must not be empty, `.` or `..`")
    } else {
        None
    };
    match why {
        None => Ok(()),
        Some(why) => Err(ObjectError::InvalidKey {
            key: key.chars().take(100).collect(),
            why,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bucket_rules() {
        for good in ["abc", "sort-input", "a.b-c.1", &"x".repeat(63)] {
            assert!(check_bucket(good).is_ok(), "{good}");
        }
        for bad in [
            "ab",
            "Abc",
            "a_b",
            "-ab",
            "ab-",
            "a..b",
            &"x".repeat(64),
            "a b",
        ] {
            assert!(check_bucket(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn key_rules() {
        for good in [
            "k",
            "a/b/c",
            "part-0001.bin",
            "ünïcode/ключ",
            &"k".repeat(1024),
        ] {
            assert!(check_key(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "/a",
            "a/",
            "a//b",
            "./a",
            "a/../b",
            "a\nb",
            &"k".repeat(1025),
        ] {
            assert!(check_key(bad).is_err(), "{bad:?}");
        }
    }

    proptest! {
        /// Every key accepted is one the directory backend stores under its own name: joining
        /// its segments gives the key back, and no segment can leave the bucket's directory.
        #[test]
        fn accepted_keys_round_trip(key in "[a-z0-9./_-]{1,40}") {
            if check_key(&key).is_ok() {
                let path = object_store::path::Path::from_iter(key.split('/'));
                prop_assert_eq!(path.to_string(), key.clone());
                prop_assert!(key.split('/').all(|s| !s.is_empty() && s != "." && s != ".."));
            }
        }

        /// A bucket name is accepted exactly when S3's rules (written out again here as one
        /// regular expression plus the `..` rule) accept it.
        #[test]
        fn bucket_check_matches_the_rules(name in "[a-z0-9.A_-]{1,70}") {
            let chars_ok = name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-');
            let ends_ok = name.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
                && name.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric());
            let expected = chars_ok && ends_ok && (3..=63).contains(&name.len()) && !name.contains("..");
            prop_assert_eq!(check_bucket(&name).is_ok(), expected);
        }
    }
}
