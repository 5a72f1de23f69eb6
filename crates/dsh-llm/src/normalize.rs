//! Turning whatever an adapter does into exactly one terminal `finish`.
//!
//! The loop must be able to trust one rule: a model stream ends with one `finish` chunk and
//! nothing after it. Adapters fail in many ways (an `Err` item, a stream that just stops, a
//! panic); this module is the single place where all of them become that one chunk.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

use dsh_session::{FailureCode, FinishReason, LlmFailure, StreamChunk};
use futures::Stream;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::adapter::{ChunkStream, LlmStream};

/// The terminal chunk for `failure`: `aborted` when the request was cancelled or the code is
/// `ABORTED`, `error` otherwise.
pub fn terminal_failure(failure: LlmFailure, cancel: &CancellationToken) -> StreamChunk {
    let reason = if cancel.is_cancelled() || failure.code == FailureCode::Aborted {
        FinishReason::Aborted { failure }
    } else {
        FinishReason::Error { failure }
    };
    StreamChunk::Finish {
        reason,
        replay_state: None,
    }
}

/// Wraps an adapter stream so that it yields plain chunks ending in exactly one `finish`.
///
/// An `Err` item, the end of the stream without a `finish`, or a panic while polling becomes
/// a terminal `finish{error|aborted}`; an adapter's own `finish{error}` with code `ABORTED` is
/// reported as `aborted`. Once `cancel` fires, an adapter stream that has nothing ready ends
/// `aborted` at once, so an adapter that ignores cancellation cannot keep a turn waiting. The
/// adapter stream is dropped as soon as the terminal chunk is produced, so its connection
/// closes and nothing after the finish is ever observed.
pub fn normalize_stream(inner: ChunkStream, cancel: CancellationToken) -> LlmStream {
    Box::pin(Normalized {
        inner: Some(inner),
        cancelled: Box::pin(cancel.clone().cancelled_owned()),
        cancel,
    })
}

struct Normalized {
    /// `None` once the terminal chunk has been produced.
    inner: Option<ChunkStream>,
    cancel: CancellationToken,
    /// Resolves when `cancel` fires; polled only while the adapter has nothing ready, so an
    /// adapter's own terminal chunk wins whenever it has one.
    cancelled: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl Normalized {
    fn terminate(&mut self, chunk: StreamChunk) -> Poll<Option<StreamChunk>> {
        self.inner = None;
        Poll::Ready(Some(chunk))
    }
}

impl Stream for Normalized {
    type Item = StreamChunk;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<StreamChunk>> {
        let this = &mut *self;
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = catch_unwind(AssertUnwindSafe(|| inner.as_mut().poll_next(cx)));
        match polled {
            Ok(Poll::Pending) => {
                if this.cancelled.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                let failure = LlmFailure::new(
                    FailureCode::Aborted,
                    "the request was cancelled (the adapter had not stopped)",
                );
                let chunk = terminal_failure(failure, &this.cancel);
                this.terminate(chunk)
            }
            Ok(Poll::Ready(Some(Ok(StreamChunk::Finish {
                reason,
                replay_state,
            })))) => {
                let reason = match reason {
                    FinishReason::Error { failure } if failure.code == FailureCode::Aborted => {
                        FinishReason::Aborted { failure }
                    }
                    other => other,
                };
                this.terminate(StreamChunk::Finish {
                    reason,
                    replay_state,
                })
            }
            Ok(Poll::Ready(Some(Ok(chunk)))) => Poll::Ready(Some(chunk)),
            Ok(Poll::Ready(Some(Err(failure)))) => {
                let chunk = terminal_failure(failure, &this.cancel);
                this.terminate(chunk)
            }
            Ok(Poll::Ready(None)) => {
                let failure = LlmFailure::new(
                    FailureCode::StreamClosed,
                    "the adapter stream ended without a finish chunk",
                );
                let chunk = terminal_failure(failure, &this.cancel);
                this.terminate(chunk)
            }
            Err(panic) => {
                let failure = LlmFailure::new(
                    FailureCode::Unknown,
                    format!("the adapter panicked: {}", panic_message(&*panic)),
                );
                let chunk = terminal_failure(failure, &this.cancel);
                this.terminate(chunk)
            }
        }
    }
}

/// The text of a panic payload, for the failure message.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}
