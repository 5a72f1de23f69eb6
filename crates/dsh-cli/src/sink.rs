//! Delivering a session's events to an output without slowing the agent down.
//!
//! `session/event` listeners run synchronously inside the append, on the agent's driver. Writing
//! to a slow pipe or terminal there would stall the turn, so the listener only queues the event;
//! a dedicated thread formats and writes it, in append order.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;

use anyhow::Context as _;
use dsh_kernel::Context;
use dsh_session::{LiveUpdate, SessionEvent, SessionEventFired, SessionId, SessionLiveFired};
use parking_lot::Mutex;
use serde::Serialize;

use crate::render::Renderer;

/// What the output thread writes: a session event, or a live update worth a line of its own.
enum Item {
    Event(Arc<SessionEvent>),
    Live(LiveUpdate),
}

type Sender = Arc<Mutex<Option<mpsc::Sender<Item>>>>;

/// A running event sink.
pub struct Sink {
    tx: Sender,
    thread: Option<JoinHandle<()>>,
}

/// One `progress` line of `--output-format stream-json`: a tool call's progress report (an
/// MCP server's `notifications/progress`), shown while it happens and never stored.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ProgressLine<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    session_id: &'a str,
    call_id: &'a str,
    progress: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    total: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
}

/// One `event` line of `--output-format stream-json`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EventLine<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    session_id: &'a str,
    event: &'a SessionEvent,
}

impl Sink {
    /// Every event of session `id` as a stream-json `event` line on stdout.
    /// Tool progress reports of that session are `progress` lines among them (live: never
    /// in the session file).
    pub fn stream_json(ctx: &Context, id: SessionId) -> anyhow::Result<Self> {
        let session = id.to_string();
        let sink = Self::start_items(
            ctx,
            {
                let id = id.clone();
                move |s| *s == id
            },
            move |item| {
                let json = match &item {
                    Item::Event(event) => serde_json::to_string(&EventLine {
                        kind: "event",
                        session_id: &session,
                        event,
                    }),
                    Item::Live(LiveUpdate::ToolProgress {
                        call_id,
                        progress,
                        total,
                        message,
                    }) => serde_json::to_string(&ProgressLine {
                        kind: "progress",
                        session_id: &session,
                        call_id: call_id.as_str(),
                        progress: *progress,
                        total: *total,
                        message: message.as_deref(),
                    }),
                    Item::Live(_) => return,
                };
                if let Ok(json) = json {
                    crate::stdout::write_line(&json);
                }
            },
        )?;
        let feed = sink.tx.clone();
        let _ = ctx.on_global::<SessionLiveFired>(move |notice| {
            // A command's output chunks stay out: the result carries them, and a flood of
            // lines would bury the events.
            if notice.session.id() != &id
                || !matches!(notice.update, LiveUpdate::ToolProgress { .. })
            {
                return;
            }
            if let Some(tx) = feed.lock().as_ref() {
                let _ = tx.send(Item::Live(notice.update.clone()));
            }
        })?;
        Ok(sink)
    }

    /// Every event of session `id` rendered by `renderer`, handed to `write`.
    pub fn render(
        ctx: &Context,
        id: SessionId,
        mut renderer: Renderer,
        mut write: impl FnMut(&str) + Send + 'static,
    ) -> anyhow::Result<Self> {
        Self::start(
            ctx,
            move |s| *s == id,
            move |event| {
                let text = renderer.event(&event);
                if !text.is_empty() {
                    write(&text);
                }
            },
        )
    }

    /// Queues the events of sessions accepted by `filter` to `consume`, on its own thread.
    pub fn start(
        ctx: &Context,
        filter: impl Fn(&SessionId) -> bool + Send + Sync + 'static,
        mut consume: impl FnMut(Arc<SessionEvent>) + Send + 'static,
    ) -> anyhow::Result<Self> {
        Self::start_items(ctx, filter, move |item| {
            if let Item::Event(event) = item {
                consume(event);
            }
        })
    }

    fn start_items(
        ctx: &Context,
        filter: impl Fn(&SessionId) -> bool + Send + Sync + 'static,
        mut consume: impl FnMut(Item) + Send + 'static,
    ) -> anyhow::Result<Self> {
        let (tx, rx) = mpsc::channel::<Item>();
        let thread = std::thread::Builder::new()
            .name("dsh-output".into())
            .spawn(move || {
                for event in rx {
                    consume(event);
                }
            })
            .context("cannot start the output thread")?;
        let tx: Sender = Arc::new(Mutex::new(Some(tx)));
        let feed = tx.clone();
        let seen: Mutex<HashSet<SessionId>> = Mutex::default();
        let _ = ctx.on_global::<SessionEventFired>(move |notice| {
            let session = &notice.session;
            if !filter(session.id()) {
                return;
            }
            let Some(tx) = feed.lock().clone() else {
                return;
            };
            // A seeded session (resume, fork) appends `session/end-seed` while it is still
            // private, before anyone can hear it; deliver such events ahead of the first
            // published one so the output is the log from the seed boundary on, gapless.
            if seen.lock().insert(session.id().clone()) {
                for early in session.events_from(session.first_live_seq()) {
                    if early.seq >= notice.event.seq {
                        break;
                    }
                    let _ = tx.send(Item::Event(early));
                }
            }
            let _ = tx.send(Item::Event(notice.event.clone()));
        })?;
        Ok(Self {
            tx,
            thread: Some(thread),
        })
    }

    /// Stops queueing and waits until everything queued so far is written.
    pub fn close(mut self) {
        self.tx.lock().take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.tx.lock().take();
    }
}
