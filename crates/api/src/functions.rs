//! Functions: what a deploy takes beside the module (`PUT /v1/functions/{name}?...`,
//! [`DeployParams`]), a function as the API shows it ([`FunctionInfo`]; the deploy's answer,
//! `GET /v1/functions/{name}`, and each of [`FunctionList`]), and a release's answer
//! ([`Released`]).

use mote_types::FunctionRecord;
use serde::{Deserialize, Serialize};

/// A deploy's query parameters: the function's limits and settings beside its module.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeployParams {
    /// Wall-clock limit per call, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// Wall-clock limit per call, in microseconds.
    pub timeout_us: Option<u64>,
    /// Memory limit per call, in MiB.
    pub memory_mb: Option<u32>,
    /// A `wasi:http` component's route at the server's root.
    pub route: Option<String>,
    /// The hosts a `wasi:http` component may call, comma-separated.
    pub allow_outbound: Option<String>,
    /// Callable without a token.
    #[serde(default)]
    pub public: bool,
}

impl DeployParams {
    /// The parameters as a URL's query (`timeout_ms=...&public=true`), empty when none is set;
    /// values escaped.
    pub fn query(&self) -> String {
        let escape = |v: &str| {
            percent_encoding::utf8_percent_encode(v, percent_encoding::NON_ALPHANUMERIC).to_string()
        };
        [
            self.timeout_ms.map(|v| format!("timeout_ms={v}")),
            self.timeout_us.map(|v| format!("timeout_us={v}")),
            self.memory_mb.map(|v| format!("memory_mb={v}")),
            self.route
                .as_deref()
                .map(|v| format!("route={}", escape(v))),
            self.allow_outbound
                .as_deref()
                .map(|v| format!("allow_outbound={}", escape(v))),
            self.public.then(|| "public=true".to_owned()),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("&")
    }
}

/// A function as the API shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionInfo {
    /// Its name.
    pub name: String,
    /// Lowercase hex sha256 of its module.
    pub sha256: String,
    /// Its guest kind (`mote-abi-v1`, `wasi-command`, `wasi-http`, `job`, ...).
    pub kind: String,
    /// Its wall-clock limit per call, in whole milliseconds (rounded up).
    pub timeout_ms: u64,
    /// Its wall-clock limit per call, in microseconds.
    pub timeout_us: u64,
    /// Its memory limit per call, in MiB.
    pub memory_mb: u32,
    /// Its module's size.
    pub size_bytes: u64,
    /// A component's route (null if none): shown for every function, so that what a function
    /// exposes is never left out.
    pub route: Option<String>,
    /// The hosts a component may call (empty if none).
    #[serde(default)]
    pub allow_outbound: Vec<String>,
    /// Callable without a token.
    #[serde(default)]
    pub public: bool,
    /// Budget kills in a row that put it in quarantine, if it is quarantined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quarantined_after_kills: Option<u32>,
}

impl From<&FunctionRecord> for FunctionInfo {
    fn from(r: &FunctionRecord) -> Self {
        Self {
            name: r.name.as_str().to_owned(),
            sha256: r.sha256.clone(),
            kind: r.kind.as_str().to_owned(),
            timeout_ms: r.limits.timeout_ms(),
            timeout_us: r.limits.timeout_us,
            memory_mb: r.limits.memory_mb,
            size_bytes: r.size_bytes,
            route: r.http.route.as_ref().map(|r| r.to_string()),
            allow_outbound: r
                .http
                .allow_outbound
                .iter()
                .map(|h| h.to_string())
                .collect(),
            public: r.public,
            quarantined_after_kills: None,
        }
    }
}

/// `GET /v1/functions`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionList {
    /// Every function deployed, by name.
    pub functions: Vec<FunctionInfo>,
}

/// `POST /v1/functions/{name}/release`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Released {
    /// The function.
    pub name: String,
    /// Whether it was quarantined (its calls run again now); false if it was not.
    pub released: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_function_without_quarantine_or_outbound_hosts_reads_with_none_and_empty() {
        let info: FunctionInfo = serde_json::from_str(
            r#"{"name": "greet", "sha256": "ab12", "kind": "mote-abi-v1", "timeout_ms": 10,
                "timeout_us": 10000, "memory_mb": 128, "size_bytes": 99, "route": null,
                "allow_outbound": [], "public": false}"#,
        )
        .unwrap();
        assert_eq!(info.route, None);
        assert_eq!(info.quarantined_after_kills, None);
        let written = serde_json::to_value(&info).unwrap();
        assert!(
            written["route"].is_null(),
            "a route is shown even when none"
        );
        assert!(written.get("quarantined_after_kills").is_none());
        assert_eq!(
            serde_json::from_value::<FunctionInfo>(written).unwrap(),
            info
        );
    }

    #[test]
    fn a_deploy_with_no_parameters_has_no_query() {
        assert_eq!(DeployParams::default().query(), "");
        let params = DeployParams {
            timeout_us: Some(500),
            public: true,
            ..DeployParams::default()
        };
        assert_eq!(params.query(), "timeout_us=500&public=true");
    }

    proptest! {
        #[test]
        fn a_route_and_hosts_in_the_query_read_back_as_given(
            route in "/[ -~]{0,20}",
            hosts in "[ -~]{0,30}",
        ) {
            let params = DeployParams {
                route: Some(route.clone()),
                allow_outbound: Some(hosts.clone()),
                ..DeployParams::default()
            };
            let query = params.query();
            let values: Vec<(&str, String)> = query
                .split('&')
                .map(|pair| {
                    let (key, value) = pair.split_once('=').unwrap();
                    let value = percent_encoding::percent_decode_str(value).decode_utf8().unwrap();
                    (key, value.into_owned())
                })
                .collect();
            prop_assert_eq!(
                values,
                vec![("route", route), ("allow_outbound", hosts)]
            );
        }
    }
}
