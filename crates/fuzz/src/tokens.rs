//! `tokens`: what a client sends to be let in, and what the store's token records hold.
//!
//! The first byte chooses what the rest feeds (its low two bits) and, for the header check, the
//! scope the request needs (the next two):
//! - 0: the `Authorization` header, checked by [`Grants::check`] against a table of three
//!   tokens, must give exactly what a plain reading of RFC 7235's `Bearer TOKEN` and the
//!   table's scopes give;
//! - 1: a token name: [`TokenName::new`] takes exactly the names the rules allow, and JSON
//!   reads a name exactly when `new` takes it;
//! - 2: a [`TokenRecord`] in JSON: a record that reads writes back to one that reads equal, its
//!   name obeys the rules, its hash reads exactly when it is 64 hex digits, and a table takes
//!   it exactly then;
//! - 3: a scope's name: it parses exactly when, trimmed, it is one of the four names, and the
//!   scope shows as that name.

use crate::alloc;
use mote_access::{Denied, Grants, Scope, Scopes, TokenName, TokenRecord, hash_token};
use std::sync::OnceLock;

/// The table's tokens: a name, its secret and its scopes.
const TABLE: [(&str, &str, &[Scope]); 3] = [
    (
        "reader",
        "mote_1111111111111111111111111111111111111111111111111111111111111111",
        &[Scope::Read],
    ),
    (
        "ci",
        "mote_2222222222222222222222222222222222222222222222222222222222222222",
        &[Scope::Invoke, Scope::Deploy],
    ),
    (
        "root",
        "mote_3333333333333333333333333333333333333333333333333333333333333333",
        &[Scope::Admin],
    ),
];

fn record(name: &str, secret: &str, scopes: &[Scope]) -> TokenRecord {
    TokenRecord {
        name: TokenName::new(name).expect("the table's names are valid"),
        scopes: scopes.to_vec(),
        sha256: hex::encode(hash_token(secret.as_bytes())),
        created_ms: 0,
    }
}

fn grants() -> &'static Grants {
    static GRANTS: OnceLock<Grants> = OnceLock::new();
    GRANTS.get_or_init(|| {
        let grants = Grants::new();
        grants.replace(TABLE.map(|(name, secret, scopes)| record(name, secret, scopes)));
        grants
    })
}

/// Runs the target on `data`.
pub fn tokens(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    match first & 3 {
        0 => header(rest, Scope::ALL[usize::from(first >> 2) & 3]),
        1 => name(rest),
        2 => token_record(rest),
        _ => scope(rest),
    }
}

fn header(header: &[u8], needed: Scope) {
    let got = grants().check(Some(header), needed);
    if let Ok(holder) = &got {
        let token = header["Bearer ".len()..].trim_ascii();
        assert_eq!(holder.hash, hash_token(token));
        assert!(holder.scopes.allows(needed));
    }
    assert_eq!(
        got.clone().map(drop),
        expected(header, needed),
        "header {header:?}"
    );
    if let Err(denied) = &got {
        assert_eq!(
            denied.is_unauthenticated(),
            !matches!(denied, Denied::Scope { .. })
        );
    }
    assert_eq!(
        grants().check(None, needed),
        Err(Denied::Missing { needed })
    );
}

/// The check as the RFC and the table say it, by comparing secrets rather than hashes.
fn expected(header: &[u8], needed: Scope) -> Result<(), Denied> {
    let scheme = b"Bearer ";
    if header.len() < scheme.len() || !header[..scheme.len()].eq_ignore_ascii_case(scheme) {
        return Err(Denied::Malformed);
    }
    let token = header[scheme.len()..].trim_ascii();
    if token.is_empty() {
        return Err(Denied::Malformed);
    }
    let (name, _, scopes) = TABLE
        .iter()
        .find(|(_, secret, _)| secret.as_bytes() == token)
        .ok_or(Denied::Unknown { needed })?;
    let has: Scopes = scopes.iter().copied().collect();
    match scopes.contains(&needed) || scopes.contains(&Scope::Admin) {
        true => Ok(()),
        false => Err(Denied::Scope {
            name: TokenName::new(*name).expect("the table's names are valid"),
            has,
            needed,
        }),
    }
}

fn name(bytes: &[u8]) {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let valid = (1..=63).contains(&text.len())
        && text.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && text
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    let made = TokenName::new(text);
    assert_eq!(made.is_ok(), valid, "name {text:?}");
    if let Ok(made) = &made {
        assert_eq!(made.as_str(), text);
    }
    let json = serde_json::to_string(text).expect("a string writes as JSON");
    let read = serde_json::from_str::<TokenName>(&json);
    assert_eq!(read.ok(), made.ok(), "name {text:?} read from JSON");
}

fn token_record(json: &[u8]) {
    let (read, allocated) = alloc::peak(|| serde_json::from_slice::<TokenRecord>(json));
    // serde_json keeps what it reads (a string at most as long as its input) and grows
    // `scopes` by doubling, a byte in memory for six or more of input. The widest is a refused
    // name, which the error quotes with `{:?}`: a control character becomes `\u{7f}`, six bytes
    // for one, in a message that doubles as it is written.
    alloc::assert_within("a token record", json.len(), allocated, 16, 1024);
    let Ok(record) = read else {
        return;
    };
    assert!(TokenName::new(record.name.as_str()).is_ok());
    let again: TokenRecord =
        serde_json::from_slice(&serde_json::to_vec(&record).expect("a record writes as JSON"))
            .expect("a record written as JSON reads back");
    assert_eq!(again, record);
    let hex64 = record.sha256.len() == 64 && record.sha256.bytes().all(|b| b.is_ascii_hexdigit());
    assert_eq!(record.hash().is_some(), hex64, "sha256 {:?}", record.sha256);
    let scopes = record.scope_set();
    assert!(record.scopes.iter().all(|&s| scopes.allows(s)));
    let grants = Grants::new();
    grants.put(record);
    assert_eq!(grants.len(), usize::from(hex64));
}

fn scope(bytes: &[u8]) {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    match text.parse::<Scope>() {
        Ok(scope) => {
            assert_eq!(scope.as_str(), text.trim());
            assert_eq!(scope.to_string().parse::<Scope>(), Ok(scope));
        }
        Err(e) => {
            assert!(Scope::ALL.iter().all(|s| s.as_str() != text.trim()));
            assert_eq!(e.0, text.trim());
        }
    }
}

/// Inputs that reach each part: every table token with each scope, near misses, names and
/// records.
pub fn seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for (scope, _) in Scope::ALL.iter().enumerate() {
        for (_, secret, _) in TABLE {
            for header in [
                format!("Bearer {secret}"),
                format!("bearer \t{secret} "),
                format!("BEARER {}", &secret[..20]),
            ] {
                seeds.push([&[(scope as u8) << 2], header.as_bytes()].concat());
            }
        }
    }
    seeds.push(b"\x00Basic dXNlcjpwdw==".to_vec());
    seeds.push(b"\x00Bearer ".to_vec());
    for name in ["ci-deploy_2", "-x", "Admin", "a b", "x"] {
        seeds.push([b"\x01", name.as_bytes()].concat());
    }
    let (name, secret, scopes) = TABLE[1];
    let json = serde_json::to_vec(&record(name, secret, scopes)).expect("a record writes");
    seeds.push([b"\x02".as_slice(), &json].concat());
    let short = br#"{"name":"x","scopes":["admin"],"sha256":"00","created_ms":1}"#;
    seeds.push([b"\x02".as_slice(), short].concat());
    for scope in ["read", " invoke\n", "deploy", "admin", "root"] {
        seeds.push([b"\x03", scope.as_bytes()].concat());
    }
    seeds
}
