//! A node's name, checked where one enters: `mote up --node` (or the host name), and the node
//! keys other nodes wrote. A name is 1 to 63 characters among `a-z`, `A-Z`, `0-9`, `-`, `_`
//! and `.`, because of where it goes:
//!
//! - the store key `/mote/nodes/NAME`: a `/` would nest it under another node's key;
//! - the `mote-forwarded-by` and `mote-node` headers: only visible ASCII may travel there;
//! - every call id (`NAME-N`, in log entries and `mote-call-id`) and metrics label;
//! - `--store-peers NAME=URL,...` lists, which `=` and `,` would cut apart;
//! - host names, the default, which are within these characters and this length (a DNS
//!   label's).
//!
//! [`mote_cluster::NodeName`] is how placement tells members apart, for any string (the
//! simulator's names too); a [`NodeName`] is one a node may go by in a real cluster, and
//! converts into it for free.

use hyper::header::HeaderValue;
use std::fmt;
use std::str::FromStr;

/// The longest name a node may have.
pub const MAX_NODE_NAME_LEN: usize = 63;

/// A node's name, valid by construction ([`NodeName::new`]).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct NodeName(mote_cluster::NodeName);

/// Why a text is not a node's name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NodeNameError {
    /// The name is empty.
    #[error(
        "the node name is empty: use 1 to {MAX_NODE_NAME_LEN} characters among a-z, A-Z, 0-9, '-', '_' and '.' (mote up --node NAME)"
    )]
    Empty,
    /// The name is longer than [`MAX_NODE_NAME_LEN`].
    #[error(
        "node name `{name}` has {len} characters; the most is {MAX_NODE_NAME_LEN} (start the node with a shorter --node NAME)"
    )]
    TooLong {
        /// The name.
        name: String,
        /// Its length, in bytes.
        len: usize,
    },
    /// The name has a character outside the allowed set.
    #[error(
        "node name `{name}` contains {bad:?}: use only a-z, A-Z, 0-9, '-', '_' and '.', since the name becomes a store key, a header and the prefix of every call id (start the node with another --node NAME)"
    )]
    BadChar {
        /// The name.
        name: String,
        /// The first character that is not allowed.
        bad: char,
    },
}

impl NodeName {
    /// `name`, if it is a valid node name.
    pub fn new(name: &str) -> Result<Self, NodeNameError> {
        if name.is_empty() {
            return Err(NodeNameError::Empty);
        }
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
        if let Some(bad) = name.chars().find(|&c| !allowed(c)) {
            return Err(NodeNameError::BadChar {
                name: name.to_owned(),
                bad,
            });
        }
        if name.len() > MAX_NODE_NAME_LEN {
            return Err(NodeNameError::TooLong {
                name: name.to_owned(),
                len: name.len(),
            });
        }
        Ok(Self(mote_cluster::NodeName::from(name)))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// The name as placement knows its members.
    pub fn member(&self) -> &mote_cluster::NodeName {
        &self.0
    }

    /// The name as a header's value.
    pub fn header(&self) -> HeaderValue {
        HeaderValue::from_str(self.as_str()).expect("a node name is visible ASCII")
    }
}

impl FromStr for NodeName {
    type Err = NodeNameError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::new(name)
    }
}

impl From<NodeName> for mote_cluster::NodeName {
    fn from(name: NodeName) -> Self {
        name.0
    }
}

impl fmt::Display for NodeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for NodeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What the rule allows, written out apart from [`NodeName::new`].
    fn follows_the_rule(name: &str) -> bool {
        (1..=MAX_NODE_NAME_LEN).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    }

    proptest! {
        /// A name is taken exactly when it follows the rule, and a name taken goes everywhere a
        /// node's name goes: one store key segment, a header, a `NAME=URL` list entry.
        #[test]
        fn a_name_is_taken_exactly_when_it_follows_the_rule(name in prop_oneof![
            "[A-Za-z0-9._-]{0,70}",
            ".{0,70}",
            "[a-z]{1,10}[/=, :\u{0}\n]?[a-z]{0,10}",
        ]) {
            match NodeName::new(&name) {
                Ok(valid) => {
                    prop_assert!(follows_the_rule(&name), "{name:?} was taken");
                    prop_assert_eq!(valid.as_str(), name.as_str());
                    let header = valid.header();
                    prop_assert_eq!(header.to_str().unwrap(), name.as_str());
                    prop_assert!(!name.contains(['/', '=', ',']));
                    prop_assert_eq!(valid.member().as_str(), name.as_str());
                }
                Err(e) => {
                    prop_assert!(!follows_the_rule(&name), "{name:?} was refused: {e}");
                    let text = e.to_string();
                    prop_assert!(name.is_empty() || text.contains(&format!("`{name}`")), "{text}");
                    prop_assert!(text.contains("--node"), "the fix is named: {text}");
                }
            }
        }
    }

    #[test]
    fn each_refusal_says_which_rule() {
        assert_eq!(NodeName::new(""), Err(NodeNameError::Empty));
        let long = "a".repeat(64);
        assert!(matches!(
            NodeName::new(&long),
            Err(NodeNameError::TooLong { len: 64, .. })
        ));
        assert!(NodeName::new(&long[..63]).is_ok());
        assert_eq!(
            NodeName::new("a/b"),
            Err(NodeNameError::BadChar {
                name: "a/b".into(),
                bad: '/'
            })
        );
        assert!(NodeName::new("host-1.example_A").is_ok());
    }
}
