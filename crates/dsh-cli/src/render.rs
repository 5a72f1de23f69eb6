//! Turning session events into terminal text.
//!
//! Kept apart from every driver (headless progress, the chat, `dsh sessions show`) so a later
//! full-screen TUI can reuse it: a [`Renderer`] is fed events in log order and returns the text
//! to print; it owns no terminal and does no I/O.

use std::collections::HashMap;

use dsh_session::{
    CallId, ContentBlock, EventKind, MessageSource, SessionEvent, StreamChunk, TodoWrite,
    ToolResult, TurnEndReason, clip_chars,
};
use serde_json::Value;

/// What to show.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// A live feed: assistant text as it streams (from `assistant/chunk`); user prompts are not
    /// echoed (the person just typed them).
    Live,
    /// A stored transcript: user prompts, assembled assistant messages, tool calls, turn ends.
    Transcript,
}

/// Stateful event-to-text renderer.
#[derive(Debug)]
pub struct Renderer {
    mode: Mode,
    at_line_start: bool,
    calls: HashMap<CallId, (String, String)>,
}

impl Renderer {
    /// A renderer for `mode`.
    pub fn new(mode: Mode) -> Self {
        Self {
            mode,
            at_line_start: true,
            calls: HashMap::new(),
        }
    }

    /// The text `event` adds to the display (possibly empty).
    pub fn event(&mut self, event: &SessionEvent) -> String {
        let mut out = String::new();
        match &event.kind {
            EventKind::AssistantChunk(c) if self.mode == Mode::Live => {
                if let StreamChunk::TextDelta { text, .. } = &c.chunk {
                    self.text(&mut out, text);
                }
            }
            // A finished (or interrupted) message ends its line, so the next step's text or a
            // steered reply starts on a fresh one.
            EventKind::AssistantMessage(_) if self.mode == Mode::Live => self.newline(&mut out),
            EventKind::AssistantMessage(m) if self.mode == Mode::Transcript => {
                let text = m.message.text();
                if !text.trim().is_empty() {
                    self.line(&mut out, "");
                    self.text(&mut out, text.trim_end());
                    self.newline(&mut out);
                }
                if m.interrupted {
                    self.line(&mut out, "[interrupted]");
                }
            }
            EventKind::UserMessage(m) if self.mode == Mode::Transcript => {
                let label = match &m.source {
                    MessageSource::User => Some("user"),
                    MessageSource::Plugin { plugin, .. } if plugin == "dsh-system-prompt" => None,
                    MessageSource::Plugin { .. } => Some("context"),
                    _ => None,
                };
                if let Some(label) = label {
                    let text = m.text();
                    self.line(&mut out, "");
                    for (i, l) in text.trim_end().lines().enumerate() {
                        let prefix = if i == 0 {
                            format!("{label}> ")
                        } else {
                            "  ".into()
                        };
                        self.line(&mut out, &format!("{prefix}{l}"));
                    }
                }
            }
            EventKind::ToolCall(c) => {
                self.calls
                    .insert(c.call_id.clone(), (c.name.clone(), summarize(&c.arguments)));
            }
            EventKind::ToolResult(r) => {
                let line = self.tool_line(r);
                self.line(&mut out, &line);
            }
            EventKind::Other { type_name, data }
                if self.mode == Mode::Transcript && type_name == dsh_guard::DECISION_EVENT =>
            {
                self.line(&mut out, &dsh_guard::describe_decision(data));
            }
            EventKind::TurnEnd(t) => match &t.reason {
                TurnEndReason::Completed => {
                    self.newline(&mut out);
                    if self.mode == Mode::Transcript {
                        self.line(&mut out, &format!("── turn {} completed", t.turn));
                    }
                }
                other => {
                    let text = other.describe();
                    self.line(&mut out, &format!("[turn {} {text}]", t.turn));
                }
            },
            EventKind::Rewind(r) => {
                self.line(
                    &mut out,
                    &format!(
                        "── rewound to the start of turn {}: the turns above from {0} on are out \
                         of the history",
                        r.to_turn
                    ),
                );
            }
            EventKind::Other { type_name, data }
                if self.mode == Mode::Transcript
                    && type_name == dsh_checkpoint::events::RESTORED =>
            {
                let count = data
                    .get("count")
                    .and_then(serde_json::Value::as_u64)
                    .unwrap_or(0);
                let turn = data
                    .get("toTurn")
                    .and_then(serde_json::Value::as_u64)
                    .unwrap_or(0);
                self.line(
                    &mut out,
                    &format!("── files of turn {turn} on put back ({count} path(s))"),
                );
            }
            EventKind::Other { type_name, .. } if type_name == TodoWrite::TYPE => {
                if let Some(write) = TodoWrite::of(event) {
                    self.newline(&mut out);
                    out.push_str(&crate::progress::todo_lines(&write));
                }
            }
            EventKind::Other { type_name, data } if type_name == "llm/retry" => {
                let line = crate::progress::retry_line(data);
                self.line(&mut out, &line);
            }
            // A host the network proxy refused a command: the person sees what the model read.
            EventKind::Other { type_name, data }
                if type_name == dsh_guard::NETWORK_BLOCKED_EVENT =>
            {
                if let Some(line) = data.get("line").and_then(serde_json::Value::as_str) {
                    self.line(&mut out, line);
                }
            }
            EventKind::Other { type_name, data }
                if self.mode == Mode::Transcript && type_name == dsh_hooks::runner::HOOK_RESULT =>
            {
                let line = crate::hooks::describe_result(data);
                self.line(&mut out, &line);
            }
            _ => {}
        }
        out
    }

    /// Ends a partial line (e.g. before the prompt is redrawn).
    pub fn finish_line(&mut self) -> String {
        let mut out = String::new();
        self.newline(&mut out);
        out
    }

    fn text(&mut self, out: &mut String, text: &str) {
        if text.is_empty() {
            return;
        }
        out.push_str(text);
        self.at_line_start = text.ends_with('\n');
    }

    fn newline(&mut self, out: &mut String) {
        if !self.at_line_start {
            out.push('\n');
            self.at_line_start = true;
        }
    }

    fn line(&mut self, out: &mut String, line: &str) {
        self.newline(out);
        out.push_str(line);
        out.push('\n');
    }

    fn tool_line(&mut self, r: &ToolResult) -> String {
        let call_id = r.message.content.iter().find_map(|b| match b {
            ContentBlock::ToolResult { tool_call_id, .. } => Some(tool_call_id.clone()),
            _ => None,
        });
        let (name, args) = call_id
            .and_then(|id| self.calls.remove(&id))
            .unwrap_or_else(|| ("tool".to_owned(), String::new()));
        let mut outcome = r.outcome();
        if outcome == "ok" && name == "bash" {
            // bash prints no marker for a zero exit status.
            outcome = "exit 0".to_owned();
        }
        format!("● {name}({args}) → {outcome}")
    }
}

/// A one-line summary of a call's arguments: the field a person recognizes, else the raw JSON.
fn summarize(arguments: &str) -> String {
    let value: Option<Value> = serde_json::from_str(arguments).ok();
    let field = value.as_ref().and_then(|v| {
        ["command", "file_path", "path", "pattern", "id", "task_id"]
            .iter()
            .find_map(|k| v.get(*k).and_then(Value::as_str))
    });
    let text = field.unwrap_or(arguments);
    one_line(text, 80)
}

/// `text` on one line (whitespace runs folded to a space), cut to `max` characters.
pub(crate) fn one_line(text: &str, max: usize) -> String {
    clip_chars(&text.split_whitespace().collect::<Vec<_>>().join(" "), max)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use dsh_session::{AssistantChunk, CancelCause, Message, ToolCall, TurnEnd};
    use std::sync::Arc;

    fn ev(kind: EventKind) -> SessionEvent {
        SessionEvent {
            seq: 0,
            time: 0,
            kind,
            ignorable: false,
            source_event_seqs: None,
            surface_op: None,
        }
    }

    #[test]
    fn live_mode_streams_text_and_prints_one_line_per_tool_call() {
        let mut r = Renderer::new(Mode::Live);
        let chunk = |t: &str| {
            ev(EventKind::AssistantChunk(AssistantChunk {
                turn: 1,
                step: 1,
                chunk: StreamChunk::TextDelta {
                    index: 0,
                    text: t.into(),
                },
            }))
        };
        let mut out = r.event(&chunk("Let me "));
        out += &r.event(&chunk("look."));
        out += &r.event(&ev(EventKind::ToolCall(ToolCall {
            turn: 1,
            step: 1,
            call_id: CallId::new("c1"),
            name: "bash".into(),
            arguments: r#"{"command":"echo hi","description":"say hi"}"#.into(),
        })));
        out += &r.event(&ev(EventKind::ToolResult(ToolResult {
            turn: 1,
            step: 1,
            message: Arc::new(Message::tool_result(
                CallId::new("c1"),
                vec![ContentBlock::text("hi\n[exit code: 3]")],
                false,
            )),
            error: None,
            meta: None,
        })));
        out += &r.event(&ev(EventKind::TurnEnd(TurnEnd {
            turn: 1,
            reason: TurnEndReason::Aborted {
                reason: CancelCause::User,
            },
        })));
        assert_eq!(
            out,
            "Let me look.\n● bash(echo hi) → exit 3\n[turn 1 cancelled]\n"
        );
    }
}
