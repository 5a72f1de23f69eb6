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
use reqwest::header::HeaderMap;
use tokio_util::sync::CancellationToken;

use crate::exchange::{Answer, Exchange, aborted, error_chain, not_streamed, redact};
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

/// [`stream_sse`] for a request that may have been refused while it was prepared (no key, a
/// body the format cannot express): the refusal becomes the stream's one failure, before any
/// I/O. Adapters prepare synchronously in `Adapter::stream` and hand the result here.
pub fn stream_prepared<T: WireTranslator>(
    prepared: Result<SseRequest, LlmFailure>,
    translator: T,
) -> ChunkStream {
    match prepared {
        Ok(request) => stream_sse(request, translator),
        Err(failure) => futures::stream::iter([Err(failure)]).boxed(),
    }
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
    /// The first non-blank byte of the body (`{` for a JSON document sent without its type).
    first_byte: Option<u8>,
    /// Whether any event arrived.
    saw_event: bool,
    max_bytes: u64,
    cancel: CancellationToken,
    idle: Duration,
    endpoint: String,
    key: Option<Secret>,
    log: RequestLog,
}

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
    let exchange = Exchange {
        endpoint: &endpoint,
        key: key.as_ref(),
        idle,
        cancel: &cancel,
        log: &log,
    };
    let response = match exchange.send(request, classify).await? {
        Answer::Stream(response) => response,
        Answer::Document(body) => {
            let failure = document_failure(translator, &body, &endpoint);
            return Err(exchange.failed(failure));
        }
    };
    Ok(Box::new(Running {
        body: response.bytes_stream().boxed(),
        parser: SseParser::new(),
        translator,
        events: Vec::new(),
        pending: VecDeque::new(),
        failure: None,
        received: 0,
        first_byte: None,
        saw_event: false,
        max_bytes,
        cancel,
        idle,
        endpoint,
        key,
        log,
    }))
}

/// The failure for a successful answer that is one JSON document instead of an event stream:
/// servers that ignore `stream: true`, and base URLs that reach some other JSON API, answer
/// this way, and reading the body as events would only say "ended early". The document is
/// given to the (still fresh) translator as one event, so a format's error object sent with
/// status 200 is reported as the error it is; anything else says the server did not stream.
fn document_failure<T: WireTranslator>(
    mut translator: T,
    body: &[u8],
    endpoint: &str,
) -> LlmFailure {
    let document = String::from_utf8_lossy(body);
    match translator.on_event(&document, &mut VecDeque::new()) {
        Err(failure) if failure.code != FailureCode::MalformedResponse => failure,
        _ => not_streamed(endpoint),
    }
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
                Ok(None) if !self.saw_event && self.first_byte == Some(b'{') => {
                    not_streamed(&self.endpoint)
                }
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
        if self.first_byte.is_none() {
            self.first_byte = bytes.iter().copied().find(|b| !b.is_ascii_whitespace());
        }
        let mut events = std::mem::take(&mut self.events);
        if let Err(e) = self.parser.feed(bytes, &mut events) {
            self.failure = Some(LlmFailure::new(
                FailureCode::MalformedResponse,
                format!("the event stream from {} is malformed: {e}", self.endpoint),
            ));
        }
        self.saw_event |= !events.is_empty();
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
