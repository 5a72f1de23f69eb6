//! The `Agent` interface of dsh.
//!
//! Every plugin (front ends, hooks, orchestrators) programs against the [`Agent`] handle
//! defined here. This crate has no dependency on the concrete loop, so the loop is swappable.
//!
//! - [`Agent`]: `id`, `session`, `status`, `options`, `ctx`, `inbox`, `send`
//!   (`followup`/`steer`/`inject`), `cancel(cause, options)`, `when_idle`.
//! - [`Inbox`]: the durable projection of `agent/inbox/spliced` events.
//! - [`AgentRegistry`]: live agents, runtime ownership, the [`AgentFactory`] slot and the
//!   [`InitiatorScope`].
//! - [`AgentHandle`]: the consumer's teardown capability, returned by `create`/`resume`.
//! - The `agent/*` event vocabulary in [`events`].
//! - [`fold_consumed_work`].
//! - [`WorkspaceFence`]: work that must be over before a session's workspace changes.
//! - [`AgentPlanner`]: the composition root's answer to "what should this agent be?".

mod agent;
mod consumed;
mod error;
pub mod events;
mod factory;
mod fence;
mod images;
mod inbox;
mod initiator;
mod plan;
mod registry;

pub use agent::{
    Agent, AgentLocal, AgentOptions, AgentRef, AgentStatus, CancelOptions, agent_of, same_agent,
};
pub use consumed::{ConsumedWork, fold_consumed_work};
pub use dsh_session::{CancelCause, InboxTarget};
pub use error::AgentError;
pub use factory::{
    AgentFactory, AgentHandle, Commit, CreateAgentOptions, Disposer, ResumeAgentOptions, Setup,
};
pub use fence::WorkspaceFence;
pub use images::{ImageRefused, PromptImages};
pub use inbox::Inbox;
pub use initiator::InitiatorScope;
pub use plan::{AgentPlan, AgentPlanner};
pub use registry::{AgentDetach, AgentRegistry};
