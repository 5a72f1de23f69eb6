//! Settlement of a `session/prompt`: when it is answered and with which stop reason.
//!
//! A prompt's interval runs from inbox receipt to whole-agent idle with its output delivered
//! (spec/edges.md §1.3): steering or autonomous work that runs before the agent goes idle is
//! part of it, and a retry that succeeds later adopts it. The turn that ran the prompt is found
//! by the claimed message id, never by turn order, so a late `turn/end` of a cancelled turn
//! can never settle the next prompt.

use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::Error;

use crate::errors::internal;
use agent_client_protocol::v1::schema::StopReason;
use dsh_agent::AgentRef;
use dsh_session::{CancelCause, LlmFailure, MessageId, TurnEndReason};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::record::SessionState;

/// How long a cancelled prompt waits for the agent to go quiet before it is answered anyway.
/// The loop still finishes the cancelled turn (a tool that ignores SIGTERM is killed after the
/// shell's grace period) and its last updates follow the answer; the next prompt is an
/// independent turn either way. Well inside the 2 s an editor waits for `cancelled`.
pub const CANCEL_ANSWER_DEADLINE: Duration = Duration::from_millis(1000);

#[derive(Default)]
struct Progress {
    turn: Option<u64>,
    end: Option<TurnEndReason>,
    agent_error: Option<LlmFailure>,
}

/// One outstanding `session/prompt`: the message it queued and what became of it.
pub(crate) struct Inflight {
    message_id: MessageId,
    progress: Mutex<Progress>,
    cancel: CancellationToken,
    /// Fired once the prompt has let go of the slot (answered, or never admitted).
    settled: CancellationToken,
}

impl Inflight {
    /// The slot of a prompt queued as `message_id`.
    pub(crate) fn new(message_id: MessageId) -> Arc<Inflight> {
        Arc::new(Inflight {
            message_id,
            progress: Mutex::new(Progress::default()),
            cancel: CancellationToken::new(),
            settled: CancellationToken::new(),
        })
    }

    /// `agent/inbox/claimed`: the turn that took this prompt.
    pub(crate) fn claimed(&self, message: &MessageId, turn: u64) {
        if *message == self.message_id {
            let mut p = self.progress.lock();
            p.turn = Some(turn);
            // Earlier work failed, but the prompt ran after all: its own turn decides.
            p.agent_error = None;
        }
    }

    /// `turn/end` of any turn: recorded when it is this prompt's turn.
    pub(crate) fn turn_ended(&self, turn: u64, reason: &TurnEndReason) {
        let mut p = self.progress.lock();
        if p.turn == Some(turn) {
            p.end = Some(reason.clone());
        }
    }

    /// `agent/error`: a failure of other work while this prompt still waits in the inbox
    /// (the agent may stop without ever claiming it).
    pub(crate) fn agent_failed(&self, turn: u64, error: &LlmFailure) {
        let mut p = self.progress.lock();
        if p.turn.is_none() {
            tracing::debug!(turn, "agent failed while a prompt waited in the inbox");
            p.agent_error = Some(error.clone());
        }
    }

    /// The client cancelled: the prompt answers `cancelled` whatever the turn records.
    pub(crate) fn request_cancel(&self) {
        self.cancel.cancel();
    }

    /// The token [`Inflight::request_cancel`] fires, for work that is not an agent turn (a
    /// waiting slash command).
    pub(crate) fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Whether the client cancelled this prompt.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Marks the prompt settled: it holds the slot no more.
    pub(crate) fn mark_settled(&self) {
        self.settled.cancel();
    }

    /// Resolves once the prompt is settled ([`Inflight::mark_settled`]).
    pub(crate) async fn settled(&self) {
        self.settled.cancelled().await;
    }

    fn claimed_turn(&self) -> Option<u64> {
        self.progress.lock().turn
    }
}

/// The answer for a settled prompt, in the precedence order of spec/edges.md §1.3.
fn outcome(cancelled: bool, p: &Progress) -> Result<StopReason, Error> {
    if cancelled {
        return Ok(StopReason::Cancelled);
    }
    if let Some(error) = &p.agent_error {
        return Err(internal(format!("turn failed: {}", error.message)));
    }
    match &p.end {
        // Never claimed (removed from the inbox before it ran).
        None => Ok(StopReason::Cancelled),
        Some(TurnEndReason::Error { error }) => {
            Err(internal(format!("turn failed: {}", error.message)))
        }
        Some(TurnEndReason::Completed | TurnEndReason::Blocked) => Ok(StopReason::EndTurn),
        // ACP has its own stop reason for it; clients offer to continue.
        Some(TurnEndReason::MaxTokens) => Ok(StopReason::MaxTokens),
        Some(TurnEndReason::Aborted {
            reason: CancelCause::Hook { .. },
        }) => Ok(StopReason::EndTurn),
        Some(TurnEndReason::Aborted { .. } | TurnEndReason::Interrupted) => {
            Ok(StopReason::Cancelled)
        }
    }
}

/// Waits until the prompt is settled and answers it: the agent idle and its output delivered,
/// or — after a client cancel — at most [`CANCEL_ANSWER_DEADLINE`] later.
pub(crate) async fn settle(
    state: &SessionState,
    agent: &AgentRef,
    inflight: &Arc<Inflight>,
) -> Result<StopReason, Error> {
    let quiet = async {
        agent.when_idle().await;
        state.updates.drained().await;
    };
    let deadline = async {
        inflight.cancel.cancelled().await;
        tokio::time::sleep(CANCEL_ANSWER_DEADLINE).await;
        // Whatever is already queued still precedes the answer.
        state.updates.drained().await;
    };
    tokio::select! {
        () = quiet => {}
        () = deadline => {}
    }
    if inflight.claimed_turn().is_none() {
        // The agent went idle without running the prompt (a failure parked it, or it was
        // removed): make sure it can never run later as an orphan turn.
        if let Err(error) = agent.inbox().remove(&inflight.message_id) {
            tracing::warn!(session = %agent.id(), %error, "cannot withdraw an unclaimed prompt");
        }
    }
    state.release_slot(inflight);
    let cancelled = inflight.cancel.is_cancelled();
    outcome(cancelled, &inflight.progress.lock())
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_session::FailureCode;

    fn ended(reason: TurnEndReason) -> Progress {
        Progress {
            turn: Some(1),
            end: Some(reason),
            agent_error: None,
        }
    }

    #[test]
    fn stop_reasons_follow_the_settlement_precedence() {
        let ok = |p: Progress, c: bool| outcome(c, &p).ok();
        assert_eq!(
            ok(ended(TurnEndReason::Completed), false),
            Some(StopReason::EndTurn)
        );
        assert_eq!(
            ok(ended(TurnEndReason::MaxTokens), false),
            Some(StopReason::MaxTokens)
        );
        assert_eq!(
            ok(ended(TurnEndReason::Blocked), false),
            Some(StopReason::EndTurn)
        );
        assert_eq!(
            ok(
                ended(TurnEndReason::Aborted {
                    reason: CancelCause::Hook { reason: "x".into() }
                }),
                false
            ),
            Some(StopReason::EndTurn)
        );
        assert_eq!(
            ok(
                ended(TurnEndReason::Aborted {
                    reason: CancelCause::User
                }),
                false
            ),
            Some(StopReason::Cancelled)
        );
        assert_eq!(ok(Progress::default(), false), Some(StopReason::Cancelled));
        // A client cancel wins over whatever the turn recorded.
        assert_eq!(
            ok(ended(TurnEndReason::Completed), true),
            Some(StopReason::Cancelled)
        );
    }

    #[test]
    fn a_prompt_that_runs_after_earlier_work_failed_is_settled_by_its_own_turn() {
        let inflight = Inflight::new(MessageId::new("m"));
        inflight.agent_failed(1, &LlmFailure::new(FailureCode::Server, "earlier"));
        inflight.claimed(&MessageId::new("m"), 2);
        inflight.turn_ended(2, &TurnEndReason::Completed);
        assert_eq!(
            outcome(false, &inflight.progress.lock()).ok(),
            Some(StopReason::EndTurn)
        );
        // Never claimed: the earlier failure is the answer.
        let parked = Inflight::new(MessageId::new("p"));
        parked.agent_failed(1, &LlmFailure::new(FailureCode::Server, "earlier"));
        assert_eq!(
            outcome(false, &parked.progress.lock()).unwrap_err().message,
            "turn failed: earlier"
        );
    }

    #[test]
    fn a_failed_turn_is_an_error_response_naming_the_failure() {
        let e = outcome(
            false,
            &ended(TurnEndReason::Error {
                error: LlmFailure::new(FailureCode::Server, "boom"),
            }),
        )
        .unwrap_err();
        assert_eq!(e.message, "turn failed: boom");
        assert_eq!(e.code, agent_client_protocol::ErrorCode::INTERNAL_ERROR);
    }
}
