//! `mote logs NAME [-f] [--tail N] [--json]`: a function's log (`GET
//! /v1/functions/NAME/logs`), one line per entry for a human, or the API's NDJSON as it is.
//! What a human sees is escaped ([`Escaped`]): a guest's text can neither start a line that
//! passes for another entry nor send the terminal escape sequences; `--json` is JSON, which
//! escapes it already.

use super::client::{Server, base, request};
use super::output::closed;
use anyhow::Context;
use clap::Args;
use mote_types::Escaped;
use serde::Deserialize;
use std::io::{BufRead, BufReader, Write};

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

/// An entry of a function's log, as far as a human sees it.
#[derive(Deserialize)]
struct Entry {
    time: String,
    node: String,
    call: String,
    stream: String,
    outcome: String,
    text: String,
}

impl Entry {
    /// `TIME NODE CALL STREAM TEXT`; a failed call's outcome is named with its stream. Every
    /// field is escaped, the guest's text above all.
    fn show(&self) -> String {
        let call = if self.call.is_empty() {
            "-"
        } else {
            &self.call
        };
        let stream = match self.outcome.as_str() {
            "" | "ok" => Escaped(&self.stream).to_string(),
            outcome => format!("{}/{}", Escaped(&self.stream), Escaped(outcome)),
        };
        format!(
            "{} {} {} {stream}: {}",
            Escaped(&self.time),
            Escaped(&self.node),
            Escaped(call),
            Escaped(&self.text)
        )
    }
}

/// `mote logs NAME`.
pub fn logs(args: LogsArgs) -> anyhow::Result<()> {
    let mut url = format!("{}/v1/functions/{}/logs", base(&args.server), args.name);
    let mut params = Vec::new();
    if let Some(tail) = args.tail {
        params.push(format!("tail={tail}"));
    }
    if args.follow {
        params.push("follow=true".to_owned());
    }
    if !params.is_empty() {
        url = format!("{url}?{}", params.join("&"));
    }
    // A followed log has no end: no timeout but the connection's own.
    let response = match args.server.get_unbounded(&url)?.call() {
        Ok(response) if response.status().is_success() => response,
        // Not a log: fails with the server's message, as every client command does.
        other => return request(&args.server, other).map(drop),
    };
    let reader = BufReader::new(response.into_body().into_reader());
    let mut out = std::io::stdout().lock();
    for line in reader.lines() {
        let line = line.context("reading the log")?;
        if line.is_empty() {
            continue;
        }
        if args.json {
            writeln!(out, "{line}").map_err(closed)?;
        } else {
            let entry: Entry = serde_json::from_str(&line)
                .with_context(|| format!("the server sent a line that is not an entry: {line}"))?;
            writeln!(out, "{}", entry.show()).map_err(closed)?;
        }
        if args.follow {
            out.flush().map_err(closed)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guest_s_text_is_shown_on_its_entry_s_line_without_control_characters() {
        let entry = Entry {
            time: "2026-05-01T10:00:00.000Z".into(),
            node: "n1".into(),
            call: "n1-7".into(),
            stream: "log".into(),
            outcome: "ok".into(),
            text: "ok\n2026-01-01T00:00:00Z n1 n1-8 log: fake line\x1b[31m".into(),
        };
        assert_eq!(
            entry.show(),
            r"2026-05-01T10:00:00.000Z n1 n1-7 log: ok\n2026-01-01T00:00:00Z n1 n1-8 log: fake line\u{1b}[31m"
        );
        let failed = Entry {
            outcome: "trap".into(),
            text: "plain words".into(),
            ..entry
        };
        assert_eq!(
            failed.show(),
            "2026-05-01T10:00:00.000Z n1 n1-7 log/trap: plain words"
        );
    }
}
