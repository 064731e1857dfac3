//! `mote logs NAME [-f] [--tail N] [--json]`: a function's log (`GET
//! /v1/functions/NAME/logs`), one line per entry for a human, or the API's NDJSON as it is.
//! What a human sees is escaped ([`Escaped`]): a guest's text can neither start a line that
//! passes for another entry nor send the terminal escape sequences; `--json` is JSON, which
//! escapes it already.

use super::client::{Server, block_on};
use super::output::closed;
use clap::Args;
use mote_api::LogLine;
use mote_types::Escaped;
use std::io::Write;

/// Options of `mote logs`.
#[derive(Args)]
pub struct LogsArgs {
    /// The function whose log to show.
    name: String,
    /// Keep printing entries as calls write them, until interrupted or the server stops.
    #[arg(long, short = 'f')]
    follow: bool,
    /// Only the newest N entries [default: every entry kept].
    #[arg(long, value_name = "N")]
    tail: Option<usize>,
    /// Print the entries as the API gives them: one JSON object per line.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    server: Server,
}

/// `entry` as `TIME NODE CALL STREAM TEXT`; a failed call's outcome is named with its stream.
/// Every field is escaped, the guest's text above all.
fn show(entry: &LogLine) -> String {
    let call = if entry.call.is_empty() {
        "-"
    } else {
        &entry.call
    };
    let stream = match entry.outcome.as_str() {
        "" | "ok" => Escaped(&entry.stream).to_string(),
        outcome => format!("{}/{}", Escaped(&entry.stream), Escaped(outcome)),
    };
    format!(
        "{} {} {} {stream}: {}",
        Escaped(&entry.time),
        Escaped(&entry.node),
        Escaped(call),
        Escaped(&entry.text)
    )
}

/// `mote logs NAME`.
pub fn logs(args: LogsArgs) -> anyhow::Result<()> {
    let server = &args.server;
    let api = server.api()?;
    block_on(async {
        let mut log = api
            .logs(&args.name, args.tail, args.follow)
            .await
            .map_err(|e| server.failed(e))?;
        let mut out = std::io::stdout().lock();
        while let Some(line) = log.next_line().await.map_err(|e| server.failed(e))? {
            if args.json {
                writeln!(out, "{line}").map_err(closed)?;
            } else {
                let entry = log.entry(&line).map_err(|e| server.failed(e))?;
                writeln!(out, "{}", show(&entry)).map_err(closed)?;
            }
            if args.follow {
                out.flush().map_err(closed)?;
            }
        }
        Ok::<_, anyhow::Error>(())
    })?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guest_s_text_is_shown_on_its_entry_s_line_without_control_characters() {
        let entry = LogLine {
            seq: 7,
            time: "2026-05-01T10:00:00.000Z".into(),
            unix_ms: 1_777_629_600_000,
            node: "n1".into(),
            call: "n1-7".into(),
            stream: "log".into(),
            outcome: "ok".into(),
            text: "ok\n2026-01-01T00:00:00Z n1 n1-8 log: fake line\x1b[31m".into(),
        };
        assert_eq!(
            show(&entry),
            r"2026-05-01T10:00:00.000Z n1 n1-7 log: ok\n2026-01-01T00:00:00Z n1 n1-8 log: fake line\u{1b}[31m"
        );
        let failed = LogLine {
            outcome: "trap".into(),
            text: "plain words".into(),
            ..entry
        };
        assert_eq!(
            show(&failed),
            "2026-05-01T10:00:00.000Z n1 n1-7 log/trap: plain words"
        );
    }
}
