//! Containment of a panic in the driver task.
//!
//! Listener, tool and adapter panics are contained where they happen; anything else that
//! unwinds through the driver would otherwise leave the run marked active forever, so
//! `when_idle` and every disposal would hang. The guard closes what the run left open (the log
//! stays balanced and provider-valid, as after a crash), ends the turn `error` with
//! [`DRIVER_PANIC_CODE`], and returns the agent to idle.

use std::any::Any;

use dsh_session::{
    EventDraft, EventKind, FailureCode, LlmFailure, SessionEvent, TurnEnd, TurnEndReason,
    interrupted_turn_closers,
};

use crate::driver::{LoopAgent, Phase};

/// Failure code of a turn whose driver panicked.
pub(crate) const DRIVER_PANIC_CODE: &str = "INTERNAL_ERROR";

fn panic_text(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-text panic payload".to_owned())
}

impl LoopAgent {
    /// Recovers from a panic that unwound out of the driver's run.
    pub(crate) fn recover_from_panic(&self, payload: Box<dyn Any + Send>) {
        let text = panic_text(payload.as_ref());
        tracing::error!(agent = %self.session.id(), panic = %text, "the agent driver panicked");
        let failure = LlmFailure::new(
            FailureCode::Other(DRIVER_PANIC_CODE.to_owned()),
            format!("internal error: the agent driver panicked: {text}"),
        );
        let events: Vec<SessionEvent> = self
            .session
            .events()
            .iter()
            .map(|e| SessionEvent::clone(e))
            .collect();
        let closers = interrupted_turn_closers(&events);
        let mut closed_turn = None;
        for closer in closers {
            let kind = match closer.kind {
                EventKind::TurnEnd(end) => {
                    closed_turn = Some(end.turn);
                    EventKind::TurnEnd(TurnEnd {
                        turn: end.turn,
                        reason: TurnEndReason::Error {
                            error: failure.clone(),
                        },
                    })
                }
                other => other,
            };
            let draft = EventDraft {
                kind,
                ignorable: closer.ignorable,
                source_event_seqs: closer.source_event_seqs,
                surface_op: closer.surface_op,
            };
            if let Err(e) = self.session.append_draft(draft) {
                tracing::warn!(agent = %self.session.id(), error = %e, "cannot close the turn after a driver panic");
                break;
            }
        }
        let turn = closed_turn.unwrap_or_else(|| self.session.last_turn());
        self.report_error(turn, self.current_step(), failure);
        // Whatever run was active is over; a latched wake is dropped with it (the input stays
        // queued for the next send).
        let retired = {
            let mut st = self.state.lock();
            match st.phase {
                Phase::Running { .. } => {
                    st.last_turn = st.last_turn.max(turn);
                    st.phase = Phase::Idle;
                    self.queue_status(dsh_agent::AgentStatus::Idle);
                    true
                }
                Phase::Idle => false,
            }
        };
        if retired {
            self.publish_statuses();
        }
    }
}
