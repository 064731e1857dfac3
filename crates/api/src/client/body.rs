//! A request's body: bytes held whole, handed to the connection in chunks so that an upload's
//! progress can be told as it goes ([`Upload`]).

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

/// How much of a body goes to the connection at a time: small enough for an upload's progress
/// to move smoothly, large enough to cost nothing.
const CHUNK: usize = 64 << 10;

/// How far an upload is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Upload {
    /// `sent` of `total` bytes went to the connection.
    Sent {
        /// Bytes sent so far.
        sent: u64,
        /// The body's length.
        total: u64,
    },
    /// Every byte went: the server has the whole body and is at work on it.
    Done,
}

/// What is told of an upload's progress.
pub(crate) type OnUpload = Box<dyn FnMut(Upload) + Send>;

/// A request's body, and whom to tell how far it is.
pub(crate) struct RequestBody {
    data: Bytes,
    sent: usize,
    progress: Option<OnUpload>,
}

impl RequestBody {
    /// `data`, sent without telling anyone.
    pub(crate) fn new(data: Bytes) -> Self {
        Self {
            data,
            sent: 0,
            progress: None,
        }
    }

    /// No body.
    pub(crate) fn empty() -> Self {
        Self::new(Bytes::new())
    }

    /// `data`, telling `progress` as each chunk goes.
    pub(crate) fn watched(data: Bytes, progress: OnUpload) -> Self {
        Self {
            progress: Some(progress),
            ..Self::new(data)
        }
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        let total = this.data.len();
        if this.sent == total {
            return Poll::Ready(None);
        }
        let end = (this.sent + CHUNK).min(total);
        let chunk = this.data.slice(this.sent..end);
        this.sent = end;
        if let Some(progress) = &mut this.progress {
            progress(Upload::Sent {
                sent: end as u64,
                total: total as u64,
            });
            if end == total {
                progress(Upload::Done);
            }
        }
        Poll::Ready(Some(Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.sent == self.data.len()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact((self.data.len() - self.sent) as u64)
    }
}
