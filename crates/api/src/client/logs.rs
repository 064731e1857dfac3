//! [`LogStream`]: a function's log as it arrives, one NDJSON line at a time.

use crate::error::ApiError;
use crate::logs::LogLine;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use mote_types::with_causes;

/// The longest line a log may send: an entry's text is bounded far below this.
const MAX_LINE: usize = 16 << 20;

/// A function's log, read as the server sends it (for as long as it does, when followed).
pub struct LogStream {
    route: String,
    server: String,
    body: Incoming,
    buffer: Vec<u8>,
    ended: bool,
}

impl LogStream {
    pub(crate) fn new(route: String, server: String, body: Incoming) -> Self {
        Self {
            route,
            server,
            body,
            buffer: Vec::new(),
            ended: false,
        }
    }

    /// The next line as the server sent it (an entry as JSON), empty lines skipped; `None`
    /// once the log ended.
    pub async fn next_line(&mut self) -> Result<Option<String>, ApiError> {
        loop {
            if let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                let line = String::from_utf8_lossy(&line[..end]);
                let line = line.trim_end_matches('\r');
                match line.is_empty() {
                    true => continue,
                    false => return Ok(Some(line.to_owned())),
                }
            }
            if self.ended {
                let rest = std::mem::take(&mut self.buffer);
                let rest = String::from_utf8_lossy(&rest);
                return Ok((!rest.trim().is_empty()).then(|| rest.trim_end().to_owned()));
            }
            if self.buffer.len() > MAX_LINE {
                return Err(ApiError::Unexpected {
                    route: self.route.clone(),
                    detail: format!("a line of the log is longer than {MAX_LINE} bytes"),
                });
            }
            match self.body.frame().await {
                None => self.ended = true,
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buffer.extend_from_slice(&data);
                    }
                }
                Some(Err(e)) => {
                    return Err(ApiError::Lost {
                        server: self.server.clone(),
                        route: self.route.clone(),
                        detail: with_causes(&e),
                    });
                }
            }
        }
    }

    /// The next entry; `None` once the log ended.
    pub async fn next_entry(&mut self) -> Result<Option<LogLine>, ApiError> {
        let Some(line) = self.next_line().await? else {
            return Ok(None);
        };
        self.entry(&line).map(Some)
    }

    /// `line`, a line [`LogStream::next_line`] gave, read as an entry.
    pub fn entry(&self, line: &str) -> Result<LogLine, ApiError> {
        serde_json::from_str(line).map_err(|e| ApiError::Unexpected {
            route: self.route.clone(),
            detail: format!("the server sent a line that is not an entry: {line} ({e})"),
        })
    }
}
