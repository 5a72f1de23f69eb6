//! The adapter: one `POST /v1/messages` per `stream` call, read incrementally.

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
use dsh_llm_openai::Secret;
use dsh_llm_openai::sse::{SseEvent, SseParser};
use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use tokio_util::sync::CancellationToken;

use crate::config::{ANTHROPIC_VERSION, AnthropicConfig};
use crate::errors::failure_from_response;
use crate::request::build_body;
use crate::translate::Translator;

/// An Anthropic Messages adapter for one route.
///
/// Each `stream` call makes exactly one streaming request and reads the SSE body as it
/// arrives. Every read is bounded by the idle timeout; cancelling the options' token ends the
/// stream `ABORTED` and drops the connection at once. The key travels only in the `x-api-key`
/// header (marked sensitive) and is redacted from every failure message.
#[derive(Clone)]
pub struct AnthropicAdapter {
    inner: Arc<Inner>,
}

struct Inner {
    config: AnthropicConfig,
    endpoint: String,
    client: reqwest::Client,
}

impl std::fmt::Debug for AnthropicAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicAdapter")
            .field("route", &self.inner.config.route)
            .field("endpoint", &self.inner.endpoint)
            .field("api_key", &self.inner.config.api_key)
            .finish_non_exhaustive()
    }
}

impl AnthropicAdapter {
    /// An adapter for `config`. Fails when the base URL is not an absolute http(s) URL, or
    /// carries credentials, a query or a fragment (it is quoted in failures, where a key must
    /// never appear).
    pub fn new(config: AnthropicConfig) -> Result<Self, LlmError> {
        let base = config.base_url.trim().trim_end_matches('/');
        let invalid = |why: String| {
            LlmError::new(
                FailureCode::InvalidRequest,
                format!("the base URL of route `{}` {why}", config.route),
            )
        };
        let url = reqwest::Url::parse(base).map_err(|e| invalid(format!("is invalid: {e}")))?;
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
        let endpoint = if base.ends_with("/v1") {
            format!("{base}/messages")
        } else {
            format!("{base}/v1/messages")
        };
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

    /// The route name this adapter serves.
    pub fn route(&self) -> &str {
        &self.inner.config.route
    }

    /// The full Messages URL requests go to.
    pub fn endpoint(&self) -> &str {
        &self.inner.endpoint
    }

    /// Registers this adapter with `llm` under its route.
    pub fn register(&self, llm: &Llm) -> Result<AdapterRegistration, LlmError> {
        llm.register_adapter(&[self.route()], Arc::new(self.clone()))
    }
}

#[async_trait]
impl Adapter for AnthropicAdapter {
    fn retry_policy(&self, _provider: &str) -> Option<RetryPolicy> {
        self.inner.config.retry_policy.clone()
    }

    fn list_models(&self, _provider: &str) -> Vec<ModelInfo> {
        self.inner.config.models.clone()
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

struct Running {
    body: BoxStream<'static, reqwest::Result<Bytes>>,
    parser: SseParser,
    translator: Translator,
    events: Vec<SseEvent>,
    pending: VecDeque<StreamChunk>,
    failure: Option<LlmFailure>,
    received: u64,
    max_received: u64,
    cancel: CancellationToken,
    idle: Duration,
    endpoint: String,
    key: Option<Secret>,
}

fn redact(key: Option<&Secret>, mut failure: LlmFailure) -> LlmFailure {
    if let Some(key) = key.map(Secret::expose).filter(|k| !k.is_empty()) {
        failure.message = failure.message.replace(key, "***");
    }
    failure
}

fn aborted() -> LlmFailure {
    LlmFailure::new(FailureCode::Aborted, "the request was cancelled")
}

/// How much of an error body is read (an error object is a few hundred bytes).
const MAX_ERROR_BODY: usize = 64 * 1024;

impl Inner {
    async fn open(&self, options: GenerateOptions) -> Result<Box<Running>, LlmFailure> {
        let key = self.config.api_key.resolve()?;
        let model = self.config.model_info(&options.config.model);
        let body = build_body(&self.config, &model, &options)?;
        let mut request = self
            .client
            .post(&self.endpoint)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "text/event-stream")
            .header("anthropic-version", ANTHROPIC_VERSION)
            .body(body);
        if let Some(key) = &key {
            let mut value = HeaderValue::from_str(key.expose()).map_err(|_| {
                LlmFailure::new(
                    FailureCode::InvalidCredential,
                    "the API key cannot be sent in an HTTP header",
                )
            })?;
            value.set_sensitive(true);
            request = request.header("x-api-key", value);
        }
        let cancel = options.cancel.clone();
        let idle = self.config.idle_timeout;
        let response = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(aborted()),
            sent = tokio::time::timeout(idle, request.send()) => match sent {
                Err(_) => return Err(LlmFailure::new(
                    FailureCode::Timeout,
                    format!("no data from {} for {} s while waiting for the response",
                        self.endpoint, idle.as_secs_f64()),
                )),
                Ok(Err(e)) => {
                    let failure = LlmFailure::new(
                        FailureCode::Transport,
                        format!("could not reach {}: {}", self.endpoint, error_chain(&e)),
                    );
                    return Err(redact(key.as_ref(), failure));
                }
                Ok(Ok(response)) => response,
            },
        };
        let status = response.status();
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
            let failure = failure_from_response(status.as_u16(), &headers, &body);
            return Err(redact(key.as_ref(), failure));
        }
        Ok(Box::new(Running {
            body: response.bytes_stream().boxed(),
            parser: SseParser::new(),
            translator: Translator::new(),
            events: Vec::new(),
            pending: VecDeque::new(),
            failure: None,
            received: 0,
            max_received: self.config.max_response_bytes,
            cancel,
            idle,
            endpoint: self.endpoint.clone(),
            key,
        }))
    }
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
    async fn next_item(mut self: Box<Self>) -> Option<(Item, State)> {
        loop {
            if let Some(chunk) = self.pending.pop_front() {
                let next = if matches!(chunk, StreamChunk::Finish { .. }) {
                    State::Done
                } else {
                    State::Streaming(self)
                };
                return Some((Ok(chunk), next));
            }
            if let Some(failure) = self.failure.take() {
                return Some((Err(redact(self.key.as_ref(), failure)), State::Done));
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
            return Some((Err(redact(self.key.as_ref(), failure)), State::Done));
        }
    }

    fn consume(&mut self, bytes: &[u8]) {
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
        let mut events = std::mem::take(&mut self.events);
        if let Err(e) = self.parser.feed(bytes, &mut events) {
            self.failure = Some(LlmFailure::new(
                FailureCode::MalformedResponse,
                format!("the event stream from {} is malformed: {e}", self.endpoint),
            ));
        }
        for event in events.drain(..) {
            if let Err(failure) = self.translator.on_event(&event.data, &mut self.pending) {
                self.failure = Some(failure);
                break;
            }
            if self.translator.is_done() {
                break;
            }
        }
        self.events = events;
    }
}
