//! Everything a platform is started with ([`PlatformConfig`]), typed, and its defaults: each
//! default is here or on the owning crate's config type, and `mote up`'s flags take theirs from
//! these, so a library user and the CLI start the same platform.

use crate::error::PlatformError;
use mote_gateway::GatewayConfig;
use mote_node::{ExecutorsConfig, MicrotaskConfig, MicrotaskMode, NodeConfig, PreemptConfig};
use mote_objects::S3Endpoint;
use mote_runtime::JobShare;
use mote_sched::Policy;
use mote_types::OutboundCeiling;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Where `mote up` keeps its state unless told otherwise, and where the CLI looks for the admin
/// token and the node's URL.
pub const DEFAULT_DATA_DIR: &str = "mote.data";

/// The address the API listens on by default.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

/// The address the embedded store serves the etcd v3 API on by default (etcd's own port).
pub const DEFAULT_STORE_LISTEN: &str = "127.0.0.1:2379";

/// Everything a platform needs to start. [`PlatformConfig::default`] is `mote up` without flags
/// (but [`PlatformConfig::new`] takes the address and the data directory most users choose).
#[derive(Clone, Debug)]
pub struct PlatformConfig {
    /// Where the HTTP API listens (port 0: any free port).
    pub listen: SocketAddr,
    /// Where the dashboard listens.
    pub ui: UiListen,
    /// The URL peers reach the API at [default: http:// (https:// with TLS) and the listen
    /// address, with the host name if it listens on every address].
    pub advertise: Option<String>,
    /// The platform's state: the embedded store's data, modules, compiled artefacts, tokens.
    pub data: PathBuf,
    /// This node's name in its cluster [default: the host name].
    pub node_name: Option<String>,
    /// Where function records are kept.
    pub store: StoreChoice,
    /// Executor cores [default: all the machine's].
    pub cores: Option<usize>,
    /// The scheduling policy.
    pub policy: Policy,
    /// Fair-Choice's window (the paper's T).
    pub fc_window: Duration,
    /// Under `baseline`, the most calls running at once [default: memory / 256 MiB].
    pub baseline_cap: Option<usize>,
    /// Preemption under the ranking policies; `None` runs every call to its end.
    pub preempt: Option<PreemptConfig>,
    /// Confine every thread that runs guest code (readers, executors, microtask and job
    /// threads) with its seccomp allow-list (Linux).
    pub seccomp: bool,
    /// Run a call on the reader that read it when a core is free and nothing waits; off queues
    /// every call for an executor.
    pub inline: bool,
    /// Most calls that may wait for a core; more are refused with 503.
    pub max_queue: usize,
    /// Quarantine a function after this many budget kills in a row (0: never).
    pub quarantine_after: u32,
    /// Most compiled code kept resident, in MiB.
    pub resident_mb: u64,
    /// Most bytes of each function's log kept in memory.
    pub function_log_bytes: usize,
    /// Microtask scheduling for functions that declare phases.
    pub microtasks: MicrotaskMode,
    /// Most calls of functions that declare phases alive at once.
    pub max_microtask_calls: usize,
    /// The most any function's outbound requests may reach.
    pub outbound_ceiling: OutboundCeiling,
    /// Where guests' objects are kept.
    pub objects: ObjectsChoice,
    /// Request size and connection limits.
    pub gateway: GatewayConfig,
    /// TLS and the cluster secret.
    pub security: SecurityConfig,
    /// Who may make requests.
    pub access: AccessConfig,
    /// How long this node's key outlives it in the store.
    pub lease_ttl: Duration,
    /// Home nodes per function.
    pub homes: usize,
    /// How often a node with a core free and no call waiting asks a peer for calls that
    /// would wait there (late correction); `None`: never.
    pub pull_every: Option<Duration>,
    /// On [`crate::Platform::drain`], the most time open calls get to finish.
    pub stop_timeout: Duration,
    /// Deploy the example functions at start-up ([`crate::examples`]).
    pub examples: bool,
    /// The share of the cores jobs keep while calls want every core.
    pub job_share: JobShare,
    /// Run jobs' executor threads in `SCHED_IDLE` (the default): a share above 0 needs it off,
    /// or the calls' threads would take the cores the share keeps.
    pub job_idle: bool,
}

impl PlatformConfig {
    /// How long a draining platform waits for open calls by default.
    pub const DEFAULT_STOP_TIMEOUT: Duration = Duration::from_secs(30);

    /// The defaults, listening on `listen` with its state in `data`.
    pub fn new(listen: SocketAddr, data: impl Into<PathBuf>) -> Self {
        Self {
            listen,
            data: data.into(),
            ..Self::default()
        }
    }

    /// The node's settings, for `cores` cores.
    pub(crate) fn node_config(
        &self,
        cores: usize,
        baseline_cap: usize,
        objects: std::sync::Arc<mote_objects::Objects>,
    ) -> NodeConfig {
        NodeConfig {
            executors: ExecutorsConfig {
                policy: self.policy,
                fc_window: self.fc_window.max(Duration::from_secs(1)),
                baseline_cap,
                max_queue: self.max_queue,
                quarantine_after: self.quarantine_after,
                seccomp: self.seccomp,
                preempt: self.preempt,
                inline: self.inline,
                ..ExecutorsConfig::new(cores)
            },
            resident_mb: self.resident_mb,
            microtasks: MicrotaskConfig {
                mode: self.microtasks,
                objects: Some(objects),
                max_alive: self.max_microtask_calls.max(1),
            },
            function_log_bytes: self.function_log_bytes,
            outbound_ceiling: self.outbound_ceiling.clone(),
            job_share: self.job_share,
        }
    }
}

impl Default for PlatformConfig {
    fn default() -> Self {
        let executors = ExecutorsConfig::new(1);
        let microtasks = MicrotaskConfig::default();
        Self {
            listen: DEFAULT_LISTEN
                .parse()
                .expect("DEFAULT_LISTEN is an address"),
            ui: UiListen::NextPort,
            advertise: None,
            data: PathBuf::from(DEFAULT_DATA_DIR),
            node_name: None,
            store: StoreChoice::default(),
            cores: None,
            policy: executors.policy,
            fc_window: executors.fc_window,
            baseline_cap: None,
            preempt: executors.preempt,
            seccomp: executors.seccomp,
            inline: executors.inline,
            max_queue: executors.max_queue,
            quarantine_after: executors.quarantine_after,
            resident_mb: NodeConfig::DEFAULT_RESIDENT_MB,
            function_log_bytes: mote_node::DEFAULT_FUNCTION_LOG_BYTES,
            microtasks: microtasks.mode,
            max_microtask_calls: microtasks.max_alive,
            outbound_ceiling: OutboundCeiling::default(),
            objects: ObjectsChoice::default(),
            gateway: GatewayConfig::default(),
            security: SecurityConfig::default(),
            access: AccessConfig::default(),
            lease_ttl: mote_peers::PeersConfig::DEFAULT_TTL,
            homes: mote_cluster::PlacementConfig::default().homes,
            pull_every: Some(mote_peers::PeersConfig::DEFAULT_PULL_EVERY),
            stop_timeout: Self::DEFAULT_STOP_TIMEOUT,
            examples: false,
            job_share: JobShare::default(),
            job_idle: true,
        }
    }
}

/// Where the dashboard listens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UiListen {
    /// The API's address with the next port (port 0, any free port, stays 0).
    #[default]
    NextPort,
    /// Nowhere.
    Off,
    /// On this address.
    At(SocketAddr),
}

impl std::str::FromStr for UiListen {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(Self::Off),
            _ => s.parse().map(Self::At).map_err(|_| {
                format!("`{s}` is not an address to serve the dashboard on: give IP:PORT, or `off`")
            }),
        }
    }
}

impl UiListen {
    /// Where the dashboard listens, the API listening on `listen`: the address given, else the
    /// API's with the next port (port 0, any free port, stays 0); `None` for off.
    pub fn address(self, listen: SocketAddr) -> Result<Option<SocketAddr>, PlatformError> {
        match self {
            Self::Off => Ok(None),
            Self::At(addr) => Ok(Some(addr)),
            Self::NextPort if listen.port() == 0 => Ok(Some(listen)),
            Self::NextPort => {
                let port = listen.port().checked_add(1).ok_or_else(|| {
                    PlatformError::Config(format!(
                        "--listen {listen} leaves no next port for the dashboard: give it an address with --ui-listen, or --ui-listen off"
                    ))
                })?;
                Ok(Some(SocketAddr::new(listen.ip(), port)))
            }
        }
    }
}

/// Where function records are kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreChoice {
    /// A mote store replica in this process.
    Embedded {
        /// Where it serves the etcd API.
        listen: SocketAddr,
        /// Edge set-up: where it serves its peers.
        peer_listen: Option<SocketAddr>,
        /// Edge set-up: the replicas, as `NAME=URL` of their peer API.
        peers: Vec<String>,
    },
    /// An etcd-API store elsewhere, by URL.
    Remote(Vec<String>),
}

impl Default for StoreChoice {
    fn default() -> Self {
        Self::Embedded {
            listen: DEFAULT_STORE_LISTEN
                .parse()
                .expect("DEFAULT_STORE_LISTEN is an address"),
            peer_listen: None,
            peers: Vec::new(),
        }
    }
}

/// Where guests' objects are kept.
#[derive(Clone, Debug)]
pub enum ObjectsChoice {
    /// In a directory, a bucket per subdirectory [`None`: DATA/objects].
    Directory(Option<PathBuf>),
    /// In an S3-compatible server, which also keeps a copy of every module in `modules_bucket`.
    S3 {
        /// The server and its keys.
        endpoint: S3Endpoint,
        /// The bucket of modules.
        modules_bucket: String,
    },
}

impl ObjectsChoice {
    /// The bucket of modules unless told otherwise.
    pub const DEFAULT_MODULES_BUCKET: &str = "mote-modules";
    /// The region S3 requests are signed for unless told otherwise.
    pub const DEFAULT_S3_REGION: &str = "us-east-1";
}

impl Default for ObjectsChoice {
    fn default() -> Self {
        Self::Directory(None)
    }
}

/// How the platform serves TLS.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum TlsChoice {
    /// Plain HTTP.
    #[default]
    Off,
    /// With this PEM certificate (chain) and key.
    Files {
        /// The certificate.
        cert: PathBuf,
        /// Its key.
        key: PathBuf,
    },
    /// With a certificate made on first start in DATA/tls.
    SelfSigned,
}

/// TLS and the cluster secret.
#[derive(Clone, Debug, Default)]
pub struct SecurityConfig {
    /// What the platform serves with.
    pub tls: TlsChoice,
    /// The certificates trusted when dialling the store and peers [default: the web PKI roots
    /// and the platform's own certificate].
    pub tls_ca: Option<PathBuf>,
    /// Where the cluster secret comes from.
    pub cluster_secret: Option<SecretSource>,
}

/// Where the cluster secret comes from.
#[derive(Clone, Debug)]
pub enum SecretSource {
    /// A file holding it.
    File(PathBuf),
    /// The secret itself, and where it was found (for messages), e.g. an environment variable.
    Text {
        /// The secret.
        text: String,
        /// Where it came from.
        from: String,
    },
}

/// Who may make requests.
#[derive(Clone, Debug)]
pub struct AccessConfig {
    /// Require a token on every request even on loopback.
    pub require_tokens: bool,
    /// Take requests without tokens beyond loopback.
    pub insecure: bool,
    /// Failed authentications allowed per client and minute (0: no limit).
    pub auth_failures_per_minute: u32,
    /// More `Host` names the API answers to.
    pub allow_host: Vec<String>,
}

impl AccessConfig {
    /// Failed authentications allowed per client and minute unless told otherwise.
    pub const DEFAULT_AUTH_FAILURES_PER_MINUTE: u32 = 30;
}

impl Default for AccessConfig {
    fn default() -> Self {
        Self {
            require_tokens: false,
            insecure: false,
            auth_failures_per_minute: Self::DEFAULT_AUTH_FAILURES_PER_MINUTE,
            allow_host: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_dashboard_listens_on_the_next_port_unless_told() {
        let listen = addr("127.0.0.1:8080");
        let next = UiListen::NextPort;
        assert_eq!(next.address(listen).unwrap(), Some(addr("127.0.0.1:8081")));
        let every = addr("[::]:9000");
        assert_eq!(next.address(every).unwrap(), Some(addr("[::]:9001")));
        let any = addr("127.0.0.1:0");
        assert_eq!(next.address(any).unwrap(), Some(any));
        let told: UiListen = "10.0.0.1:7000".parse().unwrap();
        assert_eq!(told.address(listen).unwrap(), Some(addr("10.0.0.1:7000")));
        let off: UiListen = "off".parse().unwrap();
        assert_eq!(off.address(listen).unwrap(), None);
        let last = next.address(addr("127.0.0.1:65535")).unwrap_err();
        assert!(last.to_string().contains("--ui-listen"), "{last}");
        let bad = "8081".parse::<UiListen>().unwrap_err();
        assert!(bad.contains("`8081`") && bad.contains("IP:PORT"), "{bad}");
    }

    #[test]
    fn the_library_schedules_as_the_cli_does_by_default() {
        assert_eq!(PlatformConfig::default().policy, Policy::Fc);
    }
}
