//! Scopes: what a token allows, as a set small enough to copy.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// One thing a token may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Look: list functions, read logs, metrics, the node, the cluster, jobs and the dashboard.
    Read,
    /// Call functions.
    Invoke,
    /// Deploy, remove and release functions; run and cancel jobs.
    Deploy,
    /// Everything, including creating and revoking tokens.
    Admin,
}

impl Scope {
    /// Every scope, in the order the API lists them.
    pub const ALL: [Scope; 4] = [Scope::Read, Scope::Invoke, Scope::Deploy, Scope::Admin];

    /// The scope's name, as tokens and messages spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Invoke => "invoke",
            Scope::Deploy => "deploy",
            Scope::Admin => "admin",
        }
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is no scope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a scope; the scopes are read, invoke, deploy and admin")]
pub struct ScopeError(pub String);

impl FromStr for Scope {
    type Err = ScopeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scope::ALL
            .into_iter()
            .find(|scope| scope.as_str() == s.trim())
            .ok_or_else(|| ScopeError(s.trim().to_owned()))
    }
}

/// A set of scopes. `admin` allows every scope; the others allow only themselves, so that a
/// token made to call functions cannot read what else is deployed.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Scopes(u8);

impl Scopes {
    /// Whether a token with these scopes may do what `needed` guards.
    pub fn allows(self, needed: Scope) -> bool {
        self.0 & (needed.bit() | Scope::Admin.bit()) != 0
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The scopes in the set, in [`Scope::ALL`]'s order.
    pub fn iter(self) -> impl Iterator<Item = Scope> {
        Scope::ALL
            .into_iter()
            .filter(move |s| self.0 & s.bit() != 0)
    }
}

impl FromIterator<Scope> for Scopes {
    fn from_iter<I: IntoIterator<Item = Scope>>(iter: I) -> Self {
        Scopes(iter.into_iter().fold(0, |bits, s| bits | s.bit()))
    }
}

impl fmt::Debug for Scopes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl fmt::Display for Scopes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.iter().map(Scope::as_str).collect();
        f.write_str(&names.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_allows_everything_and_others_only_themselves() {
        let admin: Scopes = [Scope::Admin].into_iter().collect();
        assert!(Scope::ALL.into_iter().all(|s| admin.allows(s)));
        let invoke: Scopes = [Scope::Invoke].into_iter().collect();
        assert!(invoke.allows(Scope::Invoke));
        assert!(!invoke.allows(Scope::Read));
        assert!(!invoke.allows(Scope::Deploy));
        assert!(!invoke.allows(Scope::Admin));
        assert!(!Scopes::default().allows(Scope::Read));
    }

    #[test]
    fn parses_and_shows_names() {
        let scopes: Scopes = ["deploy", " read"]
            .into_iter()
            .map(|s| s.parse::<Scope>().unwrap())
            .collect();
        assert_eq!(scopes.to_string(), "read,deploy");
        assert_eq!(
            "root".parse::<Scope>().unwrap_err().to_string(),
            "`root` is not a scope; the scopes are read, invoke, deploy and admin"
        );
    }
}
