//! What a call's guest wrote to its log: its `mote.log` lines and, once the call ended, what it
//! wrote to its standard streams, a line at a time. A [`GuestLog`] lives in the call's `Store`
//! and is handed to the caller with the call's result, so the node can keep it in the
//! function's log ring; each line also goes to the node's own log under the target
//! `mote::guest`, tagged with the function's name and escaped ([`Escaped`]: one line, no control
//! characters), so that no guest can write a line that passes for the node's or drive the
//! terminal of whoever reads that log. The ring keeps the text as the guest wrote it. A call that
//! writes nothing allocates nothing.

use mote_types::Escaped;

/// The longest line kept; longer lines are cut.
pub const MAX_LINE_BYTES: usize = 8 << 10;
/// How many lines one call may write; the rest are dropped, and counted.
pub const MAX_LINES: usize = 1000;

/// Where a line came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogStream {
    /// `mote.log`.
    Log,
    /// A mote ABI guest's stdout (it has no response to give there).
    Stdout,
    /// A WASI guest's or a component's stderr.
    Stderr,
}

impl LogStream {
    /// Its name, as the logs API shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Log => "log",
            Self::Stdout => "stdout",
            Self::Stderr => "stderr",
        }
    }
}

/// One line a guest wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine {
    /// Where it wrote it.
    pub stream: LogStream,
    /// The line, without its newline, cut at [`MAX_LINE_BYTES`].
    pub text: String,
}

/// The lines one call wrote, in order.
#[derive(Debug, Default)]
pub struct GuestLog {
    lines: Vec<LogLine>,
    dropped: usize,
}

impl GuestLog {
    /// Whether the call wrote nothing (and dropped nothing).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty() && self.dropped == 0
    }

    /// The lines kept, in the order they were written.
    pub fn lines(&self) -> &[LogLine] {
        &self.lines
    }

    /// Lines dropped past [`MAX_LINES`].
    pub fn dropped(&self) -> usize {
        self.dropped
    }

    /// The lines kept.
    pub fn into_lines(self) -> Vec<LogLine> {
        self.lines
    }

    /// Whether another line would be dropped; counts it if so.
    pub(crate) fn refuse(&mut self) -> bool {
        let full = self.lines.len() >= MAX_LINES;
        self.dropped += usize::from(full);
        full
    }

    /// Keeps `text`, written by a call of `function` to `stream`, unless the call wrote its
    /// share of lines already.
    pub(crate) fn push(&mut self, function: &str, stream: LogStream, mut text: String) {
        if self.refuse() {
            return;
        }
        cut_line(&mut text, MAX_LINE_BYTES);
        tracing::info!(target: "mote::guest", function, stream = stream.as_str(), "{}", Escaped(&text));
        self.lines.push(LogLine { stream, text });
    }

    /// Keeps what a call of `function` wrote to `stream`, a line at a time.
    pub(crate) fn push_output(&mut self, function: &str, stream: LogStream, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        for line in String::from_utf8_lossy(bytes).lines() {
            self.push(function, stream, line.to_owned());
        }
    }
}

impl From<Vec<LogLine>> for GuestLog {
    /// A log of `lines`, as if a call wrote them (the bound on lines is not applied).
    fn from(lines: Vec<LogLine>) -> Self {
        Self { lines, dropped: 0 }
    }
}

/// Cuts `text` to at most `max` bytes, at a character boundary.
pub fn cut_line(text: &mut String, max: usize) {
    if text.len() > max {
        let end = (0..=max)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        text.truncate(end);
    }
}

/// What the node logs on one thread while a test runs.
#[cfg(test)]
#[derive(Clone, Default)]
pub(crate) struct CapturedLog(std::sync::Arc<parking_lot::Mutex<Vec<u8>>>);

#[cfg(test)]
impl CapturedLog {
    /// Captures this thread's log (without colours) until the guard is dropped.
    pub(crate) fn start() -> (Self, tracing::subscriber::DefaultGuard) {
        let captured = Self::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        (captured, tracing::subscriber::set_default(subscriber))
    }

    /// What was logged so far.
    pub(crate) fn text(&self) -> String {
        String::from_utf8(self.0.lock().clone()).unwrap()
    }
}

#[cfg(test)]
impl std::io::Write for CapturedLog {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_split_in_lines_and_bounded() {
        let mut log = GuestLog::default();
        assert!(log.is_empty());
        log.push_output("f", LogStream::Stderr, b"one\ntwo\r\n\nthree");
        let texts: Vec<&str> = log.lines().iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts, ["one", "two", "", "three"]);
        let many = "x\n".repeat(MAX_LINES + 5);
        log.push_output("f", LogStream::Stderr, many.as_bytes());
        assert_eq!(log.lines().len(), MAX_LINES);
        assert_eq!(log.dropped(), 9);
    }

    #[test]
    fn the_node_log_shows_a_line_escaped_and_the_ring_keeps_it_as_written() {
        let (captured, logging) = CapturedLog::start();
        let forged = "ok\n2026-01-01T00:00:00Z  INFO mote: fake line\x1b[31m";
        let mut log = GuestLog::default();
        log.push("f", LogStream::Log, forged.to_owned());
        drop(logging);
        assert_eq!(log.lines()[0].text, forged);
        let node_log = captured.text();
        assert_eq!(node_log.lines().count(), 1, "{node_log}");
        assert!(!node_log.contains('\x1b'), "{node_log:?}");
        assert!(
            node_log.contains(r"ok\n2026-01-01T00:00:00Z  INFO mote: fake line\u{1b}[31m"),
            "{node_log}"
        );
    }

    #[test]
    fn long_lines_are_cut_at_a_character_boundary() {
        let mut log = GuestLog::default();
        log.push("f", LogStream::Log, "é".repeat(MAX_LINE_BYTES));
        let text = &log.lines()[0].text;
        assert_eq!(text.len(), MAX_LINE_BYTES);
        let mut odd = "aé".to_owned();
        cut_line(&mut odd, 2);
        assert_eq!(odd, "a");
    }
}
