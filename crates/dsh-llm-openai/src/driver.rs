//! One streaming HTTP request read as server-sent events: the part every HTTP wire format
//! shares (send, bound every read by the idle timeout, stop at once on cancel, cap the size,
//! keep the key out of every message). What differs per format is the [`WireTranslator`]
//! that turns event payloads into chunks and the classifier of error responses.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use dsh_llm::{ChunkStream, FailureCode, LlmFailure, StreamChunk};
use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::header::{HeaderMap, HeaderValue};
use tokio_util::sync::CancellationToken;

use crate::request_log::RequestLog;
use crate::secret::Secret;
use crate::sse::{SseEvent, SseParser};

/// Turns one wire format's event payloads into dsh stream chunks.
pub trait WireTranslator: Send + 'static {
    /// Handles one event's data; `Ok(true)` once the terminal event arrived (the finish
    /// chunk is then in `out`).
    fn on_event(&mut self, data: &str, out: &mut VecDeque<StreamChunk>)
    -> Result<bool, LlmFailure>;

    /// The failure for a body that ended before the terminal event.
    fn ended_early(&self) -> LlmFailure;
}

/// Classifies a non-2xx response from its status, headers and (the start of) its body.
pub type ErrorClassifier = Box<dyn Fn(u16, &HeaderMap, &[u8]) -> LlmFailure + Send>;

/// One request to stream.
pub struct SseRequest {
    /// The prepared request (headers and body set).
    pub request: reqwest::RequestBuilder,
    /// Quoted in failures.
    pub endpoint: String,
    /// Redacted from every failure message.
    pub key: Option<Secret>,
    /// Longest wait for any read.
    pub idle: Duration,
    /// Most bytes the response may take.
    pub max_bytes: u64,
    /// Ends the stream `ABORTED` and drops the connection.
    pub cancel: CancellationToken,
    /// How error responses are classified.
    pub classify: ErrorClassifier,
    /// The request's diagnostics (`DSH_LOG=debug`), started when the body was built.
    pub log: RequestLog,
}

/// Streams `request`, translating its events with `translator`. Exactly one terminal item
/// ends the stream: the translator's finish, or one failure.
pub fn stream_sse<T: WireTranslator>(request: SseRequest, translator: T) -> ChunkStream {
    futures::stream::unfold(
        State::Start(Box::new((request, translator))),
        State::advance,
    )
    .boxed()
}

type Item = Result<StreamChunk, LlmFailure>;

enum State<T> {
    Start(Box<(SseRequest, T)>),
    Streaming(Box<Running<T>>),
    Done,
}

impl<T: WireTranslator> State<T> {
    async fn advance(self) -> Option<(Item, State<T>)> {
        match self {
            State::Done => None,
            State::Start(start) => {
                let (request, translator) = *start;
                match open(request, translator).await {
                    Ok(running) => running.next_item().await,
                    Err(failure) => Some((Err(failure), State::Done)),
                }
            }
            State::Streaming(running) => running.next_item().await,
        }
    }
}

struct Running<T> {
    body: BoxStream<'static, reqwest::Result<Bytes>>,
    parser: SseParser,
    translator: T,
    events: Vec<SseEvent>,
    pending: VecDeque<StreamChunk>,
    failure: Option<LlmFailure>,
    received: u64,
    max_bytes: u64,
    cancel: CancellationToken,
    idle: Duration,
    endpoint: String,
    key: Option<Secret>,
    log: RequestLog,
}

/// `{base_url}{path}` for a route, refusing a base URL that is not an absolute http(s) URL or
/// that carries credentials, a query or a fragment: the endpoint is quoted in every transport
/// failure, where a key must never appear, and a query would swallow the path.
pub fn endpoint_url(route: &str, base_url: &str, path: &str) -> Result<String, dsh_llm::LlmError> {
    let base = base_url.trim().trim_end_matches('/');
    let invalid = |why: String| {
        dsh_llm::LlmError::new(
            FailureCode::InvalidRequest,
            format!("the base URL of route `{route}` {why}"),
        )
    };
    let url = reqwest::Url::parse(base).map_err(|e| {
        if base.contains('@') {
            invalid(format!("is invalid: {e}"))
        } else {
            invalid(format!("`{base}` is invalid: {e}"))
        }
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid("must be an http(s) URL".into()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid(
            "must not carry credentials; configure the API key instead".into(),
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(invalid("must not have a query or a fragment".into()));
    }
    Ok(format!("{base}{path}"))
}

/// An HTTP client for streaming: dsh's user agent, no redirects (a redirect could carry the
/// key to another host).
pub fn http_client() -> Result<reqwest::Client, dsh_llm::LlmError> {
    reqwest::Client::builder()
        .user_agent(dsh_llm::USER_AGENT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| {
            dsh_llm::LlmError::new(
                FailureCode::Transport,
                format!("the HTTP client could not be built: {e}"),
            )
        })
}

/// `key` as a header value after `prefix` (`"Bearer "`, or `""` for `x-api-key`), marked
/// sensitive so no `Debug` output of the request shows it. A key that cannot be a header value
/// is an invalid credential, refused before any I/O.
pub fn key_header(prefix: &str, key: &Secret) -> Result<HeaderValue, LlmFailure> {
    let mut value = HeaderValue::from_str(&format!("{prefix}{}", key.expose())).map_err(|_| {
        LlmFailure::new(
            FailureCode::InvalidCredential,
            "the API key cannot be sent in an HTTP header",
        )
    })?;
    value.set_sensitive(true);
    Ok(value)
}

/// Removes the key from a failure message: providers echo keys in error bodies, and
/// transport errors quote request details.
pub(crate) fn redact(key: Option<&Secret>, mut failure: LlmFailure) -> LlmFailure {
    if let Some(key) = key.map(Secret::expose).filter(|k| !k.is_empty()) {
        failure.message = failure.message.replace(key, "***");
    }
    failure
}

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

/// How much of an error response is read: provider error objects take a few hundred bytes;
/// beyond this a proxy's page is cut off.
const MAX_ERROR_BODY: usize = 64 * 1024;

async fn open<T: WireTranslator>(
    request: SseRequest,
    translator: T,
) -> Result<Box<Running<T>>, LlmFailure> {
    let SseRequest {
        request,
        endpoint,
        key,
        idle,
        max_bytes,
        cancel,
        classify,
        log,
    } = request;
    let response = tokio::select! {
        biased;
        _ = cancel.cancelled() => return Err(aborted()),
        sent = tokio::time::timeout(idle, request.send()) => match sent {
            Err(_) => {
                let failure = LlmFailure::new(
                    FailureCode::Timeout,
                    format!("no data from {endpoint} for {} s while waiting for the response",
                        idle.as_secs_f64()),
                );
                log.failed(&failure);
                return Err(failure);
            }
            Ok(Err(e)) => {
                let failure = LlmFailure::new(
                    FailureCode::Transport,
                    format!("could not reach {endpoint}: {}", error_chain(&e)),
                );
                let failure = redact(key.as_ref(), failure);
                log.failed(&failure);
                return Err(failure);
            }
            Ok(Ok(response)) => response,
        },
    };
    let status = response.status();
    log.head(status.as_u16());
    if !status.is_success() {
        let headers = response.headers().clone();
        let mut response = response;
        let mut body = Vec::new();
        while body.len() < MAX_ERROR_BODY {
            let read = tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(aborted()),
                read = tokio::time::timeout(idle, response.chunk()) => read,
            };
            let Ok(Ok(Some(bytes))) = read else { break };
            let room = MAX_ERROR_BODY - body.len();
            body.extend_from_slice(&bytes[..bytes.len().min(room)]);
        }
        log.body(&body, key.as_ref());
        let failure = redact(key.as_ref(), classify(status.as_u16(), &headers, &body));
        log.failed(&failure);
        return Err(failure);
    }
    Ok(Box::new(Running {
        body: response.bytes_stream().boxed(),
        parser: SseParser::new(),
        translator,
        events: Vec::new(),
        pending: VecDeque::new(),
        failure: None,
        received: 0,
        max_bytes,
        cancel,
        idle,
        endpoint,
        key,
        log,
    }))
}

impl<T: WireTranslator> Running<T> {
    async fn next_item(mut self: Box<Self>) -> Option<(Item, State<T>)> {
        loop {
            if let Some(chunk) = self.pending.pop_front() {
                self.log.chunk(&chunk, self.received);
                let next = if matches!(chunk, StreamChunk::Finish { .. }) {
                    State::Done
                } else {
                    State::Streaming(self)
                };
                return Some((Ok(chunk), next));
            }
            if let Some(failure) = self.failure.take() {
                return self.fail(failure);
            }
            let read = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => return Some((Err(aborted()), State::Done)),
                read = tokio::time::timeout(self.idle, self.body.next()) => read,
            };
            let failure = match read {
                Err(_) => LlmFailure::new(
                    FailureCode::Timeout,
                    format!(
                        "no data from {} for {} s while streaming",
                        self.endpoint,
                        self.idle.as_secs_f64()
                    ),
                ),
                Ok(None) if self.received == 0 => LlmFailure::new(
                    FailureCode::EmptyResponse,
                    format!("{} answered with an empty body", self.endpoint),
                ),
                Ok(None) => self.translator.ended_early(),
                Ok(Some(Err(e))) => LlmFailure::new(
                    FailureCode::Transport,
                    format!(
                        "the connection to {} failed mid-stream: {}",
                        self.endpoint,
                        error_chain(&e)
                    ),
                ),
                Ok(Some(Ok(bytes))) => {
                    self.consume(&bytes);
                    continue;
                }
            };
            return self.fail(failure);
        }
    }

    /// Ends the stream with `failure`, redacted and logged.
    fn fail(&self, failure: LlmFailure) -> Option<(Item, State<T>)> {
        let failure = redact(self.key.as_ref(), failure);
        self.log.failed(&failure);
        Some((Err(failure), State::Done))
    }

    fn consume(&mut self, bytes: &[u8]) {
        self.log.body(bytes, self.key.as_ref());
        self.received = self.received.saturating_add(bytes.len() as u64);
        if self.received > self.max_bytes {
            self.failure = Some(LlmFailure::new(
                FailureCode::MalformedResponse,
                format!(
                    "the response from {} exceeded {} bytes",
                    self.endpoint, self.max_bytes
                ),
            ));
            return;
        }
        let mut events = std::mem::take(&mut self.events);
        if let Err(e) = self.parser.feed(bytes, &mut events) {
            self.failure = Some(LlmFailure::new(
                FailureCode::MalformedResponse,
                format!("the event stream from {} is malformed: {e}", self.endpoint),
            ));
        }
        for event in events.drain(..) {
            match self.translator.on_event(&event.data, &mut self.pending) {
                Ok(false) => {}
                Ok(true) => break,
                Err(failure) => {
                    self.failure = Some(failure);
                    break;
                }
            }
        }
        self.events = events;
    }
}
