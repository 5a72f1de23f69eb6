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
use dsh_session::{SessionEvent, SessionEventFired, SessionId};
use parking_lot::Mutex;
use serde::Serialize;

use crate::render::Renderer;

type Sender = Arc<Mutex<Option<mpsc::Sender<Arc<SessionEvent>>>>>;

/// A running event sink.
pub struct Sink {
    tx: Sender,
    thread: Option<JoinHandle<()>>,
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
    pub fn stream_json(ctx: &Context, id: SessionId) -> anyhow::Result<Self> {
        let session = id.to_string();
        Self::start(
            ctx,
            move |s| *s == id,
            move |event| {
                let line = EventLine {
                    kind: "event",
                    session_id: &session,
                    event: &event,
                };
                if let Ok(json) = serde_json::to_string(&line) {
                    crate::stdout::write_line(&json);
                }
            },
        )
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
        let (tx, rx) = mpsc::channel::<Arc<SessionEvent>>();
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
                    let _ = tx.send(early);
                }
            }
            let _ = tx.send(notice.event.clone());
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
