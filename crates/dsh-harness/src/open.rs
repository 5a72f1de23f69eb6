//! Opening a session: the one entry point every front end uses.
//!
//! [`Harness::open`] resolves what the person named (a new session, an id or a unique prefix
//! of one, the newest session of the directory, a fork), applies the resume-route rule, builds
//! the agent and says what it decided ([`OpenedSession::notices`]), with the effective policy
//! the front end shows.

use std::path::PathBuf;

use dsh_agent::{AgentHandle, AgentRef, AgentRegistry, CreateAgentOptions, ResumeAgentOptions};
use std::sync::Arc;

use dsh_guard::SessionPolicies;
use dsh_plan::{PlanMode, Trigger};
use dsh_session::{SessionId, SessionMeta};
use dsh_skills::{Catalog, Catalogs, Expansion, Problem};

use crate::agent_setup::agent_setup;
use crate::compose::Harness;
use crate::config::Settings;
use crate::error::HarnessError;
use crate::planner::RouteOverrides;
use crate::policy::EffectivePolicy;
use crate::resume_route::Route;
use crate::switch::SessionChoices;
use crate::workspace::{same_dir, workspace_dir};

/// Which session to open.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum SessionReference {
    /// A fresh session.
    #[default]
    New,
    /// A stored session: its full id, or a unique prefix of one.
    Resume(String),
    /// The most recently active session a person started in the working directory.
    Continue,
    /// A new session holding a copy of a stored one's conversation (up to and including
    /// event `at`, else all of it), continued from there.
    Fork {
        /// The source session: its id or a unique prefix.
        reference: String,
        /// The last event of the source to keep.
        at: Option<u64>,
    },
}

/// What a front end asks [`Harness::open`] for.
#[derive(Clone, Debug, Default)]
pub struct SessionRequest {
    /// The working directory of a new session, and where [`SessionReference::Continue`] looks
    /// (default: the current directory). A resumed session keeps its own; naming another is
    /// reported in [`OpenedSession::notices`].
    pub cwd: Option<PathBuf>,
    /// Which session.
    pub reference: SessionReference,
    /// A route on top of the harness' flags.
    pub route: RouteOverrides,
    /// Stop after this many model requests (`dsh run --max-turns`).
    pub max_turns: Option<u32>,
    /// Open the session in plan mode (`--plan`): explore read-only, then propose a plan.
    pub plan: bool,
}

impl SessionRequest {
    /// A request for `reference` with nothing else set.
    pub fn new(reference: SessionReference) -> Self {
        Self {
            reference,
            ..Self::default()
        }
    }

    /// The same request working in (or looking in) `cwd`.
    pub fn in_dir(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }
}

/// The session a request names, before it is opened ([`Harness::locate`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocatedSession {
    /// Its id (for a new session, the one it will get).
    pub id: SessionId,
    /// Whether it is a stored session (resumed or forked).
    pub resumed: bool,
}

/// An opened session: the agent working in it and what the harness decided.
pub struct OpenedSession {
    /// The agent's teardown capability; disposing it detaches the session.
    pub handle: AgentHandle,
    /// Whether a stored session was resumed (or forked) rather than created.
    pub resumed: bool,
    /// The route the agent uses.
    pub route: Route,
    /// What the person should be told (the session continues on another route because they
    /// asked; a `--cwd` that a resumed session ignores).
    pub notices: Vec<String>,
}

impl OpenedSession {
    /// The session's (and its agent's) id.
    pub fn id(&self) -> &SessionId {
        self.handle.agent().id()
    }

    /// The agent working in the session.
    pub fn agent(&self) -> &AgentRef {
        self.handle.agent()
    }
}

impl Harness {
    /// Opens the session `request` names.
    ///
    /// ```no_run
    /// # async fn demo(harness: &dsh_harness::Harness) -> Result<(), dsh_harness::HarnessError> {
    /// use dsh_harness::{SessionReference, SessionRequest};
    ///
    /// // `dsh run -c` in a project: the newest session there, on the route it was held on.
    /// let opened = harness
    ///     .open(SessionRequest::new(SessionReference::Continue).in_dir("/src/project"))
    ///     .await?;
    /// for notice in &opened.notices {
    ///     eprintln!("dsh: {notice}");
    /// }
    /// opened.agent().followup(dsh_session::Message::user_text("and now the tests"))?;
    /// opened.agent().when_idle().await;
    /// opened.handle.dispose().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn open(&self, request: SessionRequest) -> Result<OpenedSession, HarnessError> {
        let located = self.locate(&request).await?;
        self.open_located(located, request).await
    }

    /// The first half of [`open`](Self::open): which session `request` names (a fork is made
    /// here), before any agent exists. A front end that must listen to the session from its
    /// first event on (`dsh run --output-format stream-json`) subscribes in between.
    pub async fn locate(&self, request: &SessionRequest) -> Result<LocatedSession, HarnessError> {
        let (id, resumed) = match &request.reference {
            SessionReference::New => (SessionId::generate(), false),
            SessionReference::Resume(reference) => (self.resolve(reference).await?, true),
            SessionReference::Continue => {
                let cwd = workspace_dir(request.cwd.clone())?;
                (
                    crate::session_ref::newest_in(&self.store, &cwd).await?,
                    true,
                )
            }
            SessionReference::Fork { reference, at } => {
                let source = self.resolve(reference).await?;
                let header = self.store.fork(&source, *at, None).await?;
                (header.id, true)
            }
        };
        Ok(LocatedSession { id, resumed })
    }

    /// The second half of [`open`](Self::open): the agent for a located session.
    pub async fn open_located(
        &self,
        located: LocatedSession,
        request: SessionRequest,
    ) -> Result<OpenedSession, HarnessError> {
        let LocatedSession { id, resumed } = located;
        let mut notices = Vec::new();
        let handle = if resumed {
            let mut plan = self
                .planner
                .resumed_session(&id, &request.route, request.max_turns)
                .await?;
            notices.extend(plan.notice.clone());
            // `--cwd` on a resume (not `--continue`, where it only finds the session) moves
            // the session there.
            if request.reference != SessionReference::Continue
                && let Some(dir) = &request.cwd
            {
                plan.spec.reroot = Some(workspace_dir(Some(dir.clone()))?);
            }
            let mut options = ResumeAgentOptions::new(id.clone());
            options.agent_options = plan.options.clone();
            options.setup = Some(agent_setup(&plan.spec));
            let handle = self.core.registry.resume(&self.ctx, options).await?;
            (handle, plan.route())
        } else {
            let cwd = workspace_dir(request.cwd.clone())?;
            let plan = self
                .planner
                .new_session(&request.route, request.max_turns)?;
            let handle = self
                .core
                .registry
                .create(
                    &self.ctx,
                    CreateAgentOptions {
                        session_id: Some(id.clone()),
                        meta: SessionMeta {
                            cwd: Some(cwd),
                            ..SessionMeta::default()
                        },
                        agent_options: plan.options.clone(),
                        setup: Some(agent_setup(&plan.spec)),
                        ..CreateAgentOptions::default()
                    },
                )
                .await?;
            (handle, plan.route())
        };
        let (handle, route) = handle;
        if let Some(catalog) = self.catalog(&id) {
            notices.extend(
                catalog
                    .problems()
                    .iter()
                    .map(|p| format!("skill or command skipped: {p}")),
            );
        }
        if request.plan
            && let Err(e) = self.set_plan(handle.agent(), true)
        {
            handle.dispose().await;
            return Err(e);
        }
        // A resumed session moved by `--cwd`: said, naming where it was.
        if resumed
            && request.reference != SessionReference::Continue
            && request.cwd.is_some()
            && let Some(started) = handle.agent().session().header().cwd.as_deref()
            && let Some(now) = handle.agent().session().cwd()
            && !same_dir(started, &now)
        {
            notices.push(format!(
                "session {id} works in {} from now on (it started in {})",
                now.display(),
                started.display()
            ));
        }
        Ok(OpenedSession {
            handle,
            resumed,
            route,
            notices,
        })
    }

    /// The stored session `reference` names: that exact id, else the only one whose id
    /// starts with it (more than one match is an error naming them). A reference matching
    /// nothing is passed on verbatim, so the store's own error says what is wrong with it.
    pub async fn resolve(&self, reference: &str) -> Result<SessionId, HarnessError> {
        crate::session_ref::resolve(&self.store, reference).await
    }

    /// What session `session` runs under now: the configured sandbox, the approval policy (the
    /// session's own choice over the configured one over the front end's default) and the
    /// model of its route (a person's switch over the route it was opened on). Cheap: a front
    /// end may ask again whenever something may have changed.
    pub fn policy(&self, session: &SessionId) -> EffectivePolicy {
        let guard = &self.settings.guard;
        let approval = self
            .ctx
            .get::<SessionPolicies>()
            .and_then(|p| p.get(session))
            .unwrap_or(self.approval);
        let Route { provider, model } =
            session_route(&self.settings, &self.choices, &self.core.registry, session);
        let plan = self.plan_mode().is_some_and(|p| p.is_active(session));
        EffectivePolicy {
            plan,
            // Plan mode runs the session's commands read-only whatever the configured mode.
            sandbox: if plan {
                guard
                    .sandbox
                    .value
                    .narrowed_to(dsh_guard::SandboxMode::ReadOnly)
            } else {
                guard.sandbox.value
            },
            network: guard.network.value,
            writable_roots: guard.writable_roots.value.clone(),
            approval,
            provider,
            model: self.settings.catalog.facts(&model),
        }
    }
}

/// The route `session` runs on now: a person's switch over the route its agent was opened on
/// over the configured one (a new session, whose id no agent has yet).
pub(crate) fn session_route(
    settings: &Settings,
    choices: &SessionChoices,
    registry: &AgentRegistry,
    session: &SessionId,
) -> Route {
    let agent = registry.get(session);
    let switched = choices.route(session);
    let provider = switched
        .as_ref()
        .map(|r| r.provider.clone())
        .or_else(|| agent.as_ref().and_then(|a| a.options().provider.clone()))
        .unwrap_or_else(|| settings.provider.value.clone());
    let model = switched
        .map(|r| r.model)
        .or_else(|| agent.as_ref().and_then(|a| a.options().model.clone()))
        .unwrap_or_else(|| settings.model.value.clone());
    Route { provider, model }
}

impl Harness {
    /// Plan mode of every session (mounted for every front end).
    pub fn plan_mode(&self) -> Option<Arc<PlanMode>> {
        self.ctx.get::<PlanMode>()
    }

    /// Turns plan mode of `agent`'s session on or off for the person (`/plan`, `--plan`, an
    /// editor's mode); `false` when it already was so.
    pub fn set_plan(&self, agent: &AgentRef, active: bool) -> Result<bool, HarnessError> {
        let mode = self
            .plan_mode()
            .ok_or_else(|| HarnessError::Plan("plan mode is not available".to_owned()))?;
        // Before the first turn it is how the session starts (`--plan`), after it a switch.
        let by = if agent.session().last_turn() == 0 {
            Trigger::Start
        } else {
            Trigger::User
        };
        mode.set(agent, active, by)
            .map_err(|e| HarnessError::Plan(e.to_string()))
    }

    /// The skills and commands `session` started with, while its agent lives.
    pub fn catalog(&self, session: &SessionId) -> Option<Arc<Catalog>> {
        self.ctx.get::<Catalogs>()?.get(session)
    }

    /// The prompt a person's `/name args` line stands for in `session` (a custom command or a
    /// skill), `None` when the line names neither; an error names a file that cannot be read
    /// now.
    pub fn expand(&self, session: &SessionId, line: &str) -> Option<Result<Expansion, Problem>> {
        self.catalog(session)?.expand(line)
    }
}
