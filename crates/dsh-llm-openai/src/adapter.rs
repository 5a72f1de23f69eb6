//! The adapter: one HTTP request per `stream` call, read incrementally.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use dsh_llm::retry::RetryPolicy;
use dsh_llm::{
    Adapter, AdapterRegistration, ChunkStream, FailureCode, GenerateOptions, Llm, LlmError,
    LlmFailure, ModelInfo, StreamChunk, USER_AGENT,
};
use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use tokio_util::sync::CancellationToken;

use crate::config::OpenAiAdapterConfig;
use crate::driver::key_header;
use crate::http_error::failure_from_response;
use crate::request::build_body;
use crate::request_log::RequestLog;
use crate::secret::Secret;
use crate::sse::{SseEvent, SseParser};
use crate::translate::{Progress, Translator};

/// An OpenAI-compatible chat-completions adapter for one route.
///
/// Each `stream` call makes exactly one `POST {base_url}/chat/completions` with
/// `stream: true` and reads the SSE body incrementally. Every read, the response head
/// included, is bounded by the idle timeout (`TIMEOUT`); cancelling the options' token ends
/// the stream with `ABORTED` and drops the connection at once. The API key is sent only in
/// the `authorization` header and is redacted from every failure message.
#[derive(Clone)]
pub struct OpenAiAdapter {
    inner: Arc<Inner>,
}

struct Inner {
    config: OpenAiAdapterConfig,
    endpoint: String,
    client: reqwest::Client,
}

impl std::fmt::Debug for OpenAiAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiAdapter")
            .field("route", &self.inner.config.route)
            .field("endpoint", &self.inner.endpoint)
            .field("api_key", &self.inner.config.api_key)
            .finish_non_exhaustive()
    }
}

impl OpenAiAdapter {
    /// An adapter for `config`. Fails when the base URL is not an absolute http(s) URL, carries
    /// credentials, a query or a fragment, or the HTTP client cannot be built.
    ///
    /// Credentials in the URL are refused because the endpoint is quoted in every transport
    /// failure and in `Debug` output, where a key must never appear; a query or fragment is
    /// refused because `{base_url}/chat/completions` would append the path to it.
    pub fn new(config: OpenAiAdapterConfig) -> Result<Self, LlmError> {
        let base = config.base_url.trim().trim_end_matches('/');
        let invalid = |why: &str| {
            LlmError::new(
                FailureCode::InvalidRequest,
                format!("the base URL of route `{}` {why}", config.route),
            )
        };
        let url = reqwest::Url::parse(base).map_err(|e| {
            // A URL that fails to parse may still hold a key before an `@`; quote it only
            // when it cannot.
            if base.contains('@') {
                invalid(&format!("is invalid: {e}"))
            } else {
                invalid(&format!("`{base}` is invalid: {e}"))
            }
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(invalid("must be an http(s) URL"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(invalid(
                "must not carry credentials; configure the API key instead",
            ));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(invalid("must not have a query or a fragment"));
        }
        let endpoint = format!("{base}/chat/completions");
        let client = reqwest::Client::builder()
            .user_agent(USER_AGENT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| {
                LlmError::new(
                    FailureCode::Transport,
                    format!("the HTTP client could not be built: {e}"),
                )
            })?;
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                endpoint,
                client,
            }),
        })
    }

    /// The DeepSeek route configured from the environment (`DEEPSEEK_BASE_URL`,
    /// `DEEPSEEK_API_KEY`).
    pub fn deepseek_from_env() -> Result<Self, LlmError> {
        Self::new(OpenAiAdapterConfig::deepseek_from_env())
    }

    /// The route name this adapter serves.
    pub fn route(&self) -> &str {
        &self.inner.config.route
    }

    /// The full chat-completions URL requests go to.
    pub fn endpoint(&self) -> &str {
        &self.inner.endpoint
    }

    /// The configuration.
    pub fn config(&self) -> &OpenAiAdapterConfig {
        &self.inner.config
    }

    /// Registers this adapter with `llm` under its route.
    pub fn register(&self, llm: &Llm) -> Result<AdapterRegistration, LlmError> {
        llm.register_adapter(&[self.route()], Arc::new(self.clone()))
    }
}

#[async_trait]
impl Adapter for OpenAiAdapter {
    fn retry_policy(&self, _provider: &str) -> Option<RetryPolicy> {
        self.inner.config.retry_policy.clone()
    }

    fn list_models(&self, _provider: &str) -> Vec<ModelInfo> {
        self.inner.config.model_infos()
    }

    async fn resolve_model(
        &self,
        _provider: &str,
        model: &str,
        _cancel: &CancellationToken,
    ) -> Result<ModelInfo, LlmFailure> {
        Ok(self.inner.config.model_info(model))
    }

    fn stream(&self, options: GenerateOptions) -> ChunkStream {
        let start = State::Start(self.inner.clone(), Box::new(options));
        futures::stream::unfold(start, State::advance).boxed()
    }
}

type Item = Result<StreamChunk, LlmFailure>;

enum State {
    Start(Arc<Inner>, Box<GenerateOptions>),
    Streaming(Box<Running>),
    Done,
}

impl State {
    async fn advance(self) -> Option<(Item, State)> {
        match self {
            State::Done => None,
            State::Start(inner, options) => match inner.open(*options).await {
                Ok(running) => running.next_item().await,
                Err(failure) => Some((Err(failure), State::Done)),
            },
            State::Streaming(running) => running.next_item().await,
        }
    }
}

/// A response being read.
struct Running {
    body: BoxStream<'static, reqwest::Result<Bytes>>,
    parser: SseParser,
    translator: Translator,
    events: Vec<SseEvent>,
    pending: VecDeque<StreamChunk>,
    /// A failure to report once the chunks before it are out.
    failure: Option<LlmFailure>,
    received: u64,
    /// The first non-blank byte of the body (`{` for a JSON document sent without its type).
    first_byte: Option<u8>,
    /// Whether any SSE event arrived.
    saw_event: bool,
    /// [`OpenAiAdapterConfig::max_response_bytes`].
    max_received: u64,
    cancel: CancellationToken,
    idle: Duration,
    endpoint: String,
    key: Option<Secret>,
    log: RequestLog,
}

/// Removes the key from a failure message. Providers and proxies sometimes echo the key in
/// error bodies, and transport errors may quote request details; nothing the user sees may
/// contain it.
fn redact(key: Option<&Secret>, mut failure: LlmFailure) -> LlmFailure {
    if let Some(key) = key.map(Secret::expose).filter(|k| !k.is_empty()) {
        failure.message = failure.message.replace(key, "***");
    }
    failure
}

impl Inner {
    /// Sends the request and reads the response head.
    async fn open(&self, options: GenerateOptions) -> Result<Box<Running>, LlmFailure> {
        let key = self.config.api_key.resolve()?;
        let model = self.config.model_info(&options.config.model);
        let body = build_body(&self.config, &model, &options)?;
        let log = RequestLog::sent(
            &self.config.route,
            &self.endpoint,
            &options.config.model,
            &body,
            key.as_ref(),
        );
        let mut request = self
            .client
            .post(&self.endpoint)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "text/event-stream")
            .body(body);
        if let Some(key) = &key {
            request = request.header(AUTHORIZATION, key_header("Bearer ", key)?);
        }
        if let Some(session) = &options.session_id
            && let Ok(value) = HeaderValue::from_str(session.as_str())
        {
            request = request.header("x-dsh-session-id", value);
        }
        let cancel = options.cancel.clone();
        let idle = self.config.idle_timeout;
        let response = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(aborted()),
            sent = tokio::time::timeout(idle, request.send()) => match sent {
                Err(_) => {
                    let failure = self.timeout(idle, "waiting for the response");
                    log.failed(&failure);
                    return Err(failure);
                }
                Ok(Err(e)) => {
                    let failure = LlmFailure::new(
                        FailureCode::Transport,
                        format!("could not reach {}: {}", self.endpoint, error_chain(&e)),
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
            let body = read_error_body(response, idle, &cancel).await?;
            log.body(&body, key.as_ref());
            let failure =
                failure_from_response(&self.config.route, status.as_u16(), &headers, &body);
            let failure = redact(key.as_ref(), failure);
            log.failed(&failure);
            return Err(failure);
        }
        if is_json(response.headers()) {
            let body = read_error_body(response, idle, &cancel).await?;
            return Err(redact(key.as_ref(), self.not_streamed(&body)));
        }
        Ok(Box::new(Running {
            body: response.bytes_stream().boxed(),
            parser: SseParser::new(),
            translator: Translator::new(),
            events: Vec::new(),
            pending: VecDeque::new(),
            failure: None,
            received: 0,
            first_byte: None,
            saw_event: false,
            max_received: self.config.max_response_bytes,
            cancel,
            idle,
            endpoint: self.endpoint.clone(),
            key,
            log,
        }))
    }

    /// The failure for a successful answer that is one JSON document instead of an event
    /// stream: an `{error: …}` object is classified as such; anything else means the server
    /// ignored `stream: true` or is not a chat-completions endpoint at all.
    fn not_streamed(&self, body: &[u8]) -> LlmFailure {
        let text = String::from_utf8_lossy(body);
        match Translator::new().on_event(&text, &mut Vec::new()) {
            Err(failure) if failure.code != FailureCode::MalformedResponse => failure,
            _ => not_streamed(&self.endpoint),
        }
    }

    fn timeout(&self, idle: Duration, what: &str) -> LlmFailure {
        LlmFailure::new(
            FailureCode::Timeout,
            format!(
                "no data from {} for {} s while {what}",
                self.endpoint,
                idle.as_secs_f64()
            ),
        )
    }
}

/// Whether a response declares itself a JSON document (rather than an event stream).
fn is_json(headers: &reqwest::header::HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("application/json")
        })
}

fn not_streamed(endpoint: &str) -> LlmFailure {
    LlmFailure::new(
        FailureCode::MalformedResponse,
        format!(
            "{endpoint} answered with one JSON document instead of an event stream: the server \
             did not stream; check the base URL"
        ),
    )
}

/// How much of an error response is read. Provider error objects take a few hundred bytes;
/// beyond this a proxy's HTML page or a runaway body is cut off, so it can neither exhaust
/// memory nor keep the request open.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// The start of an error response's body, at most [`MAX_ERROR_BODY`] bytes. Each read is
/// bounded by the idle timeout; a body that stalls, fails or ends early is just shorter (the
/// status classifies the failure). Dropping the response afterwards closes the connection.
async fn read_error_body(
    mut response: reqwest::Response,
    idle: Duration,
    cancel: &CancellationToken,
) -> Result<Vec<u8>, LlmFailure> {
    let mut body = Vec::new();
    while body.len() < MAX_ERROR_BODY {
        let read = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(aborted()),
            read = tokio::time::timeout(idle, response.chunk()) => read,
        };
        let Ok(Ok(Some(bytes))) = read else {
            break;
        };
        let room = MAX_ERROR_BODY - body.len();
        body.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }
    Ok(body)
}

fn aborted() -> LlmFailure {
    LlmFailure::new(FailureCode::Aborted, "the request was cancelled")
}

/// `e` and its causes, joined with `: `.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
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

impl Running {
    /// The next item: a translated chunk, or the failure that ends the stream. Dropping
    /// `self` (on finish or failure) drops the connection.
    async fn next_item(mut self: Box<Self>) -> Option<(Item, State)> {
        loop {
            if let Some(chunk) = self.pending.pop_front() {
                self.log.chunk(&chunk, self.received);
                let last = matches!(chunk, StreamChunk::Finish { .. });
                let next = if last {
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
            match read {
                Err(_) => {
                    let failure = LlmFailure::new(
                        FailureCode::Timeout,
                        format!(
                            "no data from {} for {} s while streaming",
                            self.endpoint,
                            self.idle.as_secs_f64()
                        ),
                    );
                    return self.fail(failure);
                }
                Ok(None) => {
                    let failure = if self.received == 0 {
                        LlmFailure::new(
                            FailureCode::EmptyResponse,
                            format!("{} answered with an empty body", self.endpoint),
                        )
                    } else if !self.saw_event && self.first_byte == Some(b'{') {
                        not_streamed(&self.endpoint)
                    } else {
                        self.translator.ended_early()
                    };
                    return self.fail(failure);
                }
                Ok(Some(Err(e))) => {
                    let failure = LlmFailure::new(
                        FailureCode::Transport,
                        format!(
                            "the connection to {} failed mid-stream: {}",
                            self.endpoint,
                            error_chain(&e)
                        ),
                    );
                    return self.fail(failure);
                }
                Ok(Some(Ok(bytes))) => self.consume(&bytes),
            }
        }
    }

    /// Parses and translates one read's worth of bytes into `pending` (or `failure`).
    fn consume(&mut self, bytes: &[u8]) {
        self.log.body(bytes, self.key.as_ref());
        self.received = self.received.saturating_add(bytes.len() as u64);
        if self.received > self.max_received {
            self.failure = Some(LlmFailure::new(
                FailureCode::MalformedResponse,
                format!(
                    "the response from {} exceeded {} bytes",
                    self.endpoint, self.max_received
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
                Ok(Progress::Continue) => {}
                Ok(Progress::Done) => break,
                Err(failure) => {
                    self.failure = Some(failure);
                    break;
                }
            }
        }
        self.events = events;
    }

    fn redact(&self, failure: LlmFailure) -> LlmFailure {
        redact(self.key.as_ref(), failure)
    }

    /// Ends the stream with `failure`, redacted and logged.
    fn fail(&self, failure: LlmFailure) -> Option<(Item, State)> {
        let failure = self.redact(failure);
        self.log.failed(&failure);
        Some((Err(failure), State::Done))
    }
}
