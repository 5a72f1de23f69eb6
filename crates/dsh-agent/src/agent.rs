//! The `Agent` interface every plugin programs against.

use std::fmt;
use std::sync::{Arc, Weak};

use dsh_kernel::Context;
use dsh_session::{CancelCause, InboxTarget, Message, MessageId, Session, SessionId};
use futures::future::BoxFuture;

use crate::error::AgentError;
use crate::inbox::Inbox;

/// A shared handle on a live agent. Holding one lets you observe and drive the agent, never
/// tear it down: teardown is the [`crate::AgentHandle`]'s capability.
pub type AgentRef = Arc<dyn Agent>;

/// Whether an agent has a driver reservation.
///
/// `Running` covers a driver-wide drain interval (possibly several consecutive turns, turn
/// close and inter-turn bookkeeping); it is not proof that a turn is open. Disposal is not a
/// status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentStatus {
    /// No driver is running.
    Idle,
    /// A driver is running.
    Running,
}

/// The initial model route of an agent and its output cap.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgentOptions {
    /// Provider route (e.g. `deepseek`). An `agent/request` listener may supply it instead.
    pub provider: Option<String>,
    /// Model id. An `agent/request` listener may supply it instead.
    pub model: Option<String>,
    /// Positive per-request output-token cap; when absent the adapter's default applies.
    pub max_tokens: Option<u32>,
}

impl AgentOptions {
    /// Options for a provider and model.
    pub fn route(provider: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            provider: Some(provider.into()),
            model: Some(model.into()),
            max_tokens: None,
        }
    }

    /// Checks the options; creation refuses invalid ones before publishing anything.
    pub fn validate(&self) -> Result<(), AgentError> {
        if self.max_tokens == Some(0) {
            return Err(AgentError::InvalidOptions(
                "agent maxTokens must be a positive safe integer".into(),
            ));
        }
        Ok(())
    }
}

/// Options of [`Agent::cancel`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CancelOptions {
    /// Abort only the active turn and keep pending inbox work.
    pub keep_inbox: bool,
}

/// A live handle over exactly one session (same id).
///
/// Implementations must keep the public verbs synchronous in their observable effects: a
/// waking `send` on an idle agent has logged its insert, opened the turn and claimed its input
/// before it returns; `cancel` has cleared the inbox and aborted the turn before it returns.
pub trait Agent: Send + Sync + 'static {
    /// The agent's id, equal to its session's id.
    fn id(&self) -> &SessionId;

    /// The session this agent drives.
    fn session(&self) -> &Arc<Session>;

    /// Current status.
    fn status(&self) -> AgentStatus;

    /// The options the agent was created with.
    fn options(&self) -> &AgentOptions;

    /// The agent's scoped context: registrations through it apply to this agent alone and are
    /// undone when the agent is disposed; its tag routes this agent's events.
    fn ctx(&self) -> &Context;

    /// The durable inbox of pending input.
    fn inbox(&self) -> &Inbox;

    /// Queues `message` for `target` and, when `wakeup`, wakes the driver. Returns the
    /// message's id. Fails — with nothing logged and the driver not woken — when the message
    /// cannot be recorded durably.
    fn send(
        &self,
        message: Message,
        target: InboxTarget,
        wakeup: bool,
    ) -> Result<MessageId, AgentError>;

    /// Queues an ordinary prompt for its own turn and wakes the driver.
    fn followup(&self, message: Message) -> Result<MessageId, AgentError> {
        self.send(message, InboxTarget::NextTurn, true)
    }

    /// Queues steering for the next step boundary and wakes the driver (an idle agent starts a
    /// turn at once).
    fn steer(&self, message: Message) -> Result<MessageId, AgentError> {
        self.send(message, InboxTarget::NextStep, true)
    }

    /// Queues context for the next step boundary without waking an idle agent.
    fn inject(&self, message: Message) -> Result<MessageId, AgentError> {
        self.send(message, InboxTarget::NextStep, false)
    }

    /// The single public stop primitive: durably cancels pending inbox work (unless
    /// `keep_inbox`) and aborts the active turn with `cause`. Idle cancellation with an empty
    /// inbox does nothing and never strands the next prompt.
    fn cancel(&self, cause: CancelCause, options: CancelOptions);

    /// Resolves once the whole agent is quiescent, including replacement work scheduled before
    /// the current driver retired. It does not settle any particular message.
    fn when_idle(&self) -> BoxFuture<'static, ()>;
}

impl fmt::Debug for dyn Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Agent")
            .field("id", self.id())
            .field("status", &self.status())
            .finish()
    }
}

/// Whether two handles are the same agent object (not merely the same id).
pub fn same_agent(a: &AgentRef, b: &AgentRef) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}

/// The context-local marker that makes `agent_of(agent.ctx())` return the agent. Held weakly so
/// an agent's context does not keep the agent alive.
pub struct AgentLocal(pub Weak<dyn Agent>);

/// The agent a scoped context belongs to, if any.
pub fn agent_of(ctx: &Context) -> Option<AgentRef> {
    ctx.local::<AgentLocal>().and_then(|l| l.0.upgrade())
}
