//! The model facts catalog: context window, output ceiling and prices of every model dsh knows.
//!
//! Compaction budgets against the window, the adapter sends the output ceiling as the default
//! `max_tokens`, and the front ends price usage with it, so all three read this one table. A
//! built-in row per model ([`BUILTIN_MODELS`]; adding a model is adding a row) and `[models."ID"]`
//! overrides from the user's configuration ([`ModelOverride`]) merge into [`ModelFacts`]. An id
//! with no row and no configured window gets the conservative [`DEFAULT_CONTEXT_WINDOW`] so a
//! small local model is compacted early rather than overflowing.

use std::collections::BTreeMap;

use dsh_session::TokenUsage;
use serde::{Deserialize, Serialize};

/// Window assumed for a model nobody described: small enough that compaction starts before a
/// typical local server's context fills.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 32_768;

/// Output ceiling sent for a model nobody described, so a looping model stops.
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 8_192;

/// DeepSeek's thinking efforts (V4 models).
pub const DEEPSEEK_EFFORTS: &[&str] = &["off", "low", "high", "max"];

/// Anthropic's thinking efforts (mapped onto a thinking budget by the Messages adapter).
pub const ANTHROPIC_EFFORTS: &[&str] = &["off", "low", "medium", "high"];

/// OpenAI's reasoning efforts as the Responses route offers them.
pub const OPENAI_EFFORTS: &[&str] = &["off", "low", "medium", "high"];

/// Prices in US dollars per million tokens.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPrice {
    /// Input tokens the provider's prompt cache did not serve.
    pub input: f64,
    /// Input tokens served from the prompt cache (cache hits).
    pub cached_input: f64,
    /// Output tokens, reasoning included.
    pub output: f64,
}

impl ModelPrice {
    /// What `usage` cost, in US dollars.
    pub fn cost(&self, usage: &TokenUsage) -> f64 {
        let cached = usage.cache_read_tokens.unwrap_or(0) as f64;
        (usage.input_tokens as f64 * self.input
            + cached * self.cached_input
            + usage.output_tokens as f64 * self.output)
            / 1_000_000.0
    }
}

/// One built-in catalog row. `const`-constructible so the table is plain data.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CatalogRow {
    /// Provider family whose routes list the model (`deepseek`, ...).
    pub family: &'static str,
    /// Model id as sent on the wire.
    pub id: &'static str,
    /// Human-readable name.
    pub name: &'static str,
    /// Context window in tokens.
    pub context_window: u64,
    /// Default output ceiling per request.
    pub max_output_tokens: u32,
    /// Reasoning efforts the model takes (empty: no effort setting).
    pub efforts: &'static [&'static str],
    /// Published prices, when known.
    pub price: Option<ModelPrice>,
    /// Whether the model reads images in its input.
    pub vision: bool,
}

/// The built-in models. Prices: the providers' published list prices, USD per 1M tokens
/// (DeepSeek: peak; Anthropic: cache reads, base input; OpenAI: standard tier).
pub const BUILTIN_MODELS: &[CatalogRow] = &[
    CatalogRow {
        family: "deepseek",
        id: "deepseek-v4-flash",
        name: "DeepSeek V4 Flash",
        context_window: 1_000_000,
        max_output_tokens: 256_000,
        vision: false,
        efforts: DEEPSEEK_EFFORTS,
        price: Some(ModelPrice {
            input: 0.14,
            cached_input: 0.0028,
            output: 0.28,
        }),
    },
    CatalogRow {
        family: "deepseek",
        id: "deepseek-v4-pro",
        name: "DeepSeek V4 Pro",
        context_window: 1_000_000,
        max_output_tokens: 256_000,
        vision: false,
        efforts: DEEPSEEK_EFFORTS,
        price: Some(ModelPrice {
            input: 0.435,
            cached_input: 0.003_625,
            output: 0.87,
        }),
    },
    CatalogRow {
        family: "deepseek",
        id: "deepseek-chat",
        name: "DeepSeek Chat",
        context_window: 128_000,
        max_output_tokens: 8_192,
        vision: false,
        efforts: &[],
        price: None,
    },
    CatalogRow {
        family: "deepseek",
        id: "deepseek-reasoner",
        name: "DeepSeek Reasoner",
        context_window: 128_000,
        max_output_tokens: 65_536,
        vision: false,
        efforts: &[],
        price: None,
    },
    CatalogRow {
        family: "anthropic",
        id: "claude-sonnet-4-5",
        name: "Claude Sonnet 4.5",
        context_window: 200_000,
        max_output_tokens: 64_000,
        vision: true,
        efforts: ANTHROPIC_EFFORTS,
        price: Some(ModelPrice {
            input: 3.0,
            cached_input: 0.30,
            output: 15.0,
        }),
    },
    CatalogRow {
        family: "anthropic",
        id: "claude-opus-4-1",
        name: "Claude Opus 4.1",
        context_window: 200_000,
        max_output_tokens: 32_000,
        vision: true,
        efforts: ANTHROPIC_EFFORTS,
        price: Some(ModelPrice {
            input: 15.0,
            cached_input: 1.50,
            output: 75.0,
        }),
    },
    CatalogRow {
        family: "anthropic",
        id: "claude-haiku-4-5",
        name: "Claude Haiku 4.5",
        context_window: 200_000,
        max_output_tokens: 64_000,
        vision: true,
        efforts: ANTHROPIC_EFFORTS,
        price: Some(ModelPrice {
            input: 1.0,
            cached_input: 0.10,
            output: 5.0,
        }),
    },
    CatalogRow {
        family: "openai",
        id: "gpt-5",
        name: "GPT-5",
        context_window: 400_000,
        max_output_tokens: 128_000,
        vision: true,
        efforts: OPENAI_EFFORTS,
        price: Some(ModelPrice {
            input: 1.25,
            cached_input: 0.125,
            output: 10.0,
        }),
    },
    CatalogRow {
        family: "openai",
        id: "gpt-5-mini",
        name: "GPT-5 mini",
        context_window: 400_000,
        max_output_tokens: 128_000,
        vision: true,
        efforts: OPENAI_EFFORTS,
        price: Some(ModelPrice {
            input: 0.25,
            cached_input: 0.025,
            output: 2.0,
        }),
    },
    CatalogRow {
        family: "openai",
        id: "o4-mini",
        name: "o4-mini",
        context_window: 200_000,
        max_output_tokens: 100_000,
        vision: true,
        efforts: OPENAI_EFFORTS,
        price: Some(ModelPrice {
            input: 1.10,
            cached_input: 0.275,
            output: 4.40,
        }),
    },
    CatalogRow {
        family: "openai",
        id: "gpt-4.1",
        name: "GPT-4.1",
        context_window: 1_047_576,
        max_output_tokens: 32_768,
        vision: true,
        efforts: &[],
        price: Some(ModelPrice {
            input: 2.0,
            cached_input: 0.50,
            output: 8.0,
        }),
    },
];

/// A user's `[models."ID"]` table: any field set replaces the built-in one.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelOverride {
    /// Context window in tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// Default output ceiling per request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// Prices (USD per million tokens).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<ModelPrice>,
    /// Whether the model reads images (a local vision model the table does not know).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vision: Option<bool>,
}

/// Where a model's window came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FactsOrigin {
    /// A built-in row.
    Builtin,
    /// The user's configuration (possibly over a built-in row).
    Configured,
    /// Nobody described the model: conservative defaults.
    Assumed,
}

/// The effective facts of one model.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelFacts {
    /// Model id.
    pub id: String,
    /// Human-readable name.
    pub name: String,
    /// Context window in tokens.
    pub context_window: u64,
    /// Default output ceiling per request.
    pub max_output_tokens: u32,
    /// Reasoning efforts (empty: none).
    pub efforts: Vec<String>,
    /// Prices, when known.
    pub price: Option<ModelPrice>,
    /// Whether the model reads images.
    pub vision: bool,
    /// Where the window came from.
    pub origin: FactsOrigin,
}

impl ModelFacts {
    /// The input kinds of [`crate::ModelInfo::input_modalities`]: `text`, and `image` for a
    /// vision model.
    pub fn input_modalities(&self) -> Vec<String> {
        let mut kinds = vec!["text".to_owned()];
        if self.vision {
            kinds.push("image".to_owned());
        }
        kinds
    }

    /// What `usage` cost, when the model's prices are known.
    pub fn cost(&self, usage: &TokenUsage) -> Option<f64> {
        self.price.map(|p| p.cost(usage))
    }
}

/// The built-in rows plus the user's overrides; cheap to clone and share.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelCatalog {
    overrides: BTreeMap<String, ModelOverride>,
}

impl ModelCatalog {
    /// The built-in rows only.
    pub fn builtin() -> Self {
        Self::default()
    }

    /// Adds (or replaces) the override of `id`.
    pub fn with_override(mut self, id: impl Into<String>, facts: ModelOverride) -> Self {
        self.overrides.insert(id.into(), facts);
        self
    }

    /// The configured overrides, by id.
    pub fn overrides(&self) -> &BTreeMap<String, ModelOverride> {
        &self.overrides
    }

    /// The built-in row of `id`.
    pub fn row(id: &str) -> Option<&'static CatalogRow> {
        BUILTIN_MODELS.iter().find(|r| r.id == id)
    }

    /// The built-in rows of a provider family, in table order.
    pub fn family(family: &str) -> impl Iterator<Item = &'static CatalogRow> {
        BUILTIN_MODELS.iter().filter(move |r| r.family == family)
    }

    /// The effective facts of `id`: its row, overridden field by field by the configuration,
    /// else conservative defaults ([`FactsOrigin::Assumed`] unless a window is configured).
    pub fn facts(&self, id: &str) -> ModelFacts {
        let row = Self::row(id);
        let over = self.overrides.get(id);
        let mut facts = match row {
            Some(r) => ModelFacts {
                id: id.to_owned(),
                name: r.name.to_owned(),
                context_window: r.context_window,
                max_output_tokens: r.max_output_tokens,
                efforts: r.efforts.iter().map(|e| (*e).to_owned()).collect(),
                price: r.price,
                vision: r.vision,
                origin: FactsOrigin::Builtin,
            },
            None => ModelFacts {
                id: id.to_owned(),
                name: id.to_owned(),
                context_window: DEFAULT_CONTEXT_WINDOW,
                max_output_tokens: DEFAULT_MAX_OUTPUT_TOKENS,
                efforts: Vec::new(),
                price: None,
                vision: false,
                origin: FactsOrigin::Assumed,
            },
        };
        if let Some(over) = over {
            if let Some(window) = over.context_window {
                facts.context_window = window;
                facts.origin = FactsOrigin::Configured;
            }
            if let Some(max) = over.max_output_tokens {
                facts.max_output_tokens = max;
            }
            if over.price.is_some() {
                facts.price = over.price;
            }
            if let Some(vision) = over.vision {
                facts.vision = vision;
            }
        }
        facts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_replace_builtin_fields_one_by_one() {
        let catalog = ModelCatalog::builtin().with_override(
            "deepseek-v4-flash",
            ModelOverride {
                context_window: Some(24_000),
                ..ModelOverride::default()
            },
        );
        let f = catalog.facts("deepseek-v4-flash");
        assert_eq!(f.context_window, 24_000);
        assert_eq!(f.max_output_tokens, 256_000);
        assert!(f.price.is_some());
        assert_eq!(f.origin, FactsOrigin::Configured);
    }

    #[test]
    fn vision_comes_from_the_row_and_the_configuration_can_grant_it() {
        let catalog = ModelCatalog::builtin();
        assert!(!catalog.facts("deepseek-v4-flash").vision);
        assert!(catalog.facts("claude-sonnet-4-5").vision);
        assert_eq!(
            catalog.facts("claude-sonnet-4-5").input_modalities(),
            ["text", "image"]
        );
        assert!(!catalog.facts("llava").vision);
        let local = catalog.with_override(
            "llava",
            ModelOverride {
                vision: Some(true),
                ..ModelOverride::default()
            },
        );
        assert!(local.facts("llava").vision);
    }

    #[test]
    fn an_unknown_model_gets_the_conservative_defaults() {
        let f = ModelCatalog::builtin().facts("qwen2.5-coder");
        assert_eq!(f.context_window, DEFAULT_CONTEXT_WINDOW);
        assert_eq!(f.max_output_tokens, DEFAULT_MAX_OUTPUT_TOKENS);
        assert_eq!(f.origin, FactsOrigin::Assumed);
        assert!(f.price.is_none());
    }

    #[test]
    fn cost_prices_cache_hits_apart() {
        let price = ModelPrice {
            input: 1.0,
            cached_input: 0.1,
            output: 2.0,
        };
        let usage = TokenUsage {
            input_tokens: 1_000_000,
            output_tokens: 500_000,
            cache_read_tokens: Some(2_000_000),
            ..TokenUsage::default()
        };
        assert!((price.cost(&usage) - 2.2).abs() < 1e-9);
    }
}
