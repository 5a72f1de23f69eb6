//! The turn algorithm: steps until nothing more is owed, then `turn/end`.

use std::error::Error as StdError;
use std::sync::Arc;

use dsh_agent::events::{
    AgentPreStep, AgentTurnEnding, AgentTurnStopping, PreStepDecision, PreStepRequest, TurnEnding,
    TurnStopping,
};
use dsh_agent::{AgentError, CancelCause};
use dsh_kernel::BoxError;
use dsh_llm::LlmError;
use dsh_prompt::{AssemblyScope, PromptAssembly, render_context};
use dsh_session::{
    EventKind, FailureCode, InboxTarget, LlmFailure, Message, MessageSource, Session, StepBoundary,
    TurnEnd, TurnEndReason,
};
use futures::FutureExt;
use serde_json::{Map, Value};

use crate::cancel::TurnCancel;
use crate::driver::LoopAgent;

/// A turn opened synchronously by [`LoopAgent::begin_turn`].
pub(crate) struct Opened {
    pub(crate) turn: u64,
    pub(crate) cancel: TurnCancel,
    pub(crate) claimed: Result<Vec<Arc<Message>>, AgentError>,
}

/// Why a turn stopped early.
#[derive(Debug)]
pub(crate) enum Interrupt {
    /// The turn's cancellation fired.
    Cancelled,
    /// Something failed; the turn ends `error`.
    Failed(LlmFailure),
}

/// How a completed step leaves the turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ends {
    Completed,
    MaxTokens,
    Blocked,
}

/// Code of a turn that failed because its session could not be stored (a full disk, an
/// unwritable directory): the message names the file and the cause.
pub(crate) const STORAGE: &str = "STORAGE";

/// The failure facts of any error: an LLM failure verbatim, a persistence failure as
/// [`STORAGE`], anything else as `UNKNOWN`, each with its whole cause chain.
pub(crate) fn failure_of(e: &(dyn StdError + 'static)) -> LlmFailure {
    if let Some(f) = e.downcast_ref::<LlmFailure>() {
        return f.clone();
    }
    if let Some(f) = e.downcast_ref::<LlmError>() {
        return f.failure.clone();
    }
    let mut code = FailureCode::Unknown;
    let mut message = e.to_string();
    let mut source = e.source();
    if e.is::<dsh_session::PersistenceError>() {
        code = FailureCode::Other(STORAGE.into());
    }
    while let Some(s) = source {
        if s.is::<dsh_session::PersistenceError>() {
            code = FailureCode::Other(STORAGE.into());
        }
        let text = s.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = s.source();
    }
    LlmFailure::new(code, message)
}

pub(crate) fn fail_box(e: BoxError) -> Interrupt {
    Interrupt::Failed(failure_of(e.as_ref()))
}

pub(crate) fn fail<E: StdError + 'static>(e: E) -> Interrupt {
    Interrupt::Failed(failure_of(&e))
}

/// Plugin name marking runtime-context snapshot messages.
pub(crate) const RUNTIME_CONTEXT_PLUGIN: &str = "dsh-system-prompt";
const NO_RUNTIME_CONTEXT: &str =
    "Current runtime context: none. Earlier runtime-context snapshots no longer apply.";

fn is_snapshot(m: &Message) -> bool {
    matches!(&m.source, MessageSource::Plugin { plugin, extra }
        if plugin == RUNTIME_CONTEXT_PLUGIN
            && extra.get("form").and_then(Value::as_str) == Some("snapshot"))
}

/// The text of the last runtime-context snapshot in a log (restored on resume so an unchanged
/// context is not re-sent).
pub(crate) fn restore_runtime_context(session: &Session) -> Option<String> {
    session.with_events(|events| {
        // A snapshot in a turn that was rewound is no longer in the history.
        let rewound = dsh_session::rewound_ranges(events);
        events.iter().rev().find_map(|e| match &e.kind {
            EventKind::UserMessage(m)
                if is_snapshot(m) && !dsh_session::is_rewound(&rewound, e.seq) =>
            {
                Some(m.text())
            }
            _ => None,
        })
    })
}

impl LoopAgent {
    /// Runs one opened turn to its `turn/end`. Returns whether it reached the normal close (so
    /// the same run may continue with queued work).
    pub(crate) async fn run_turn(&self, opened: Opened) -> bool {
        let Opened {
            turn,
            cancel,
            claimed,
        } = opened;
        let mut ends = None;
        let result = self.turn_body(turn, &cancel, claimed, &mut ends).await;
        let (reason, normal) = match result {
            Ok(normal) => (
                match ends.unwrap_or(Ends::Completed) {
                    Ends::Completed => TurnEndReason::Completed,
                    Ends::MaxTokens => TurnEndReason::MaxTokens,
                    Ends::Blocked => TurnEndReason::Blocked,
                },
                normal,
            ),
            Err(_) if cancel.is_cancelled() => (
                TurnEndReason::Aborted {
                    reason: cancel.cause().unwrap_or(CancelCause::User),
                },
                false,
            ),
            Err(Interrupt::Cancelled) => (
                TurnEndReason::Aborted {
                    reason: CancelCause::User,
                },
                false,
            ),
            Err(Interrupt::Failed(failure)) => {
                self.report_error(turn, self.current_step(), failure.clone());
                (TurnEndReason::Error { error: failure }, false)
            }
        };
        // Whatever way the turn ends, what it left behind is recorded before it closes.
        if let Err(error) = self
            .ctx
            .serial::<AgentTurnEnding>(TurnEnding {
                agent: self.agent_ref(),
                turn,
                step: self.current_step(),
            })
            .await
        {
            tracing::warn!(agent = %self.session.id(), %error, "an agent/turn-ending listener failed");
        }
        if let Err(e) = self
            .session
            .append(EventKind::TurnEnd(TurnEnd { turn, reason }))
        {
            self.report_error(turn, self.current_step(), failure_of(&e));
            return false;
        }
        normal
    }

    async fn turn_body(
        &self,
        turn: u64,
        cancel: &TurnCancel,
        claimed: Result<Vec<Arc<Message>>, AgentError>,
        ends: &mut Option<Ends>,
    ) -> Result<bool, Interrupt> {
        let mut first = Some(claimed);
        let mut target = InboxTarget::NextTurn;
        loop {
            cancel.check()?;
            let step = self.current_step() + 1;
            let batch = match first.take() {
                Some(claimed) => claimed.map_err(fail)?,
                None => self.inbox.claim(target, turn).map_err(fail)?,
            };
            let Some((messages, assembly)) = self.pre_step(batch, turn, step, cancel).await? else {
                *ends = Some(Ends::Blocked);
                return Ok(false);
            };
            if ends.is_some() && messages.is_empty() {
                break;
            }
            if self.current_step() == 0 && messages.is_empty() {
                *ends = Some(Ends::Completed);
                return Ok(false);
            }
            cancel.check()?;
            self.session
                .append(EventKind::StepStart(StepBoundary { turn, step }))
                .map_err(fail)?;
            self.set_step(step);
            let stepped = self.step_body(turn, step, messages, assembly, cancel).await;
            // `step/end` is always written, whatever the step's outcome.
            let closed = self
                .session
                .append(EventKind::StepEnd(StepBoundary { turn, step }));
            let outcome = stepped?;
            closed.map_err(fail)?;
            if *ends != Some(Ends::MaxTokens) {
                *ends = outcome;
            }
            cancel.check()?;
            if ends.is_some() && !self.inbox.has_next_step() {
                self.ctx
                    .serial::<AgentTurnStopping>(TurnStopping {
                        agent: self.agent_ref(),
                        turn,
                        cancel: cancel.token().clone(),
                    })
                    .await
                    .map_err(fail_box)?;
                cancel.check()?;
            }
            if ends.is_some() && !self.inbox.has_next_step() {
                break;
            }
            target = InboxTarget::NextStep;
        }
        Ok(true)
    }

    async fn step_body(
        &self,
        turn: u64,
        step: u64,
        messages: Vec<Arc<Message>>,
        assembly: PromptAssembly,
        cancel: &TurnCancel,
    ) -> Result<Option<Ends>, Interrupt> {
        for m in messages {
            let snapshot = is_snapshot(&m).then(|| m.text());
            self.session
                .append(EventKind::UserMessage(m))
                .map_err(fail)?;
            if let Some(text) = snapshot {
                *self.runtime_context.lock() = Some(text);
            }
        }
        self.step(turn, step, assembly, cancel).await
    }

    /// Assembles the prompt and asks `agent/pre-step` whether (and with what) to enter the
    /// step. `None` is a rejection.
    async fn pre_step(
        &self,
        claimed: Vec<Arc<Message>>,
        turn: u64,
        step: u64,
        cancel: &TurnCancel,
    ) -> Result<Option<(Vec<Arc<Message>>, PromptAssembly)>, Interrupt> {
        // No checkpoint here: the one before the model request covers the claims, the previous
        // step's results and this step's start in a single sync. Pre-step listeners with side
        // effects make the log durable themselves first (hooks before a command, compaction
        // before its summary request).
        let mut scope = AssemblyScope::global().with_cancel(cancel.token().clone());
        scope.tag = self.ctx.tag().cloned();
        let assembly = self.svc.prompt.assemble(scope).await.map_err(fail)?;
        cancel.check()?;
        let snapshot = self.project_runtime_context(&assembly);
        let payload = PreStepRequest {
            agent: self.agent_ref(),
            messages: claimed,
            turn,
            step,
            cancel: cancel.token().clone(),
        };
        let decision = self
            .ctx
            .waterfall::<AgentPreStep>(payload, move |p| {
                async move {
                    let mut messages = p.messages;
                    messages.extend(snapshot);
                    Ok(PreStepDecision::Enter(messages))
                }
                .boxed()
            })
            .await
            .map_err(fail_box)?;
        cancel.check()?;
        Ok(match decision {
            PreStepDecision::Reject => None,
            PreStepDecision::Enter(messages) => Some((messages, assembly)),
        })
    }

    /// A new snapshot message when the runtime context changed since the last one entered.
    fn project_runtime_context(&self, assembly: &PromptAssembly) -> Option<Arc<Message>> {
        let current = render_context(assembly);
        let retained = self.runtime_context.lock().clone();
        if retained.is_none() && current.is_empty() {
            return None;
        }
        let candidate = if current.is_empty() {
            NO_RUNTIME_CONTEXT.to_owned()
        } else {
            current
        };
        if retained.as_deref() == Some(candidate.as_str()) {
            return None;
        }
        let mut extra = Map::new();
        extra.insert("form".into(), Value::from("snapshot"));
        Some(Arc::new(Message::user(
            vec![dsh_session::ContentBlock::text(candidate)],
            MessageSource::Plugin {
                plugin: RUNTIME_CONTEXT_PLUGIN.into(),
                extra,
            },
        )))
    }

    /// The durability checkpoint (`session/flush`); a failure fails the turn closed.
    pub(crate) async fn flush(&self) -> Result<(), Interrupt> {
        if !self.session.is_attached() {
            return Ok(());
        }
        self.svc.store.flush(&self.session).await.map_err(fail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_session::{PersistenceError, SessionError, SessionId};

    #[test]
    fn a_session_that_cannot_be_stored_fails_as_storage_naming_file_and_cause() {
        let e = SessionError::Flush {
            id: SessionId::new("s"),
            source: Box::new(PersistenceError::Io {
                context: "appending to session file /home/u/.dsh/sessions/p/s.jsonl".into(),
                // ENOSPC, as a full disk reports it.
                source: std::io::Error::from_raw_os_error(28),
            }),
        };
        let f = failure_of(&e);
        assert_eq!(f.code, FailureCode::Other(STORAGE.into()));
        assert!(f.message.contains("/home/u/.dsh/sessions/p/s.jsonl"), "{f}");
        assert!(f.message.contains("No space left on device"), "{f}");
    }
}
