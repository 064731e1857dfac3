//! Starting and talking to a platform: a real `mote up` process, or, for tests that need no
//! process of their own (no flags parsed, no signals, no restart, no process memory), the same
//! platform in this process ([`Platform::in_process`], `mote_platform`). Raw HTTP for what a
//! test checks on the wire (statuses, headers, error bodies), and the typed client,
//! [`ApiClient`], for what a client reads of the API.

use mote_api::{ApiClient, ApiError, DeployParams, FunctionInfo};
use mote_testbed::KilledOnDrop;
use parking_lot::Mutex;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, LazyLock, OnceLock};
use std::time::Duration;

/// The runtime the typed client's requests run on: one, for every test, so that each client's
/// pooled connections outlive a request.
static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("building the typed client's runtime")
});

/// Waits for a typed client's request; a test's failure naming the error if it failed.
pub fn wait<T>(request: impl Future<Output = Result<T, ApiError>>) -> T {
    try_wait(request).unwrap_or_else(|e| panic!("{e}"))
}

/// Waits for a typed client's request, for a test that expects it may fail.
pub fn try_wait<T>(request: impl Future<Output = Result<T, ApiError>>) -> Result<T, ApiError> {
    RUNTIME.block_on(request)
}

/// The platform `mote up` runs with its state in `data`, its API and embedded store on free
/// loopback ports, without a dashboard: what a test starts in process.
pub fn in_process_config(data: &Path) -> mote_platform::PlatformConfig {
    let any: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
    let mut config = mote_platform::PlatformConfig::new(any, data);
    config.store = mote_platform::StoreChoice::Embedded {
        listen: any,
        peer_listen: None,
        peers: Vec::new(),
    };
    config.ui = mote_platform::UiListen::Off;
    config
}

/// A typed client of the node at `url`, trusting `ca` if given (else the web PKI), sending
/// `token` if given.
pub fn api_client(url: &str, token: Option<&str>, ca: Option<&Path>) -> ApiClient {
    let trust = match ca {
        Some(ca) => mote_tls::Trust::from_file(ca).expect("reading the trusted certificates"),
        None => mote_tls::Trust::default(),
    };
    ApiClient::new(url, token.map(str::to_owned), &trust).expect("a client of the node's URL")
}

/// What serves a [`Platform`].
enum Host {
    /// A `mote up` process, killed when dropped.
    Process(KilledOnDrop),
    /// A platform in this process.
    InProcess(Box<InProcess>),
}

/// A platform started in this process, on a runtime of its own as `mote up` runs it; stopped
/// when dropped.
struct InProcess {
    platform: Option<mote_platform::Platform>,
    runtime: tokio::runtime::Runtime,
}

impl Drop for InProcess {
    fn drop(&mut self) {
        if let Some(platform) = self.platform.take() {
            let stopped = self.runtime.block_on(platform.stop());
            // A test that already failed keeps its own message.
            if !std::thread::panicking() {
                stopped.expect("stopping the in-process platform");
            }
        }
    }
}

/// A running platform, stopped when dropped.
pub struct Platform {
    host: Host,
    pub url: String,
    /// The dashboard's own listener (`dashboard on URL/ui`), unless `--ui-listen off`.
    pub dashboard: Option<String>,
    pub data: PathBuf,
    /// The PEM certificates the test's requests trust, for a node serving https.
    ca: Option<PathBuf>,
    /// What `mote up` printed on stdout so far.
    printed: Arc<Mutex<Vec<String>>>,
    /// The typed client, made on first use (after [`Platform::trusting`] may have named a CA).
    api: OnceLock<ApiClient>,
    _dir: Option<tempfile::TempDir>,
}

/// A response: status, the node that answered (`mote-node`) and body.
pub struct Reply {
    pub status: u16,
    pub node: Option<String>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The `error` field of a JSON error body.
    pub fn error(&self) -> String {
        let v: serde_json::Value = serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("error body is not JSON ({e}): {}", self.text()));
        v["error"]
            .as_str()
            .expect("error body has an `error` string")
            .to_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.text()))
    }
}

pub fn mote_bin() -> &'static str {
    env!("CARGO_BIN_EXE_mote")
}

impl Platform {
    /// Starts `mote up` on a fresh data directory.
    pub fn start(args: &[&str]) -> Self {
        Self::start_with_env(args, &[])
    }

    /// The platform `mote up` runs, started in this process as [`in_process_config`] has it on
    /// a fresh data directory, after `configure` changed what the test needs.
    pub fn in_process(configure: impl FnOnce(&mut mote_platform::PlatformConfig)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let mut config = in_process_config(&data);
        configure(&mut config);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("building the in-process platform's runtime");
        let platform = runtime
            .block_on(mote_platform::Platform::start(config))
            .unwrap_or_else(|e| panic!("starting the platform in process: {e}"));
        Self {
            url: platform.serving().api_url(),
            dashboard: None,
            data,
            ca: None,
            printed: Arc::default(),
            api: OnceLock::new(),
            host: Host::InProcess(Box::new(InProcess {
                platform: Some(platform),
                runtime,
            })),
            _dir: Some(dir),
        }
    }

    /// `mote up` on free ports with its state in `data`, and `args`.
    pub fn up_command(data: &Path, args: &[&str]) -> Command {
        Self::up_command_on("127.0.0.1:0", data, args)
    }

    /// `mote up` listening on `listen`, its store on a free loopback port, with its state in
    /// `data`, and `args`.
    fn up_command_on(listen: &str, data: &Path, args: &[&str]) -> Command {
        let mut command = Command::new(mote_bin());
        command
            .args(["up", "--listen", listen])
            .args(["--store-listen", "127.0.0.1:0", "--data"])
            .arg(data)
            .args(args);
        command
    }

    /// Starts `mote up` listening on `listen` (such as `0.0.0.0:0`) on a fresh data directory.
    pub fn start_on(listen: &str, args: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let command = Self::up_command_on(listen, &data, args);
        let mut p = Self::start_command(command, &data, Stdio::inherit(), "warn");
        p._dir = Some(dir);
        p
    }

    /// Starts `mote up` on a fresh data directory with `env` set.
    pub fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let mut p = Self::start_in_with_env(&data, args, env);
        p._dir = Some(dir);
        p
    }

    /// Starts `mote up --tls-self-signed` and `args` on a fresh data directory, its requests
    /// trusting the certificate the node made.
    pub fn start_self_signed(args: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let args: Vec<&str> = ["--tls-self-signed"].iter().chain(args).copied().collect();
        let mut p = Self::start_in(&data, &args);
        p.ca = Some(p.certificate());
        p._dir = Some(dir);
        p
    }

    /// The certificate a node started with `--tls-self-signed` made in its data directory.
    pub fn certificate(&self) -> PathBuf {
        self.data.join("tls").join("cert.pem")
    }

    /// Starts `mote up` on `data` (which may hold state from an earlier run).
    pub fn start_in(data: &Path, args: &[&str]) -> Self {
        Self::start_in_with_env(data, args, &[])
    }

    pub fn start_in_with_env(data: &Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::start_in_with_stderr(data, args, env, Stdio::inherit(), "warn")
    }

    /// Starts `mote up` on `data`, its log (warnings and worse) going to the file `log`.
    pub fn start_in_logging(data: &Path, args: &[&str], log: &Path) -> Self {
        let log = std::fs::File::create(log).expect("creating the log file");
        Self::start_in_with_stderr(data, args, &[], Stdio::from(log), "warn")
    }

    /// Starts `mote up` on a fresh data directory, its log going to the file `log`: what
    /// `filter` (tracing's EnvFilter syntax, as `mote up --log` takes it) lets through.
    pub fn start_logging(args: &[&str], log: &Path, filter: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let log = std::fs::File::create(log).expect("creating the log file");
        let data = dir.path().join("data");
        let mut p = Self::start_in_with_stderr(&data, args, &[], Stdio::from(log), filter);
        p._dir = Some(dir);
        p
    }

    fn start_in_with_stderr(
        data: &Path,
        args: &[&str],
        env: &[(&str, &str)],
        stderr: Stdio,
        log_filter: &str,
    ) -> Self {
        let mut command = Self::up_command(data, args);
        command.envs(env.iter().copied());
        Self::start_command(command, data, stderr, log_filter)
    }

    /// Starts `command`, a `mote up` keeping its state in `data`, and waits until it is up.
    fn start_command(mut command: Command, data: &Path, stderr: Stdio, log_filter: &str) -> Self {
        let mut child = command
            .args(["--log", log_filter])
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("starting mote up");
        let stdout = child.stdout.take().unwrap();
        let printed = Arc::new(Mutex::new(Vec::new()));
        let mut lines = BufReader::new(stdout).lines().map({
            let printed = printed.clone();
            move |line| {
                let line = line.expect("reading mote up's stdout");
                printed.lock().push(line.clone());
                line
            }
        });
        let url = loop {
            let line = lines.next().expect("mote up exited before it was up");
            if let Some(rest) = line.strip_prefix("mote is up on ") {
                break rest.split_whitespace().next().unwrap().to_owned();
            }
        };
        // The dashboard's line comes right after, if it has a listener.
        let dashboard = lines.next().and_then(|line| {
            line.strip_prefix("dashboard on ")
                .and_then(|url| url.strip_suffix("/ui"))
                .map(str::to_owned)
        });
        // Keep draining stdout so the child never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Self {
            host: Host::Process(KilledOnDrop::new(child)),
            url,
            dashboard,
            data: data.to_owned(),
            ca: None,
            printed,
            api: OnceLock::new(),
            _dir: None,
        }
    }

    /// The first line `mote up` printed on stdout that starts with `prefix`, waiting a while for
    /// it: lines after "mote is up" may still be on their way.
    pub fn printed_line(&self, prefix: &str) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let printed = self.printed.lock();
            if let Some(line) = printed.iter().find(|l| l.starts_with(prefix)) {
                return line.clone();
            }
            assert!(
                std::time::Instant::now() < deadline,
                "mote up printed no line starting with {prefix:?}: {printed:#?}"
            );
            drop(printed);
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// This platform, its requests trusting the PEM certificates in `ca` (for https).
    pub fn trusting(mut self, ca: &Path) -> Self {
        self.ca = Some(ca.to_owned());
        self
    }

    /// A client trusting `ca` if given, else the web PKI.
    pub fn agent_trusting(ca: Option<&Path>) -> ureq::Agent {
        let mut tls = ureq::tls::TlsConfig::builder();
        if let Some(ca) = ca {
            let pem = std::fs::read(ca).expect("reading the trusted certificates");
            let cert = ureq::tls::Certificate::from_pem(&pem).expect("a PEM certificate");
            tls = tls.root_certs(ureq::tls::RootCerts::new_with_certs(&[cert]));
        }
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .tls_config(tls.build())
            .build()
            .into()
    }

    fn agent(&self) -> ureq::Agent {
        Self::agent_trusting(self.ca.as_deref())
    }

    fn finish(r: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Reply {
        let mut r = r.expect("request reached the server");
        let status = r.status().as_u16();
        let node = r
            .headers()
            .get("mote-node")
            .map(|v| v.to_str().unwrap().to_owned());
        let body = r
            .body_mut()
            .with_config()
            .limit(1 << 30)
            .read_to_vec()
            .unwrap();
        Reply { status, node, body }
    }

    /// The `mote up` process; a test that needs one does not run the platform in process.
    fn process(&mut self) -> &mut KilledOnDrop {
        match &mut self.host {
            Host::Process(child) => child,
            Host::InProcess(_) => panic!("this test needs `mote up` as a process of its own"),
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        match &self.host {
            Host::Process(child) => child.id(),
            Host::InProcess(_) => panic!("this test needs `mote up` as a process of its own"),
        }
    }

    /// The server process's resident memory.
    pub fn resident_bytes(&self) -> u64 {
        let pid = self.pid();
        let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).unwrap();
        let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
        pages * 4096
    }

    pub fn get(&self, path: &str) -> Reply {
        Self::finish(self.agent().get(format!("{}{path}", self.url)).call())
    }

    pub fn delete(&self, path: &str) -> Reply {
        Self::finish(self.agent().delete(format!("{}{path}", self.url)).call())
    }

    pub fn put(&self, path: &str, body: &[u8]) -> Reply {
        Self::finish(self.agent().put(format!("{}{path}", self.url)).send(body))
    }

    pub fn post(&self, path: &str, body: &[u8]) -> Reply {
        Self::finish(self.agent().post(format!("{}{path}", self.url)).send(body))
    }

    /// POSTs `body` written as JSON, with `content-type: application/json` as the JSON routes
    /// require: a typed request sent raw, to check what the wire carries back.
    pub fn post_json(&self, path: &str, body: &impl serde::Serialize) -> Reply {
        let body = serde_json::to_string(body).expect("a request body written as JSON");
        Self::finish(
            self.agent()
                .post(format!("{}{path}", self.url))
                .header("content-type", "application/json")
                .send(body),
        )
    }

    /// The typed client of this node's API, with no token.
    pub fn api(&self) -> &ApiClient {
        self.api
            .get_or_init(|| api_client(&self.url, None, self.ca.as_deref()))
    }

    /// Deploys `wasm` as `name` with `params` through the typed client, asserting success.
    pub fn deploy(&self, name: &str, wasm: &[u8], params: &DeployParams) -> FunctionInfo {
        let wasm = bytes::Bytes::copy_from_slice(wasm);
        try_wait(self.api().deploy(name, wasm, params, |_| {}))
            .unwrap_or_else(|e| panic!("deploying {name}: {e}"))
    }

    /// The names `GET /v1/functions` lists, in its order.
    pub fn function_names(&self) -> Vec<String> {
        let list = wait(self.api().functions());
        list.functions.into_iter().map(|f| f.name).collect()
    }

    pub fn invoke(&self, name: &str, body: &[u8]) -> Reply {
        self.post(&format!("/v1/invoke/{name}"), body)
    }

    /// Sends SIGKILL and waits.
    pub fn kill(mut self) {
        let _ = self.process().kill_and_reap();
    }

    /// Stops the platform cleanly: SIGTERM to a process, which must exit successfully; an
    /// in-process platform's [`mote_platform::Platform::stop`].
    pub fn stop(mut self) {
        match &mut self.host {
            Host::Process(child) => {
                let pid = child.id().to_string();
                Command::new("kill").args(["-TERM", &pid]).status().unwrap();
                let status = child.wait().unwrap();
                assert!(status.success(), "mote up exited with {status} on SIGTERM");
            }
            Host::InProcess(host) => {
                let platform = host.platform.take().expect("not yet stopped");
                host.runtime
                    .block_on(platform.stop())
                    .expect("stopping the in-process platform");
            }
        }
    }
}
