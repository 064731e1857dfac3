//! The `mote` binary: the single-machine platform (`mote up`), the client commands that talk to
//! a running platform over HTTP, and the benchmarks. It only wires crates together and turns
//! errors into exit codes; every capability lives in a crate under `crates/`.

mod commands;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// mote: a serverless platform for WebAssembly functions that run for microseconds to seconds.
///
/// Start the platform with `mote up --examples`, then deploy and call functions:
///
///   mote deploy resize ./resize.wasm --timeout-ms 2000
///   mote invoke resize --data @photo.jpg > small.jpg
///   mote ls
///
/// A function is one of four kinds of WebAssembly, told apart by what it exports (docs/abi.md):
///
///   mote ABI module   `mote_handle`: request bytes in, response bytes out, microseconds a call
///   WASI command      `_start`: the request on stdin, the response on stdout
///   wasi:http         a component of the wasi:http/proxy world (what `wasmtime serve` and Spin
///     component       run): whole HTTP requests, on /v1/invoke/NAME/... and on its --route
///   job               `mote_job_driver` and `mote_job_task`: a data-parallel job, run with
///                     `mote job run`
#[derive(Parser)]
#[command(name = "mote", version, verbatim_doc_comment)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the whole platform on this machine: HTTP gateway, node and state store.
    Up(Box<commands::up::UpArgs>),
    /// Deploy (or replace) a function from a .wasm file.
    Deploy(commands::client::DeployArgs),
    /// Call a function and write its response to stdout.
    Invoke(commands::client::InvokeArgs),
    /// List deployed functions.
    Ls(commands::client::LsArgs),
    /// Remove a function.
    Rm(commands::client::RmArgs),
    /// Let a quarantined function's calls in again.
    Release(commands::client::ReleaseArgs),
    /// Show a function's log: what its calls wrote and why failing calls failed (-f follows).
    Logs(commands::logs::LogsArgs),
    /// List the nodes of the cluster the server is in, with their state and load.
    Nodes(commands::client::NodesArgs),
    /// Run data-parallel jobs (Canary): `run`, `ls`, `status`, `cancel`.
    #[command(subcommand)]
    Job(commands::job::JobCommand),
    /// Make, list and revoke tokens: `create`, `ls`, `revoke`.
    #[command(subcommand)]
    Token(commands::token::TokenCommand),
    /// Run one replica of mote store, an eventually consistent store with the etcd v3 API.
    Store(commands::store::StoreArgs),
    /// Measure the platform (see docs/benchmarks.md).
    #[command(subcommand)]
    Bench(commands::bench::BenchCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Up(args) => commands::up::run(*args),
        Command::Deploy(args) => commands::client::deploy(args),
        Command::Invoke(args) => commands::client::invoke(args),
        Command::Ls(args) => commands::client::ls(args),
        Command::Rm(args) => commands::client::rm(args),
        Command::Release(args) => commands::client::release(args),
        Command::Nodes(args) => commands::client::nodes(args),
        Command::Logs(args) => commands::logs::logs(args),
        Command::Job(cmd) => commands::job::run(cmd),
        Command::Token(cmd) => commands::token::run(cmd),
        Command::Store(args) => commands::store::run(args),
        Command::Bench(cmd) => commands::bench::run(cmd),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of the output went away (`mote ls | head -1`): what it wanted, it has.
        Err(e) if e.is::<commands::output::OutputClosed>() => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
