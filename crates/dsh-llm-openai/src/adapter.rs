//! The adapter: one HTTP request per `stream` call, read incrementally.

use std::collections::VecDeque;
use std::sync::Arc;

use async_trait::async_trait;
use dsh_llm::retry::RetryPolicy;
use dsh_llm::{
    Adapter, AdapterRegistration, ChunkStream, GenerateOptions, Llm, LlmError, LlmFailure,
    ModelInfo, StreamChunk,
};
use dsh_llm_http::{
    RequestLog, SseRequest, WireTranslator, endpoint_url, http_client, key_header, stream_prepared,
};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use tokio_util::sync::CancellationToken;

use crate::config::OpenAiAdapterConfig;
use crate::http_error::failure_from_response;
use crate::request::build_body;
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
        let endpoint = endpoint_url(&config.route, &config.base_url, "/chat/completions")?;
        Ok(Self {
            inner: Arc::new(Inner {
                endpoint,
                client: http_client()?,
                config,
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
        stream_prepared(self.inner.request(&options), Translator::new())
    }
}

impl WireTranslator for Translator {
    fn on_event(
        &mut self,
        data: &str,
        out: &mut VecDeque<StreamChunk>,
    ) -> Result<bool, LlmFailure> {
        Translator::on_event(self, data, out).map(|progress| progress == Progress::Done)
    }

    fn ended_early(&self) -> LlmFailure {
        Translator::ended_early(self)
    }
}

impl Inner {
    /// Prepares the request; everything refusable (the key, the body) is refused here, before
    /// any I/O.
    fn request(&self, options: &GenerateOptions) -> Result<SseRequest, LlmFailure> {
        let key = self.config.api_key.resolve()?;
        let model = self.config.model_info(&options.config.model);
        let body = build_body(&self.config, &model, options)?;
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
        let route = self.config.route.clone();
        Ok(SseRequest {
            request,
            endpoint: self.endpoint.clone(),
            key,
            idle: self.config.idle_timeout,
            max_bytes: self.config.max_response_bytes,
            cancel: options.cancel.clone(),
            classify: Box::new(move |status, headers, body| {
                failure_from_response(&route, status, headers, body)
            }),
            log,
        })
    }
}
