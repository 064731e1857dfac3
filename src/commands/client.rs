//! The client commands (`deploy`, `invoke`, `ls`, `rm`, `release`, `nodes`): each makes one HTTP request to a running
//! platform and prints the result for a human, or the server's error message on failure.

use super::credential::{Credential, is_own_node};
use super::output::outln;
use super::progress::Progress;
use super::secrets;
use anyhow::{Context, bail};
use clap::Args;
use mote_types::{Escaped, ShowBudget};
use serde::Deserialize;
use std::io::Read;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

/// Where the platform is, and the token to send it.
#[derive(Args)]
pub struct Server {
    /// URL of a running mote platform.
    #[arg(
        long,
        default_value = "http://127.0.0.1:8080",
        env = "MOTE_SERVER",
        global = true
    )]
    pub(crate) server: String,
    /// A file holding the token to send (`Authorization: Bearer`); MOTE_TOKEN may hold the token
    /// itself instead. Either goes to whatever --server names. Without them the admin token in
    /// DATA/admin.token is sent, but only to this machine's node: a loopback address, or the URL
    /// that node advertises (DATA/url).
    #[arg(long, value_name = "FILE", global = true)]
    token_file: Option<PathBuf>,
    /// Refused, with what to use instead: every user of the machine reads a command line.
    #[arg(long = "token", value_name = "TOKEN", hide = true, global = true)]
    token_in_argv: Option<String>,
    /// The platform's data directory, where `mote up` wrote admin.token (the token sent to it
    /// when none is given) and the URL it advertises.
    #[arg(long, default_value = DEFAULT_DATA_DIR, env = "MOTE_DATA", global = true)]
    data_dir: PathBuf,
    /// PEM certificates to trust for an https:// server, such as a node's DATA/tls/cert.pem
    /// [default: the web PKI roots].
    #[arg(long, env = "MOTE_TLS_CA", global = true)]
    pub(crate) tls_ca: Option<PathBuf>,
    /// The token this command sends, decided on its first request.
    #[arg(skip)]
    credential: OnceLock<Credential>,
}

/// A request to the server, with the token.
type Builder<B> = anyhow::Result<ureq::RequestBuilder<B>>;

/// The longest a client command's request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15 * 60);

impl Server {
    /// A GET of `url`, with the token.
    pub(crate) fn get(&self, url: &str) -> Builder<ureq::typestate::WithoutBody> {
        self.request(Some(REQUEST_TIMEOUT), |agent| agent.get(url))
    }

    /// A GET of `url` whose answer may stream for as long as the server sends (a followed
    /// log), with the token.
    pub(crate) fn get_unbounded(&self, url: &str) -> Builder<ureq::typestate::WithoutBody> {
        self.request(None, |agent| agent.get(url))
    }

    /// A POST to `url`, with the token.
    pub(crate) fn post(&self, url: &str) -> Builder<ureq::typestate::WithBody> {
        self.request(Some(REQUEST_TIMEOUT), |agent| agent.post(url))
    }

    /// POSTs `body` as JSON to `url`, with the token, and reads the answer as [`request`] does.
    pub(crate) fn post_json(
        &self,
        url: &str,
        body: &impl serde::Serialize,
    ) -> anyhow::Result<Vec<u8>> {
        let sent = self
            .post(url)?
            .header("content-type", "application/json")
            .send(serde_json::to_vec(body)?);
        request(self, sent)
    }

    /// A PUT to `url`, with the token.
    pub(crate) fn put(&self, url: &str) -> Builder<ureq::typestate::WithBody> {
        self.request(Some(REQUEST_TIMEOUT), |agent| agent.put(url))
    }

    /// A DELETE of `url`, with the token.
    pub(crate) fn delete(&self, url: &str) -> Builder<ureq::typestate::WithoutBody> {
        self.request(Some(REQUEST_TIMEOUT), |agent| agent.delete(url))
    }

    /// The request `make` builds on an agent for this server, bounded by `timeout`, with the
    /// token if there is one to send.
    fn request<B>(
        &self,
        timeout: Option<Duration>,
        make: impl FnOnce(&ureq::Agent) -> ureq::RequestBuilder<B>,
    ) -> Builder<B> {
        let credential = self.credential()?;
        let trust = match &self.tls_ca {
            Some(ca) => mote_tls::Trust::from_file(ca)?,
            None => mote_tls::Trust::default(),
        };
        let mut config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(timeout)
            .tls_config(ureq_trust(&trust));
        if let Credential::Admin(_) = credential {
            // The node is this machine's: the admin token goes to it directly, never to a
            // proxy named in the environment.
            config = config.proxy(None);
        }
        let request = make(&config.build().into());
        Ok(match credential.token() {
            Some(token) => request.header("authorization", format!("Bearer {token}")),
            None => request,
        })
    }

    /// `--token-file`, else MOTE_TOKEN, else the admin token `mote up` wrote in its data
    /// directory if the server is that node; read once.
    fn credential(&self) -> anyhow::Result<&Credential> {
        if let Some(credential) = self.credential.get() {
            return Ok(credential);
        }
        let credential =
            match secrets::TOKEN.read(self.token_file.as_deref(), self.token_in_argv.as_deref())? {
                Some(token) => Credential::Given(token),
                None => self.admin_token(),
            };
        Ok(self.credential.get_or_init(|| credential))
    }

    /// The admin token in the data directory, if the server is the node that wrote it.
    fn admin_token(&self) -> Credential {
        let Ok(token) = std::fs::read_to_string(self.data_dir.join(ADMIN_TOKEN_FILE)) else {
            return Credential::None;
        };
        let token = token.trim();
        if token.is_empty() {
            return Credential::None;
        }
        let advertised = std::fs::read_to_string(self.data_dir.join(NODE_URL_FILE)).ok();
        match is_own_node(&self.server, advertised.as_deref().map(str::trim)) {
            true => Credential::Admin(token.to_owned()),
            false => Credential::Withheld,
        }
    }
}

/// Where `mote up` keeps its state, and the CLI looks for its admin token, unless told
/// otherwise.
pub(crate) const DEFAULT_DATA_DIR: &str = "mote.data";

/// The file in a data directory where `mote up` writes the admin token it made on first start.
pub(crate) const ADMIN_TOKEN_FILE: &str = "admin.token";

/// The file in a data directory where `mote up` writes the URL it advertises, at every start:
/// the CLI sends the admin token to that URL (and to loopback) only.
pub(crate) const NODE_URL_FILE: &str = "url";

/// Options of `mote deploy`.
#[derive(Args)]
pub struct DeployArgs {
    /// Name to deploy under: a-z, 0-9, '-' and '_', up to 63 characters.
    name: String,
    /// The WebAssembly file (.wasm): a mote ABI module, a WASI command, a job, or a wasi:http
    /// component (what `wasmtime serve` and Spin run).
    file: PathBuf,
    /// Wall-clock limit per call, in milliseconds [server default: 10000].
    #[arg(long, conflicts_with = "timeout_us")]
    timeout_ms: Option<u64>,
    /// Wall-clock limit per call, in microseconds (at least 100), for functions that run for
    /// microseconds.
    #[arg(long)]
    timeout_us: Option<u64>,
    /// Memory limit per call, in MiB [server default: 128].
    #[arg(long)]
    memory_mb: Option<u32>,
    /// Also serve a wasi:http component at this path of the server's root, as Spin's `route`:
    /// `/path` exactly, `/path/...` that path and everything below it, `/...` a whole site.
    #[arg(long)]
    route: Option<String>,
    /// Hosts a wasi:http component may send requests to, comma-separated HOST[:PORT]: names
    /// and `*.example.com` (subdomains) with a deploy token; `*` (any public address), IP
    /// addresses and CIDR ranges (`10.0.0.0/8:5432`, `[fd00::/8]:443`) only with an admin
    /// token. All within the node's --outbound-ceiling; loopback, private and link-local
    /// addresses only through address entries [default: none].
    #[arg(long, value_name = "HOSTS")]
    allow_outbound: Option<String>,
    /// Let anyone call it without a token (on a node that requires tokens).
    #[arg(long)]
    public: bool,
    #[command(flatten)]
    server: Server,
}

/// Options of `mote invoke`.
#[derive(Args)]
pub struct InvokeArgs {
    /// The function to call.
    name: String,
    /// Request body: literal text, `@FILE` to send a file, or `-` to send stdin [default: none].
    #[arg(value_name = "DATA")]
    body: Option<String>,
    /// The request body, as DATA: for a body that starts with `-` (`--data=-x`).
    #[arg(long, short = 'd', value_name = "DATA", conflicts_with = "body")]
    data: Option<String>,
    #[command(flatten)]
    server: Server,
}

/// Options of `mote ls`.
#[derive(Args)]
pub struct LsArgs {
    #[command(flatten)]
    server: Server,
}

/// Options of `mote rm`.
#[derive(Args)]
pub struct RmArgs {
    /// The function to remove.
    name: String,
    #[command(flatten)]
    server: Server,
}

/// Options of `mote release`.
#[derive(Args)]
pub struct ReleaseArgs {
    /// The quarantined function.
    name: String,
    #[command(flatten)]
    server: Server,
}

/// A function as the API describes it.
#[derive(Deserialize)]
struct FunctionInfo {
    name: String,
    sha256: String,
    kind: String,
    timeout_us: u64,
    memory_mb: u32,
    size_bytes: u64,
    route: Option<String>,
    #[serde(default)]
    public: bool,
    #[serde(default)]
    allow_outbound: Vec<String>,
}

#[derive(Deserialize)]
struct FunctionList {
    functions: Vec<FunctionInfo>,
}

/// `mote deploy NAME FILE`.
pub fn deploy(args: DeployArgs) -> anyhow::Result<()> {
    let wasm = std::fs::read(&args.file)
        .with_context(|| format!("cannot read module {}", args.file.display()))?;
    let mut url = format!("{}/v1/functions/{}", base(&args.server), args.name);
    let params: Vec<String> = [
        args.timeout_ms.map(|v| format!("timeout_ms={v}")),
        args.timeout_us.map(|v| format!("timeout_us={v}")),
        args.memory_mb.map(|v| format!("memory_mb={v}")),
        args.route
            .as_deref()
            .map(|v| format!("route={}", query_escape(v))),
        args.allow_outbound
            .as_deref()
            .map(|v| format!("allow_outbound={}", query_escape(v))),
        args.public.then(|| "public=true".to_owned()),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !params.is_empty() {
        url = format!("{url}?{}", params.join("&"));
    }
    let size = wasm.len() as u64;
    let body = match size >= LARGE_MODULE {
        false => request(&args.server, args.server.put(&url)?.send(&wasm[..]))?,
        true => {
            let progress = Progress::bytes(size, &format!("uploading {}", args.file.display()));
            let upload = progress.reader(std::io::Cursor::new(wasm));
            let sent = args
                .server
                .put(&url)?
                .header("content-length", size)
                .send(ureq::SendBody::from_owned_reader(upload));
            progress.wait("the server is compiling it");
            request(&args.server, sent)?
        }
    };
    let f: FunctionInfo = serde_json::from_slice(&body).context("unexpected deploy response")?;
    outln!(
        "deployed {} ({}, {} bytes, sha256 {}, timeout {}, memory {} MiB{})",
        f.name,
        f.kind,
        f.size_bytes,
        &f.sha256[..12.min(f.sha256.len())],
        ShowBudget(f.timeout_us),
        f.memory_mb,
        if f.public { ", public" } else { "" }
    );
    if f.kind == "wasi-http" {
        let base = base(&args.server);
        match &f.route {
            Some(route) => outln!(
                "serving requests at {base}/v1/invoke/{}/... and on its route {route}",
                f.name
            ),
            None => outln!("serving requests at {base}/v1/invoke/{}/...", f.name),
        }
    }
    Ok(())
}

/// From this size on, a deploy shows its upload's progress (on a terminal).
const LARGE_MODULE: u64 = 4 << 20;

/// Escapes a query parameter's value: the characters a route or host list may hold that a
/// query gives a meaning of its own.
fn query_escape(value: &str) -> String {
    value
        .replace('%', "%25")
        .replace('&', "%26")
        .replace('+', "%2B")
        .replace('#', "%23")
        .replace(' ', "%20")
}

/// `mote invoke NAME`.
pub fn invoke(args: InvokeArgs) -> anyhow::Result<()> {
    let data = args.body.or(args.data).unwrap_or_default();
    let input = match data.as_str() {
        "-" => {
            let mut buf = Vec::new();
            std::io::stdin()
                .read_to_end(&mut buf)
                .context("cannot read stdin")?;
            buf
        }
        d if d.starts_with('@') => {
            std::fs::read(&d[1..]).with_context(|| format!("cannot read {}", &d[1..]))?
        }
        d => d.as_bytes().to_vec(),
    };
    let url = format!("{}/v1/invoke/{}", base(&args.server), args.name);
    let body = request(&args.server, args.server.post(&url)?.send(&input[..]))?;
    super::output::bytes(&body)
}

/// `mote ls`.
pub fn ls(args: LsArgs) -> anyhow::Result<()> {
    let url = format!("{}/v1/functions", base(&args.server));
    let body = request(&args.server, args.server.get(&url)?.call())?;
    let list: FunctionList = serde_json::from_slice(&body).context("unexpected list response")?;
    if list.functions.is_empty() {
        outln!("no functions deployed; deploy one with `mote deploy NAME FILE.wasm`");
        return Ok(());
    }
    let routes: Vec<&str> = list
        .functions
        .iter()
        .map(|f| f.route.as_deref().unwrap_or("-"))
        .collect();
    let route_width = routes.iter().map(|r| r.len()).max().unwrap_or(0).max(5);
    outln!(
        "{:<24} {:<13} {:>10} {:>8} {:>9}  {:<12}  {:<route_width$}  {:<6}  OUTBOUND",
        "NAME",
        "KIND",
        "SIZE",
        "TIMEOUT",
        "MEMORY",
        "SHA256",
        "ROUTE",
        "PUBLIC"
    );
    for (f, route) in list.functions.iter().zip(routes) {
        let outbound = match f.allow_outbound.is_empty() {
            true => "-".to_owned(),
            false => f.allow_outbound.join(","),
        };
        outln!(
            "{:<24} {:<13} {:>10} {:>8} {:>6}MiB  {:<12}  {:<route_width$}  {:<6}  {}",
            f.name,
            f.kind,
            f.size_bytes,
            ShowBudget(f.timeout_us).to_string(),
            f.memory_mb,
            &f.sha256[..12.min(f.sha256.len())],
            route,
            if f.public { "yes" } else { "no" },
            outbound,
        );
    }
    Ok(())
}

/// Options of `mote nodes`.
#[derive(Args)]
pub struct NodesArgs {
    #[command(flatten)]
    server: Server,
}

/// `GET /v1/cluster`, as far as `mote nodes` shows it.
#[derive(Deserialize)]
struct ClusterView {
    node: String,
    store: StoreView,
    nodes: Vec<MemberView>,
}

#[derive(Deserialize)]
struct StoreView {
    endpoints: String,
    reachable: bool,
    error: Option<String>,
}

#[derive(Deserialize)]
struct MemberView {
    name: String,
    url: String,
    state: String,
    cores: u32,
    running: u32,
    queued: u32,
    work_ms: f64,
    heard_ms_ago: u64,
}

/// `mote nodes`.
pub fn nodes(args: NodesArgs) -> anyhow::Result<()> {
    let url = format!("{}/v1/cluster", base(&args.server));
    let body = request(&args.server, args.server.get(&url)?.call())?;
    let view: ClusterView = serde_json::from_slice(&body).context("unexpected cluster response")?;
    outln!(
        "{:<20} {:<9} {:>5} {:>7} {:>6} {:>9} {:>7}  URL",
        "NODE",
        "STATE",
        "CORES",
        "RUNNING",
        "QUEUED",
        "WORK",
        "HEARD"
    );
    for n in &view.nodes {
        let marker = if n.name == view.node { "*" } else { "" };
        outln!(
            "{:<20} {:<9} {:>5} {:>7} {:>6} {:>7.1}ms {:>5}ms  {}",
            format!("{}{marker}", n.name),
            n.state,
            n.cores,
            n.running,
            n.queued,
            n.work_ms,
            n.heard_ms_ago,
            n.url
        );
    }
    match (view.store.reachable, view.store.error) {
        (true, _) => outln!(
            "(* answered; its store at {} answers)",
            view.store.endpoints
        ),
        (false, error) => outln!(
            "(* answered; its store at {} does NOT answer: {}; it serves what it knows)",
            view.store.endpoints,
            error.unwrap_or_default()
        ),
    }
    Ok(())
}

/// `mote rm NAME`.
pub fn rm(args: RmArgs) -> anyhow::Result<()> {
    let url = format!("{}/v1/functions/{}", base(&args.server), args.name);
    request(&args.server, args.server.delete(&url)?.call())?;
    outln!("removed {}", args.name);
    Ok(())
}

/// `mote release NAME`.
pub fn release(args: ReleaseArgs) -> anyhow::Result<()> {
    let url = format!("{}/v1/functions/{}/release", base(&args.server), args.name);
    let body = request(&args.server, args.server.post(&url)?.send_empty())?;
    let released: serde_json::Value =
        serde_json::from_slice(&body).context("unexpected release response")?;
    if released["released"] == true {
        outln!("released {}: its calls run again", args.name);
    } else {
        outln!("{} was not quarantined", args.name);
    }
    Ok(())
}

pub(crate) fn base(server: &Server) -> &str {
    server.server.trim_end_matches('/')
}

/// Reads a response, turning transport failures and error statuses into messages for humans.
pub(crate) fn request(
    server: &Server,
    response: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
) -> anyhow::Result<Vec<u8>> {
    let mut response = response.map_err(|e| {
        anyhow::anyhow!(
            "cannot reach mote at {}: {e}; is `mote up` running there?",
            server.server
        )
    })?;
    let status = response.status();
    let body = response
        .body_mut()
        .with_config()
        .limit(1 << 30)
        .read_to_vec()
        .context("reading the response")?;
    if !status.is_success() {
        #[derive(Deserialize)]
        struct ApiError {
            error: String,
        }
        // Escaped for the terminal: the message may quote what a guest wrote to its stderr.
        let message = match serde_json::from_slice::<ApiError>(&body) {
            Ok(e) => format!("{} ({status})", Escaped(&e.error)),
            Err(_) => format!(
                "server answered {status}: {}",
                Escaped(&String::from_utf8_lossy(&body))
            ),
        };
        if status == ureq::http::StatusCode::UNAUTHORIZED
            && matches!(server.credential.get(), Some(Credential::Withheld))
        {
            bail!(
                "{message}; the admin token in {} was not sent: {} is not this machine's node \
                 (neither a loopback address nor the URL in {}). To send a token there, put it \
                 in MOTE_TOKEN or in a file given with --token-file",
                server.data_dir.join(ADMIN_TOKEN_FILE).display(),
                server.server,
                server.data_dir.join(NODE_URL_FILE).display()
            );
        }
        bail!("{message}");
    }
    Ok(body)
}

/// `trust` for a ureq agent: the web PKI roots alone as ureq knows them, or every certificate
/// `trust` holds.
fn ureq_trust(trust: &mote_tls::Trust) -> ureq::tls::TlsConfig {
    let roots = match trust.own_certificates().is_empty() {
        true => ureq::tls::RootCerts::WebPki,
        false => {
            let certs = trust
                .certificates()
                .map(|c| ureq::tls::Certificate::from_der(c.as_ref()).to_owned())
                .collect();
            ureq::tls::RootCerts::Specific(std::sync::Arc::new(certs))
        }
    };
    ureq::tls::TlsConfig::builder().root_certs(roots).build()
}
