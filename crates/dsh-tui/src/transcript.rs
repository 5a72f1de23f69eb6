//! The app-owned transcript: cells built from session events, laid out on demand.
//!
//! Cells come only from log events (never from what was typed), so the live transcript and the
//! one a resumed session replays from its log are the same. Layout is virtualized: each cell
//! caches its wrapped rows per width, and a frame asks only for the rows it shows.

use std::collections::HashMap;

use dsh_plan::{Decided, Decision, ModeChange, Proposed};
use dsh_session::{
    CallId, CancelCause, ContentBlock, EventKind, LiveUpdate, MessageSource, SessionEvent,
    StreamChunk, TokenUsage, ToolResult, TurnEndReason,
};
use ratatui::text::Line;
use serde_json::Value;

use crate::cell::{Cell, CellKind, ToolCard, ToolState, summarize};
use crate::diff;
use crate::sanitize::sanitize;

/// Tokens of one model's requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tokens {
    /// Uncached input tokens.
    pub input: u64,
    /// Cached input tokens.
    pub cache_read: u64,
    /// Output tokens.
    pub output: u64,
}

/// Token totals and the last request's context use, from the log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Uncached input tokens, summed over the session's requests.
    pub input: u64,
    /// Cached input tokens, summed.
    pub cache_read: u64,
    /// Output tokens, summed.
    pub output: u64,
    /// Input (cached included) of the latest request: what the context holds now.
    pub last_input: u64,
    /// The model's context window, from the latest `request/context`.
    pub context_window: Option<u64>,
    /// The same totals per model (each is priced by its own model: a session that switched
    /// models, and compaction summaries, are billed at their model's prices).
    pub by_model: std::collections::BTreeMap<String, Tokens>,
    /// Requests that reported usage.
    pub requests: u64,
}

/// What the transcript learned that the status line shows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Activity {
    /// A turn is open.
    pub running: bool,
    /// The latest retry notice of the open step (`retrying in 4 s: 429 …`).
    pub retry: Option<String>,
    /// The name of the tool running now, if any.
    pub tool: Option<String>,
}

/// The transcript of one session (and the actions of its subagents).
#[derive(Debug, Default)]
pub struct Transcript {
    cells: Vec<Cell>,
    calls: HashMap<CallId, usize>,
    active_text: Option<usize>,
    active_reasoning: Option<usize>,
    child_calls: HashMap<CallId, String>,
    /// Why the guard refused a call (by call id), until its result arrives.
    denials: HashMap<String, (String, String)>,
    /// Token accounting.
    pub usage: Usage,
    /// Turn state.
    pub activity: Activity,
    /// Compactions that ended (a front end tells its own report from the log's).
    pub compactions: u64,
    /// Every card expanded (Ctrl+O).
    pub expand_all: bool,
    /// Plan mode is on (the last `plan/mode` event said so).
    pub planning: bool,
}

impl Transcript {
    /// A transcript replayed from `events` (a resumed session's log).
    pub fn replay<'a>(events: impl IntoIterator<Item = &'a SessionEvent>) -> Self {
        let mut t = Self::default();
        for e in events {
            t.apply(e);
        }
        t
    }

    /// Number of cells.
    pub fn len(&self) -> usize {
        self.cells.len()
    }

    /// Whether nothing has been shown.
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// The cells, for inspection.
    pub fn cells(&self) -> &[Cell] {
        &self.cells
    }

    /// Adds a notice that is not from the log (a front-end message such as a failed resume).
    pub fn notice(&mut self, text: impl Into<String>) {
        self.push(CellKind::Notice(text.into()));
    }

    /// Adds an error block that is not from the log.
    pub fn error(&mut self, text: impl Into<String>) {
        self.push(CellKind::Error(text.into()));
    }

    /// The text of the last assistant cell (printed on exit).
    pub fn last_answer(&self) -> Option<&str> {
        self.cells.iter().rev().find_map(|c| match &c.kind {
            CellKind::Assistant(t) if !t.trim().is_empty() => Some(t.as_str()),
            _ => None,
        })
    }

    fn push(&mut self, kind: CellKind) -> usize {
        let mut cell = Cell::new(kind);
        cell.expanded = self.expand_all;
        self.cells.push(cell);
        self.cells.len() - 1
    }

    /// Toggles every card between collapsed and expanded.
    pub fn toggle_expand_all(&mut self) {
        self.expand_all = !self.expand_all;
        for c in &mut self.cells {
            c.expanded = self.expand_all;
        }
    }

    /// Applies one event of the session itself.
    pub fn apply(&mut self, event: &SessionEvent) {
        match &event.kind {
            EventKind::TurnStart(_) => {
                self.activity = Activity {
                    running: true,
                    ..Activity::default()
                };
            }
            EventKind::UserMessage(m) => match &m.source {
                MessageSource::User => {
                    self.push(CellKind::User(sanitize(&m.text())));
                }
                // A compaction's checkpoint is announced by its end notice.
                MessageSource::Plugin { plugin, .. }
                    if plugin != "dsh-system-prompt" && plugin != COMPACTION_PLUGIN =>
                {
                    self.push(CellKind::Context(sanitize(&m.text())));
                }
                _ => {}
            },
            EventKind::AssistantChunk(c) => match &c.chunk {
                StreamChunk::TextDelta { text, .. } => {
                    self.activity.retry = None;
                    let i = match self.active_text {
                        Some(i) => i,
                        None => {
                            let i = self.push(CellKind::Assistant(String::new()));
                            self.active_text = Some(i);
                            i
                        }
                    };
                    if let CellKind::Assistant(t) = &mut self.cells[i].kind {
                        t.push_str(&sanitize(text));
                    }
                    self.cells[i].touch();
                }
                StreamChunk::ReasoningDelta { text, .. } => {
                    self.activity.retry = None;
                    let i = match self.active_reasoning {
                        Some(i) => i,
                        None => {
                            let i = self.push(CellKind::Reasoning {
                                text: String::new(),
                                done: false,
                            });
                            self.active_reasoning = Some(i);
                            i
                        }
                    };
                    if let CellKind::Reasoning { text: t, .. } = &mut self.cells[i].kind {
                        t.push_str(&sanitize(text));
                    }
                    self.cells[i].touch();
                }
                _ => {}
            },
            EventKind::AssistantMessage(m) => {
                self.activity.retry = None;
                // The assembled message is authoritative over what streamed.
                let text = sanitize(&m.message.text());
                match self.active_text.take() {
                    Some(i) => {
                        self.cells[i].kind = CellKind::Assistant(text);
                        self.cells[i].touch();
                    }
                    None if !text.trim().is_empty() => {
                        self.push(CellKind::Assistant(text));
                    }
                    None => {}
                }
                let reasoning: String = m
                    .message
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::Reasoning { text } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect();
                match self.active_reasoning.take() {
                    Some(i) => {
                        if let CellKind::Reasoning { text, done } = &mut self.cells[i].kind {
                            if !reasoning.is_empty() {
                                *text = sanitize(&reasoning);
                            }
                            *done = true;
                        }
                        self.cells[i].touch();
                    }
                    None if !reasoning.trim().is_empty() => {
                        self.push(CellKind::Reasoning {
                            text: sanitize(&reasoning),
                            done: true,
                        });
                    }
                    None => {}
                }
                if let (Some(u), MessageSource::Model { model, .. }) = (&m.usage, &m.message.source)
                {
                    self.add_usage(model, u);
                    self.usage.last_input = u.input_tokens + u.cache_read_tokens.unwrap_or(0);
                }
            }
            EventKind::ToolCall(c) => {
                let args: Value = serde_json::from_str(&c.arguments).unwrap_or(Value::Null);
                let mut card =
                    ToolCard::new(c.name.clone(), sanitize(&summarize(&args, &c.arguments)));
                card.diff = diff::for_call(&c.name, &args);
                card.lang = diff::language(&args);
                let i = self.push(CellKind::Tool(Box::new(card)));
                self.calls.insert(c.call_id.clone(), i);
                self.activity.tool = Some(c.name.clone());
            }
            EventKind::ToolResult(r) => {
                let Some(call) = result_call(r) else {
                    return;
                };
                let denial = self.denials.remove(call.as_str());
                let Some(i) = self.calls.get(&call).copied() else {
                    return;
                };
                if let CellKind::Tool(card) = &mut self.cells[i].kind {
                    finish_card(card, r, denial);
                }
                self.cells[i].touch();
                self.activity.tool = None;
            }
            EventKind::Other { type_name, data } if type_name == DECISION_EVENT => {
                self.decision(data);
            }
            EventKind::Other { type_name, data } if type_name == NETWORK_BLOCKED_EVENT => {
                if let Some(line) = data.get("line").and_then(Value::as_str) {
                    self.notice(format!("⊘ {}", sanitize(line)));
                }
            }
            EventKind::Other { type_name, data } if type_name == COMPACTION_SUMMARY => {
                let usage = data
                    .get("usage")
                    .and_then(|u| serde_json::from_value::<TokenUsage>(u.clone()).ok());
                let model = data.get("model").and_then(Value::as_str).unwrap_or("");
                if let Some(u) = usage {
                    self.add_usage(model, &u);
                }
            }
            EventKind::Other { type_name, data } if type_name == COMPACTION_END => {
                self.compactions += 1;
                self.notice(compaction_text(data));
            }
            EventKind::TurnEnd(t) => {
                self.active_text = None;
                self.active_reasoning = None;
                self.activity = Activity::default();
                match &t.reason {
                    TurnEndReason::Completed => {}
                    TurnEndReason::Aborted {
                        reason: CancelCause::User,
                    } => self.notice("⊘ cancelled"),
                    TurnEndReason::Error { error } => {
                        self.error(format!("{}: {}", error.code, error.message));
                    }
                    other => self.notice(format!("⊘ turn {}", other.describe())),
                }
            }
            EventKind::RequestContext(c) if c.context_window.is_some() => {
                self.usage.context_window = c.context_window;
            }
            EventKind::SessionEndSeed => self.notice("── resumed ──"),
            EventKind::Other { type_name, data } if type_name == "llm/retry" => {
                let text = retry_text(data);
                self.notice(text.clone());
                self.activity.retry = Some(text);
            }
            EventKind::Other { .. } => self.apply_plan(event),
            _ => {}
        }
    }

    /// Plan mode's events: the mode in the status line, each plan as its own cell, and what
    /// became of it.
    fn apply_plan(&mut self, event: &SessionEvent) {
        if let Some(change) = ModeChange::of(event) {
            self.planning = change.active;
            self.notice(if change.active {
                "plan mode on: the agent explores read-only and proposes a plan (/plan off leaves)"
            } else {
                "plan mode off"
            });
        } else if let Some(proposed) = Proposed::of(event) {
            self.push(CellKind::Plan(sanitize(&proposed.plan)));
        } else if let Some(decided) = Decided::of(event) {
            let text = match (decided.decision, decided.feedback) {
                (Decision::Approved, _) => "✓ plan approved".to_owned(),
                (Decision::Rejected, Some(feedback)) => {
                    format!("plan not approved: {}", sanitize(&feedback))
                }
                (Decision::Rejected, None) => "plan not approved".to_owned(),
                (Decision::Unreviewed, _) => "plan not reviewed".to_owned(),
            };
            self.notice(text);
        }
    }

    /// Applies an event of a subagent's session: its tool calls become lines of the running
    /// `subagent` card.
    pub fn apply_child(&mut self, event: &SessionEvent) {
        let line = match &event.kind {
            EventKind::ToolCall(c) => {
                let args: Value = serde_json::from_str(&c.arguments).unwrap_or(Value::Null);
                let line = format!("{}({})", c.name, sanitize(&summarize(&args, &c.arguments)));
                self.child_calls.insert(c.call_id.clone(), line);
                return;
            }
            EventKind::ToolResult(r) => {
                let Some(call) = result_call(r).and_then(|id| self.child_calls.remove(&id)) else {
                    return;
                };
                format!("{call} → {}", r.outcome())
            }
            _ => return,
        };
        if let Some(i) = self.running_subagent() {
            if let CellKind::Tool(card) = &mut self.cells[i].kind {
                card.children.push(line);
                card.child_live = None;
            }
            self.cells[i].touch();
        }
    }

    /// The newest running `subagent` card.
    fn running_subagent(&self) -> Option<usize> {
        self.cells.iter().rposition(|c| {
            matches!(&c.kind, CellKind::Tool(card) if card.name == "subagent" && card.state == ToolState::Running)
        })
    }

    /// A live update of the session on screen (`child`: of one of its subagents): output
    /// and progress of a running call, shown in its card until the result replaces them.
    pub fn live(&mut self, update: &LiveUpdate, child: bool) {
        if child {
            // A subagent's running command: its latest line under the subagent's card.
            let LiveUpdate::ToolOutput { text, .. } = update else {
                return;
            };
            let Some(last) = sanitize(text)
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(str::to_owned)
            else {
                return;
            };
            if let Some(i) = self.running_subagent() {
                if let CellKind::Tool(card) = &mut self.cells[i].kind {
                    card.child_live = Some(last);
                }
                self.cells[i].touch();
            }
            return;
        }
        let Some(i) = self.calls.get(update.call_id()).copied() else {
            return;
        };
        let CellKind::Tool(card) = &mut self.cells[i].kind else {
            return;
        };
        // The result is authoritative: anything late is ignored.
        if card.state != ToolState::Running {
            return;
        }
        match update {
            LiveUpdate::ToolOutput { text, skipped, .. } => {
                if *skipped > 0 {
                    card.push_live(&format!("\n… {skipped} bytes skipped …\n"));
                }
                card.push_live(text);
            }
            LiveUpdate::ToolProgress {
                progress,
                total,
                message,
                ..
            } => {
                let amount = match total {
                    Some(t) => format!("{progress}/{t}"),
                    None => progress.to_string(),
                };
                let text = match message {
                    Some(m) => format!("{amount} {}", sanitize(m)),
                    None => amount,
                };
                card.progress = Some(text.lines().next().unwrap_or("").to_owned());
            }
        }
        self.cells[i].touch();
    }

    /// A guard decision (`approval/decided`): a refusal is remembered for the call's card.
    fn decision(&mut self, data: &Value) {
        let field = |k: &str| data.get(k).and_then(Value::as_str);
        let Some(call) = field("callId") else {
            return;
        };
        let by = match (field("verdict"), field("by"), field("answer")) {
            (Some("deny"), Some("mode"), _) => "the sandbox",
            (Some("deny"), Some("rule"), _) => "a rule",
            (Some("deny"), _, _) => "the approval policy",
            (_, Some("user"), Some("rejected")) => "you",
            _ => return,
        };
        let reason = field("reason").unwrap_or("").to_owned();
        self.denials
            .insert(call.to_owned(), (by.to_owned(), sanitize(&reason)));
    }

    fn add_usage(&mut self, model: &str, u: &TokenUsage) {
        let cached = u.cache_read_tokens.unwrap_or(0);
        self.usage.input += u.input_tokens;
        self.usage.cache_read += cached;
        self.usage.output += u.output_tokens;
        self.usage.requests += 1;
        let m = self.usage.by_model.entry(model.to_owned()).or_default();
        m.input += u.input_tokens;
        m.cache_read += cached;
        m.output += u.output_tokens;
    }

    /// Total rows at `width`.
    pub fn height(&mut self, width: usize) -> usize {
        self.cells.iter_mut().map(|c| c.height(width)).sum()
    }

    /// The rows `top..top + rows` at `width`; only the cells they cross are laid out.
    pub fn visible(&mut self, width: usize, top: usize, rows: usize) -> Vec<Line<'static>> {
        let mut out = Vec::with_capacity(rows);
        let mut y = 0;
        for cell in &mut self.cells {
            if out.len() >= rows {
                break;
            }
            let h = cell.height(width);
            if y + h <= top {
                y += h;
                continue;
            }
            let from = top.saturating_sub(y);
            let lines = cell.rows(width);
            for line in lines.iter().skip(from) {
                if out.len() >= rows {
                    break;
                }
                out.push(line.clone());
            }
            y += h;
        }
        out
    }
}

/// The guard's log event of a decision or an answer.
const DECISION_EVENT: &str = "approval/decided";
/// The guard's log event of a host the network proxy refused a command.
const NETWORK_BLOCKED_EVENT: &str = "network/blocked";
/// Compaction's events (its crate is not a dependency of the UI; the names are its log
/// vocabulary).
const COMPACTION_PLUGIN: &str = "dsh-compaction";
const COMPACTION_SUMMARY: &str = "compaction/summary";
const COMPACTION_END: &str = "compaction/end";

/// Settles a card with its result: the outcome, whether it failed, what it printed, a refusal
/// (its reason is the card's text, said once) or a write the sandbox blocked.
fn finish_card(card: &mut ToolCard, r: &ToolResult, denial: Option<(String, String)>) {
    let (text, is_error) = r.text_and_error();
    card.live.clear();
    card.progress = None;
    card.child_live = None;
    if is_error && let Some((by, reason)) = denial {
        card.state = ToolState::Denied { by };
        card.output = if reason.is_empty() {
            sanitize(text.strip_prefix("Error: ").unwrap_or(&text))
        } else {
            reason
        };
        return;
    }
    card.output = sanitize(&text);
    card.blocked = blocked_path(&text);
    let mut outcome = r.outcome();
    let failed = if is_error {
        outcome = match &r.error {
            Some(e) => format!("failed · {}", e.code),
            None => "failed".to_owned(),
        };
        true
    } else {
        outcome.starts_with("exit ") && outcome != "exit 0"
            || outcome.starts_with("killed")
            || outcome == "timed out"
    };
    if outcome == "ok" && card.name == "bash" {
        outcome = "exit 0".to_owned();
    }
    card.state = ToolState::Done { outcome, failed };
}

/// The path in the guard's `[sandbox] write to PATH blocked: …` note.
fn blocked_path(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix("[sandbox] write to ")?;
        let end = rest.find(" blocked")?;
        Some(sanitize(&rest[..end]))
    })
}

/// `context compacted: ~41,000 → ~9,000 tokens` from a `compaction/end` record.
fn compaction_text(data: &Value) -> String {
    let after = data.get("tokensAfter").and_then(Value::as_u64);
    let pruned = data.get("pruned").and_then(Value::as_u64).unwrap_or(0);
    let summarized = data.get("summarized").and_then(Value::as_bool) == Some(true);
    if let Some(error) = data.get("error") {
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("stopped");
        return format!("⊘ compaction stopped: {}", sanitize(message));
    }
    let mut what = Vec::new();
    if summarized {
        what.push("older history summarized".to_owned());
    }
    if pruned > 0 {
        what.push(format!("{pruned} old tool results trimmed"));
    }
    if what.is_empty() {
        what.push("nothing to compact".to_owned());
    }
    let mut text = format!("── context compacted: {}", what.join(", "));
    if let Some(after) = after {
        text.push_str(&format!(
            " (now ~{} tokens)",
            crate::status::group_thousands(after)
        ));
    }
    text.push_str(" ──");
    text
}

fn result_call(r: &ToolResult) -> Option<CallId> {
    r.message.content.iter().find_map(|b| match b {
        ContentBlock::ToolResult { tool_call_id, .. } => Some(tool_call_id.clone()),
        _ => None,
    })
}

/// `retrying in 4 s: 429 rate limited (2/5)` from an `llm/retry` record.
fn retry_text(data: &Value) -> String {
    let delay = data.get("delayMs").and_then(Value::as_u64).unwrap_or(0);
    let secs = delay.div_ceil(1000);
    let failure = data.get("failure");
    let status = failure
        .and_then(|f| f.get("status"))
        .and_then(Value::as_u64)
        .map(|s| format!("{s} "))
        .unwrap_or_default();
    let message = failure
        .and_then(|f| f.get("message"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let message: String = message.chars().take(60).collect();
    let count = match (
        data.get("retry").and_then(Value::as_u64),
        data.get("maxRetries").and_then(Value::as_u64),
    ) {
        (Some(n), Some(max)) => format!(" ({n}/{max})"),
        _ => String::new(),
    };
    format!("retrying in {secs} s: {status}{message}{count}")
        .trim_end()
        .to_owned()
}
