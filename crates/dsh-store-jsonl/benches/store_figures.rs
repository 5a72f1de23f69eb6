//! Figures for the JSONL store: loading a long session, listing many sessions, and the flush
//! path. Run with `cargo bench -p dsh-store-jsonl`; goals (release build): load of 100,000
//! events < 300 ms, listing 1,000 sessions < 100 ms.

#![allow(clippy::unwrap_used)] // A benchmark binary: a panic is the failure report.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_kernel::Context;
use dsh_session::*;
use dsh_store_jsonl::{JsonlOptions, JsonlPersistencePlugin, JsonlStore, layout};

/// Appends one turn in which the model streams a few chunks, calls a tool, and answers.
fn turn(s: &Session) {
    let turn = s.last_turn() + 1;
    s.append(EventKind::TurnStart(TurnStart { turn })).unwrap();
    s.append(EventKind::UserMessage(Arc::new(Message::user_text(
        format!("please look at file number {turn} and tell me what it does"),
    ))))
    .unwrap();
    s.append(EventKind::StepStart(StepBoundary { turn, step: 1 }))
        .unwrap();
    let mut chunks = Vec::new();
    for i in 0..3 {
        chunks.push(
            s.append(EventKind::AssistantChunk(AssistantChunk {
                turn,
                step: 1,
                chunk: StreamChunk::TextDelta {
                    index: 0,
                    text: format!("part {i} of a streamed answer "),
                },
            }))
            .unwrap()
            .seq,
        );
    }
    let call = CallId::new(format!("call-{turn}"));
    s.append_draft(
        EventDraft::new(EventKind::AssistantMessage(AssistantMessage {
            turn,
            step: 1,
            message: Arc::new(Message::assistant(
                vec![
                    ContentBlock::text("part 0 of a streamed answer part 1 part 2"),
                    ContentBlock::ToolCall {
                        id: call.clone(),
                        name: "read".into(),
                        arguments: format!(r#"{{"path":"src/file_{turn}.rs"}}"#),
                    },
                ],
                "deepseek",
                "deepseek-chat",
            )),
            usage: None,
            interrupted: false,
        }))
        .with_sources(chunks),
    )
    .unwrap();
    let call_seq = s
        .append(EventKind::ToolCall(ToolCall {
            turn,
            step: 1,
            call_id: call.clone(),
            name: "read".into(),
            arguments: format!(r#"{{"path":"src/file_{turn}.rs"}}"#),
        }))
        .unwrap()
        .seq;
    s.append_draft(
        EventDraft::new(EventKind::ToolResult(ToolResult {
            turn,
            step: 1,
            message: Arc::new(Message::tool_result(
                call,
                vec![ContentBlock::text(
                    "fn main() { println!(\"hello\"); }\n".repeat(4),
                )],
                false,
            )),
            error: None,
            meta: None,
        }))
        .with_sources(vec![call_seq]),
    )
    .unwrap();
    s.append(EventKind::StepEnd(StepBoundary { turn, step: 1 }))
        .unwrap();
    s.append(EventKind::TurnEnd(TurnEnd {
        turn,
        reason: TurnEndReason::Completed,
    }))
    .unwrap();
}

fn session(id: &str, cwd: &str, events: u64) -> Arc<Session> {
    let s = Session::new(
        SessionHeader::new(
            SessionId::new(id),
            now_ms(),
            SessionMeta {
                cwd: Some(PathBuf::from(cwd)),
                ..SessionMeta::default()
            },
        ),
        None,
    )
    .unwrap();
    while s.len() < events {
        turn(&s);
    }
    s
}

fn write(root: &Path, s: &Session) -> u64 {
    let path = layout::session_path(root, s.header()).unwrap();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut out = serde_json::to_vec(s.header()).unwrap();
    out.push(b'\n');
    for e in s.events() {
        serde_json::to_writer(&mut out, &*e).unwrap();
        out.push(b'\n');
    }
    std::fs::write(&path, &out).unwrap();
    out.len() as u64
}

fn stats(mut samples: Vec<Duration>) -> String {
    samples.sort();
    format!(
        "min {:>8.2} ms  median {:>8.2} ms  max {:>8.2} ms  ({} runs)",
        samples[0].as_secs_f64() * 1e3,
        samples[samples.len() / 2].as_secs_f64() * 1e3,
        samples[samples.len() - 1].as_secs_f64() * 1e3,
        samples.len()
    )
}

/// CPU time (user + system, all threads) this process has used, from `/proc/self/stat`
/// (Linux; 10 ms ticks). Wall time on a shared machine mostly measures the neighbours; CPU time
/// per run is the figure that stays comparable.
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after_comm = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after_comm.split(' ').collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// Times `runs` calls of `f`; what each call returns is dropped outside the timed region.
async fn time<T, F, Fut>(runs: usize, mut f: F) -> String
where
    F: FnMut() -> Fut,
    Fut: Future<Output = T>,
{
    let mut samples = Vec::new();
    let mut cpu = Duration::ZERO;
    for _ in 0..runs {
        let (t, c) = (Instant::now(), cpu_time());
        let out = f().await;
        samples.push(t.elapsed());
        if let (Some(before), Some(after)) = (c, cpu_time()) {
            cpu += after - before;
        }
        drop(out);
    }
    format!(
        "{}  cpu/run {:>6.1} ms",
        stats(samples),
        cpu.as_secs_f64() * 1e3 / runs as f64
    )
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let store = JsonlStore::new(&root);

    // Load: one session of 100,000 events.
    let long = session("long", "/bench/long", 100_000);
    let bytes = write(&root, &long);
    let events = long.len();
    drop(long);
    let id = SessionId::new("long");
    let figure = time(7, || async {
        let stored = store.load(&id).await.unwrap();
        assert_eq!(stored.events.len() as u64, events);
        stored
    })
    .await;
    println!(
        "load {events} events ({:.1} MiB):    {figure}",
        bytes as f64 / (1 << 20) as f64
    );
    let figure = time(7, || async { store.summary(&id).await.unwrap() }).await;
    println!("summary of the same session:          {figure}");
    std::fs::remove_dir_all(&root).unwrap();

    // List: 1,000 sessions over 20 projects.
    let template = session("template", "/bench/p", 40);
    let template_events: Vec<SessionEvent> =
        template.events().iter().map(|e| (**e).clone()).collect();
    for i in 0..1000 {
        let s = Session::new(
            SessionHeader::new(
                SessionId::new(format!("session-{i:04}")),
                now_ms(),
                SessionMeta {
                    cwd: Some(PathBuf::from(format!("/bench/project-{}", i % 20))),
                    ..SessionMeta::default()
                },
            ),
            None,
        )
        .unwrap();
        for e in &template_events {
            s.append_draft(EventDraft {
                kind: e.kind.clone(),
                ignorable: e.ignorable,
                source_event_seqs: e.source_event_seqs.clone(),
                surface_op: e.surface_op,
            })
            .unwrap();
        }
        write(&root, &s);
    }
    let figure = time(11, || async {
        let listed = store.listings().await.unwrap();
        assert_eq!(listed.len(), 1000);
        listed
    })
    .await;
    println!("list 1000 sessions:                    {figure}");
    std::fs::remove_dir_all(&root).unwrap();

    // Flush path: a live session flushed after every turn (the loop's checkpoint cadence).
    let ctx = Context::new();
    let live_store = JsonlStore::with_options(&root, JsonlOptions::default());
    let _plugin = ctx
        .plugin(JsonlPersistencePlugin::new(live_store.clone()))
        .await
        .unwrap();
    let sessions = SessionStore::new(&ctx);
    let s = sessions
        .prepare(None, SessionMeta::default(), None)
        .unwrap();
    let _detach = sessions.enter(&s, None).unwrap();
    let mut samples = Vec::new();
    for _ in 0..200 {
        turn(&s);
        let t = Instant::now();
        sessions.flush(&s).await.unwrap();
        samples.push(t.elapsed());
    }
    println!("flush one turn (10 events, fdatasync): {}", stats(samples));
}
