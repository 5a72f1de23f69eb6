//! Frame render time with a 5,000-row transcript at 120×40: prints p50/p95/max for a full
//! layout (cold caches), a one-key frame, a streaming frame (one delta) and a resize, with
//! syntax highlighting on (every code block and diff of the transcript is highlighted in the
//! background after the first layout; that time is printed apart). `RENDER_BENCH_PLAIN=1`
//! measures without highlighting.
//!
//! `cargo bench -p dsh-tui --bench render`. The goal: a keystroke reaches the screen within
//! 16 ms; a streaming frame at 200 tokens/s stays well under that.

#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
use dsh_session::{
    AssistantChunk, CallId, ContentBlock, EventKind, Message, SessionEvent, SessionId, StreamChunk,
    ToolCall, ToolResult,
};
use dsh_tui::HostInfo;
use dsh_tui::app::App;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

fn event(seq: u64, kind: EventKind) -> Arc<SessionEvent> {
    Arc::new(SessionEvent {
        seq,
        time: 0,
        kind,
        ignorable: false,
        source_event_seqs: None,
        surface_op: None,
    })
}

fn delta(seq: u64, text: &str) -> Arc<SessionEvent> {
    event(
        seq,
        EventKind::AssistantChunk(AssistantChunk {
            turn: 1,
            step: 1,
            chunk: StreamChunk::TextDelta {
                index: 0,
                text: text.into(),
            },
        }),
    )
}

/// A mixed transcript of about 5,000 rows at 120 columns: prompts, Markdown answers, tool
/// cards with output and diffs.
fn transcript() -> Vec<Arc<SessionEvent>> {
    let mut events = Vec::new();
    let mut seq = 0;
    let mut next = || {
        seq += 1;
        seq
    };
    for round in 0..140 {
        events.push(event(
            next(),
            EventKind::UserMessage(Arc::new(Message::user_text(format!(
                "round {round}: fix the tests and explain what changed"
            )))),
        ));
        let answer = format!(
            "## Round {round}\n\nI looked at **the code** and `the tests`. Here is what I found:\n\n- one item that is long enough to wrap around the edge of a wide terminal, then some more words\n- two\n- three\n\n```rust\n// round {round}\nfn main() {{\n    let greeting = \"hello\"; // a comment\n    println!(\"{{greeting}} {round}\");\n}}\n```\n\nA closing paragraph with several sentences. It keeps going for a while so that it wraps.\n"
        );
        events.push(delta(next(), &answer));
        let id = format!("c{round}");
        events.push(event(
            next(),
            EventKind::ToolCall(ToolCall {
                turn: 1,
                step: 1,
                call_id: CallId::new(id.as_str()),
                name: "bash".into(),
                arguments: r#"{"command":"cargo test"}"#.into(),
            }),
        ));
        let out: String = (0..12).map(|i| format!("test case_{i} ... ok\n")).collect();
        events.push(event(
            next(),
            EventKind::ToolResult(ToolResult {
                turn: 1,
                step: 1,
                message: Arc::new(Message::tool_result(
                    CallId::new(id.as_str()),
                    vec![ContentBlock::text(out)],
                    false,
                )),
                error: None,
                meta: None,
            }),
        ));
        let edit = format!("e{round}");
        let old: String = (0..10)
            .map(|i| format!("let line_{i} = \"round {round}\"; // {i}\n"))
            .collect();
        let new = old.replace("line_5", "line_five");
        events.push(event(
            next(),
            EventKind::ToolCall(ToolCall {
                turn: 1,
                step: 1,
                call_id: CallId::new(edit.as_str()),
                name: "edit".into(),
                arguments: serde_json::json!({"file_path": "src/lib.rs", "old_string": old, "new_string": new}).to_string(),
            }),
        ));
    }
    events
}

fn stats(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let pick = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
    println!(
        "{name:<28} p50 {:>8.3} ms   p95 {:>8.3} ms   max {:>8.3} ms   ({} runs)",
        pick(0.5).as_secs_f64() * 1e3,
        pick(0.95).as_secs_f64() * 1e3,
        samples.last().unwrap().as_secs_f64() * 1e3,
        samples.len()
    );
}

fn main() {
    let highlighting = std::env::var_os("RENDER_BENCH_PLAIN").is_none();
    if highlighting {
        let t = Instant::now();
        dsh_tui::highlight::load_now();
        println!(
            "syntax highlighting: loaded in {:.1} ms",
            t.elapsed().as_secs_f64() * 1e3
        );
    } else {
        println!("syntax highlighting: off (RENDER_BENCH_PLAIN)");
    }
    let events = transcript();
    let now = Instant::now();
    let info = HostInfo {
        model: "deepseek-chat".into(),
        provider: "deepseek".into(),
        mode: "no sandbox".into(),
        ..HostInfo::default()
    };
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();

    let mut terminal_first = Terminal::new(TestBackend::new(120, 40)).unwrap();
    {
        // The first layout highlights every block once; later layouts find them cached.
        let mut app = App::new(info.clone(), Vec::new());
        app.open(SessionId::new("bench"), &events, now);
        let t = Instant::now();
        terminal_first
            .draw(|f| dsh_tui::view::draw(f, &mut app, now))
            .unwrap();
        println!(
            "first layout (blocks queued for highlighting): {:.3} ms",
            t.elapsed().as_secs_f64() * 1e3
        );
        let t = Instant::now();
        dsh_tui::highlight::settle();
        println!(
            "background highlighting of every block: {:.1} ms (off the UI thread)",
            t.elapsed().as_secs_f64() * 1e3
        );
    }
    let mut full = Vec::new();
    let mut rows = 0;
    for _ in 0..20 {
        let mut app = App::new(info.clone(), Vec::new());
        app.open(SessionId::new("bench"), &events, now);
        let t = Instant::now();
        terminal
            .draw(|f| dsh_tui::view::draw(f, &mut app, now))
            .unwrap();
        full.push(t.elapsed());
        rows = app.transcript.height(120);
    }
    println!(
        "transcript: {rows} rows at 120 columns, {} events",
        events.len()
    );
    stats("full layout (cold)", full);

    let mut app = App::new(info.clone(), Vec::new());
    app.open(SessionId::new("bench"), &events, now);
    terminal
        .draw(|f| dsh_tui::view::draw(f, &mut app, now))
        .unwrap();
    let mut keys = Vec::new();
    for i in 0..300 {
        let c = char::from(b'a' + (i % 26) as u8);
        let t = Instant::now();
        app.handle(
            Event::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)),
            now,
        );
        terminal
            .draw(|f| dsh_tui::view::draw(f, &mut app, now))
            .unwrap();
        keys.push(t.elapsed());
    }
    stats("one-key frame", keys);

    // Streaming: a long answer growing by a token per frame.
    let mut stream = Vec::new();
    let mut seq = 1_000_000;
    for i in 0..600 {
        seq += 1;
        let text = if i % 12 == 11 { "word.\n\n" } else { "word " };
        let e = delta(seq, text);
        let t = Instant::now();
        app.session_event(&e, false, now);
        terminal
            .draw(|f| dsh_tui::view::draw(f, &mut app, now))
            .unwrap();
        stream.push(t.elapsed());
    }
    stats("streaming frame", stream);

    let mut resize = Vec::new();
    for i in 0..20 {
        let width = if i % 2 == 0 { 60 } else { 120 };
        terminal
            .resize(ratatui::layout::Rect::new(0, 0, width, 40))
            .unwrap();
        let t = Instant::now();
        terminal
            .draw(|f| dsh_tui::view::draw(f, &mut app, now))
            .unwrap();
        resize.push(t.elapsed());
        if std::env::var_os("RENDER_BENCH_VERBOSE").is_some() {
            println!("  resize to {width}: {:?}", t.elapsed());
        }
    }
    stats("resize 120 <-> 60", resize);
    println!(
        "after resizing: {} rows at 60 columns, {} at 120",
        app.transcript.height(60),
        app.transcript.height(120)
    );
}
