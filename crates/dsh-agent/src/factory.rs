//! Agent creation through a registered factory, and the handles it returns.
//!
//! Creation lives on this interface (not in the loop crate) so front ends and plugins create
//! and own agents without depending on the concrete driver. The factory returns an
//! [`AgentHandle`]: the only capability that can tear the agent down.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use dsh_kernel::{BoxError, Context};
use dsh_session::{SessionEvent, SessionId, SessionMeta};
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::agent::{AgentOptions, AgentRef};
use crate::error::AgentError;

/// Runs synchronously immediately before publication; an error rolls creation back.
pub type Commit = Box<dyn FnOnce() -> Result<(), BoxError> + Send>;

/// Composition-only setup run while neither the session nor the agent is published. It
/// receives the agent's scoped context (registrations through it apply to that agent alone)
/// and may return a [`Commit`]. Setup must not drive the agent.
pub type Setup =
    Box<dyn FnOnce(Context) -> BoxFuture<'static, Result<Option<Commit>, BoxError>> + Send>;

/// Options of [`crate::AgentRegistry::create`].
#[derive(Default)]
pub struct CreateAgentOptions {
    /// The id shared by the agent and its session (caller-chosen, assumed globally unique).
    pub session_id: Option<SessionId>,
    /// Session metadata (cwd, lineage).
    pub meta: SessionMeta,
    /// Seed events (a fork's prefix); validated and copied at the session boundary.
    pub seed: Option<Vec<SessionEvent>>,
    /// Route and output cap.
    pub agent_options: AgentOptions,
    /// Unpublished composition.
    pub setup: Option<Setup>,
    /// Creation-only cancellation: aborts load/setup/publication; detached once the handle is
    /// returned.
    pub cancel: Option<CancellationToken>,
}

/// Options of [`crate::AgentRegistry::resume`].
pub struct ResumeAgentOptions {
    /// The persisted session to load.
    pub session_id: SessionId,
    /// Route and output cap for the new driver.
    pub agent_options: AgentOptions,
    /// Unpublished composition.
    pub setup: Option<Setup>,
    /// Creation-only cancellation.
    pub cancel: Option<CancellationToken>,
}

impl ResumeAgentOptions {
    /// Options to resume `session_id` with default agent options.
    pub fn new(session_id: SessionId) -> Self {
        Self {
            session_id,
            agent_options: AgentOptions::default(),
            setup: None,
            cancel: None,
        }
    }
}

/// Creates and resumes agents. The loop registers one through
/// [`crate::AgentRegistry::set_factory`].
#[async_trait]
pub trait AgentFactory: Send + Sync + 'static {
    /// Creates a fresh agent owned by `owner` (the caller's context): the caller's scope
    /// disposal tears the agent down, like the handle's `dispose`.
    async fn create_agent(
        &self,
        owner: &Context,
        options: CreateAgentOptions,
    ) -> Result<AgentHandle, AgentError>;

    /// Loads a persisted session and starts a new agent over it, owned by `owner`.
    async fn resume_agent(
        &self,
        owner: &Context,
        options: ResumeAgentOptions,
    ) -> Result<AgentHandle, AgentError>;
}

/// The async teardown an [`AgentHandle`] runs, memoized by whoever built it.
pub type Disposer = Arc<dyn Fn() -> BoxFuture<'static, ()> + Send + Sync>;

/// The consumer capability over one agent: the agent itself plus its teardown.
#[derive(Clone)]
pub struct AgentHandle {
    agent: AgentRef,
    disposer: Disposer,
}

impl AgentHandle {
    /// Wraps an agent and its teardown. The teardown is memoized here too, so every clone and
    /// every caller awaits one completion.
    pub fn new(agent: AgentRef, dispose: Disposer) -> Self {
        let once: Mutex<Option<Shared<BoxFuture<'static, ()>>>> = Mutex::new(None);
        let disposer: Disposer = Arc::new(move || {
            let mut slot = once.lock();
            let fut = slot.get_or_insert_with(|| dispose().shared()).clone();
            fut.boxed()
        });
        Self { agent, disposer }
    }

    /// The agent.
    pub fn agent(&self) -> &AgentRef {
        &self.agent
    }

    /// Tears the agent down and resolves at true quiescence: the driver is stopped and drained
    /// (its final `turn/end` durable), the agent's scope unwound, the agent and then its session
    /// detached. Memoized: concurrent and repeated calls share one teardown.
    pub fn dispose(&self) -> BoxFuture<'static, ()> {
        (self.disposer)()
    }
}

impl fmt::Debug for AgentHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentHandle")
            .field("agent", &self.agent.id())
            .finish()
    }
}
