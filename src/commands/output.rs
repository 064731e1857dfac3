//! The client commands' answers on stdout. `println!` panics when the reader has gone
//! (`mote ls | head -1`); these writes end the command quietly instead, and only for stdout: a
//! broken connection to the server stays an error.

use std::fmt;
use std::io::Write;

/// Stdout's reader closed it: the command stops, and exits successfully, since the reader has
/// what it wanted.
#[derive(Debug)]
pub struct OutputClosed;

impl fmt::Display for OutputClosed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("stdout was closed by its reader")
    }
}

impl std::error::Error for OutputClosed {}

/// Turns a failed write to stdout into [`OutputClosed`] when the reader went away.
pub fn closed(e: std::io::Error) -> anyhow::Error {
    match e.kind() {
        std::io::ErrorKind::BrokenPipe => OutputClosed.into(),
        _ => anyhow::Error::new(e).context("cannot write to stdout"),
    }
}

/// Writes `bytes` to stdout as they are.
pub fn bytes(bytes: &[u8]) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .map_err(closed)
}

/// Writes one line to stdout.
pub fn line(args: fmt::Arguments<'_>) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_fmt(args)
        .and_then(|()| out.write_all(b"\n"))
        .map_err(closed)
}

/// `println!` for the client commands: returns from the calling function with [`OutputClosed`]
/// when stdout's reader has gone.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::commands::output::line(format_args!($($arg)*))?
    };
}
pub(crate) use outln;
