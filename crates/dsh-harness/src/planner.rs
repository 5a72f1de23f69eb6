//! What an agent about to be opened should be: its route (the resume-route rule), its output
//! cap and its per-agent composition. One planner per harness; the harness opens sessions with
//! it and provides it to front ends that create agents themselves (`dsh_agent::AgentPlanner`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use dsh_agent::{AgentError, AgentOptions, AgentPlan, AgentPlanner};
use dsh_session::SessionId;
use parking_lot::Mutex;

use crate::agent_setup::{AgentSpec, agent_setup};
use crate::config::{Overrides, Settings};
use crate::error::HarnessError;
use crate::resume_route::{Route, resume_flags, stored_route};
use crate::store::Store;

/// A route a person asked for on top of the harness' own flags (the terminal UI's `/model`,
/// an editor's model choice): `None` keeps what the flags (or, on resume, the session) say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouteOverrides {
    /// Provider route name.
    pub provider: Option<String>,
    /// Model id.
    pub model: Option<String>,
}

/// A planned agent: what the registry needs, and what the front end is told.
pub(crate) struct Plan {
    /// The settings of the plan's route (the harness' own, or those re-resolved for the route
    /// a resumed session keeps).
    pub(crate) settings: Arc<Settings>,
    /// Route and output cap.
    pub(crate) options: AgentOptions,
    /// Per-agent composition.
    pub(crate) spec: AgentSpec,
    /// Said when the route differs from the session's own because the person asked.
    pub(crate) notice: Option<String>,
}

impl Plan {
    /// The route the agent will use.
    pub(crate) fn route(&self) -> Route {
        Route {
            provider: self.settings.provider.value.clone(),
            model: self.settings.model.value.clone(),
        }
    }
}

/// The provider and model flags that select a route.
type RouteKey = (Option<String>, Option<String>);

/// Plans agents for one harness.
pub(crate) struct Planner {
    base: Arc<Settings>,
    flags: Overrides,
    store: Store,
    /// Settings re-resolved for other routes, by the flags that select them.
    routes: Mutex<HashMap<RouteKey, Arc<Settings>>>,
}

impl Planner {
    pub(crate) fn new(base: Arc<Settings>, flags: Overrides, store: Store) -> Self {
        Self {
            base,
            flags,
            store,
            routes: Mutex::new(HashMap::new()),
        }
    }

    /// The harness' flags with `overrides` on top.
    fn flags_with(&self, overrides: &RouteOverrides) -> Overrides {
        let mut flags = self.flags.clone();
        if let Some(provider) = &overrides.provider {
            flags.provider = Some(provider.clone());
            // A provider named alone means its own default model, not the flags' one.
            flags.model = None;
        }
        if let Some(model) = &overrides.model {
            flags.model = Some(model.clone());
        }
        flags
    }

    /// The settings `flags` select: the harness' own when they are its flags, else resolved
    /// again (the file read once more) and remembered, with the route checked (URL, model, key)
    /// so a session never starts on a route that cannot answer.
    fn settings_for(&self, flags: &Overrides) -> Result<Arc<Settings>, HarnessError> {
        if flags.provider == self.flags.provider && flags.model == self.flags.model {
            return Ok(self.base.clone());
        }
        let key = (flags.provider.clone(), flags.model.clone());
        if let Some(settings) = self.routes.lock().get(&key) {
            return Ok(settings.clone());
        }
        let settings = Settings::resolve(&crate::env::process_env, flags)?;
        settings.check_credentials(&crate::env::process_env)?;
        let settings = Arc::new(settings);
        self.routes.lock().insert(key, settings.clone());
        Ok(settings)
    }

    /// The settings of the route `overrides` names on top of the harness' flags, checked
    /// like a new session's (a running session switching to it).
    pub(crate) fn route_settings(
        &self,
        overrides: &RouteOverrides,
    ) -> Result<Arc<Settings>, HarnessError> {
        self.settings_for(&self.flags_with(overrides))
    }

    fn plan(
        &self,
        settings: Arc<Settings>,
        max_turns: Option<u32>,
        notice: Option<String>,
    ) -> Plan {
        let options = AgentOptions {
            provider: Some(settings.provider.value.clone()),
            model: Some(settings.model.value.clone()),
            max_tokens: settings.max_tokens.as_ref().map(|m| m.value),
        };
        let spec = AgentSpec {
            max_turns,
            reasoning_effort: settings.reasoning_effort.as_ref().map(|e| e.value.clone()),
            home: Some(settings.home.value.clone()),
            user_home: crate::env::process_env("HOME").map(PathBuf::from),
            provider_web_search: match &settings.web_search {
                Some(crate::config::web_search::WebSearchChoice::Provider(search)) => Some(*search),
                _ => None,
            },
            reroot: None,
        };
        Plan {
            settings,
            options,
            spec,
            notice,
        }
    }

    /// The plan of a fresh session.
    pub(crate) fn new_session(
        &self,
        overrides: &RouteOverrides,
        max_turns: Option<u32>,
    ) -> Result<Plan, HarnessError> {
        let settings = self.settings_for(&self.flags_with(overrides))?;
        Ok(self.plan(settings, max_turns, None))
    }

    /// The plan of stored session `id`: the route it last used unless the flags or
    /// `overrides` name another (then a notice says so). A session that never sent a request
    /// (or cannot be read: resuming it reports why) takes the harness' route.
    pub(crate) async fn resumed_session(
        &self,
        id: &SessionId,
        overrides: &RouteOverrides,
        max_turns: Option<u32>,
    ) -> Result<Plan, HarnessError> {
        let flags = self.flags_with(overrides);
        let Some(stored) = stored_route(&self.store, id).await else {
            return Ok(self.plan(self.settings_for(&flags)?, max_turns, None));
        };
        let (resumed, notice) = resume_flags(&flags, &stored);
        let settings = self.settings_for(&resumed).map_err(|e| {
            HarnessError::Route(format!(
                "session {id} used provider `{}` with model `{}`; name a configured one with \
                 --provider/--model: {e}",
                stored.provider, stored.model
            ))
        })?;
        let notice = notice.map(|n| format!("{id}: {n}"));
        Ok(self.plan(settings, max_turns, notice))
    }
}

fn planning_failed(e: HarnessError) -> AgentError {
    AgentError::creation(e.to_string(), None)
}

#[async_trait]
impl AgentPlanner for Planner {
    async fn plan_new(&self, _cwd: &Path) -> Result<AgentPlan, AgentError> {
        let plan = self
            .new_session(&RouteOverrides::default(), None)
            .map_err(planning_failed)?;
        Ok(AgentPlan {
            options: plan.options,
            setup: Some(agent_setup(&plan.spec)),
            notice: plan.notice,
        })
    }

    async fn plan_resume(&self, id: &SessionId) -> Result<AgentPlan, AgentError> {
        let plan = self
            .resumed_session(id, &RouteOverrides::default(), None)
            .await
            .map_err(planning_failed)?;
        Ok(AgentPlan {
            options: plan.options,
            setup: Some(agent_setup(&plan.spec)),
            notice: plan.notice,
        })
    }
}
