//! The `Llm` service: the adapter registry and the single entry point for model requests.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use dsh_session::{FailureCode, LlmFailure, Message, MessageSource, StreamChunk};
use parking_lot::RwLock;
use tokio_util::sync::CancellationToken;

use crate::adapter::{Adapter, LlmStream};
use crate::config::{AdapterDefaults, GenerateOptions, LlmCallConfig};
use crate::error::LlmError;
use crate::model::ModelInfo;
use crate::normalize::{normalize_stream, panic_message, terminal_failure};
use crate::prepared::PreparedCall;
use crate::retry::RetryPolicy;

/// The model-request service.
///
/// Adapters register for route names; callers prepare a call (materializing defaults so the
/// logged config is exactly what is sent) and stream it. Whatever the adapter does, the
/// returned stream yields plain chunks ending in exactly one `finish`. Cheap to share as
/// `Arc<Llm>`; every method takes `&self`.
#[derive(Default)]
pub struct Llm {
    registry: Arc<Registry>,
}

impl std::fmt::Debug for Llm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Llm")
            .field("providers", &self.providers())
            .finish()
    }
}

/// Route table shared by the service, its registrations and its prepared calls.
#[derive(Default)]
pub(crate) struct Registry {
    routes: RwLock<HashMap<String, Route>>,
    next_registration: AtomicU64,
    /// Where image bytes are read from for every request that leaves them unset.
    attachments: RwLock<Option<Arc<dyn dsh_session::Attachments>>>,
}

#[derive(Clone)]
pub(crate) struct Route {
    pub(crate) adapter: Arc<dyn Adapter>,
    registration: u64,
    pub(crate) retry_policy: Option<RetryPolicy>,
}

impl Registry {
    pub(crate) fn route(&self, provider: &str) -> Option<Route> {
        self.routes.read().get(provider).cloned()
    }

    fn providers(&self) -> Vec<String> {
        let mut names: Vec<String> = self.routes.read().keys().cloned().collect();
        names.sort();
        names
    }

    fn no_adapter(&self, provider: &str) -> LlmFailure {
        let known = self.providers();
        let known = if known.is_empty() {
            "none".to_owned()
        } else {
            known.join(", ")
        };
        LlmFailure::new(
            FailureCode::NoAdapter,
            format!(
                "no adapter is registered for provider route `{provider}` (registered: {known})"
            ),
        )
    }

    /// Replay state is adapter-private: forward it only to the adapter instance that owns the
    /// route which produced the message. Anything else gets the message without it.
    pub(crate) fn scrub_replay_state(
        &self,
        messages: &mut [Arc<Message>],
        target: &Arc<dyn Adapter>,
    ) {
        let routes = self.routes.read();
        for message in messages.iter_mut() {
            let MessageSource::Model {
                provider,
                replay_state: Some(_),
                ..
            } = &message.source
            else {
                continue;
            };
            let same = routes
                .get(provider)
                .is_some_and(|r| same_adapter(&r.adapter, target));
            if !same {
                let mut owned = Message::clone(message);
                if let MessageSource::Model { replay_state, .. } = &mut owned.source {
                    *replay_state = None;
                }
                *message = Arc::new(owned);
            }
        }
    }

    /// Dispatches to `adapter` and normalizes the result; shared by prepared and unprepared
    /// calls.
    pub(crate) fn dispatch(
        &self,
        adapter: &Arc<dyn Adapter>,
        mut options: GenerateOptions,
    ) -> LlmStream {
        self.scrub_replay_state(&mut options.messages, adapter);
        if options.attachments.is_none() {
            options.attachments = self.attachments.read().clone();
        }
        let cancel = options.cancel.clone();
        match catch_unwind(AssertUnwindSafe(|| adapter.stream(options))) {
            Ok(inner) => normalize_stream(inner, cancel),
            Err(panic) => {
                let failure = LlmFailure::new(
                    FailureCode::Unknown,
                    format!(
                        "the adapter panicked while starting the request: {}",
                        panic_message(&*panic)
                    ),
                );
                single(terminal_failure(failure, &cancel))
            }
        }
    }
}

/// Identity of adapter instances (data pointer only: vtable pointers of one type may differ).
fn same_adapter(a: &Arc<dyn Adapter>, b: &Arc<dyn Adapter>) -> bool {
    std::ptr::eq(Arc::as_ptr(a).cast::<()>(), Arc::as_ptr(b).cast::<()>())
}

/// A stream of exactly one chunk.
pub(crate) fn single(chunk: StreamChunk) -> LlmStream {
    Box::pin(futures::stream::iter([chunk]))
}

/// Proof of one `register_adapter` call; `unregister` removes exactly the routes it added.
///
/// Dropping it does not unregister: the plugin scope that registered the adapter decides when
/// the routes go away, by calling [`AdapterRegistration::unregister`] from its disposer.
#[derive(Debug)]
pub struct AdapterRegistration {
    registry: Weak<Registry>,
    id: u64,
    providers: Vec<String>,
}

impl AdapterRegistration {
    /// The routes this registration added.
    pub fn providers(&self) -> &[String] {
        &self.providers
    }

    /// Removes this registration's routes. Idempotent; routes re-registered since by another
    /// adapter are left alone.
    pub fn unregister(&self) {
        let Some(registry) = self.registry.upgrade() else {
            return;
        };
        let mut routes = registry.routes.write();
        for provider in &self.providers {
            if routes
                .get(provider)
                .is_some_and(|r| r.registration == self.id)
            {
                routes.remove(provider);
            }
        }
    }
}

impl Llm {
    /// An empty service with no adapters.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `adapter` for every route in `providers`, all or nothing.
    ///
    /// A route already owned (or named twice) fails with `DUPLICATE_ADAPTER` and registers
    /// nothing; an adapter whose retry policy is invalid fails likewise. Each route's retry
    /// policy is captured now, so a prepared call carries the policy of the route it used.
    pub fn register_adapter(
        &self,
        providers: &[&str],
        adapter: Arc<dyn Adapter>,
    ) -> Result<AdapterRegistration, LlmError> {
        let mut policies = Vec::with_capacity(providers.len());
        for provider in providers {
            let policy = adapter.retry_policy(provider);
            if let Some(p) = &policy {
                p.validate().map_err(|e| {
                    LlmError::new(
                        FailureCode::InvalidRequest,
                        format!("the adapter for `{provider}` has an invalid retry policy: {e}"),
                    )
                })?;
            }
            policies.push(policy);
        }
        let id = self
            .registry
            .next_registration
            .fetch_add(1, Ordering::Relaxed);
        let mut routes = self.registry.routes.write();
        for (i, provider) in providers.iter().enumerate() {
            if routes.contains_key(*provider) || providers[..i].contains(provider) {
                return Err(LlmError::new(
                    FailureCode::DuplicateAdapter,
                    format!("provider route `{provider}` already has an adapter"),
                ));
            }
        }
        for (provider, retry_policy) in providers.iter().zip(policies) {
            routes.insert(
                (*provider).to_owned(),
                Route {
                    adapter: adapter.clone(),
                    registration: id,
                    retry_policy,
                },
            );
        }
        Ok(AdapterRegistration {
            registry: Arc::downgrade(&self.registry),
            id,
            providers: providers.iter().map(|p| (*p).to_owned()).collect(),
        })
    }

    /// Registered route names, sorted.
    pub fn providers(&self) -> Vec<String> {
        self.registry.providers()
    }

    /// The adapter serving `provider`, if any.
    pub fn adapter(&self, provider: &str) -> Option<Arc<dyn Adapter>> {
        self.registry.route(provider).map(|r| r.adapter)
    }

    /// The retry policy captured for `provider` when its adapter registered.
    pub fn retry_policy(&self, provider: &str) -> Option<RetryPolicy> {
        self.registry.route(provider).and_then(|r| r.retry_policy)
    }

    /// The advisory model catalog of `provider` (empty when no adapter serves it).
    pub fn list_models(&self, provider: &str) -> Vec<ModelInfo> {
        self.registry
            .route(provider)
            .map(|r| r.adapter.list_models(provider))
            .unwrap_or_default()
    }

    /// Sets the store image blocks are read from (the session store's attachments), for every
    /// request whose options name none. Until it is set, an image in a request fails that
    /// request with a clear error.
    pub fn set_attachments(&self, attachments: Arc<dyn dsh_session::Attachments>) {
        *self.registry.attachments.write() = Some(attachments);
    }

    /// Resolves the model once and materializes the adapter's defaults into `config`.
    ///
    /// `max_tokens` is filled from the model's default output ceiling and `reasoning_effort`
    /// from its default effort, each only when absent, and each filled field is marked in
    /// [`AdapterDefaults`]. An explicit effort the model does not advertise fails with
    /// `UNSUPPORTED_REASONING_EFFORT` before any request is made; an unknown route fails with
    /// `NO_ADAPTER`.
    pub async fn prepare_call(
        &self,
        mut config: LlmCallConfig,
        cancel: &CancellationToken,
    ) -> Result<PreparedCall, LlmError> {
        let route = self
            .registry
            .route(&config.provider)
            .ok_or_else(|| self.registry.no_adapter(&config.provider))?;
        if cancel.is_cancelled() {
            return Err(LlmError::new(
                FailureCode::Aborted,
                "the call was cancelled before it was prepared",
            ));
        }
        let model = route
            .adapter
            .resolve_model(&config.provider, &config.model, cancel)
            .await?;
        let mut adapter_defaults = AdapterDefaults::default();
        match (&config.reasoning_effort, &model.reasoning) {
            (Some(effort), Some(reasoning)) if !reasoning.offers(effort) => {
                return Err(unsupported_effort(&config, effort, &reasoning.efforts));
            }
            (Some(effort), None) => {
                return Err(unsupported_effort(&config, effort, &[]));
            }
            (None, Some(reasoning)) => {
                if let Some(default) = &reasoning.default_effort {
                    config.reasoning_effort = Some(default.clone());
                    adapter_defaults.reasoning_effort = true;
                }
            }
            _ => {}
        }
        if config.max_tokens.is_none()
            && let Some(default) = model.default_max_tokens
        {
            config.max_tokens = Some(default);
            adapter_defaults.max_tokens = true;
        }
        Ok(PreparedCall {
            config,
            adapter_defaults,
            retry_policy: route.retry_policy.clone(),
            context_window: model.context_window,
            vision: model.input_modalities.iter().any(|m| m == "image"),
            adapter: route.adapter,
            registry: self.registry.clone(),
        })
    }

    /// Streams an unprepared request to the adapter serving `options.config.provider`.
    ///
    /// No adapter is a terminal `finish{error: NO_ADAPTER}`; every adapter failure is
    /// normalized into one terminal `finish`.
    pub fn stream(&self, options: GenerateOptions) -> LlmStream {
        match self.registry.route(&options.config.provider) {
            Some(route) => self.registry.dispatch(&route.adapter, options),
            None => {
                let failure = self.registry.no_adapter(&options.config.provider);
                single(terminal_failure(failure, &options.cancel))
            }
        }
    }
}

fn unsupported_effort(config: &LlmCallConfig, effort: &str, offered: &[String]) -> LlmError {
    let offered = if offered.is_empty() {
        "it takes no reasoning effort".to_owned()
    } else {
        format!("it offers {}", offered.join(", "))
    };
    LlmError::new(
        FailureCode::UnsupportedReasoningEffort,
        format!(
            "model `{}` on `{}` does not offer reasoning effort `{effort}`; {offered}",
            config.model, config.provider
        ),
    )
}
