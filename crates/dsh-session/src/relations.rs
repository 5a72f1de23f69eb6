//! Relational invariants of the turn/step structure (INV-REL-1..5), as an optional pre-commit
//! [`Validator`]. Drivers install it in tests and debug builds to catch an out-of-order event the
//! moment it is appended instead of when a provider rejects the history later.

use std::sync::Arc;

use crate::event::{EventKind, SessionEvent, SurfaceOp};
use crate::ids::CallId;
use crate::message::ContentBlock;
use crate::session::{Session, Validator};

/// Where the log stands: the open turn and the open step within it.
struct Position {
    last_turn: u64,
    open_turn: Option<u64>,
    open_step: Option<u64>,
    last_step: u64,
}

fn position(events: &[Arc<SessionEvent>]) -> Position {
    let mut p = Position {
        last_turn: 0,
        open_turn: None,
        open_step: None,
        last_step: 0,
    };
    for e in events {
        match &e.kind {
            EventKind::TurnStart(t) => {
                p.last_turn = p.last_turn.max(t.turn);
                p.open_turn = Some(t.turn);
                p.last_step = 0;
            }
            EventKind::TurnEnd(_) => p.open_turn = None,
            EventKind::StepStart(b) => {
                p.open_step = Some(b.step);
                p.last_step = b.step;
            }
            EventKind::StepEnd(_) => p.open_step = None,
            _ => {}
        }
    }
    p
}

/// Checks one proposed event against the log it would extend.
pub fn check_relation(events: &[Arc<SessionEvent>], event: &SessionEvent) -> Result<(), String> {
    let p = position(events);
    let in_step = |turn: u64, step: u64| -> Result<(), String> {
        if p.open_turn != Some(turn) || p.open_step != Some(step) {
            return Err(format!(
                "{} names turn {turn} step {step}, but the open position is turn {:?} step {:?}",
                event.type_name(),
                p.open_turn,
                p.open_step
            ));
        }
        Ok(())
    };
    match &event.kind {
        EventKind::TurnStart(t) => {
            if let Some(open) = p.open_turn {
                return Err(format!("turn/start {} while turn {open} is open", t.turn));
            }
            if t.turn != p.last_turn + 1 {
                return Err(format!(
                    "turn/start {} does not follow the last turn {}",
                    t.turn, p.last_turn
                ));
            }
        }
        EventKind::TurnEnd(t) => {
            if p.open_turn != Some(t.turn) {
                return Err(format!("turn/end {} does not name the open turn", t.turn));
            }
            if let Some(step) = p.open_step {
                return Err(format!("turn/end {} while step {step} is open", t.turn));
            }
        }
        EventKind::StepStart(b) => {
            if p.open_turn != Some(b.turn) {
                return Err(format!("step/start outside open turn {}", b.turn));
            }
            if p.open_step.is_some() {
                return Err("step/start while a step is open".into());
            }
            if b.step != p.last_step + 1 {
                return Err(format!(
                    "step/start {} does not follow step {}",
                    b.step, p.last_step
                ));
            }
        }
        EventKind::StepEnd(b) => in_step(b.turn, b.step)?,
        EventKind::AssistantChunk(c) => in_step(c.turn, c.step)?,
        EventKind::AssistantMessage(m) => in_step(m.turn, m.step)?,
        EventKind::ToolCall(c) => in_step(c.turn, c.step)?,
        EventKind::ToolResult(r) if event.surface_op == Some(SurfaceOp::Append) => {
            in_step(r.turn, r.step)?;
            let synthetic = r
                .error
                .as_ref()
                .is_some_and(|e| e.code == "TOOL_NOT_STARTED");
            let call: Option<&CallId> = r.message.content.iter().find_map(|b| match b {
                ContentBlock::ToolResult { tool_call_id, .. } => Some(tool_call_id),
                _ => None,
            });
            let called = events.iter().rev().any(|e| {
                matches!(&e.kind, EventKind::ToolCall(c)
                    if Some(&c.call_id) == call && c.turn == r.turn && c.step == r.step)
            });
            if !called && !synthetic {
                return Err(format!(
                    "tool/result for {call:?} has no tool/call in turn {} step {}",
                    r.turn, r.step
                ));
            }
        }
        EventKind::RequestHeader(_) | EventKind::RequestContext(_) if p.open_turn.is_none() => {
            return Err(format!("{} outside a turn", event.type_name()));
        }
        _ => {}
    }
    Ok(())
}

/// A validator enforcing INV-REL-1..5 on every append.
pub fn relational_validator() -> Validator {
    Arc::new(|session: &Session, event: &SessionEvent| {
        session
            .with_events(|events| check_relation(events, event))
            .map_err(Into::into)
    })
}
