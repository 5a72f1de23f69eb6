//! What one model request asks for.

use std::sync::Arc;

use dsh_session::{Message, SessionId};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// A tool the model may call, as the provider sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSchema {
    /// Tool name the model uses in calls.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON schema of the arguments object.
    pub parameters: Value,
    /// The tool returns images, so it is only offered to models that read them. Not part of
    /// the wire schema or the log.
    #[serde(skip)]
    pub needs_vision: bool,
}

/// The per-conversation request configuration.
///
/// It is logged verbatim in `request/header` so that every wire request is reconstructable
/// from the session log; the field order is therefore part of the log format and must stay
/// stable.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LlmCallConfig {
    /// Provider route name (`deepseek`, `openai-compatible`, `scripted`, ...).
    pub provider: String,
    /// Model id on that route.
    pub model: String,
    /// Reasoning effort id, as advertised by the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Output-token ceiling per request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Vec<String>>,
    /// The provider's own web search, run on its servers (`[web_search] provider = "native"`).
    /// Adapters whose API has one offer it with the request (Anthropic's `web_search` server
    /// tool); the others have none to offer and send the request without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub web_search: Option<ProviderWebSearch>,
}

/// A provider-side web search offered with a request (see [`LlmCallConfig::web_search`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderWebSearch {
    /// At most this many searches per request (the provider's own cap when absent): each one
    /// is billed by the provider on top of tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_uses: Option<u32>,
}

impl LlmCallConfig {
    /// A configuration naming only the route and model; everything else is defaulted.
    pub fn new(provider: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            provider: provider.into(),
            model: model.into(),
            ..Self::default()
        }
    }
}

/// Marks the [`LlmCallConfig`] fields that `prepare_call` filled from the adapter's model
/// defaults rather than the caller.
///
/// The next step re-resolves marked fields (the route may have changed) while explicit values
/// persist, so the distinction has to be logged next to the config.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdapterDefaults {
    /// `reasoning_effort` came from the model's default effort.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reasoning_effort: bool,
    /// `max_tokens` came from the model's default output ceiling.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub max_tokens: bool,
}

impl AdapterDefaults {
    /// Whether no field was filled (the header then omits `adapterDefaults`).
    pub fn is_empty(&self) -> bool {
        !self.reasoning_effort && !self.max_tokens
    }
}

/// Why a request is made. Adapters may treat auxiliary requests differently (a session title
/// does not need the model to think).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Purpose {
    /// An ordinary conversation step.
    #[default]
    Conversation,
    /// Summarizing history to free context.
    Compaction,
    /// Naming a session.
    SessionTitle,
}

/// Everything one `stream` call needs.
///
/// Cloning is cheap: messages are shared behind `Arc` and the cancellation token is a handle.
#[derive(Clone, Debug, Default)]
pub struct GenerateOptions {
    /// Route, model and sampling configuration.
    pub config: LlmCallConfig,
    /// Conversation history, oldest first.
    pub messages: Vec<Arc<Message>>,
    /// System prompt, sent before the history.
    pub system: Option<String>,
    /// Tools the model may call.
    pub tools: Vec<ToolSchema>,
    /// The session making the request (adapters may forward it for attribution).
    pub session_id: Option<SessionId>,
    /// Why the request is made.
    pub purpose: Purpose,
    /// Cancels the request; adapters must stop promptly and end with `finish{aborted}`.
    pub cancel: CancellationToken,
    /// Where the bytes of image blocks are read from (filled by the runtime from
    /// [`crate::Llm::set_attachments`] when the caller left it empty).
    pub attachments: Option<Arc<dyn dsh_session::Attachments>>,
}

impl GenerateOptions {
    /// Options for `config` with an empty history and a fresh cancellation token.
    pub fn new(config: LlmCallConfig) -> Self {
        Self {
            config,
            ..Self::default()
        }
    }
}

/// The bytes of `image`, base64-encoded for a provider request, read from the request's
/// attachment store. A missing store, a missing or damaged file is an `UNSUPPORTED_CONTENT`
/// failure naming the image: a request must never go out with an image silently dropped.
pub fn image_base64(
    options: &GenerateOptions,
    image: &dsh_session::ImageRef,
) -> Result<String, dsh_session::LlmFailure> {
    use base64::Engine as _;
    let fail = |why: String| {
        dsh_session::LlmFailure::new(
            dsh_session::FailureCode::UnsupportedContent,
            format!("image {} cannot be sent: {why}", image.attachment_id),
        )
    };
    let store = options
        .attachments
        .as_ref()
        .ok_or_else(|| fail("no attachment store is configured".to_owned()))?;
    let bytes = store.get(image).map_err(|e| fail(e.to_string()))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn call_config_logs_camel_case_in_stable_order_without_absent_fields() {
        let c = LlmCallConfig {
            provider: "deepseek".into(),
            model: "m".into(),
            reasoning_effort: Some("high".into()),
            temperature: None,
            max_tokens: Some(10),
            stop: Some(vec!["x".into()]),
            web_search: None,
        };
        let text = serde_json::to_string(&c).unwrap();
        assert_eq!(
            text,
            r#"{"provider":"deepseek","model":"m","reasoningEffort":"high","maxTokens":10,"stop":["x"]}"#
        );
        let back: LlmCallConfig = serde_json::from_str(&text).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn adapter_defaults_omit_false_markers() {
        assert_eq!(
            serde_json::to_value(AdapterDefaults::default()).unwrap(),
            json!({})
        );
        let d = AdapterDefaults {
            reasoning_effort: true,
            max_tokens: false,
        };
        assert_eq!(
            serde_json::to_value(d).unwrap(),
            json!({"reasoningEffort": true})
        );
        let parsed: AdapterDefaults = serde_json::from_value(json!({"maxTokens": true})).unwrap();
        assert!(parsed.max_tokens && !parsed.reasoning_effort);
    }

    #[test]
    fn purpose_uses_reference_spelling() {
        assert_eq!(
            serde_json::to_value(Purpose::SessionTitle).unwrap(),
            json!("session-title")
        );
    }
}
