//! Function names: the one identifier users type, so the rules are strict and the errors say them.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The longest function name, short enough for DNS labels and metric labels.
pub const MAX_NAME_LEN: usize = 63;

/// A function's name: 1 to 63 characters of `a-z`, `0-9`, `-` and `_`, starting with a letter or
/// digit. The rules keep names safe in URLs, file names, store keys and Prometheus labels.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct FunctionName(String);

/// Why a string is not a valid [`FunctionName`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The name is empty.
    #[error("function name is empty; use 1 to {MAX_NAME_LEN} characters of a-z, 0-9, '-' and '_'")]
    Empty,
    /// The name is longer than [`MAX_NAME_LEN`].
    #[error("function name is {0} characters long; the limit is {MAX_NAME_LEN}")]
    TooLong(usize),
    /// The name contains a character outside the allowed set.
    #[error(
        "function name {name:?} contains {bad:?}; use only a-z, 0-9, '-' and '_', starting with a letter or digit"
    )]
    BadChar {
        /// The rejected name.
        name: String,
        /// The first character that is not allowed.
        bad: char,
    },
}

impl FunctionName {
    /// Validates `name` against the naming rules.
    pub fn new(name: impl Into<String>) -> Result<Self, NameError> {
        let name = name.into();
        if name.is_empty() {
            return Err(NameError::Empty);
        }
        if name.len() > MAX_NAME_LEN {
            return Err(NameError::TooLong(name.chars().count()));
        }
        let allowed =
            |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_';
        let first_ok = name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit());
        if let Some(bad) = name.chars().find(|&c| !allowed(c)) {
            return Err(NameError::BadChar { name, bad });
        }
        if !first_ok {
            let bad = name.chars().next().unwrap_or_default();
            return Err(NameError::BadChar { name, bad });
        }
        Ok(Self(name))
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for FunctionName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for FunctionName {
    type Err = NameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

impl TryFrom<String> for FunctionName {
    type Error = NameError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::new(s)
    }
}

impl From<FunctionName> for String {
    fn from(n: FunctionName) -> Self {
        n.0
    }
}

// Hash and Eq are derived from the inner string, so borrowing as `str` keeps map lookups
// consistent and lets the call path look functions up without building a `FunctionName`.
impl std::borrow::Borrow<str> for FunctionName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for FunctionName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn accepts_typical_names() {
        for n in ["hello", "resize-image", "v2_handler", "0day", "a"] {
            assert_eq!(FunctionName::new(n).unwrap().as_str(), n);
        }
    }

    #[test]
    fn rejects_with_a_reason() {
        assert_eq!(FunctionName::new(""), Err(NameError::Empty));
        assert_eq!(
            FunctionName::new("x".repeat(64)),
            Err(NameError::TooLong(64))
        );
        assert!(matches!(
            FunctionName::new("Hello"),
            Err(NameError::BadChar { bad: 'H', .. })
        ));
        assert!(matches!(
            FunctionName::new("a/b"),
            Err(NameError::BadChar { bad: '/', .. })
        ));
        assert!(matches!(
            FunctionName::new("-x"),
            Err(NameError::BadChar { bad: '-', .. })
        ));
        assert!(matches!(
            FunctionName::new(".."),
            Err(NameError::BadChar { bad: '.', .. })
        ));
    }

    #[test]
    fn deserialising_validates() {
        assert!(serde_json::from_str::<FunctionName>("\"ok-name\"").is_ok());
        assert!(serde_json::from_str::<FunctionName>("\"../etc\"").is_err());
    }

    proptest! {
        #[test]
        fn valid_names_are_path_and_label_safe(s in "\\PC{0,80}") {
            if let Ok(n) = FunctionName::new(s.clone()) {
                prop_assert!(n.as_str().len() <= MAX_NAME_LEN);
                prop_assert!(!n.as_str().contains(['/', '.', '"', '\\', ' ']));
                prop_assert_eq!(n.as_str(), s.as_str());
            }
        }
    }
}
