//! The provider adapter, registered at once and built in the background.
//!
//! Building an adapter's HTTP client reads and parses every system root certificate:
//! several milliseconds, more than everything else dsh does before its first request. Nothing
//! needs the client until that request, so [`LazyAdapter`] registers the route immediately
//! (its metadata comes from the configuration alone) and builds the client on a blocking
//! thread while the agent is created and its session made durable. The first `stream` waits
//! for the build; later ones find it done.

use std::sync::Arc;

use async_trait::async_trait;
use dsh_llm::LlmError;
use dsh_llm::retry::RetryPolicy;
use dsh_llm::{Adapter, ChunkStream, FailureCode, GenerateOptions, LlmFailure, ModelInfo};
use dsh_llm_anthropic::{AnthropicAdapter, AnthropicConfig};
use dsh_llm_openai::{OpenAiAdapter, OpenAiAdapterConfig, ResponsesAdapter};
use futures::future::{BoxFuture, Shared};
use futures::{FutureExt, StreamExt};
use tokio_util::sync::CancellationToken;

type Built = Result<Arc<dyn Adapter>, LlmFailure>;

/// The blocking build of an adapter, as a future of its join.
type Building =
    BoxFuture<'static, Result<Result<Arc<dyn Adapter>, LlmError>, tokio::task::JoinError>>;

/// The configuration of one provider route, in the wire format it speaks.
#[derive(Clone, Debug)]
pub enum ProviderConfig {
    /// OpenAI-compatible chat completions (DeepSeek, OpenAI, local servers).
    OpenAi(OpenAiAdapterConfig),
    /// Anthropic Messages.
    Anthropic(AnthropicConfig),
    /// OpenAI Responses (same settings as chat completions, another wire format).
    Responses(OpenAiAdapterConfig),
}

impl ProviderConfig {
    fn retry_policy(&self) -> Option<RetryPolicy> {
        match self {
            Self::OpenAi(c) | Self::Responses(c) => c.retry_policy.clone(),
            Self::Anthropic(c) => c.retry_policy.clone(),
        }
    }

    fn model_infos(&self) -> Vec<ModelInfo> {
        match self {
            Self::OpenAi(c) | Self::Responses(c) => c.model_infos(),
            Self::Anthropic(c) => c.models.clone(),
        }
    }

    fn model_info(&self, model: &str) -> ModelInfo {
        match self {
            Self::OpenAi(c) | Self::Responses(c) => c.model_info(model),
            Self::Anthropic(c) => c.model_info(model),
        }
    }

    fn build(self) -> Result<Arc<dyn Adapter>, LlmError> {
        Ok(match self {
            Self::OpenAi(c) => Arc::new(OpenAiAdapter::new(c)?),
            Self::Anthropic(c) => Arc::new(AnthropicAdapter::new(c)?),
            Self::Responses(c) => Arc::new(ResponsesAdapter::new(c)?),
        })
    }
}

/// A provider adapter whose construction runs in the background.
pub struct LazyAdapter {
    config: ProviderConfig,
    built: Shared<BoxFuture<'static, Built>>,
}

impl LazyAdapter {
    /// Starts building the adapter for `config` now (needs a tokio runtime): the route a front
    /// end will use first, so its TLS set-up overlaps the rest of start-up.
    pub fn spawn(config: ProviderConfig) -> Self {
        let building = tokio::task::spawn_blocking({
            let config = config.clone();
            move || config.build()
        });
        Self::from_build(config, building.boxed())
    }

    /// Builds the adapter for `config` only when a request first needs it: every configured
    /// route is registered, and most are never used by a given process.
    pub fn deferred(config: ProviderConfig) -> Self {
        let building = {
            let config = config.clone();
            async move { tokio::task::spawn_blocking(move || config.build()).await }.boxed()
        };
        Self::from_build(config, building)
    }

    fn from_build(config: ProviderConfig, building: Building) -> Self {
        let built = async move {
            match building.await {
                Ok(Ok(adapter)) => Ok(adapter),
                Ok(Err(e)) => Err(e.failure),
                Err(e) => Err(LlmFailure::new(
                    FailureCode::Transport,
                    format!("building the HTTP client failed: {e}"),
                )),
            }
        }
        .boxed()
        .shared();
        Self { config, built }
    }

    /// Waits for the build; a failure names what is wrong with the provider's settings.
    pub async fn ready(&self) -> Result<(), LlmFailure> {
        self.built.clone().await.map(|_| ())
    }
}

#[async_trait]
impl Adapter for LazyAdapter {
    fn retry_policy(&self, _provider: &str) -> Option<RetryPolicy> {
        self.config.retry_policy()
    }

    fn list_models(&self, _provider: &str) -> Vec<ModelInfo> {
        self.config.model_infos()
    }

    async fn resolve_model(
        &self,
        _provider: &str,
        model: &str,
        _cancel: &CancellationToken,
    ) -> Result<ModelInfo, LlmFailure> {
        Ok(self.config.model_info(model))
    }

    fn stream(&self, options: GenerateOptions) -> ChunkStream {
        let built = self.built.clone();
        let mut options = Some(options);
        futures::stream::once(built)
            .flat_map(move |built| match (built, options.take()) {
                (Ok(adapter), Some(options)) => adapter.stream(options),
                (Err(failure), _) => futures::stream::iter([Err(failure)]).boxed(),
                // `once` yields exactly one item, so the options are always still there.
                (Ok(_), None) => futures::stream::empty().boxed(),
            })
            .boxed()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use dsh_llm_openai::ApiKeySource;

    #[tokio::test]
    async fn metadata_needs_no_client_and_a_bad_url_fails_the_build() {
        let config = OpenAiAdapterConfig::deepseek("not a url", ApiKeySource::NotRequired);
        let lazy = LazyAdapter::spawn(ProviderConfig::OpenAi(config));
        assert!(!lazy.list_models("deepseek").is_empty());
        assert!(lazy.retry_policy("deepseek").is_some());
        let failure = lazy.ready().await.unwrap_err();
        assert!(failure.message.contains("not a url"), "{failure}");
    }
}
