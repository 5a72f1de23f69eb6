//! Noticing that a stdio server went away: its standard output ends (it exited, crashed or
//! closed it), which is the end of its MCP channel whatever the process does next.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::watch;

/// The server's standard output, reporting its end (or a read error) on a watch channel.
pub(crate) struct EndWatch<R> {
    inner: R,
    ended: watch::Sender<bool>,
}

impl<R> EndWatch<R> {
    /// `inner`, with a receiver that turns `true` once it ends.
    pub(crate) fn new(inner: R) -> (Self, watch::Receiver<bool>) {
        let (ended, seen) = watch::channel(false);
        (Self { inner, ended }, seen)
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for EndWatch<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let ended = match &polled {
            Poll::Ready(Ok(())) => buf.filled().len() == before && buf.remaining() > 0,
            Poll::Ready(Err(_)) => true,
            Poll::Pending => false,
        };
        if ended {
            self.ended.send_replace(true);
        }
        polled
    }
}
