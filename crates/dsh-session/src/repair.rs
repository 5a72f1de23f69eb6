//! Crash repair and balance checks.
//!
//! A process that dies mid-turn leaves a log whose last turn is open, possibly with tool calls
//! that never got a result. Providers reject such a history, so every load closes the open turn
//! with synthetic events: an error result for each unanswered call, `step/end` if a step is
//! open, then `turn/end {interrupted}`.

use std::collections::HashSet;
use std::sync::Arc;

use crate::event::SessionEvent;
use crate::event::{
    EventKind, StepBoundary, SurfaceOp, ToolErrorInfo, ToolResult, TurnEnd, TurnEndReason,
};
use crate::ids::{CallId, MessageId};
use crate::message::{ContentBlock, Message, MessageSource, Role};

/// Code of a synthetic result for a call whose `tool/call` was logged (it may have run).
pub const TOOL_OUTCOME_UNKNOWN: &str = "TOOL_OUTCOME_UNKNOWN";
/// Code of a synthetic result for a call that never started.
pub const TOOL_NOT_STARTED: &str = "TOOL_NOT_STARTED";

/// The events that close an interrupted tail turn, with contiguous seqs and the last event's
/// time. Empty when the log ends outside a turn.
pub fn interrupted_turn_closers(events: &[SessionEvent]) -> Vec<SessionEvent> {
    let Some(start) = events
        .iter()
        .rposition(|e| matches!(e.kind, EventKind::TurnStart(_) | EventKind::TurnEnd(_)))
    else {
        return Vec::new();
    };
    let EventKind::TurnStart(open) = &events[start].kind else {
        return Vec::new();
    };
    let turn = open.turn;
    let time = events.last().map_or(0, |e| e.time);
    let mut seq = events.len() as u64;
    let mut out = Vec::new();

    let tail = &events[start..];
    // Calls pair with results within their step (INV-REL-4): providers reuse ids such as
    // `call_0` in every response, so an id alone does not identify a call.
    let answered: HashSet<(u64, u64, &CallId)> = tail
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult(r) => r.message.content.iter().find_map(|b| match b {
                ContentBlock::ToolResult { tool_call_id, .. } => {
                    Some((r.turn, r.step, tool_call_id))
                }
                _ => None,
            }),
            _ => None,
        })
        .collect();
    let mut open_step = None;
    for e in tail {
        match &e.kind {
            EventKind::StepStart(b) => open_step = Some(b.step),
            EventKind::StepEnd(_) => open_step = None,
            _ => {}
        }
    }
    for e in tail {
        let EventKind::AssistantMessage(a) = &e.kind else {
            continue;
        };
        for (call_id, _, _) in a.message.tool_calls() {
            if answered.contains(&(a.turn, a.step, call_id)) {
                continue;
            }
            let logged = tail.iter().find(|c| {
                matches!(&c.kind, EventKind::ToolCall(tc)
                    if &tc.call_id == call_id && tc.turn == a.turn && tc.step == a.step)
            });
            let (code, text, sources) = match logged {
                Some(call) => (
                    TOOL_OUTCOME_UNKNOWN,
                    "Error: the session was interrupted while this tool call was running, so its \
                     outcome is unknown. Retry only read-only or idempotent work; otherwise verify \
                     the current state or ask the user.",
                    Some(vec![call.seq]),
                ),
                None => (
                    TOOL_NOT_STARTED,
                    "Error: the session was interrupted before this tool call started. Retry it \
                     if it is still needed.",
                    None,
                ),
            };
            let message = Message {
                id: MessageId::new(format!("interrupted-tool-result-{call_id}-{seq}")),
                role: Role::User,
                content: vec![ContentBlock::ToolResult {
                    tool_call_id: call_id.clone(),
                    content: vec![ContentBlock::text(text)],
                    is_error: true,
                }],
                source: MessageSource::Tool {
                    call_id: call_id.clone(),
                },
            };
            out.push(SessionEvent {
                seq,
                time,
                kind: EventKind::ToolResult(ToolResult {
                    turn: a.turn,
                    step: a.step,
                    message: Arc::new(message),
                    error: Some(ToolErrorInfo {
                        name: "InterruptedError".into(),
                        code: code.into(),
                    }),
                    meta: None,
                }),
                ignorable: false,
                source_event_seqs: sources,
                surface_op: Some(SurfaceOp::Append),
            });
            seq += 1;
        }
    }
    let mut close = |kind| {
        out.push(SessionEvent {
            seq,
            time,
            kind,
            ignorable: false,
            source_event_seqs: None,
            surface_op: None,
        });
        seq += 1;
    };
    if let Some(step) = open_step {
        close(EventKind::StepEnd(StepBoundary { turn, step }));
    }
    close(EventKind::TurnEnd(TurnEnd {
        turn,
        reason: TurnEndReason::Interrupted,
    }));
    out
}

/// Checks the structural balance of a log: every `turn/start` closed by one `turn/end`, every
/// `step/start` by one `step/end`, every `tool/call` answered by exactly one appended
/// `tool/result`, and every assistant tool call answered. Returns the first problem found.
pub fn check_balanced(events: &[Arc<SessionEvent>]) -> Result<(), String> {
    let mut open_turn: Option<u64> = None;
    let mut open_step: Option<(u64, u64)> = None;
    // Keyed by (turn, step, call id): ids are unique only within one step's response.
    let mut requested: Vec<(u64, u64, CallId)> = Vec::new();
    let mut results: HashSet<(u64, u64, CallId)> = HashSet::new();
    let mut calls: HashSet<(u64, u64, CallId)> = HashSet::new();
    for e in events {
        match &e.kind {
            EventKind::TurnStart(t) => {
                if let Some(o) = open_turn {
                    return Err(format!(
                        "turn {} starts at seq {} while turn {o} is open",
                        t.turn, e.seq
                    ));
                }
                open_turn = Some(t.turn);
            }
            EventKind::TurnEnd(t) => {
                if open_turn != Some(t.turn) {
                    return Err(format!(
                        "turn/end {} at seq {} closes no open turn",
                        t.turn, e.seq
                    ));
                }
                if let Some((turn, step)) = open_step {
                    return Err(format!(
                        "turn/end at seq {} while step {turn}.{step} is open",
                        e.seq
                    ));
                }
                open_turn = None;
            }
            EventKind::StepStart(b) => {
                if open_step.is_some() || open_turn != Some(b.turn) {
                    return Err(format!(
                        "step/start at seq {} outside a turn or inside a step",
                        e.seq
                    ));
                }
                open_step = Some((b.turn, b.step));
            }
            EventKind::StepEnd(b) => {
                if open_step != Some((b.turn, b.step)) {
                    return Err(format!("step/end at seq {} closes no open step", e.seq));
                }
                open_step = None;
            }
            EventKind::ToolCall(c) if !calls.insert((c.turn, c.step, c.call_id.clone())) => {
                return Err(format!("tool/call {} logged twice", c.call_id));
            }
            EventKind::AssistantMessage(a) => {
                requested.extend(
                    a.message
                        .tool_calls()
                        .map(|(id, _, _)| (a.turn, a.step, id.clone())),
                );
            }
            EventKind::ToolResult(r) if e.surface_op == Some(SurfaceOp::Append) => {
                for b in &r.message.content {
                    if let ContentBlock::ToolResult { tool_call_id, .. } = b
                        && !results.insert((r.turn, r.step, tool_call_id.clone()))
                    {
                        return Err(format!("tool call {tool_call_id} has two results"));
                    }
                }
            }
            _ => {}
        }
    }
    if let Some(t) = open_turn {
        return Err(format!("turn {t} is never closed"));
    }
    if let Some((_, _, c)) = calls.iter().find(|c| !results.contains(*c)) {
        return Err(format!("tool/call {c} has no tool/result"));
    }
    if let Some((_, _, c)) = requested.iter().find(|c| !results.contains(*c)) {
        return Err(format!("assistant tool call {c} has no tool/result"));
    }
    Ok(())
}
