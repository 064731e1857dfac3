//! The servers under test, real processes on loopback started through
//! [`mote_testbed::Launch`]: `mote up` with `http-hello` deployed on its route and `echo`
//! ([`start_mote`]), and `wasmtime serve` with the same component bytes ([`start_wasmtime`]),
//! each waited for until it answers `http-hello`'s greeting. mote's functions are deployed
//! through its API's typed client (`crate::node_api`); the greeting is asked with a plain HTTP
//! client, as it is a component's route, the same on both servers, not the API's.

use crate::node_api::NodeApi;
use anyhow::{Context, bail};
use mote_api::DeployParams;
use mote_testbed::{Announces, Launch, Served};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The wasmtime-cli version the benchmark is written for (`scripts/wasmtime-cli`).
pub const WASMTIME_VERSION: &str = "48.0.8";

/// What `http-hello` answers on `/`: the readiness check of both servers.
const HELLO_BODY: &str = "Hello from a wasi:http component\n";

/// The route `http-hello` is deployed on in mote, as `mote up --examples` does.
pub(super) const ROUTE: &str = "/hello-http/...";

/// The path measured on mote: the route's root, what a site would use.
pub(super) const MOTE_PATH: &str = "/hello-http/";

/// The longest a server may take to answer its first 200.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Waits until `path` on `server` answers 200 with `body`.
fn wait_ready(server: &mut Served, path: &str, body: &str) -> anyhow::Result<()> {
    let agent = agent();
    let url = format!("{}{path}", server.url());
    let started = Instant::now();
    let mut last = String::new();
    while started.elapsed() < START_TIMEOUT {
        if let Some(status) = server.try_wait()? {
            bail!("the server exited ({status}): {}", server.log_tail(5));
        }
        match agent.get(&url).call() {
            Ok(mut response) => {
                let status = response.status();
                let text = response.body_mut().read_to_string().unwrap_or_default();
                if status == 200 && text == body {
                    return Ok(());
                }
                last = format!("{status}: {text:?}");
            }
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!("GET {url} did not answer 200 {body:?} in {START_TIMEOUT:?}; last: {last}")
}

/// `mote up --cores CORES` on loopback with its own embedded store, data in `dir`, on `cpu` alone
/// if given, `http-hello` deployed on its route and `echo` deployed.
pub(super) fn start_mote(
    mote: &Path,
    dir: &Path,
    cores: usize,
    cpu: Option<usize>,
) -> anyhow::Result<Served> {
    let mut server = Launch::mote_up(mote, &dir.join("mote.data"))
        .args(["--cores", &cores.to_string()])
        .log(dir.join("mote.log"))
        .pin(cpu)
        .start()?;
    let api = NodeApi::new(server.url())?;
    let on_route = DeployParams {
        route: Some(ROUTE.to_owned()),
        ..DeployParams::default()
    };
    for (guest, params) in [
        (&mote_guests::HTTP_HELLO, on_route),
        (&mote_guests::ECHO, DeployParams::default()),
    ] {
        api.deploy(guest.name, guest.wasm, &params)
            .with_context(|| format!("deploying {}", guest.name))?;
    }
    wait_ready(&mut server, MOTE_PATH, HELLO_BODY)?;
    Ok(server)
}

/// `wasmtime serve`'s `-O` options by default: the pooling allocator, asked for explicitly (48
/// turns it on by itself only where the address space allows), with the memory reset mote's
/// pool uses (`mote_runtime`'s engine: dirty pages found by `PAGEMAP_SCAN`, and as much memory
/// and table kept resident), so that the comparison is of the two designs, not of their
/// settings. 48's defaults already give every request of a WASIp2 component a fresh instance
/// (`--max-instance-reuse-count` 1), as mote does.
pub fn wasmtime_optimize() -> String {
    format!(
        "pooling-allocator,pooling-pagemap-scan=y,pooling-memory-keep-resident={},\
         pooling-table-keep-resident={}",
        mote_runtime::KEEP_RESIDENT_BYTES,
        mote_runtime::TABLE_KEEP_RESIDENT_BYTES
    )
}

/// The arguments of `wasmtime serve` before `--addr` and the component.
pub fn wasmtime_serve_flags(optimize: &str) -> Vec<String> {
    ["serve", "-O", optimize].map(str::to_owned).to_vec()
}

/// `wasmtime serve -O OPTIMIZE` on loopback, serving `http-hello` from a file in `dir`.
pub(super) fn start_wasmtime(
    wasmtime: &Path,
    optimize: &str,
    dir: &Path,
    cpu: Option<usize>,
) -> anyhow::Result<Served> {
    let component = dir.join("http-hello.wasm");
    std::fs::write(&component, mote_guests::HTTP_HELLO.wasm)?;
    let mut command = Command::new(wasmtime);
    command
        .args(wasmtime_serve_flags(optimize))
        .args(["--addr", "127.0.0.1:0"])
        .arg(&component);
    let mut server = Launch::new(command, Announces::Stderr, "Serving HTTP on ")
        .log(dir.join("wasmtime.log"))
        .pin(cpu)
        .start()?;
    wait_ready(&mut server, "/", HELLO_BODY)?;
    Ok(server)
}

/// `wasmtime --version`'s output, checked to be the version the benchmark is written for.
pub(super) fn wasmtime_version(wasmtime: &Path) -> anyhow::Result<String> {
    let output = Command::new(wasmtime)
        .arg("--version")
        .output()
        .with_context(|| format!("running {} --version", wasmtime.display()))?;
    let version = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if !version.starts_with(&format!("wasmtime {WASMTIME_VERSION}")) {
        bail!(
            "{} is `{version}`, not wasmtime {WASMTIME_VERSION} (scripts/wasmtime-cli installs it)",
            wasmtime.display()
        );
    }
    Ok(version)
}

pub(crate) fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}
