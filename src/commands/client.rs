//! The client commands (`deploy`, `invoke`, `ls`, `rm`, `release`, `nodes`): each makes one
//! request to a running platform through [`ApiClient`] and prints the result for a human, or
//! the server's error message on failure. [`Server`] is where the platform is and which token
//! goes to it; [`block_on`] runs a command's requests.

use super::credential::{Credential, is_own_node};
use super::output::outln;
use super::progress::Progress;
use super::secrets;
use anyhow::Context;
use bytes::Bytes;
use clap::Args;
use mote_api::{ApiClient, ApiError, DeployParams, Upload};
use mote_platform::DEFAULT_DATA_DIR;
use mote_platform::data_dir::{ADMIN_TOKEN_FILE, NODE_URL_FILE};
use mote_types::ShowBudget;
use std::io::Read;
use std::path::PathBuf;
use std::sync::OnceLock;

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

impl Server {
    /// The client of this server, sending the token if there is one to send.
    pub(crate) fn api(&self) -> anyhow::Result<ApiClient> {
        let credential = self.credential()?;
        let trust = match &self.tls_ca {
            Some(ca) => mote_tls::Trust::from_file(ca)?,
            None => mote_tls::Trust::default(),
        };
        Ok(ApiClient::new(
            &self.server,
            credential.token().map(str::to_owned),
            &trust,
        )?)
    }

    /// Waits for `request`'s answer; a failure is told as [`Server::failed`] tells it.
    pub(crate) fn answer<T>(
        &self,
        request: impl Future<Output = Result<T, ApiError>>,
    ) -> anyhow::Result<T> {
        block_on(request)?.map_err(|e| self.failed(e))
    }

    /// `error` for a human: a refusal the admin token would have passed says why it was not
    /// sent, and how to send a token there.
    pub(crate) fn failed(&self, error: ApiError) -> anyhow::Error {
        let withheld = matches!(self.credential.get(), Some(Credential::Withheld));
        match error.status() {
            Some(mote_api::StatusCode::UNAUTHORIZED) if withheld => anyhow::anyhow!(
                "{error}; the admin token in {} was not sent: {} is not this machine's node \
                 (neither a loopback address nor the URL in {}). To send a token there, put it \
                 in MOTE_TOKEN or in a file given with --token-file",
                self.data_dir.join(ADMIN_TOKEN_FILE).display(),
                self.server,
                self.data_dir.join(NODE_URL_FILE).display()
            ),
            _ => error.into(),
        }
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

/// `mote deploy NAME FILE`.
pub fn deploy(args: DeployArgs) -> anyhow::Result<()> {
    let wasm = std::fs::read(&args.file)
        .with_context(|| format!("cannot read module {}", args.file.display()))?;
    let params = DeployParams {
        timeout_ms: args.timeout_ms,
        timeout_us: args.timeout_us,
        memory_mb: args.memory_mb,
        route: args.route.clone(),
        allow_outbound: args.allow_outbound.clone(),
        public: args.public,
    };
    let server = &args.server;
    let api = server.api()?;
    let progress = Progress::bytes(
        wasm.len() as u64,
        &format!("uploading {}", args.file.display()),
    );
    let shown = progress.share();
    let watch = move |upload| match upload {
        Upload::Sent { sent, .. } => shown.at(sent),
        Upload::Done => shown.wait("the server is compiling it"),
    };
    let f = server.answer(api.deploy(&args.name, Bytes::from(wasm), &params, watch))?;
    drop(progress);
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
        let base = api.base();
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
    let server = &args.server;
    let api = server.api()?;
    let body =
        server.answer(async { api.invoke(&args.name, Bytes::from(input)).await?.success() })?;
    super::output::bytes(&body)
}

/// `mote ls`.
pub fn ls(args: LsArgs) -> anyhow::Result<()> {
    let api = args.server.api()?;
    let list = args.server.answer(api.functions())?;
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

/// `mote nodes`.
pub fn nodes(args: NodesArgs) -> anyhow::Result<()> {
    let api = args.server.api()?;
    let view = args.server.answer(api.cluster())?;
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
    let api = args.server.api()?;
    args.server.answer(api.remove(&args.name))?;
    outln!("removed {}", args.name);
    Ok(())
}

/// `mote release NAME`.
pub fn release(args: ReleaseArgs) -> anyhow::Result<()> {
    let api = args.server.api()?;
    let released = args.server.answer(api.release(&args.name))?;
    if released.released {
        outln!("released {}: its calls run again", args.name);
    } else {
        outln!("{} was not quarantined", args.name);
    }
    Ok(())
}

/// Runs `command`'s requests on a runtime of this thread's own, made for it: a client command
/// waits for its answers and does nothing else meanwhile.
pub(crate) fn block_on<F: Future>(command: F) -> anyhow::Result<F::Output> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the client's runtime")?;
    Ok(runtime.block_on(command))
}
