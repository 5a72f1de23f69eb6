//! Shared test fixtures: a mounted store, session builders, and a file-ops double.

#![allow(dead_code)] // Each test file uses a different subset.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use dsh_kernel::{Context, PluginHandle};
use dsh_session::*;
use dsh_store_jsonl::{FileOps, JsonlOptions, JsonlPersistencePlugin, JsonlStore};
use parking_lot::Mutex;
use serde_json::json;

/// A mounted store over a unique temp dir.
pub struct Harness {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    pub ctx: Context,
    pub store: Arc<JsonlStore>,
    pub sessions: Arc<SessionStore>,
    pub plugin: PluginHandle,
}

impl Harness {
    pub async fn new(options: JsonlOptions) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("sessions");
        let ctx = Context::new();
        let store = JsonlStore::with_options(&root, options);
        let plugin = ctx
            .plugin(JsonlPersistencePlugin::new(store.clone()))
            .await
            .unwrap();
        let sessions = SessionStore::new(&ctx);
        Self {
            dir,
            root,
            ctx,
            store,
            sessions,
            plugin,
        }
    }

    /// A second, independently mounted store over the same root, as another dsh process
    /// would have.
    pub async fn sharing_root(&self) -> Self {
        let ctx = Context::new();
        let store = JsonlStore::new(&self.root);
        let plugin = ctx
            .plugin(JsonlPersistencePlugin::new(store.clone()))
            .await
            .unwrap();
        Self {
            dir: tempfile::tempdir().unwrap(),
            root: self.root.clone(),
            sessions: SessionStore::new(&ctx),
            ctx,
            store,
            plugin,
        }
    }

    pub async fn with_ops(ops: Arc<TestOps>, window: Duration) -> Self {
        Self::new(JsonlOptions {
            batch_window: window,
            file_ops: ops,
            on_durable: None,
        })
        .await
    }

    /// A live, announced session.
    pub fn live(&self, id: &str, cwd: Option<&str>) -> (Arc<Session>, SessionDetach) {
        let meta = SessionMeta {
            cwd: cwd.map(PathBuf::from),
            ..SessionMeta::default()
        };
        let s = self
            .sessions
            .prepare(Some(SessionId::new(id)), meta, None)
            .unwrap();
        self.publish(s)
    }

    /// Enters and announces a prepared session.
    pub fn publish(&self, s: Arc<Session>) -> (Arc<Session>, SessionDetach) {
        let detach = self.sessions.enter(&s, None).unwrap();
        self.sessions.announce(&s).unwrap();
        (s, detach)
    }

    /// Resumes a stored session the way the agent factory does.
    pub async fn resume(&self, id: &str) -> (Arc<Session>, SessionDetach) {
        let stored = self.store.load(&SessionId::new(id)).await.unwrap();
        let s = self
            .sessions
            .prepare_loaded(stored.header, stored.events)
            .unwrap();
        self.publish(s)
    }

    pub fn path(&self, s: &Session) -> PathBuf {
        self.store.path_for(s.header()).unwrap()
    }
}

/// An error and its sources, joined with `: `.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        out.push_str(": ");
        out.push_str(&s.to_string());
        next = s.source();
    }
    out
}

pub fn user(text: &str) -> EventKind {
    EventKind::UserMessage(Arc::new(Message::user_text(text)))
}

pub fn title(n: u64) -> EventKind {
    EventKind::other("session/title", json!({ "title": format!("t{n}") }))
}

/// Appends one complete turn; with `tool`, the model calls one tool and then answers.
pub fn complete_turn(s: &Session, tool: bool) {
    let turn = s.last_turn() + 1;
    open_turn(s, turn, tool);
    finish_turn(s, turn, tool);
}

/// Completes turn `turn` opened by [`open_turn`] with the same `tool`: the call's result and a
/// final answer, or just the end of its step.
pub fn finish_turn(s: &Session, turn: u64, tool: bool) {
    if tool {
        let call = CallId::new(format!("{}-call-{turn}", s.id()));
        let call_seq = s.len() - 1;
        s.append_draft(
            EventDraft::new(EventKind::ToolResult(ToolResult {
                turn,
                step: 1,
                message: Arc::new(Message::tool_result(
                    call,
                    vec![ContentBlock::text("ok")],
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
        s.append(EventKind::StepStart(StepBoundary { turn, step: 2 }))
            .unwrap();
        s.append(EventKind::AssistantMessage(AssistantMessage {
            turn,
            step: 2,
            message: Arc::new(Message::assistant(
                vec![ContentBlock::text("done")],
                "p",
                "m",
            )),
            usage: None,
            interrupted: false,
        }))
        .unwrap();
        s.append(EventKind::StepEnd(StepBoundary { turn, step: 2 }))
            .unwrap();
    } else {
        s.append(EventKind::StepEnd(StepBoundary { turn, step: 1 }))
            .unwrap();
    }
    s.append(EventKind::TurnEnd(TurnEnd {
        turn,
        reason: TurnEndReason::Completed,
    }))
    .unwrap();
}

/// Opens turn `turn` with a prompt and one step; with `tool`, the assistant asks for a call
/// and the `tool/call` is logged (the step stays open, as if the tool were running).
pub fn open_turn(s: &Session, turn: u64, tool: bool) {
    s.append(EventKind::TurnStart(TurnStart { turn })).unwrap();
    s.append(user(&format!("prompt {turn}"))).unwrap();
    s.append(EventKind::StepStart(StepBoundary { turn, step: 1 }))
        .unwrap();
    let chunk = s
        .append(EventKind::AssistantChunk(AssistantChunk {
            turn,
            step: 1,
            chunk: StreamChunk::TextDelta {
                index: 0,
                text: "thinking".into(),
            },
        }))
        .unwrap();
    let mut content = vec![ContentBlock::text("answer")];
    let call = CallId::new(format!("{}-call-{turn}", s.id()));
    if tool {
        content.push(ContentBlock::ToolCall {
            id: call.clone(),
            name: "bash".into(),
            arguments: r#"{"command":"ls"}"#.into(),
        });
    }
    s.append_draft(
        EventDraft::new(EventKind::AssistantMessage(AssistantMessage {
            turn,
            step: 1,
            message: Arc::new(Message::assistant(content, "p", "m")),
            usage: None,
            interrupted: false,
        }))
        .with_sources(vec![chunk.seq]),
    )
    .unwrap();
    if tool {
        s.append(EventKind::ToolCall(ToolCall {
            turn,
            step: 1,
            call_id: call,
            name: "bash".into(),
            arguments: r#"{"command":"ls"}"#.into(),
        }))
        .unwrap();
    }
}

/// A detached session (no store) to build logs for hand-written files.
pub fn scratch(id: &str, cwd: Option<&str>) -> Arc<Session> {
    Session::new(
        SessionHeader::new(
            SessionId::new(id),
            1_700_000_000_000,
            SessionMeta {
                cwd: cwd.map(PathBuf::from),
                ..SessionMeta::default()
            },
        ),
        None,
    )
    .unwrap()
}

/// The JSONL bytes of a session: header line then one line per event.
pub fn jsonl(s: &Session) -> Vec<u8> {
    let mut out = serde_json::to_vec(s.header()).unwrap();
    out.push(b'\n');
    for e in s.events() {
        serde_json::to_writer(&mut out, &*e).unwrap();
        out.push(b'\n');
    }
    out
}

/// Writes `bytes` as the stored file of `s` under `root`; returns its path.
pub fn write_file(root: &Path, s: &Session, bytes: &[u8]) -> PathBuf {
    let path = dsh_store_jsonl::layout::session_path(root, s.header()).unwrap();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, bytes).unwrap();
    path
}

/// The number of the 1-based file line holding event `seq` (the header is line 1).
pub fn line_of(seq: u64) -> usize {
    seq as usize + 2
}

/// Every event seq in order.
pub fn seqs(events: &[SessionEvent]) -> Vec<u64> {
    events.iter().map(|e| e.seq).collect()
}

pub fn arcs(events: &[SessionEvent]) -> Vec<Arc<SessionEvent>> {
    events.iter().cloned().map(Arc::new).collect()
}

/// File operations that count writes, can fail (after writing half the bytes, like a disk
/// filling up mid-write), can hold a write until released, and report each write.
#[derive(Default)]
pub struct TestOps {
    pub writes: AtomicUsize,
    pub fail_writes: AtomicUsize,
    pub fail_syncs: AtomicUsize,
    started: Mutex<Option<tokio::sync::mpsc::UnboundedSender<usize>>>,
    gate: Mutex<Option<std::sync::mpsc::Receiver<()>>>,
}

impl TestOps {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Every write's byte count is sent here as it starts.
    pub fn watch(&self) -> tokio::sync::mpsc::UnboundedReceiver<usize> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        *self.started.lock() = Some(tx);
        rx
    }

    /// Each write waits for one token from the returned sender.
    pub fn gate(&self) -> std::sync::mpsc::Sender<()> {
        let (tx, rx) = std::sync::mpsc::channel();
        *self.gate.lock() = Some(rx);
        tx
    }

    pub fn writes(&self) -> usize {
        self.writes.load(Ordering::SeqCst)
    }

    fn take(counter: &AtomicUsize) -> bool {
        counter
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }
}

impl FileOps for TestOps {
    fn write_all(&self, file: &mut File, bytes: &[u8]) -> io::Result<()> {
        self.writes.fetch_add(1, Ordering::SeqCst);
        if let Some(tx) = &*self.started.lock() {
            let _ = tx.send(bytes.len());
        }
        if let Some(gate) = &*self.gate.lock() {
            gate.recv().unwrap();
        }
        if Self::take(&self.fail_writes) {
            file.write_all(&bytes[..bytes.len() / 2])?;
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                "No space left on device (injected)",
            ));
        }
        file.write_all(bytes)
    }

    fn sync_data(&self, file: &File) -> io::Result<()> {
        if Self::take(&self.fail_syncs) {
            return Err(io::Error::other("fdatasync failed (injected)"));
        }
        file.sync_data()
    }
}
