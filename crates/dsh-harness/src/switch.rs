//! What a person changes about a running session: its model (and provider) and how much it
//! asks.
//!
//! **Model.** [`Harness::switch_route`] moves a session to another model, or another
//! configured provider, from its next model request on, without re-opening it (its background
//! commands and subagents keep running). The choice is durable: a `route/switched` event in the
//! session's log, which the resume-route rule reads like a request's own route, so a session
//! resumed later keeps the model the person chose even if no request was made since. The new
//! route's settings (output cap, reasoning effort, key) are resolved exactly as for a session
//! started on it, and an `agent/request` listener applies them to every request of that
//! session, after the agent's own listeners (the outermost word on the route is the
//! person's).
//!
//! **Approvals.** [`Harness::set_approval`] is a front end's mode switch (the terminal UI's
//! `/mode auto`, like an editor's): the guard's per-session policy, cleared when the session
//! closes. Not durable: a resumed session starts under the configured policy again.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use dsh_agent::AgentRef;
use dsh_agent::events::AgentRequest;
use dsh_guard::{ApprovalPolicy, SessionPolicies};
use dsh_kernel::Context;
use dsh_llm::catalog::ModelFacts;
use dsh_session::{RouteSwitched, SessionDisposed, SessionId};
use parking_lot::Mutex;

use crate::compose::Harness;
use crate::error::HarnessError;
use crate::planner::RouteOverrides;
use crate::resume_route::Route;

/// The log event that records a person's switch of a session's route (`{provider, model}`;
/// [`RouteSwitched`], shared with the editor bridge's model select).
pub const ROUTE_EVENT: &str = RouteSwitched::TYPE;

/// One model a session can switch to ([`Harness::models`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ModelChoice {
    /// The configured provider route that serves it.
    pub provider: String,
    /// The model with its window and prices, from the catalog.
    pub facts: ModelFacts,
}

/// A switched route and the request settings that go with it.
#[derive(Clone, Debug)]
struct Switched {
    route: Route,
    max_tokens: Option<u32>,
    reasoning_effort: Option<String>,
}

/// The choices in force, by live session.
#[derive(Default)]
pub(crate) struct SessionChoices {
    routes: Mutex<HashMap<SessionId, Switched>>,
    /// Sessions whose approval policy this harness set (and so clears).
    approvals: Mutex<HashSet<SessionId>>,
}

impl SessionChoices {
    /// The route `session` was switched to, if it was.
    pub(crate) fn route(&self, session: &SessionId) -> Option<Route> {
        self.routes.lock().get(session).map(|s| s.route.clone())
    }

    /// Applies the choices to every request and forgets them when a session closes (a later
    /// resume reads the durable record instead).
    pub(crate) fn install(self: &Arc<Self>, ctx: &Context) -> Result<(), HarnessError> {
        let choices = self.clone();
        let _ = ctx
            .on_waterfall::<AgentRequest, _>(move |proposal, next| {
                let switched = choices.routes.lock().get(proposal.agent.id()).cloned();
                async move {
                    let mut config = next.run(proposal).await?;
                    if let Some(s) = switched {
                        config.provider = s.route.provider;
                        config.model = s.route.model;
                        config.max_tokens = s.max_tokens;
                        config.reasoning_effort = s.reasoning_effort;
                    }
                    Ok(config)
                }
            })
            .map_err(|e| HarnessError::start("apply model switches", e))?;
        let choices = self.clone();
        let policies = ctx.get::<SessionPolicies>();
        let _ = ctx
            .on_global::<SessionDisposed>(move |session| {
                choices.routes.lock().remove(session.id());
                if choices.approvals.lock().remove(session.id())
                    && let Some(policies) = &policies
                {
                    policies.set(session.id(), None);
                }
            })
            .map_err(|e| HarnessError::start("forget closed sessions' choices", e))?;
        Ok(())
    }
}

impl Harness {
    /// Every model of every configured provider, the selected provider's first: what a
    /// session may switch to, with windows and prices.
    pub fn models(&self) -> Vec<ModelChoice> {
        let selected = &self.settings.provider.value;
        let mut providers: Vec<&String> = self.settings.providers.keys().collect();
        providers.sort_by_key(|p| *p != selected);
        providers
            .into_iter()
            .flat_map(|provider| {
                self.core
                    .llm
                    .list_models(provider)
                    .into_iter()
                    .map(|m| ModelChoice {
                        provider: provider.clone(),
                        facts: self.settings.catalog.facts(&m.id),
                    })
            })
            .collect()
    }

    /// Moves `agent`'s session to `route` from its next model request on (see the module
    /// documentation): a provider named alone means its default model, a model named alone
    /// stays on the session's provider. The route must be configured, have its key, and list
    /// the model when its catalog lists any. Recorded in the log before it applies.
    pub async fn switch_route(
        &self,
        agent: &AgentRef,
        route: RouteOverrides,
    ) -> Result<Route, HarnessError> {
        let current = self.policy(agent.id());
        let provider = route.provider.unwrap_or(current.provider);
        if !self.settings.providers.contains_key(&provider) {
            let known: Vec<&str> = self.settings.providers.keys().map(String::as_str).collect();
            return Err(HarnessError::Route(format!(
                "unknown provider `{provider}` (configured: {})",
                known.join(", ")
            )));
        }
        let listed: Vec<String> = self
            .core
            .llm
            .list_models(&provider)
            .into_iter()
            .map(|m| m.id)
            .collect();
        if let Some(model) = &route.model
            && !listed.is_empty()
            && !listed.contains(model)
        {
            return Err(HarnessError::Route(format!(
                "provider `{provider}` does not list model `{model}` (it lists: {})",
                listed.join(", ")
            )));
        }
        let settings = self.planner.route_settings(&RouteOverrides {
            provider: Some(provider),
            model: route.model,
        })?;
        let switched = Switched {
            route: Route {
                provider: settings.provider.value.clone(),
                model: settings.model.value.clone(),
            },
            max_tokens: settings.max_tokens.as_ref().map(|m| m.value),
            reasoning_effort: settings.reasoning_effort.as_ref().map(|e| e.value.clone()),
        };
        let session = agent.session();
        let record = RouteSwitched {
            provider: switched.route.provider.clone(),
            model: switched.route.model.clone(),
        };
        session
            .append_draft(record.draft())
            .map_err(|e| HarnessError::store("record the model switch", e))?;
        if session.is_attached() {
            self.core
                .store
                .flush(session)
                .await
                .map_err(|e| HarnessError::store("record the model switch", e))?;
        }
        let route = switched.route.clone();
        self.choices
            .routes
            .lock()
            .insert(agent.id().clone(), switched);
        Ok(route)
    }

    /// Sets (`Some`) or clears (`None`) how much `session` asks, over the configured policy
    /// (see [`SessionPolicies`]); cleared when the session closes.
    pub fn set_approval(&self, session: &SessionId, policy: Option<ApprovalPolicy>) {
        let Some(policies) = self.ctx.get::<SessionPolicies>() else {
            return;
        };
        policies.set(session, policy);
        let mut set = self.choices.approvals.lock();
        if policy.is_some() {
            set.insert(session.clone());
        } else {
            set.remove(session);
        }
    }
}
