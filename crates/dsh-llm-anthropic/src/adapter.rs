//! The adapter: one `POST /v1/messages` per `stream` call, read incrementally.

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
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap};
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
        let path = if base.ends_with("/v1") {
            "/messages"
        } else {
            "/v1/messages"
        };
        let endpoint = endpoint_url(&config.route, base, path)?;
        let client = http_client()?;
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
        stream_prepared(self.inner.request(&options), Translator::new())
    }
}

impl WireTranslator for Translator {
    fn on_event(
        &mut self,
        data: &str,
        out: &mut VecDeque<StreamChunk>,
    ) -> Result<bool, LlmFailure> {
        Translator::on_event(self, data, out)?;
        Ok(self.is_done())
    }

    fn ended_early(&self) -> LlmFailure {
        Translator::ended_early(self)
    }
}

fn classify(status: u16, headers: &HeaderMap, body: &[u8]) -> LlmFailure {
    failure_from_response(status, headers, body)
}

impl Inner {
    /// Prepares the request; everything refusable is refused here, before any I/O.
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
            .header("anthropic-version", ANTHROPIC_VERSION)
            .body(body);
        if let Some(key) = &key {
            request = request.header("x-api-key", key_header("", key)?);
        }
        Ok(SseRequest {
            request,
            endpoint: self.endpoint.clone(),
            key,
            idle: self.config.idle_timeout,
            max_bytes: self.config.max_response_bytes,
            cancel: options.cancel.clone(),
            classify: Box::new(classify),
            log,
        })
    }
}
