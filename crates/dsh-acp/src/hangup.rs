//! Telling a client that hung up from a connection that failed.
//!
//! An editor that quits closes both pipes at once. The bridge still has frames in flight (late
//! updates, answers to prompts it just cancelled), so the final drain writes into a pipe nobody
//! reads and fails with `EPIPE`. That is the ordinary end of a session, not a transport failure:
//! the pipe ends are wrapped so `serve` knows the client went away — its input reached end of
//! file, or a write found the reader gone — and returns `Ok` after its teardown.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use futures::{Sink, Stream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Set once the client has gone away.
#[derive(Clone, Debug, Default)]
pub(crate) struct Hangup(Arc<AtomicBool>);

impl Hangup {
    /// Whether the client closed its end (input at end of file, or output unreadable).
    pub(crate) fn happened(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// `served` with a failure that only reflects the client's going away (frames still in
    /// flight when an editor quits fail to write: that is its goodbye) turned into success.
    pub(crate) fn excuse(
        &self,
        served: Result<(), agent_client_protocol::Error>,
    ) -> Result<(), agent_client_protocol::Error> {
        match served {
            Err(error) if self.happened() => {
                tracing::debug!(%error, "the ACP client hung up with frames in flight");
                Ok(())
            }
            other => other,
        }
    }

    fn mark(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Marks the hangup when `error` says the peer is gone (not that the link broke).
    fn watch_error(&self, error: &io::Error) {
        if matches!(
            error.kind(),
            io::ErrorKind::BrokenPipe
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::NotConnected
        ) {
            self.mark();
        }
    }
}

/// The client's frames; marks the hangup at end of file.
pub(crate) struct WatchedInput<R> {
    inner: Pin<Box<R>>,
    hangup: Hangup,
}

impl<R: AsyncRead> WatchedInput<R> {
    pub(crate) fn new(inner: R, hangup: Hangup) -> Self {
        Self {
            inner: Box::pin(inner),
            hangup,
        }
    }
}

impl<R: AsyncRead> AsyncRead for WatchedInput<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = self.inner.as_mut().poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &polled
            && buf.filled().len() == before
            && buf.remaining() > 0
        {
            self.hangup.mark();
        }
        polled
    }
}

/// Our frames; marks the hangup when the reader is gone.
pub(crate) struct WatchedOutput<W> {
    inner: Pin<Box<W>>,
    hangup: Hangup,
}

impl<W: AsyncWrite> WatchedOutput<W> {
    pub(crate) fn new(inner: W, hangup: Hangup) -> Self {
        Self {
            inner: Box::pin(inner),
            hangup,
        }
    }

    fn watch<T>(&self, polled: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if let Poll::Ready(Err(e)) = &polled {
            self.hangup.watch_error(e);
        }
        polled
    }
}

impl<W: AsyncWrite> AsyncWrite for WatchedOutput<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = self.inner.as_mut().poll_write(cx, buf);
        self.watch(polled)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = self.inner.as_mut().poll_flush(cx);
        self.watch(polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = self.inner.as_mut().poll_shutdown(cx);
        self.watch(polled)
    }
}

/// A message transport's incoming frames; marks the hangup when they end.
pub(crate) struct WatchedFrames<I> {
    inner: Pin<Box<I>>,
    hangup: Hangup,
}

impl<I> WatchedFrames<I> {
    pub(crate) fn new(inner: I, hangup: Hangup) -> Self {
        Self {
            inner: Box::pin(inner),
            hangup,
        }
    }
}

impl<I: Stream<Item = io::Result<String>>> Stream for WatchedFrames<I> {
    type Item = io::Result<String>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = self.inner.as_mut().poll_next(cx);
        match &polled {
            Poll::Ready(None) => self.hangup.mark(),
            Poll::Ready(Some(Err(e))) => self.hangup.watch_error(e),
            _ => {}
        }
        polled
    }
}

/// A message transport's outgoing frames; marks the hangup when the peer is gone.
pub(crate) struct WatchedSink<O> {
    inner: Pin<Box<O>>,
    hangup: Hangup,
}

impl<O> WatchedSink<O> {
    pub(crate) fn new(inner: O, hangup: Hangup) -> Self {
        Self {
            inner: Box::pin(inner),
            hangup,
        }
    }

    fn watch(&self, polled: Poll<io::Result<()>>) -> Poll<io::Result<()>> {
        if let Poll::Ready(Err(e)) = &polled {
            self.hangup.watch_error(e);
        }
        polled
    }
}

impl<O: Sink<String, Error = io::Error>> Sink<String> for WatchedSink<O> {
    type Error = io::Error;

    fn poll_ready(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = self.inner.as_mut().poll_ready(cx);
        self.watch(polled)
    }

    fn start_send(mut self: Pin<&mut Self>, frame: String) -> io::Result<()> {
        let sent = self.inner.as_mut().start_send(frame);
        if let Err(e) = &sent {
            self.hangup.watch_error(e);
        }
        sent
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = self.inner.as_mut().poll_flush(cx);
        self.watch(polled)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = self.inner.as_mut().poll_close(cx);
        self.watch(polled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn end_of_input_and_a_vanished_reader_are_hangups() {
        let (a, b) = tokio::io::duplex(64);
        let hangup = Hangup::default();
        let mut input = WatchedInput::new(a, hangup.clone());
        drop(b);
        let mut buf = [0u8; 8];
        assert_eq!(input.read(&mut buf).await.unwrap(), 0);
        assert!(hangup.happened());

        let (a, b) = tokio::io::duplex(64);
        let hangup = Hangup::default();
        let mut output = WatchedOutput::new(a, hangup.clone());
        output.write_all(b"x").await.unwrap();
        assert!(!hangup.happened());
        drop(b);
        assert!(output.write_all(b"y").await.is_err());
        assert!(hangup.happened());
    }

    #[tokio::test]
    async fn the_end_of_a_message_stream_and_a_closed_peer_are_hangups() {
        use futures::{SinkExt, StreamExt};

        let hangup = Hangup::default();
        let mut frames = WatchedFrames::new(
            futures::stream::iter([Ok::<_, io::Error>("{}".to_owned())]),
            hangup.clone(),
        );
        assert!(frames.next().await.is_some());
        assert!(!hangup.happened(), "a frame is not a hangup");
        assert!(frames.next().await.is_none());
        assert!(hangup.happened());

        let hangup = Hangup::default();
        let (tx, rx) = futures::channel::mpsc::unbounded::<String>();
        let mut sink = WatchedSink::new(
            tx.sink_map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe)),
            hangup.clone(),
        );
        sink.send("a".to_owned()).await.unwrap();
        assert!(!hangup.happened());
        drop(rx);
        assert!(sink.send("b".to_owned()).await.is_err());
        assert!(hangup.happened());
    }
}
