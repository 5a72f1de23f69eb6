//! Sending a streaming request and reading its response head: the part of [`crate::stream_sse`]
//! before the first event. A failure here ends the stream before any chunk: no answer, an error
//! status (its body classified), or a successful answer that is not an event stream.

use std::time::Duration;

use dsh_llm::{FailureCode, LlmFailure};
use reqwest::header::{CONTENT_TYPE, HeaderMap};
use tokio_util::sync::CancellationToken;

use crate::driver::ErrorClassifier;
use crate::request_log::RequestLog;
use crate::secret::Secret;

/// How much of an error response (or of a JSON document answering a streaming request) is
/// read. Provider error objects take a few hundred bytes; beyond this a proxy's HTML page or a
/// runaway body is cut off, so it can neither exhaust memory nor keep the request open.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// What the steps before the event stream need of one request.
pub(crate) struct Exchange<'a> {
    pub(crate) endpoint: &'a str,
    pub(crate) key: Option<&'a Secret>,
    pub(crate) idle: Duration,
    pub(crate) cancel: &'a CancellationToken,
    pub(crate) log: &'a RequestLog,
}

/// A successful answer.
pub(crate) enum Answer {
    /// The head says an event stream follows.
    Stream(reqwest::Response),
    /// One JSON document (its start) instead of an event stream.
    Document(Vec<u8>),
}

impl Exchange<'_> {
    /// Sends `request` and reads the response head (and the body of an error or a JSON
    /// document). Every failure is redacted and logged (a cancel is not logged: nothing
    /// failed); `classify` is taken by value so the future stays `Send`.
    pub(crate) async fn send(
        &self,
        request: reqwest::RequestBuilder,
        classify: ErrorClassifier,
    ) -> Result<Answer, LlmFailure> {
        let response = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => return Err(aborted()),
            sent = tokio::time::timeout(self.idle, request.send()) => match sent {
                Err(_) => {
                    return Err(self.failed(LlmFailure::new(
                        FailureCode::Timeout,
                        format!(
                            "no data from {} for {} s while waiting for the response",
                            self.endpoint,
                            self.idle.as_secs_f64()
                        ),
                    )));
                }
                Ok(Err(e)) => {
                    return Err(self.failed(LlmFailure::new(
                        FailureCode::Transport,
                        format!("could not reach {}: {}", self.endpoint, error_chain(&e)),
                    )));
                }
                Ok(Ok(response)) => response,
            },
        };
        let status = response.status();
        self.log.head(status.as_u16());
        if !status.is_success() {
            let headers = response.headers().clone();
            let body = self.read_body(response).await?;
            return Err(self.failed(classify(status.as_u16(), &headers, &body)));
        }
        if is_json(response.headers()) {
            return Ok(Answer::Document(self.read_body(response).await?));
        }
        Ok(Answer::Stream(response))
    }

    /// The start of a body that is not an event stream, at most [`MAX_ERROR_BODY`] bytes. Each
    /// read is bounded by the idle timeout; a body that stalls, fails or ends early is just
    /// shorter (the status classifies the failure). Dropping the response afterwards closes
    /// the connection.
    async fn read_body(&self, mut response: reqwest::Response) -> Result<Vec<u8>, LlmFailure> {
        let mut body = Vec::new();
        while body.len() < MAX_ERROR_BODY {
            let read = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => return Err(aborted()),
                read = tokio::time::timeout(self.idle, response.chunk()) => read,
            };
            let Ok(Ok(Some(bytes))) = read else { break };
            let room = MAX_ERROR_BODY - body.len();
            body.extend_from_slice(&bytes[..bytes.len().min(room)]);
        }
        self.log.body(&body, self.key);
        Ok(body)
    }

    /// `failure`, redacted and logged.
    pub(crate) fn failed(&self, failure: LlmFailure) -> LlmFailure {
        let failure = redact(self.key, failure);
        self.log.failed(&failure);
        failure
    }
}

/// Whether a response declares itself a JSON document (rather than an event stream).
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("application/json")
        })
}

/// The failure for a successful answer that is one JSON document instead of an event stream.
pub(crate) fn not_streamed(endpoint: &str) -> LlmFailure {
    LlmFailure::new(
        FailureCode::MalformedResponse,
        format!(
            "{endpoint} answered with one JSON document instead of an event stream: the server \
             did not stream; check the base URL"
        ),
    )
}

/// Removes the key from a failure message: providers and proxies echo keys in error bodies,
/// and transport errors quote request details; nothing the user sees may contain it.
pub(crate) fn redact(key: Option<&Secret>, mut failure: LlmFailure) -> LlmFailure {
    if let Some(key) = key.map(Secret::expose).filter(|k| !k.is_empty()) {
        failure.message = failure.message.replace(key, "***");
    }
    failure
}

/// The failure of a cancelled request.
pub(crate) fn aborted() -> LlmFailure {
    LlmFailure::new(FailureCode::Aborted, "the request was cancelled")
}

/// `e` and its causes, joined with `: `.
pub(crate) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
