//! `mote bench`: the benchmarks of docs/benchmarks.md.

use super::platform::available_cores;
use clap::{Args, Subcommand};
use mote_bench::call_path::{self, CallPathConfig};

/// Which benchmark to run.
#[derive(Subcommand)]
pub enum BenchCommand {
    /// Latency and throughput of one call in process: dispatch, queue, executor, fresh
    /// instance, call, reply; side by side with the runtime alone.
    Call(CallArgs),
}

/// Options of `mote bench call`.
#[derive(Args)]
pub struct CallArgs {
    /// Calls per measured run.
    #[arg(long, default_value_t = 100_000)]
    calls: u64,
    /// Executor cores in the latency runs; the caller needs a core of its own.
    #[arg(long, default_value_t = 1)]
    latency_cores: usize,
    /// Executor cores in the throughput run [default: all].
    #[arg(long)]
    cores: Option<usize>,
    /// Concurrent callers in the throughput run [default: 4 per core].
    #[arg(long)]
    concurrency: Option<usize>,
    /// Request body size in bytes.
    #[arg(long, default_value_t = 64)]
    body_bytes: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs a benchmark and prints its report.
pub fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Call(args) => {
            let cores = args.cores.unwrap_or_else(available_cores);
            let config = CallPathConfig {
                latency_cores: args.latency_cores.max(1),
                throughput_cores: cores,
                calls: args.calls,
                concurrency: args.concurrency.unwrap_or(4 * cores).max(1),
                body_bytes: args.body_bytes,
            };
            let report = call_path::run(&config)?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", report.table());
            }
        }
    }
    Ok(())
}
