//! The Responses route: one `POST {base_url}/responses` per `stream` call.

use std::sync::Arc;

use async_trait::async_trait;
use dsh_llm::retry::RetryPolicy;
use dsh_llm::{
    Adapter, AdapterRegistration, ChunkStream, GenerateOptions, Llm, LlmError, LlmFailure,
    ModelInfo,
};
use dsh_llm_http::{
    RequestLog, SseRequest, endpoint_url, http_client, key_header, stream_prepared,
};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use tokio_util::sync::CancellationToken;

use crate::config::OpenAiAdapterConfig;
use crate::http_error::failure_from_response;
use crate::responses::{ResponsesTranslator, build_body};

/// OpenAI's main models (their windows, output ceilings, efforts and prices are the model
/// catalog's `openai` rows): the ids a `kind = "openai-responses"` provider lists.
pub fn openai_models() -> Vec<String> {
    dsh_llm::ModelCatalog::family("openai")
        .map(|row| row.id.to_owned())
        .collect()
}

/// An adapter for OpenAI's Responses API (`kind = "openai-responses"`).
///
/// It takes the same configuration as the chat-completions adapter (route, base URL, key,
/// catalog, timeouts); requests ask for `store: false` and the encrypted reasoning content, so
/// reasoning is carried across the steps of a tool loop without server-side state.
#[derive(Clone)]
pub struct ResponsesAdapter {
    inner: Arc<Inner>,
}

struct Inner {
    config: OpenAiAdapterConfig,
    endpoint: String,
    client: reqwest::Client,
}

impl std::fmt::Debug for ResponsesAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponsesAdapter")
            .field("route", &self.inner.config.route)
            .field("endpoint", &self.inner.endpoint)
            .field("api_key", &self.inner.config.api_key)
            .finish_non_exhaustive()
    }
}

impl ResponsesAdapter {
    /// An adapter for `config`; the base URL is checked as for chat completions.
    pub fn new(config: OpenAiAdapterConfig) -> Result<Self, LlmError> {
        let endpoint = endpoint_url(&config.route, &config.base_url, "/responses")?;
        Ok(Self {
            inner: Arc::new(Inner {
                endpoint,
                client: http_client()?,
                config,
            }),
        })
    }

    /// The full Responses URL requests go to.
    pub fn endpoint(&self) -> &str {
        &self.inner.endpoint
    }

    /// Registers this adapter with `llm` under its route.
    pub fn register(&self, llm: &Llm) -> Result<AdapterRegistration, LlmError> {
        llm.register_adapter(&[self.inner.config.route.as_str()], Arc::new(self.clone()))
    }
}

impl Inner {
    fn request(&self, options: &GenerateOptions) -> Result<SseRequest, LlmFailure> {
        let key = self.config.api_key.resolve()?;
        let model = self.config.model_info(&options.config.model);
        let body = build_body(&model, options)?;
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

#[async_trait]
impl Adapter for ResponsesAdapter {
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
        stream_prepared(self.inner.request(&options), ResponsesTranslator::new())
    }
}
