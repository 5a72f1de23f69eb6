//! Provider routes: every configured provider registered with the LLM runtime, so one
//! harness can continue any stored session on the route it was held on.
//!
//! Registering is cheap (a route's metadata comes from the configuration alone); the HTTP
//! client of a route is built in the background for the selected provider, which the first
//! request will most likely use, and on first use for the others (see [`LazyAdapter`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use dsh_llm::catalog::FactsOrigin;
use dsh_llm::{AdapterRegistration, Llm, ModelCatalog, ModelInfo};
use dsh_llm_anthropic::AnthropicConfig;
use dsh_llm_openai::{ApiKeySource, OpenAiAdapterConfig};

use crate::config::{ProviderKind, ProviderSettings, Settings, Source};
use crate::error::HarnessError;
use crate::lazy_adapter::{LazyAdapter, ProviderConfig};

/// The registered routes of one harness, unregistered together.
pub(crate) struct Routes {
    adapters: BTreeMap<String, Arc<LazyAdapter>>,
    registrations: Vec<AdapterRegistration>,
}

impl Routes {
    /// Registers every provider of `settings` with `llm`; the selected one starts building
    /// its client now.
    pub(crate) fn register(llm: &Llm, settings: &Settings) -> Result<Self, HarnessError> {
        let mut adapters = BTreeMap::new();
        let mut registrations = Vec::new();
        for (name, provider) in &settings.providers {
            let selected = *name == settings.provider.value;
            let mut config = adapter_config(provider, settings.catalog.clone());
            if selected
                && let (Some(effort), ProviderConfig::OpenAi(openai)) =
                    (&settings.reasoning_effort, &mut config)
            {
                crate::effort::offer(openai, &settings.model.value, &effort.value);
            }
            let adapter = Arc::new(if selected {
                LazyAdapter::spawn(config)
            } else {
                LazyAdapter::deferred(config)
            });
            let registration = llm
                .register_adapter(&[name.as_str()], adapter.clone())
                .map_err(|e| HarnessError::start(format!("register provider `{name}`"), e))?;
            registrations.push(registration);
            adapters.insert(name.clone(), adapter);
        }
        Ok(Self {
            adapters,
            registrations,
        })
    }

    /// The adapter of route `name`.
    pub(crate) fn adapter(&self, name: &str) -> Option<&Arc<LazyAdapter>> {
        self.adapters.get(name)
    }

    /// Removes every route this harness registered.
    pub(crate) fn unregister(&self) {
        for registration in &self.registrations {
            registration.unregister();
        }
    }
}

fn adapter_config(p: &ProviderSettings, catalog: ModelCatalog) -> ProviderConfig {
    let key = match &p.api_key_env {
        // The key was moved out of dsh's environment at start-up (`env`).
        Some(var) => crate::env::key_source(&var.value),
        None => ApiKeySource::NotRequired,
    };
    let base = p.base_url.value.clone();
    match p.kind.value {
        ProviderKind::Deepseek => ProviderConfig::OpenAi(configured_models(
            OpenAiAdapterConfig::deepseek(base, key).with_route(p.name.clone()),
            p,
            catalog,
        )),
        ProviderKind::OpenaiCompatible => ProviderConfig::OpenAi(configured_models(
            OpenAiAdapterConfig::openai_compatible(base, key).with_route(p.name.clone()),
            p,
            catalog,
        )),
        ProviderKind::OpenaiResponses => {
            let mut config =
                OpenAiAdapterConfig::openai_compatible(base, key).with_route(p.name.clone());
            config.models = dsh_llm_openai::openai_models();
            ProviderConfig::Responses(configured_models(config, p, catalog))
        }
        ProviderKind::Anthropic => {
            let mut config = AnthropicConfig::new(base, key).with_route(p.name.clone());
            // Listed models take the catalog's facts (the user's `[models."ID"]` included).
            config.models = listed_models(std::mem::take(&mut config.models), p)
                .into_iter()
                .map(|m| {
                    let facts = catalog.facts(&m.id);
                    match facts.origin {
                        FactsOrigin::Assumed => m,
                        _ => dsh_llm_anthropic::claude_info(&facts),
                    }
                })
                .collect();
            ProviderConfig::Anthropic(config)
        }
    }
}

/// The OpenAI-compatible route with the model catalog (the user's `[models."ID"]` included); a
/// configured model list replaces the advertised ids, facts still come from the catalog.
fn configured_models(
    config: OpenAiAdapterConfig,
    p: &ProviderSettings,
    catalog: ModelCatalog,
) -> OpenAiAdapterConfig {
    let mut config = config.with_catalog(catalog);
    if p.models.source != Source::Default {
        config.models = p.models.value.clone();
    }
    config
}

/// A configured model list replaces the catalog, keeping what the adapter knows about ids it
/// already lists.
fn listed_models(known: Vec<ModelInfo>, p: &ProviderSettings) -> Vec<ModelInfo> {
    if p.models.source == Source::Default {
        return known;
    }
    p.models
        .value
        .iter()
        .map(|id| {
            known
                .iter()
                .find(|m| &m.id == id)
                .cloned()
                .unwrap_or_else(|| ModelInfo::new(id.clone()))
        })
        .collect()
}
