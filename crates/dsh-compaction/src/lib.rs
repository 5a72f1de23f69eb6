//! Compaction for dsh: long sessions that never outgrow the model's window.
//!
//! A plugin on the agent seams (never on the loop):
//! - [`estimate`]: token accounting. The provider's usage report of the last answer plus a
//!   calibrated estimate of what was added since ([`context_use`]); the session's billed
//!   totals ([`SessionUsage`]).
//! - [`Compaction`]: before each step, when the estimated next request passes 80% of the
//!   window, prune oversized old tool results (no model call), then summarize the oldest whole
//!   units into a checkpoint (never separating a tool call from its result, keeping ~16% of
//!   the window verbatim). The summary call replays the conversation's own prefix byte for
//!   byte so the provider's prefix cache serves it.
//! - Overflow repair: a context-length error compacts and retries the step once.
//! - Durable: `compaction/start`, `compaction/summary`, the checkpoint `user/message` that
//!   replaces the shadowed range, `compaction/end` ([`events`]). A crash mid-way leaves either
//!   no replacement or a whole one: the replacement is a single event.

pub mod breakdown;
pub mod config;
pub mod cut;
pub mod error;
pub mod estimate;
pub mod events;
mod plugin;
pub mod prune;
mod service;
pub mod summarize;

pub use breakdown::{ContextBreakdown, context_breakdown};
pub use config::CompactionConfig;
pub use error::CompactionError;
pub use estimate::{ContextUse, SessionUsage, context_use, cost_usd, usage_report};
pub use events::Trigger;
pub use plugin::CompactionPlugin;
pub use service::{At, Compaction, CompactionOutcome};
