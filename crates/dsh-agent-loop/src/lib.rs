//! The agent loop of dsh: the one concrete driver and the factory that creates it.
//!
//! - The driver implements [`dsh_agent::Agent`]: queue-aware sends that open a turn
//!   synchronously on an idle agent, turns of steps (model request, then tools), tool
//!   scheduling with exclusive barriers and a bounded parallel pool, cooperative cancellation
//!   with first-wins causes, request-error recovery, and a provider-valid log under every
//!   interrupt.
//! - [`AgentLoop`] implements [`dsh_agent::AgentFactory`]: rollback-protected creation and
//!   resume, one memoized quiescence boundary for handle disposal, owner unload and loop
//!   unload, with the teardown order stop-and-drain → scope → agent → session.
//! - [`RetryPlugin`] wires `dsh-llm`'s retry policy to `agent/request-error`.

mod alternate;
mod cancel;
mod compose;
mod config;
mod driver;
mod error;
mod lifecycle;
mod panic_guard;
mod rebuild;
mod request;
mod retry;
mod schedule;
mod service;
mod step;
mod turn;

pub use compose::{Core, CoreConfig, mount_core};
pub use config::{ConfiguredAgent, LoopConfig};
pub use error::LoopError;
pub use rebuild::{RebuiltRequest, rebuild_requests};
pub use retry::{RetryPlugin, SessionRetryLog};
pub use service::{AgentLoop, AgentLoopPlugin, ConfigStartFailed, ConfigStartFailure};
