//! Configuration of one Anthropic Messages route.

use std::time::Duration;

use dsh_llm::retry::RetryPolicy;
use dsh_llm::{ModelInfo, ReasoningInfo};
use dsh_llm_http::ApiKeySource;

/// The environment variable holding the Anthropic key.
pub const ANTHROPIC_API_KEY_ENV: &str = "ANTHROPIC_API_KEY";
/// The environment variable overriding the Anthropic API root.
pub const ANTHROPIC_BASE_URL_ENV: &str = "ANTHROPIC_BASE_URL";
/// Anthropic's public API root (requests go to `{base}/v1/messages`).
pub const ANTHROPIC_DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The API version header every request carries.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The Messages API requires `max_tokens`; this is sent when neither the call nor the model
/// names one.
pub const FALLBACK_MAX_TOKENS: u32 = 8_192;

/// Everything an [`crate::AnthropicAdapter`] needs.
#[derive(Clone, Debug)]
pub struct AnthropicConfig {
    /// Route name the adapter registers under.
    pub route: String,
    /// API root; requests go to `{base_url}/v1/messages` (a base already ending in `/v1`
    /// gets `/messages`).
    pub base_url: String,
    /// Where the API key comes from (sent as `x-api-key`).
    pub api_key: ApiKeySource,
    /// Advertised catalog; ids not listed are still accepted with defaults.
    pub models: Vec<ModelInfo>,
    /// Put `cache_control` breakpoints on the system prompt and the newest block.
    pub prompt_caching: bool,
    /// Longest wait for any read.
    pub idle_timeout: Duration,
    /// Most bytes one streamed response may take.
    pub max_response_bytes: u64,
    /// Retry policy reported for the route.
    pub retry_policy: Option<RetryPolicy>,
}

impl AnthropicConfig {
    /// Anthropic at `base_url` with `api_key`, route `anthropic`, the Claude catalog.
    pub fn new(base_url: impl Into<String>, api_key: ApiKeySource) -> Self {
        Self {
            route: "anthropic".to_owned(),
            base_url: base_url.into(),
            api_key,
            models: anthropic_models(),
            prompt_caching: true,
            idle_timeout: Duration::from_secs(300),
            max_response_bytes: 256 << 20,
            retry_policy: Some(RetryPolicy::default()),
        }
    }

    /// The same configuration under another route name.
    pub fn with_route(mut self, route: impl Into<String>) -> Self {
        self.route = route.into();
        self
    }

    /// What the adapter knows about `model` (listed facts, else a text model with no limits).
    pub fn model_info(&self, model: &str) -> ModelInfo {
        self.models
            .iter()
            .find(|m| m.id == model)
            .cloned()
            .unwrap_or_else(|| ModelInfo::new(model))
    }
}

/// Efforts mapped onto a thinking budget (see `request::thinking_budget`).
pub(crate) const EFFORTS: &[&str] = dsh_llm::catalog::ANTHROPIC_EFFORTS;

/// The facts of a Claude model from `facts` (the model catalog's, overrides included).
pub fn claude_info(facts: &dsh_llm::ModelFacts) -> ModelInfo {
    let mut m = ModelInfo::new(facts.id.clone());
    m.name = facts.name.clone();
    m.input_modalities = facts.input_modalities();
    m.context_window = Some(facts.context_window);
    m.default_max_tokens = Some(facts.max_output_tokens);
    m.reasoning = Some(ReasoningInfo {
        efforts: EFFORTS.iter().map(|e| (*e).to_owned()).collect(),
        default_effort: None,
    });
    m
}

/// The main Claude models with their context windows and output ceilings: the model
/// catalog's `anthropic` rows.
pub fn anthropic_models() -> Vec<ModelInfo> {
    let catalog = dsh_llm::ModelCatalog::builtin();
    dsh_llm::ModelCatalog::family("anthropic")
        .map(|row| claude_info(&catalog.facts(row.id)))
        .collect()
}
