//! Whether the selected route can be used at all, decided at start: before a session file is
//! written, and without failing `dsh config show`, the command one runs to find out why.
//!
//! A keyless OpenAI-compatible server (`--provider local`, llama.cpp's `llama-server`, Ollama)
//! usually serves one model and ignores the name, so a missing model there is not an error:
//! the composition asks the server (`GET {base_url}/models`) and otherwise sends a placeholder.
//! Everywhere else a missing model is refused, naming the three ways to set one.

use std::time::Duration;

use super::{ProviderKind, Settings, Source, Sourced};
use crate::error::{ConfigError, config_bail};

/// How long a start waits for a local server's model list.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// The model id sent to a keyless server that did not name one of its own. llama.cpp's
/// server answers whatever the name; other servers at least fail naming it.
pub const PLACEHOLDER_MODEL: &str = "default";

impl Settings {
    /// Whether no model was chosen and the selected provider is a keyless OpenAI-compatible
    /// server that may be asked for its model.
    pub fn asks_server_for_model(&self) -> bool {
        let p = self.selected();
        self.model.source == Source::Unset
            && p.kind.value == ProviderKind::OpenaiCompatible
            && p.api_key_env.is_none()
    }

    /// Fills in a missing model of a keyless server (see [`asks_server_for_model`]): the first
    /// id of its `GET /models`, else [`PLACEHOLDER_MODEL`]. Both count as the provider's
    /// default. Does nothing when a model was chosen.
    ///
    /// [`asks_server_for_model`]: Settings::asks_server_for_model
    pub async fn ask_server_for_model(&mut self) {
        if !self.asks_server_for_model() {
            return;
        }
        let base = self.selected().base_url.value.clone();
        let model = match dsh_llm_openai::list_model_ids(&base, ASK_TIMEOUT).await {
            Ok(ids) if !ids.is_empty() => {
                tracing::info!(model = %ids[0], "using the first model the server lists");
                ids[0].clone()
            }
            Ok(_) => {
                tracing::info!("the server lists no model; sending `{PLACEHOLDER_MODEL}`");
                PLACEHOLDER_MODEL.to_owned()
            }
            Err(failure) => {
                tracing::info!(%failure, "the server did not list its models; sending `{PLACEHOLDER_MODEL}`");
                PLACEHOLDER_MODEL.to_owned()
            }
        };
        self.model = Sourced::new(model, Source::ProviderDefault);
    }

    /// What `dsh config show` says about a missing model.
    pub fn missing_model_note(&self) -> String {
        let p = self.selected();
        if self.asks_server_for_model() {
            format!(
                "asked from the server at start (GET {}/models), else `{PLACEHOLDER_MODEL}`",
                p.base_url.value.trim_end_matches('/')
            )
        } else {
            format!(
                "NOT SET for provider `{}`: pass --model, set DSH_MODEL, or set `model` under \
                 [defaults] (or `models` under [providers.{}]) in {}",
                p.name,
                p.name,
                self.config_path.display()
            )
        }
    }

    /// Fails when the selected route cannot work: a base URL without an http(s) scheme (a
    /// common slip, `127.0.0.1:8080`), or no model for a provider that cannot name one.
    pub fn check_route(&self) -> Result<(), ConfigError> {
        let p = self.selected();
        let shown = super::redact_url(p.base_url.value.trim());
        let url = shown.as_str();
        let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
        if !matches!(scheme.as_deref(), Some("http" | "https")) {
            config_bail!(
                "the base URL of provider `{}` must start with http:// or https:// (from {}); \
                 e.g. http://{}",
                p.name,
                p.base_url.source,
                url.split_once("://").map_or(url, |(_, rest)| rest)
            );
        }
        if self.model.source == Source::Unset && !self.asks_server_for_model() {
            config_bail!("no model chosen: {}", self.missing_model_note());
        }
        Ok(())
    }
}
