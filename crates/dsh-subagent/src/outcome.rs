//! How a child's run ended, read back from its log.
//!
//! The log is the truth (DESIGN §2): the answer is the last non-empty assistant text written
//! after the delegated prompt, and the stop reason is the latest `turn/end` that accounts for
//! work ([`fold_consumed_work`]), so a cancellation reads the same whichever owner issued it.

use std::sync::Arc;

use dsh_agent::fold_consumed_work;
use dsh_session::{CancelCause, EventKind, SessionEvent, SessionId, TurnEndReason};

/// Why a child stopped, as the parent is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SubagentStop {
    /// The child finished the task; its final text is the answer.
    Completed,
    /// The child hit its output-token ceiling before finishing.
    MaxTokens,
    /// The child's run was cancelled (by its parent, the user, a hook or disposal).
    Cancelled {
        /// The recorded cause, when a turn recorded one.
        cause: Option<CancelCause>,
    },
    /// An `agent/pre-step` policy rejected the child's step: it declined the task.
    Declined,
    /// The child's turn failed (a model request error, a log failure).
    Failed {
        /// What failed.
        message: String,
    },
    /// The child ended some other way (a crash-repaired turn, or no turn ran at all).
    Abnormal {
        /// What happened.
        detail: String,
    },
}

/// The result of one delegated run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubagentOutcome {
    /// The child's session id (its session file carries the child's whole work).
    pub child: SessionId,
    /// How it stopped.
    pub stop: SubagentStop,
    /// The last non-empty assistant text of the run, interrupted prefixes included: the answer
    /// of a completed run, the partial output of any other.
    pub text: Option<String>,
}

/// Error-result code: the child hit its token limit.
pub const SUBAGENT_MAX_TOKENS: &str = "SUBAGENT_MAX_TOKENS";
/// Error-result code: the child's run was cancelled.
pub const SUBAGENT_CANCELLED: &str = "SUBAGENT_CANCELLED";
/// Error-result code: the child declined the task.
pub const SUBAGENT_DECLINED: &str = "SUBAGENT_DECLINED";
/// Error-result code: the child failed.
pub const SUBAGENT_FAILED: &str = "SUBAGENT_FAILED";
/// Error-result code: the child ended abnormally.
pub const SUBAGENT_ABNORMAL: &str = "SUBAGENT_ABNORMAL";

impl SubagentOutcome {
    /// Whether the child finished its task.
    pub fn is_completed(&self) -> bool {
        self.stop == SubagentStop::Completed
    }

    /// The one-line summary of a run that did not complete (`None` for a completed run).
    pub fn headline(&self) -> Option<String> {
        Some(match &self.stop {
            SubagentStop::Completed => return None,
            SubagentStop::MaxTokens => "subagent hit its token limit before finishing".into(),
            SubagentStop::Cancelled { .. } => "subagent run was cancelled".into(),
            SubagentStop::Declined => "subagent declined the task".into(),
            SubagentStop::Failed { message } => format!("subagent failed: {message}"),
            SubagentStop::Abnormal { detail } => format!("subagent ended abnormally ({detail})"),
        })
    }

    /// The error-result code of a run that did not complete.
    pub fn code(&self) -> Option<&'static str> {
        match &self.stop {
            SubagentStop::Completed => None,
            SubagentStop::MaxTokens => Some(SUBAGENT_MAX_TOKENS),
            SubagentStop::Cancelled { .. } => Some(SUBAGENT_CANCELLED),
            SubagentStop::Declined => Some(SUBAGENT_DECLINED),
            SubagentStop::Failed { .. } => Some(SUBAGENT_FAILED),
            SubagentStop::Abnormal { .. } => Some(SUBAGENT_ABNORMAL),
        }
    }

    /// What the parent's model reads: the answer of a completed run, otherwise the headline
    /// followed by any partial output.
    pub fn render(&self) -> String {
        let Some(headline) = self.headline() else {
            return self
                .text
                .clone()
                .unwrap_or_else(|| "(the subagent finished without a text answer)".into());
        };
        match &self.text {
            Some(partial) => format!("{headline}\n\nPartial output:\n{partial}"),
            None => headline,
        }
    }

    /// A short status word for listings and notices: `completed`, `cancelled`, `failed`, ….
    pub fn status_word(&self) -> &'static str {
        match &self.stop {
            SubagentStop::Completed => "completed",
            SubagentStop::MaxTokens => "max-tokens",
            SubagentStop::Cancelled { .. } => "cancelled",
            SubagentStop::Declined => "declined",
            SubagentStop::Failed { .. } => "failed",
            SubagentStop::Abnormal { .. } => "abnormal",
        }
    }
}

/// Reads the outcome of the run recorded in `events` (the child's log from the seq at which
/// the delegated prompt was queued).
pub fn read_outcome(child: SessionId, events: &[Arc<SessionEvent>]) -> SubagentOutcome {
    let text = events.iter().rev().find_map(|e| match &e.kind {
        EventKind::AssistantMessage(m) => {
            let text = m.message.text();
            (!text.trim().is_empty()).then_some(text)
        }
        _ => None,
    });
    let consumed = fold_consumed_work(events);
    let stop = match consumed.end.as_ref().map(|e| &e.kind) {
        Some(EventKind::TurnEnd(end)) if !consumed.dropped_unrun => stop_of(&end.reason),
        _ if consumed.dropped_unrun => SubagentStop::Cancelled { cause: None },
        _ => SubagentStop::Abnormal {
            detail: "no turn ran".into(),
        },
    };
    SubagentOutcome { child, stop, text }
}

fn stop_of(reason: &TurnEndReason) -> SubagentStop {
    match reason {
        TurnEndReason::Completed => SubagentStop::Completed,
        TurnEndReason::MaxTokens => SubagentStop::MaxTokens,
        TurnEndReason::Aborted { reason } => SubagentStop::Cancelled {
            cause: Some(reason.clone()),
        },
        TurnEndReason::Blocked => SubagentStop::Declined,
        TurnEndReason::Error { error } => SubagentStop::Failed {
            message: error.message.clone(),
        },
        TurnEndReason::Interrupted => SubagentStop::Abnormal {
            detail: "interrupted".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(stop: SubagentStop, text: Option<&str>) -> SubagentOutcome {
        SubagentOutcome {
            child: SessionId::new("c"),
            stop,
            text: text.map(str::to_owned),
        }
    }

    #[test]
    fn a_completed_run_renders_its_answer_and_others_their_headline_and_partial_text() {
        assert_eq!(outcome(SubagentStop::Completed, Some("42")).render(), "42");
        assert_eq!(
            outcome(SubagentStop::MaxTokens, Some("half")).render(),
            "subagent hit its token limit before finishing\n\nPartial output:\nhalf"
        );
        assert_eq!(
            outcome(SubagentStop::Declined, None).render(),
            "subagent declined the task"
        );
        assert_eq!(
            outcome(
                SubagentStop::Failed {
                    message: "boom".into()
                },
                None
            )
            .render(),
            "subagent failed: boom"
        );
        assert_eq!(
            outcome(SubagentStop::Cancelled { cause: None }, None).render(),
            "subagent run was cancelled"
        );
    }
}
