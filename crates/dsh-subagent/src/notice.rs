//! Completion notices: when a background run ends, its owner is told, so the model need not
//! poll.
//!
//! Delivery: a busy owner gets the notice injected (it joins the next step); an idle owner is
//! woken with a follow-up while its wake budget lasts, then the notice is only injected (it
//! joins the owner's next turn). The budget bounds consecutive wakes per owner and is reset
//! when the owner claims a person's message, so a parent and its children cannot keep waking
//! each other. A cancelled run never wakes its owner: the usual reason is that the owner itself
//! was cancelled, and a person who stopped an agent does not want it restarted.

use std::collections::HashMap;

use dsh_agent::{AgentRef, AgentStatus};
use dsh_session::{Message, SessionId, clip_chars};
use parking_lot::Mutex;

use crate::background::BackgroundRun;
use crate::outcome::{SubagentOutcome, SubagentStop};

/// The `plugin` name on messages this crate produces.
pub const NOTICE_PLUGIN: &str = "dsh-subagent";

/// Longest description quoted in a notice.
const MAX_LABEL_CHARS: usize = 80;

/// The notice announcing the end of `run`.
pub(crate) fn notice_message(run: &BackgroundRun, outcome: &SubagentOutcome) -> Message {
    let id = &run.id;
    let status = outcome.status_word();
    let label = clip_chars(run.description.trim(), MAX_LABEL_CHARS);
    let text = format!(
        "background subagent {id} ({label}) finished [status: {status}]. Read its result with \
         subagent_output."
    );
    Message::notice(
        NOTICE_PLUGIN,
        text,
        &format!("background subagent {id} finished [status: {status}]"),
    )
}

/// Consecutive wakes spent per owner.
#[derive(Default)]
pub(crate) struct WakeBudget {
    spent: Mutex<HashMap<SessionId, u32>>,
}

impl WakeBudget {
    /// Spends one wake of `owner` if fewer than `max` were spent since the last reset.
    pub(crate) fn take(&self, owner: &SessionId, max: u32) -> bool {
        let mut spent = self.spent.lock();
        let n = spent.entry(owner.clone()).or_default();
        if *n < max {
            *n += 1;
            true
        } else {
            false
        }
    }

    /// Restores `owner`'s full budget.
    pub(crate) fn reset(&self, owner: &SessionId) {
        self.spent.lock().remove(owner);
    }
}

/// Delivers the notice of `run` to `owner` (already checked to be live).
pub(crate) fn deliver(
    owner: &AgentRef,
    run: &BackgroundRun,
    outcome: &SubagentOutcome,
    budget: &WakeBudget,
    max_wakes: u32,
) {
    let message = notice_message(run, outcome);
    let cancelled = matches!(outcome.stop, SubagentStop::Cancelled { .. });
    let wake =
        !cancelled && owner.status() == AgentStatus::Idle && budget.take(owner.id(), max_wakes);
    let sent = if wake {
        owner.followup(message)
    } else {
        owner.inject(message)
    };
    if let Err(error) = sent {
        tracing::warn!(task = %run.id, owner = %owner.id(), %error, "subagent notice not delivered");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wake_budget_is_spent_per_owner_and_restored_by_a_reset() {
        let budget = WakeBudget::default();
        let a = SessionId::new("a");
        let b = SessionId::new("b");
        assert!(budget.take(&a, 2));
        assert!(budget.take(&a, 2));
        assert!(!budget.take(&a, 2), "a third consecutive wake is refused");
        assert!(budget.take(&b, 2), "budgets are per owner");
        budget.reset(&a);
        assert!(budget.take(&a, 2));
        assert!(!budget.take(&b, 0), "a zero budget never wakes");
    }
}
