//! Mounting compaction: the pre-step pressure check and the overflow repair.

use std::sync::Arc;

use dsh_agent::events::{
    AgentPreStep, AgentRequestError, PreStepDecision, RecoveryAction, RequestFailure,
};
use dsh_kernel::{BoxError, Context, Plugin};
use dsh_llm::{FailureCode, Llm};
use dsh_session::EventKind;

use crate::config::CompactionConfig;
use crate::events::{START, Trigger};
use crate::service::{At, Compaction};

/// Mounts [`Compaction`] for every agent: a serial check before each step (after the other
/// pre-step listeners decided what enters it) and the canonical repair of context-length
/// errors on `agent/request-error`. Provides the service on the context for on-demand use.
pub struct CompactionPlugin {
    config: CompactionConfig,
}

impl CompactionPlugin {
    /// The plugin with `config`.
    pub fn new(config: CompactionConfig) -> Self {
        Self { config }
    }
}

impl Default for CompactionPlugin {
    fn default() -> Self {
        Self::new(CompactionConfig::default())
    }
}

impl Plugin for CompactionPlugin {
    fn name(&self) -> &str {
        "dsh-compaction"
    }

    async fn apply(&self, ctx: &Context) -> Result<(), BoxError> {
        let llm = ctx.require::<Llm>()?;
        let store = ctx.get::<dsh_session::SessionStore>();
        let service = Arc::new(Compaction::new(llm, self.config.clone()).with_store(store));
        ctx.provide::<Compaction>(service.clone())?;

        let pressure = service.clone();
        let _ = ctx.on_waterfall::<AgentPreStep, _>(move |request, next| {
            let service = pressure.clone();
            async move {
                let agent = request.agent.clone();
                let cancel = request.cancel.clone();
                let at = At {
                    turn: Some(request.turn),
                    step: Some(request.step),
                };
                let decision = next.run(request).await?;
                if let PreStepDecision::Enter(entering) = &decision
                    && !cancel.is_cancelled()
                {
                    // Operational: a failed pressure compaction warns and the step goes on.
                    if let Err(error) = service
                        .relieve_pressure(agent.session(), at, entering, &cancel)
                        .await
                    {
                        tracing::warn!(agent = %agent.id(), %error, "compaction failed");
                    }
                }
                Ok(decision)
            }
        })?;

        let repair = service;
        let _ = ctx.on_waterfall::<AgentRequestError, _>(move |failure, next| {
            let service = repair.clone();
            async move {
                if failure.failure.code != FailureCode::ContextWindowExceeded
                    || overflow_attempts(&failure) >= service.config().max_overflow_retries
                {
                    return next.run(failure).await;
                }
                let session = failure.agent.session().clone();
                let generation = session.replace_generation();
                let at = At {
                    turn: Some(failure.turn),
                    step: Some(failure.step),
                };
                let result = service
                    .compact(
                        &session,
                        Trigger::ContextOverflow,
                        None,
                        at,
                        &[],
                        &failure.cancel,
                    )
                    .await;
                if let Err(error) = &result {
                    tracing::warn!(agent = %failure.agent.id(), %error, "overflow repair failed");
                }
                // Retry only when the history actually changed; otherwise the provider's
                // error stands.
                if session.replace_generation() > generation && !failure.cancel.is_cancelled() {
                    return Ok(Some(RecoveryAction::Retry));
                }
                next.run(failure).await
            }
        })?;
        Ok(())
    }
}

/// Overflow compactions already attempted for the failing step (counted from the log, so a
/// resumed session keeps its budget).
fn overflow_attempts(failure: &RequestFailure) -> usize {
    failure.agent.session().with_events(|events| {
        events
            .iter()
            .filter(|e| match &e.kind {
                EventKind::Other { type_name, data } if type_name == START => {
                    data.get("trigger").and_then(|t| t.as_str()) == Some("context-overflow")
                        && data.get("turn").and_then(|t| t.as_u64()) == Some(failure.turn)
                        && data.get("step").and_then(|t| t.as_u64()) == Some(failure.step)
                }
                _ => false,
            })
            .count()
    })
}
