//! The `AgentLoop` service: the factory that creates, resumes and owns concrete agents.
//!
//! Creation is one rollback-protected transaction: build the session, the driver and the
//! agent's scoped context privately; await optional setup while nothing is published; then
//! enter both registries, announce `session/created` and `agent/created`, emit
//! `agent/session-start`, re-checking liveness after each edge. Any failure disposes the
//! private state through the same teardown a live agent uses, so ids are reusable at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use async_trait::async_trait;
use dsh_agent::events::{AgentSessionStart, SessionStartNotice, SessionStartSource};
use dsh_agent::{
    Agent, AgentError, AgentFactory, AgentHandle, AgentLocal, AgentOptions, AgentRef,
    AgentRegistry, CreateAgentOptions, Inbox, ResumeAgentOptions, Setup, agent_of,
};
use dsh_kernel::{BoxError, Context, KernelError, Notification, Plugin, ScopeTag};
use dsh_llm::Llm;
use dsh_prompt::SystemPrompt;
use dsh_session::{Persistence, Session, SessionId, SessionMeta, SessionStore};
use dsh_tools::ToolRuntime;
use futures::FutureExt;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{ConfiguredAgent, LoopConfig};
use crate::driver::{LoopAgent, Services};
use crate::error::LoopError;
use crate::lifecycle::Lifecycle;

/// `agent-loop/config-start-failed`: a config-declared agent could not start.
pub struct ConfigStartFailed;
impl Notification for ConfigStartFailed {
    const NAME: &'static str = "agent-loop/config-start-failed";
    type Payload = ConfigStartFailure;
}

/// Payload of [`ConfigStartFailed`].
#[derive(Clone, Debug)]
pub struct ConfigStartFailure {
    /// The session id the agent would have had.
    pub session_id: SessionId,
    /// Why it failed.
    pub error: String,
}

pub(crate) struct LoopInner {
    pub(crate) ctx: Context,
    pub(crate) svc: Arc<Services>,
    pub(crate) lifecycles: Mutex<HashMap<u64, Arc<Lifecycle>>>,
    next: AtomicU64,
    active: AtomicBool,
    /// Creations and resumes in progress: `shutdown` waits for them, so none can publish an
    /// agent (or keep loading from persistence) after the loop stopped.
    in_flight: TaskTracker,
    /// Fired by `shutdown`: aborts in-flight setup and persistence loads.
    closing: CancellationToken,
    config: LoopConfig,
}

/// The agent factory and owner of config-declared agents. Provided as a service by
/// [`AgentLoopPlugin`]; programs create agents through `AgentRegistry::create`, which delegates
/// here.
pub struct AgentLoop {
    inner: Arc<LoopInner>,
}

fn creation(message: impl Into<String>, source: Option<BoxError>) -> AgentError {
    AgentError::creation(message, source)
}

impl AgentLoop {
    /// Builds the loop over the services provided in `ctx` (session store, LLM runtime, tool
    /// runtime, system prompt, agent registry).
    pub fn new(ctx: &Context, config: LoopConfig) -> Result<Arc<Self>, LoopError> {
        config.validate()?;
        let svc = Arc::new(Services {
            store: ctx.require::<SessionStore>()?,
            llm: ctx.require::<Llm>()?,
            tools: ctx.require::<ToolRuntime>()?,
            prompt: ctx.require::<SystemPrompt>()?,
            registry: ctx.require::<AgentRegistry>()?,
            max_parallel: config.max_parallel_tool_calls.into(),
            runtime: tokio::runtime::Handle::try_current().map_err(|_| {
                LoopError::Config("the agent loop must be created inside a tokio runtime".into())
            })?,
        });
        Ok(Arc::new(Self {
            inner: Arc::new(LoopInner {
                ctx: ctx.clone(),
                svc,
                lifecycles: Mutex::new(HashMap::new()),
                next: AtomicU64::new(1),
                active: AtomicBool::new(true),
                in_flight: TaskTracker::new(),
                closing: CancellationToken::new(),
                config,
            }),
        }))
    }

    /// Changes `max_parallel_tool_calls` live; read at each tool group's start.
    pub fn set_max_parallel_tool_calls(&self, n: usize) -> Result<(), LoopError> {
        if n == 0 {
            return Err(LoopError::Config(
                "maxParallelToolCalls must be a positive integer".into(),
            ));
        }
        self.inner.svc.max_parallel.store(n, Ordering::Relaxed);
        Ok(())
    }

    /// Live agents this loop owns (created or resumed and not yet disposed).
    pub fn agents(&self) -> Vec<AgentRef> {
        self.inner
            .lifecycles
            .lock()
            .values()
            .map(|l| l.agent.clone() as AgentRef)
            .collect()
    }

    fn check_active(&self) -> Result<(), AgentError> {
        if self.inner.active.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(creation("agent loop is not active", None))
        }
    }

    /// Builds the private (unpublished) driver and its lifecycle, owned by `owner`.
    fn build(
        &self,
        owner: &Context,
        session: Arc<Session>,
        options: AgentOptions,
    ) -> Result<Arc<Lifecycle>, AgentError> {
        let inbox = Inbox::restore(session.clone())?;
        let id = session.id().clone();
        let tag = ScopeTag::new(id.as_str());
        let base = self.inner.ctx.isolated(format!("agent:{id}"), Some(tag));
        let svc = self.inner.svc.clone();
        let agent = Arc::new_cyclic(|weak: &Weak<LoopAgent>| {
            let weak_dyn: Weak<dyn Agent> = weak.clone();
            let ctx = base.with_local(Arc::new(AgentLocal(weak_dyn.clone())));
            inbox.bind(weak_dyn);
            LoopAgent::new(weak.clone(), session, ctx, inbox, options, svc)
        });
        self.register_variables(&agent)?;
        let key = self.inner.next.fetch_add(1, Ordering::Relaxed);
        let lifecycle = Arc::new(Lifecycle::new(key, agent, Arc::downgrade(&self.inner)));
        // The owner's scope disposal tears the agent down like the handle does.
        let on_owner = lifecycle.clone();
        let effect = owner
            .scope()
            .defer_async(move || async move { on_owner.dispose().await });
        match effect {
            Ok(effect) => {
                *lifecycle.owner_effect.lock() = Some((owner.scope().clone(), effect));
                *lifecycle.owner.lock() = Some(owner.scope().clone());
            }
            Err(e) => return Err(e.into()),
        }
        self.inner.lifecycles.lock().insert(key, lifecycle.clone());
        Ok(lifecycle)
    }

    /// Prompt variables every agent provides: `provider`, `model` and `cwd`.
    fn register_variables(&self, agent: &Arc<LoopAgent>) -> Result<(), AgentError> {
        let prompt = &self.inner.svc.prompt;
        let provider = agent.options.provider.clone();
        let model = agent.options.model.clone();
        let cwd = agent
            .session
            .header()
            .cwd
            .as_ref()
            .map(|p| p.display().to_string());
        let vars = [("provider", provider), ("model", model), ("cwd", cwd)];
        for (name, value) in vars {
            let _ = prompt
                .variable(&agent.ctx, name, Arc::new(move |_| value.clone()))
                .map_err(|e| {
                    creation(
                        format!("cannot register prompt variable `{name}`"),
                        Some(Box::new(e)),
                    )
                })?;
        }
        Ok(())
    }

    fn live_check(&self, lifecycle: &Lifecycle, owner: &Context) -> Result<(), AgentError> {
        self.check_active()?;
        if !owner.is_active() || lifecycle.creation.is_cancelled() {
            return Err(creation(
                format!(
                    "agent \"{}\" creation aborted: owner disposed during setup",
                    lifecycle.agent.id()
                ),
                None,
            ));
        }
        Ok(())
    }

    async fn setup_and_publish(
        &self,
        lifecycle: &Arc<Lifecycle>,
        owner: &Context,
        setup: Option<Setup>,
        cancel: Option<CancellationToken>,
        source: SessionStartSource,
    ) -> Result<(), AgentError> {
        let id = lifecycle.agent.id().clone();
        let cancel = cancel.unwrap_or_default();
        let aborted = || creation(format!("agent \"{id}\" creation aborted"), None);
        if let Some(setup) = setup {
            let run = setup(lifecycle.agent.ctx.clone());
            let commit = tokio::select! {
                r = run => r.map_err(|e| creation(format!("agent \"{id}\" setup failed"), Some(e)))?,
                () = cancel.cancelled() => return Err(aborted()),
                () = lifecycle.creation.cancelled() => return Err(aborted()),
                () = self.inner.closing.cancelled() => return Err(aborted()),
            };
            if let Some(commit) = commit {
                commit().map_err(|e| {
                    creation(format!("agent \"{id}\" setup commit failed"), Some(e))
                })?;
            }
        }
        if cancel.is_cancelled() {
            return Err(aborted());
        }
        self.live_check(lifecycle, owner)?;
        let svc = &self.inner.svc;
        let agent = &lifecycle.agent;
        let agent_ref: AgentRef = agent.clone();
        let owner_agent = agent_of(owner);
        *lifecycle.session_detach.lock() =
            Some(svc.store.enter(&agent.session, agent.ctx.tag().cloned())?);
        *lifecycle.agent_detach.lock() = Some(
            svc.registry
                .enter(agent_ref.clone(), owner_agent.as_ref())?,
        );
        svc.store.announce(&agent.session)?;
        self.live_check(lifecycle, owner)?;
        svc.registry.announce(&agent_ref)?;
        self.live_check(lifecycle, owner)?;
        agent.ctx.emit::<AgentSessionStart>(&SessionStartNotice {
            agent: agent_ref,
            source,
        });
        self.live_check(lifecycle, owner)
    }

    fn handle(lifecycle: &Arc<Lifecycle>) -> AgentHandle {
        let l = lifecycle.clone();
        AgentHandle::new(
            lifecycle.agent.clone(),
            Arc::new(move || l.dispose().boxed()),
        )
    }

    async fn publish_or_rollback(
        &self,
        lifecycle: Arc<Lifecycle>,
        owner: &Context,
        setup: Option<Setup>,
        cancel: Option<CancellationToken>,
        source: SessionStartSource,
    ) -> Result<AgentHandle, AgentError> {
        match self
            .setup_and_publish(&lifecycle, owner, setup, cancel, source)
            .await
        {
            Ok(()) => Ok(Self::handle(&lifecycle)),
            Err(e) => {
                lifecycle.dispose().await;
                Err(e)
            }
        }
    }

    /// Creates a fresh agent owned by `owner` (see [`AgentFactory::create_agent`]).
    pub async fn create_agent(
        &self,
        owner: &Context,
        options: CreateAgentOptions,
    ) -> Result<AgentHandle, AgentError> {
        self.inner
            .in_flight
            .track_future(self.create_tracked(owner, options))
            .await
    }

    async fn create_tracked(
        &self,
        owner: &Context,
        options: CreateAgentOptions,
    ) -> Result<AgentHandle, AgentError> {
        self.check_active()?;
        options.agent_options.validate()?;
        if let Some(cwd) = &options.meta.cwd
            && !cwd.is_absolute()
        {
            return Err(AgentError::InvalidOptions(format!(
                "session cwd must be absolute, got {}",
                cwd.display()
            )));
        }
        if !owner.is_active() {
            return Err(creation("owner is disposed", None));
        }
        let id = options.session_id.unwrap_or_else(SessionId::generate);
        if options
            .cancel
            .as_ref()
            .is_some_and(CancellationToken::is_cancelled)
        {
            return Err(creation(format!("agent \"{id}\" creation aborted"), None));
        }
        let session = self
            .inner
            .svc
            .store
            .prepare(Some(id), options.meta, options.seed)?;
        let lifecycle = self.build(owner, session, options.agent_options)?;
        self.publish_or_rollback(
            lifecycle,
            owner,
            options.setup,
            options.cancel,
            SessionStartSource::Startup,
        )
        .await
    }

    /// Resumes a persisted session owned by `owner` (see [`AgentFactory::resume_agent`]).
    pub async fn resume_agent(
        &self,
        owner: &Context,
        options: ResumeAgentOptions,
    ) -> Result<AgentHandle, AgentError> {
        self.inner
            .in_flight
            .track_future(self.resume_tracked(owner, options))
            .await
    }

    async fn resume_tracked(
        &self,
        owner: &Context,
        options: ResumeAgentOptions,
    ) -> Result<AgentHandle, AgentError> {
        self.check_active()?;
        options.agent_options.validate()?;
        let persistence = self
            .inner
            .ctx
            .get::<dyn Persistence>()
            .ok_or(AgentError::PersistenceNotConfigured)?;
        let id = options.session_id;
        if self.inner.svc.store.get(&id).is_some() {
            return Err(creation(
                format!("cannot resume session \"{id}\" while it is live"),
                None,
            ));
        }
        let cancel = options.cancel.clone().unwrap_or_default();
        let stored = tokio::select! {
            r = persistence.load(&id) => r.map_err(|e| creation(format!("cannot resume session \"{id}\""), Some(Box::new(e))))?,
            () = cancel.cancelled() => return Err(creation(format!("agent \"{id}\" creation aborted"), None)),
            () = self.inner.closing.cancelled() => return Err(creation(format!("agent \"{id}\" creation aborted: the agent loop is shutting down"), None)),
        };
        self.check_active()?;
        if !owner.is_active() {
            return Err(creation("owner disposed during setup", None));
        }
        let session = self
            .inner
            .svc
            .store
            .prepare_loaded(stored.header, stored.events)?;
        let lifecycle = self.build(owner, session, options.agent_options)?;
        self.publish_or_rollback(
            lifecycle,
            owner,
            options.setup,
            options.cancel,
            SessionStartSource::Resume,
        )
        .await
    }

    /// Starts the config-declared agents, owned by the loop. Call it once the composition is
    /// complete (adapters, tools, persistence). Failures are logged and reported as
    /// `agent-loop/config-start-failed`; they never stop the others.
    pub async fn start_configured(&self) {
        let agents = self.inner.config.agents.clone();
        for entry in agents {
            let id = entry
                .resume_session_id
                .clone()
                .or_else(|| entry.session_id.clone())
                .unwrap_or_else(|| format!("{}-session-{}", entry.id, uuid::Uuid::new_v4()));
            if let Err(error) = self.start_one(&entry, id.clone()).await {
                if !self.inner.active.load(Ordering::Acquire) {
                    return;
                }
                tracing::warn!(agent = %entry.id, %error, "config agent failed to start");
                self.inner
                    .ctx
                    .emit::<ConfigStartFailed>(&ConfigStartFailure {
                        session_id: id.into(),
                        error: error.to_string(),
                    });
            }
        }
    }

    async fn start_one(&self, entry: &ConfiguredAgent, id: String) -> Result<(), AgentError> {
        let agent_options = AgentOptions {
            provider: entry.provider.clone(),
            model: entry.model.clone(),
            max_tokens: entry.max_tokens,
        };
        let owner = self.inner.ctx.clone();
        if entry.resume_session_id.is_some() {
            let mut options = ResumeAgentOptions::new(id.into());
            options.agent_options = agent_options;
            self.resume_agent(&owner, options).await?;
        } else {
            self.create_agent(
                &owner,
                CreateAgentOptions {
                    session_id: Some(id.into()),
                    meta: SessionMeta {
                        cwd: entry.cwd.clone(),
                        ..SessionMeta::default()
                    },
                    agent_options,
                    ..CreateAgentOptions::default()
                },
            )
            .await?;
        }
        Ok(())
    }

    /// Stops the loop: no new agents, in-flight creations and resumes (a setup, a load from
    /// persistence) are aborted and awaited, then every agent it created is disposed (each
    /// through its ordered teardown) and awaited.
    pub async fn shutdown(&self) {
        self.inner.active.store(false, Ordering::Release);
        self.inner.closing.cancel();
        self.inner.in_flight.close();
        // A creation that already passed its last check publishes its lifecycle before it
        // completes, so it is in the snapshot below.
        self.inner.in_flight.wait().await;
        let lifecycles: Vec<Arc<Lifecycle>> =
            self.inner.lifecycles.lock().values().cloned().collect();
        futures::future::join_all(lifecycles.iter().map(|l| l.dispose())).await;
    }
}

#[async_trait]
impl AgentFactory for AgentLoop {
    async fn create_agent(
        &self,
        owner: &Context,
        options: CreateAgentOptions,
    ) -> Result<AgentHandle, AgentError> {
        AgentLoop::create_agent(self, owner, options).await
    }

    async fn resume_agent(
        &self,
        owner: &Context,
        options: ResumeAgentOptions,
    ) -> Result<AgentHandle, AgentError> {
        AgentLoop::resume_agent(self, owner, options).await
    }
}

/// Mounts the [`AgentLoop`]: provides it, registers it as the agent factory, and on unmount
/// disposes every agent it owns. Config-declared agents start when the composition calls
/// [`AgentLoop::start_configured`] — after adapters and tools are registered, so a resumed
/// agent with queued work does not run its first turn against a half-built harness.
pub struct AgentLoopPlugin {
    config: LoopConfig,
}

impl AgentLoopPlugin {
    /// A plugin with `config`.
    pub fn new(config: LoopConfig) -> Self {
        Self { config }
    }
}

impl Plugin for AgentLoopPlugin {
    fn name(&self) -> &str {
        "agent-loop"
    }

    async fn apply(&self, ctx: &Context) -> Result<(), BoxError> {
        let agent_loop = AgentLoop::new(ctx, self.config.clone())?;
        let registry = ctx.require::<AgentRegistry>()?;
        let _ = registry.set_factory(ctx, agent_loop.clone())?;
        ctx.provide::<AgentLoop>(agent_loop.clone())?;
        let on_unload = agent_loop.clone();
        ctx.scope()
            .defer_async(move || async move { on_unload.shutdown().await })
            .map_err(|e: KernelError| Box::new(e) as BoxError)?;
        Ok(())
    }
}
