//! Retrying failed model requests.
//!
//! A failed request is re-issued inside the same step (DESIGN R7). The decision is a pure
//! function of the route's policy, the failure and how many retries the same
//! (turn, step, provider, policy) already made, which the session log answers through
//! `llm/retry` events; so a resumed session continues the same retry budget. The executor
//! records the decision, sleeps the backoff (cancellable by the turn) and records the start
//! of the retry.

mod decide;
mod events;
mod executor;
mod memory_log;
mod policy;

pub use decide::{RetryDecision, decide};
pub use events::{LlmRetry, LlmRetryStarted, RetryMode};
pub use executor::{RecoveryOutcome, RecoveryRequest, RetryExecutor, RetryLog};
pub use memory_log::{MemoryRetryLog, RetryLogEntry};
pub use policy::{Backoff, PolicyError, RetryPolicy};
