//! The persisted description of a deployed function.

use crate::{FunctionName, Grantor, HttpSettings, Limits};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Which calling convention a module follows. Detected from its exports at deploy time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum GuestKind {
    /// Exports `memory`, `mote_alloc` and `mote_handle` (see [`crate::abi`]).
    #[serde(rename = "mote-abi-v1")]
    MoteAbiV1,
    /// A WASI preview1 command: exports `_start`, reads stdin, writes stdout.
    #[serde(rename = "wasi-command")]
    WasiCommand,
    /// A Canary job: exports `mote_job_driver` and `mote_job_task`; run with `mote job run`,
    /// never invoked as a function.
    #[serde(rename = "job")]
    Job,
    /// A WebAssembly component of the `wasi:http/proxy` world: exports
    /// `wasi:http/incoming-handler` (what `wasmtime serve` and Spin run); serves whole HTTP
    /// requests, on `/v1/invoke/NAME/...` and on its route.
    #[serde(rename = "wasi-http")]
    WasiHttp,
}

impl GuestKind {
    /// The name used in the API and in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MoteAbiV1 => "mote-abi-v1",
            Self::WasiCommand => "wasi-command",
            Self::Job => "job",
            Self::WasiHttp => "wasi-http",
        }
    }
}

impl fmt::Display for GuestKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A deployed function as the control plane stores it. The module's bytes live in a
/// content-addressed blob named by `sha256`, not in the record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionRecord {
    /// The function's name.
    pub name: FunctionName,
    /// Lowercase hex sha256 of the module's bytes.
    pub sha256: String,
    /// The detected guest kind.
    pub kind: GuestKind,
    /// Per-call limits.
    pub limits: Limits,
    /// Size of the module in bytes.
    pub size_bytes: u64,
    /// When it was deployed, in milliseconds since the Unix epoch.
    pub deployed_at_ms: u64,
    /// A `wasi:http` component's route and outbound hosts; absent for other kinds.
    #[serde(default, skip_serializing_if = "HttpSettings::is_empty")]
    pub http: HttpSettings,
    /// Whether anyone may call it without a token (on a node that requires tokens).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub public: bool,
}

/// What a deploy sets beside the module and its limits.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeployOptions {
    /// A `wasi:http` component's route and outbound hosts.
    pub http: HttpSettings,
    /// Callable without a token.
    pub public: bool,
    /// Who deploys it: whether `http.allow_outbound` may hold entries only an admin grants.
    pub grantor: Grantor,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trips_through_json() {
        let r = FunctionRecord {
            name: FunctionName::new("hello").unwrap(),
            sha256: "ab".repeat(32),
            kind: GuestKind::WasiCommand,
            limits: Limits::default(),
            size_bytes: 42,
            deployed_at_ms: 1,
            http: HttpSettings::default(),
            public: false,
        };
        let json = serde_json::to_string(&r).unwrap();
        assert!(json.contains("\"kind\":\"wasi-command\""));
        assert!(
            !json.contains("http"),
            "records of other kinds stay as they were: {json}"
        );
        assert!(!json.contains("public"), "{json}");
        assert_eq!(serde_json::from_str::<FunctionRecord>(&json).unwrap(), r);
    }
}
