//! Configuration of one OpenAI-compatible route.

use std::time::Duration;

use dsh_llm::ModelInfo;
use dsh_llm::catalog::{DEEPSEEK_EFFORTS, ModelCatalog};
use dsh_llm::retry::RetryPolicy;
use dsh_llm_http::ApiKeySource;

/// Which dialect the server speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProviderKind {
    /// DeepSeek's API: `thinking` + `reasoning_effort`, reasoning always passed back,
    /// cache-hit usage fields.
    Deepseek,
    /// Plain chat completions: no `thinking`; reasoning is passed back only to the route that
    /// streamed it.
    OpenAiCompatible,
}

/// Whether a DeepSeek deployment lets the model think at all.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ThinkingMode {
    /// Efforts `off`, `low`, `high`, `max` are offered.
    #[default]
    Enabled,
    /// Only `off` is offered; enabling efforts are rejected before any request.
    Disabled,
}

/// Everything an [`crate::OpenAiAdapter`] needs. Build it with [`OpenAiAdapterConfig::deepseek`],
/// [`OpenAiAdapterConfig::openai_compatible`] or the environment readers, then adjust fields.
#[derive(Clone, Debug)]
pub struct OpenAiAdapterConfig {
    /// Dialect.
    pub kind: ProviderKind,
    /// Route name the adapter registers under.
    pub route: String,
    /// API root; requests go to `{base_url}/chat/completions`.
    pub base_url: String,
    /// Where the API key comes from.
    pub api_key: ApiKeySource,
    /// Advertised model ids; ids not listed are still accepted.
    pub models: Vec<String>,
    /// Where every model's window, output ceiling and efforts come from (the one catalog
    /// compaction and the cost display read too).
    pub catalog: ModelCatalog,
    /// Effort used when the caller names none (DeepSeek: `high`).
    pub default_effort: Option<String>,
    /// DeepSeek deployment thinking switch.
    pub thinking: ThinkingMode,
    /// Longest wait for any read (the response head or the next body bytes).
    pub idle_timeout: Duration,
    /// Most bytes one streamed response may take (default 256 MiB, far above any real answer:
    /// a 256k-token completion is some 64 MiB of events). A server that streams past it (a
    /// runaway local model, a hostile endpoint) fails `MALFORMED_RESPONSE` instead of growing
    /// the assembled message and the session without bound.
    pub max_response_bytes: u64,
    /// Retry policy reported for the route.
    pub retry_policy: Option<RetryPolicy>,
}

/// The environment variable holding the DeepSeek key.
pub const DEEPSEEK_API_KEY_ENV: &str = "DEEPSEEK_API_KEY";
/// The environment variable overriding the DeepSeek API root.
pub const DEEPSEEK_BASE_URL_ENV: &str = "DEEPSEEK_BASE_URL";
/// DeepSeek's public API root.
pub const DEEPSEEK_DEFAULT_BASE_URL: &str = "https://api.deepseek.com";

const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
const DEFAULT_MAX_RESPONSE_BYTES: u64 = 256 << 20;

/// Efforts OpenAI-style reasoning models accept.
pub(crate) const OPENAI_EFFORTS: [&str; 3] = ["low", "medium", "high"];

impl OpenAiAdapterConfig {
    /// DeepSeek at `base_url` with `api_key`, route `deepseek`, the default catalog.
    pub fn deepseek(base_url: impl Into<String>, api_key: ApiKeySource) -> Self {
        Self {
            kind: ProviderKind::Deepseek,
            route: "deepseek".to_owned(),
            base_url: base_url.into(),
            api_key,
            models: ModelCatalog::family("deepseek")
                .map(|r| r.id.to_owned())
                .collect(),
            catalog: ModelCatalog::builtin(),
            default_effort: Some("high".to_owned()),
            thinking: ThinkingMode::Enabled,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            retry_policy: Some(RetryPolicy::default()),
        }
    }

    /// DeepSeek configured from the process environment: `DEEPSEEK_BASE_URL` (else the public
    /// API) and `DEEPSEEK_API_KEY`, the latter read on every request.
    pub fn deepseek_from_env() -> Self {
        let base = std::env::var(DEEPSEEK_BASE_URL_ENV)
            .ok()
            .filter(|v| !v.trim().is_empty())
            .unwrap_or_else(|| DEEPSEEK_DEFAULT_BASE_URL.to_owned());
        Self::deepseek(base, ApiKeySource::Env(DEEPSEEK_API_KEY_ENV.to_owned()))
    }

    /// DeepSeek configured from `lookup` instead of the process environment (tests and
    /// embedders with their own settings source).
    pub fn deepseek_from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let base = lookup(DEEPSEEK_BASE_URL_ENV)
            .filter(|v| !v.trim().is_empty())
            .unwrap_or_else(|| DEEPSEEK_DEFAULT_BASE_URL.to_owned());
        let key = match lookup(DEEPSEEK_API_KEY_ENV) {
            Some(k) => ApiKeySource::value(k),
            None => ApiKeySource::Missing {
                env: DEEPSEEK_API_KEY_ENV.to_owned(),
            },
        };
        Self::deepseek(base, key)
    }

    /// A plain OpenAI-compatible server at `base_url`, route `openai-compatible`, no catalog.
    pub fn openai_compatible(base_url: impl Into<String>, api_key: ApiKeySource) -> Self {
        Self {
            kind: ProviderKind::OpenAiCompatible,
            route: "openai-compatible".to_owned(),
            base_url: base_url.into(),
            api_key,
            models: Vec::new(),
            catalog: ModelCatalog::builtin(),
            default_effort: None,
            thinking: ThinkingMode::Enabled,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            retry_policy: Some(RetryPolicy::default()),
        }
    }

    /// Sets the idle timeout.
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// Sets the response size limit.
    pub fn with_max_response_bytes(mut self, bytes: u64) -> Self {
        self.max_response_bytes = bytes;
        self
    }

    /// Sets the route name.
    pub fn with_route(mut self, route: impl Into<String>) -> Self {
        self.route = route.into();
        self
    }

    /// Uses `catalog` for model facts (the user's `[models."ID"]` overrides included).
    pub fn with_catalog(mut self, catalog: ModelCatalog) -> Self {
        self.catalog = catalog;
        self
    }

    /// The facts of every advertised model, as [`model_info`](Self::model_info) gives them:
    /// what an adapter lists for its route.
    pub fn model_infos(&self) -> Vec<ModelInfo> {
        self.models.iter().map(|id| self.model_info(id)).collect()
    }

    /// The facts for `model` from the catalog (conservative defaults for an id nobody
    /// described), with the dialect's efforts for ids the catalog has no row for and the
    /// deployment's thinking switch applied.
    pub fn model_info(&self, model: &str) -> ModelInfo {
        let facts = self.catalog.facts(model);
        let mut info = ModelInfo::new(model)
            .with_context_window(facts.context_window)
            .with_default_max_tokens(facts.max_output_tokens);
        info.input_modalities = facts.input_modalities();
        info.name = facts.name;
        info.reasoning = if ModelCatalog::row(model).is_some() {
            (!facts.efforts.is_empty())
                .then(|| {
                    ModelInfo::new(model)
                        .with_reasoning(facts.efforts.iter().map(String::as_str), None)
                        .reasoning
                })
                .flatten()
        } else {
            match self.kind {
                ProviderKind::Deepseek => {
                    ModelInfo::new(model)
                        .with_reasoning(
                            DEEPSEEK_EFFORTS.iter().copied(),
                            self.default_effort.as_deref(),
                        )
                        .reasoning
                }
                // A configured effort is what the person knows their server accepts: it is
                // offered beside OpenAI's, even when it is none of them (`minimal`, say).
                ProviderKind::OpenAiCompatible => {
                    self.default_effort.as_deref().and_then(|effort| {
                        let mut efforts: Vec<&str> = OPENAI_EFFORTS.to_vec();
                        if !efforts.contains(&effort) {
                            efforts.push(effort);
                        }
                        ModelInfo::new(model)
                            .with_reasoning(efforts, Some(effort))
                            .reasoning
                    })
                }
            }
        };
        if let Some(reasoning) = &mut info.reasoning {
            if self.kind == ProviderKind::Deepseek && self.thinking == ThinkingMode::Disabled {
                reasoning.efforts = vec!["off".to_owned()];
                reasoning.default_effort = Some("off".to_owned());
            } else if reasoning.default_effort.is_none() {
                reasoning.default_effort =
                    self.default_effort.clone().filter(|e| reasoning.offers(e));
            }
        }
        info
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn unlisted_models_resolve_with_conservative_catalog_defaults() {
        let c = OpenAiAdapterConfig::deepseek("http://x", ApiKeySource::NotRequired);
        let m = c.model_info("deepseek-v9");
        assert_eq!(
            m.context_window,
            Some(dsh_llm::catalog::DEFAULT_CONTEXT_WINDOW)
        );
        assert_eq!(
            m.default_max_tokens,
            Some(dsh_llm::catalog::DEFAULT_MAX_OUTPUT_TOKENS)
        );
        let listed = c.model_info("deepseek-v4-flash");
        assert_eq!(listed.context_window, Some(1_000_000));
        assert_eq!(listed.default_max_tokens, Some(256_000));
        let r = m.reasoning.unwrap();
        assert_eq!(r.efforts, ["off", "low", "high", "max"]);
        assert_eq!(r.default_effort.as_deref(), Some("high"));
        let listed = c.model_info("deepseek-v4-pro");
        assert_eq!(
            listed.reasoning.unwrap().default_effort.as_deref(),
            Some("high")
        );
        assert!(c.model_info("deepseek-chat").reasoning.is_none());
        let o = OpenAiAdapterConfig::openai_compatible("http://x", ApiKeySource::NotRequired);
        assert!(o.model_info("llama").reasoning.is_none());
    }

    #[test]
    fn disabled_thinking_offers_only_off() {
        let mut c = OpenAiAdapterConfig::deepseek("http://x", ApiKeySource::NotRequired);
        c.thinking = ThinkingMode::Disabled;
        let r = c.model_info("deepseek-v4-flash").reasoning.unwrap();
        assert_eq!(r.efforts, ["off"]);
        assert_eq!(r.default_effort.as_deref(), Some("off"));
    }

    #[test]
    fn lookup_constructor_reads_base_url_and_key_without_process_env() {
        let env: HashMap<&str, &str> = [("DEEPSEEK_BASE_URL", "http://127.0.0.1:9/v1")].into();
        let c = OpenAiAdapterConfig::deepseek_from_lookup(|k| env.get(k).map(|v| v.to_string()));
        assert_eq!(c.base_url, "http://127.0.0.1:9/v1");
        assert_eq!(
            c.api_key,
            ApiKeySource::Missing {
                env: "DEEPSEEK_API_KEY".into()
            }
        );
    }
}
