//! What an adapter says about a model.

use serde::{Deserialize, Serialize};

/// Reasoning efforts a model offers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningInfo {
    /// Advertised effort ids; an explicit effort outside this list is rejected before I/O.
    pub efforts: Vec<String>,
    /// Effort used when the caller names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_effort: Option<String>,
}

impl ReasoningInfo {
    /// Whether `effort` is one of the advertised ids.
    pub fn offers(&self, effort: &str) -> bool {
        self.efforts.iter().any(|e| e == effort)
    }
}

/// The facts about one model that the runtime needs before a request: they decide the
/// materialized defaults in the logged config and the context budget compaction works to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelInfo {
    /// Model id as sent on the wire.
    pub id: String,
    /// Human-readable name.
    pub name: String,
    /// Input kinds the model accepts (`text`, `image`).
    pub input_modalities: Vec<String>,
    /// Context window in tokens, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// Output ceiling used when the caller names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_max_tokens: Option<u32>,
    /// Reasoning support; `None` means the model takes no effort setting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<ReasoningInfo>,
}

impl ModelInfo {
    /// A text-only model with no known limits: what an adapter reports for an unlisted id.
    pub fn new(id: impl Into<String>) -> Self {
        let id = id.into();
        Self {
            name: id.clone(),
            id,
            input_modalities: vec!["text".to_owned()],
            context_window: None,
            default_max_tokens: None,
            reasoning: None,
        }
    }

    /// Sets the context window.
    pub fn with_context_window(mut self, tokens: u64) -> Self {
        self.context_window = Some(tokens);
        self
    }

    /// Sets the default output ceiling.
    pub fn with_default_max_tokens(mut self, tokens: u32) -> Self {
        self.default_max_tokens = Some(tokens);
        self
    }

    /// Sets the advertised reasoning efforts and default.
    pub fn with_reasoning<S: Into<String>>(
        mut self,
        efforts: impl IntoIterator<Item = S>,
        default_effort: Option<&str>,
    ) -> Self {
        self.reasoning = Some(ReasoningInfo {
            efforts: efforts.into_iter().map(Into::into).collect(),
            default_effort: default_effort.map(str::to_owned),
        });
        self
    }

    /// Whether the model accepts image input.
    pub fn accepts_images(&self) -> bool {
        self.input_modalities.iter().any(|m| m == "image")
    }
}
