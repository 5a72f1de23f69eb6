//! Building session events and drawing the app on ratatui's test backend.

#![allow(dead_code, clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Instant;

use dsh_session::{
    AssistantChunk, AssistantMessage, CallId, ContentBlock, EventKind, Message, SessionEvent,
    StreamChunk, ToolCall, ToolResult, TurnEnd, TurnEndReason, TurnStart,
};
use dsh_tui::app::App;
use dsh_tui::{HostInfo, ModelEntry};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

/// A log under construction, with increasing seqs.
#[derive(Default)]
pub struct Log {
    pub events: Vec<Arc<SessionEvent>>,
}

impl Log {
    pub fn push(&mut self, kind: EventKind) -> Arc<SessionEvent> {
        let e = Arc::new(SessionEvent {
            seq: self.events.len() as u64 + 1,
            time: 0,
            kind,
            ignorable: false,
            source_event_seqs: None,
            surface_op: None,
        });
        self.events.push(e.clone());
        e
    }

    pub fn turn_start(&mut self, turn: u64) -> Arc<SessionEvent> {
        self.push(EventKind::TurnStart(TurnStart { turn }))
    }

    pub fn user(&mut self, text: &str) -> Arc<SessionEvent> {
        self.push(EventKind::UserMessage(Arc::new(Message::user_text(text))))
    }

    pub fn delta(&mut self, text: &str) -> Arc<SessionEvent> {
        self.push(EventKind::AssistantChunk(AssistantChunk {
            turn: 1,
            step: 1,
            chunk: StreamChunk::TextDelta {
                index: 0,
                text: text.into(),
            },
        }))
    }

    pub fn reasoning(&mut self, text: &str) -> Arc<SessionEvent> {
        self.push(EventKind::AssistantChunk(AssistantChunk {
            turn: 1,
            step: 1,
            chunk: StreamChunk::ReasoningDelta {
                index: 0,
                text: text.into(),
            },
        }))
    }

    pub fn answer(&mut self, text: &str) -> Arc<SessionEvent> {
        self.push(EventKind::AssistantMessage(AssistantMessage {
            turn: 1,
            step: 1,
            message: Arc::new(Message::assistant(
                vec![ContentBlock::text(text)],
                "deepseek",
                "deepseek-chat",
            )),
            usage: None,
            interrupted: false,
        }))
    }

    pub fn call(&mut self, id: &str, name: &str, args: serde_json::Value) -> Arc<SessionEvent> {
        self.push(EventKind::ToolCall(ToolCall {
            turn: 1,
            step: 1,
            call_id: CallId::new(id),
            name: name.into(),
            arguments: args.to_string(),
        }))
    }

    pub fn result(&mut self, id: &str, text: &str, is_error: bool) -> Arc<SessionEvent> {
        self.push(EventKind::ToolResult(ToolResult {
            turn: 1,
            step: 1,
            message: Arc::new(Message::tool_result(
                CallId::new(id),
                vec![ContentBlock::text(text)],
                is_error,
            )),
            error: None,
            meta: None,
        }))
    }

    pub fn end(&mut self, turn: u64, reason: TurnEndReason) -> Arc<SessionEvent> {
        self.push(EventKind::TurnEnd(TurnEnd { turn, reason }))
    }
}

pub fn info() -> HostInfo {
    HostInfo {
        model: "deepseek-chat".into(),
        provider: "deepseek".into(),
        cwd: "/work/project".into(),
        mode: "workspace-write · ask · network off".into(),
        models: vec![ModelEntry {
            id: "deepseek-chat".into(),
            provider: "deepseek".into(),
            context_window: Some(128_000),
            prices: Some(dsh_tui::Prices {
                input: 0.28,
                cache_read: 0.028,
                output: 0.42,
            }),
        }],
    }
}

/// An app showing a session, fed `events` live (as the feed delivers them).
pub fn app_with(events: &[Arc<SessionEvent>], now: Instant) -> App {
    let mut app = App::new(info(), Vec::new());
    app.open(dsh_session::SessionId::new("s1"), &[], now);
    for e in events {
        app.session_event(e, false, now);
    }
    app
}

/// The screen at `width`×`height`.
pub fn screen(app: &mut App, width: u16, height: u16, now: Instant) -> Terminal<TestBackend> {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|f| dsh_tui::view::draw(f, app, now)).unwrap();
    terminal
}

/// The screen's text, one string per row (trailing spaces trimmed).
pub fn rows(terminal: &Terminal<TestBackend>) -> Vec<String> {
    let buffer = terminal.backend().buffer();
    let area = buffer.area;
    (0..area.height)
        .map(|y| {
            let mut row = String::new();
            for x in 0..area.width {
                row.push_str(buffer[(x, y)].symbol());
            }
            row.trim_end().to_owned()
        })
        .collect()
}

/// An approval question for `bash` running `args`, and where its answer arrives.
pub fn ask(
    args: serde_json::Value,
    reason: Option<&str>,
) -> (
    dsh_tui::approval::Ask,
    tokio::sync::oneshot::Receiver<dsh_tui::approval::Answer>,
) {
    let (reply, answer) = tokio::sync::oneshot::channel();
    let ask = dsh_tui::approval::Ask {
        request: dsh_tools::ApprovalRequest {
            agent_id: "s1".into(),
            tool_name: "bash".into(),
            reason: reason.map(str::to_owned),
            call_id: "c1".into(),
            effects: dsh_tools::ToolEffects::none()
                .runs(args["command"].as_str().unwrap_or_default()),
            arguments: Arc::new(args),
            cancel: tokio_util::sync::CancellationToken::new(),
        },
        reply,
    };
    (ask, answer)
}

/// A key without modifiers.
pub fn key(
    app: &mut App,
    code: crossterm::event::KeyCode,
    now: Instant,
) -> Vec<dsh_tui::app::Effect> {
    use crossterm::event::{Event, KeyEvent, KeyModifiers};
    app.handle(Event::Key(KeyEvent::new(code, KeyModifiers::NONE)), now)
}

/// Ctrl + `c`.
pub fn ctrl(app: &mut App, c: char, now: Instant) -> Vec<dsh_tui::app::Effect> {
    use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
    app.handle(
        Event::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)),
        now,
    )
}

/// Types `text` key by key.
pub fn type_text(app: &mut App, text: &str, now: Instant) {
    for c in text.chars() {
        key(app, crossterm::event::KeyCode::Char(c), now);
    }
}

/// An app whose session has a running turn.
pub fn running_app(now: Instant) -> App {
    let mut log = Log::default();
    log.turn_start(1);
    log.user("start");
    app_with(&log.events, now)
}
