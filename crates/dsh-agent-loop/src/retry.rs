//! The retry plugin: recovers retryable model failures on `agent/request-error`.
//!
//! The policy and backoff live in `dsh-llm`; this wires them to the loop: attempts are counted
//! from durable `llm/retry` events in the agent's own log (so a resumed session keeps its
//! budget), the backoff is cancellable by the turn, and a granted retry re-issues the request
//! inside the same step.

use std::sync::Arc;

use dsh_agent::events::{AgentRequestError, RecoveryAction};
use dsh_kernel::{BoxError, Context, Plugin};
use dsh_llm::retry::{
    LlmRetry, LlmRetryStarted, RecoveryOutcome, RecoveryRequest, RetryExecutor, RetryLog,
};
use dsh_session::{EventKind, Session};

/// Records retries in a session's log.
pub struct SessionRetryLog(pub Arc<Session>);

impl RetryLog for SessionRetryLog {
    fn previous(
        &self,
        turn: u64,
        step: u64,
        provider: &str,
        policy_key: &str,
    ) -> Option<(String, u32)> {
        self.0.with_events(|events| {
            events.iter().rev().find_map(|e| match &e.kind {
                EventKind::Other { type_name, data } if type_name == LlmRetry::TYPE => {
                    serde_json::from_value::<LlmRetry>(data.clone())
                        .ok()
                        .filter(|r| r.matches(turn, step, provider, policy_key))
                        .map(|r| (r.retry_id, r.retry))
                }
                _ => None,
            })
        })
    }

    fn append_retry(&self, retry: &LlmRetry) -> Result<(), BoxError> {
        self.0.append_plugin(LlmRetry::TYPE, retry)?;
        Ok(())
    }

    fn append_retry_started(&self, started: &LlmRetryStarted) -> Result<(), BoxError> {
        self.0.append_plugin(LlmRetryStarted::TYPE, started)?;
        Ok(())
    }
}

/// Mounts retry recovery on `agent/request-error` for every agent.
pub struct RetryPlugin {
    executor: Arc<RetryExecutor>,
}

impl RetryPlugin {
    /// Retry with the default randomness.
    pub fn new() -> Self {
        Self::with_executor(RetryExecutor::new())
    }

    /// Retry with a custom executor (tests inject randomness).
    pub fn with_executor(executor: RetryExecutor) -> Self {
        Self {
            executor: Arc::new(executor),
        }
    }
}

impl Default for RetryPlugin {
    fn default() -> Self {
        Self::new()
    }
}

impl Plugin for RetryPlugin {
    fn name(&self) -> &str {
        "llm-retry"
    }

    async fn apply(&self, ctx: &Context) -> Result<(), BoxError> {
        let executor = self.executor.clone();
        let _ = ctx.on_waterfall::<AgentRequestError, _>(move |failure, next| {
            let executor = executor.clone();
            async move {
                let request = RecoveryRequest {
                    turn: failure.turn,
                    step: failure.step,
                    provider: failure.provider.clone(),
                    failure: failure.failure.clone(),
                    policy: failure.retry_policy.clone(),
                    cancel: failure.cancel.clone(),
                };
                let log = SessionRetryLog(failure.agent.session().clone());
                match executor.recover(request, &log).await {
                    RecoveryOutcome::Retry => Ok(Some(RecoveryAction::Retry)),
                    RecoveryOutcome::Cancelled => Ok(None),
                    RecoveryOutcome::Delegate => next.run(failure).await,
                }
            }
        })?;
        let executor = self.executor.clone();
        ctx.scope()
            .defer_async(move || async move { executor.dispose().await })?;
        Ok(())
    }
}
