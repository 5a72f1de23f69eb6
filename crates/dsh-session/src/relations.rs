//! Relational invariants of the turn/step structure (INV-REL-1..5), as an optional pre-commit
//! [`Validator`]. Drivers install it in tests and debug builds to catch an out-of-order event the
//! moment it is appended instead of when a provider rejects the history later.

use std::collections::HashSet;
use std::sync::Arc;

use crate::event::{EventKind, SessionEvent, SurfaceOp};
use crate::ids::CallId;
use crate::message::ContentBlock;
use crate::session::{Session, Validator};

/// INV-REL checked one event at a time: feed a log's events in order to [`check`], and each
/// is checked against everything before it in constant time. Loading a stored log uses it
/// (a log whose relations are broken would be rejected by every provider on resume); the
/// append validator uses it through [`check_relation`].
///
/// [`check`]: RelationChecker::check
#[derive(Debug, Default)]
pub struct RelationChecker {
    last_turn: u64,
    open_turn: Option<u64>,
    open_step: Option<u64>,
    last_step: u64,
    /// `tool/call`s logged in the open step.
    step_calls: HashSet<CallId>,
    /// Assistant tool calls of the open turn not answered yet, as (step, id).
    unanswered: HashSet<(u64, CallId)>,
}

impl RelationChecker {
    /// A checker positioned after `events`, which are taken as valid.
    pub fn after(events: &[Arc<SessionEvent>]) -> Self {
        let mut checker = Self::default();
        for e in events {
            checker.advance(e);
        }
        checker
    }

    /// Checks `event` against the log so far, then takes it into the log on success.
    pub fn check(&mut self, event: &SessionEvent) -> Result<(), String> {
        self.verify(event)?;
        self.advance(event);
        Ok(())
    }

    fn in_step(&self, event: &SessionEvent, turn: u64, step: u64) -> Result<(), String> {
        if self.open_turn != Some(turn) || self.open_step != Some(step) {
            return Err(format!(
                "{} names turn {turn} step {step}, but the open position is turn {:?} step {:?}",
                event.type_name(),
                self.open_turn,
                self.open_step
            ));
        }
        Ok(())
    }

    fn verify(&self, event: &SessionEvent) -> Result<(), String> {
        match &event.kind {
            EventKind::TurnStart(t) => {
                if let Some(open) = self.open_turn {
                    return Err(format!("turn/start {} while turn {open} is open", t.turn));
                }
                // Checked: a log claiming turn u64::MAX has no next turn.
                match self.last_turn.checked_add(1) {
                    Some(next) if next == t.turn => {}
                    Some(_) => {
                        return Err(format!(
                            "turn/start {} does not follow the last turn {}",
                            t.turn, self.last_turn
                        ));
                    }
                    None => return Err(format!("turn numbers end at turn {}", self.last_turn)),
                }
            }
            EventKind::TurnEnd(t) => {
                if self.open_turn != Some(t.turn) {
                    return Err(format!("turn/end {} does not name the open turn", t.turn));
                }
                if let Some(step) = self.open_step {
                    return Err(format!("turn/end {} while step {step} is open", t.turn));
                }
                if let Some((step, call)) = self.unanswered.iter().min() {
                    return Err(format!(
                        "turn/end {} while tool call {call} of step {step} has no tool/result",
                        t.turn
                    ));
                }
            }
            EventKind::StepStart(b) => {
                if self.open_turn != Some(b.turn) {
                    return Err(format!("step/start outside open turn {}", b.turn));
                }
                if self.open_step.is_some() {
                    return Err("step/start while a step is open".into());
                }
                if self.last_step.checked_add(1) != Some(b.step) {
                    return Err(format!(
                        "step/start {} does not follow step {}",
                        b.step, self.last_step
                    ));
                }
            }
            EventKind::StepEnd(b) => self.in_step(event, b.turn, b.step)?,
            EventKind::AssistantChunk(c) => self.in_step(event, c.turn, c.step)?,
            EventKind::AssistantMessage(m) => self.in_step(event, m.turn, m.step)?,
            EventKind::ToolCall(c) => self.in_step(event, c.turn, c.step)?,
            EventKind::ToolResult(r) if event.surface_op == Some(SurfaceOp::Append) => {
                self.in_step(event, r.turn, r.step)?;
                let synthetic = r
                    .error
                    .as_ref()
                    .is_some_and(|e| e.code == "TOOL_NOT_STARTED");
                let call = result_call(event);
                let called = call.is_some_and(|c| self.step_calls.contains(c));
                if !called && !synthetic {
                    return Err(format!(
                        "tool/result for {call:?} has no tool/call in turn {} step {}",
                        r.turn, r.step
                    ));
                }
            }
            EventKind::Rewind(_) if self.open_turn.is_some() => {
                return Err("session/rewind inside an open turn".into());
            }
            EventKind::RequestHeader(_) | EventKind::RequestContext(_)
                if self.open_turn.is_none() =>
            {
                return Err(format!("{} outside a turn", event.type_name()));
            }
            _ => {}
        }
        Ok(())
    }

    fn advance(&mut self, event: &SessionEvent) {
        match &event.kind {
            EventKind::TurnStart(t) => {
                self.last_turn = self.last_turn.max(t.turn);
                self.open_turn = Some(t.turn);
                self.last_step = 0;
                self.unanswered.clear();
            }
            EventKind::TurnEnd(_) => self.open_turn = None,
            EventKind::StepStart(b) => {
                self.open_step = Some(b.step);
                self.last_step = b.step;
                self.step_calls.clear();
            }
            EventKind::StepEnd(_) => self.open_step = None,
            EventKind::ToolCall(c) => {
                self.step_calls.insert(c.call_id.clone());
            }
            EventKind::AssistantMessage(m) => {
                for (id, _, _) in m.message.tool_calls() {
                    self.unanswered.insert((m.step, id.clone()));
                }
            }
            EventKind::ToolResult(r) if event.surface_op == Some(SurfaceOp::Append) => {
                if let Some(call) = result_call(event) {
                    self.unanswered.remove(&(r.step, call.clone()));
                }
            }
            _ => {}
        }
    }
}

/// The call a `tool/result` answers.
fn result_call(event: &SessionEvent) -> Option<&CallId> {
    let EventKind::ToolResult(r) = &event.kind else {
        return None;
    };
    r.message.content.iter().find_map(|b| match b {
        ContentBlock::ToolResult { tool_call_id, .. } => Some(tool_call_id),
        _ => None,
    })
}

/// Checks one proposed event against the log it would extend.
pub fn check_relation(events: &[Arc<SessionEvent>], event: &SessionEvent) -> Result<(), String> {
    RelationChecker::after(events).verify(event)
}

/// A validator enforcing INV-REL-1..5 on every append.
pub fn relational_validator() -> Validator {
    Arc::new(|session: &Session, event: &SessionEvent| {
        session
            .with_events(|events| check_relation(events, event))
            .map_err(Into::into)
    })
}
