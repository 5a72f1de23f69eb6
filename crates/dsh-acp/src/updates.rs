//! Ordered, per-session delivery of `session/update`s.
//!
//! Session events are published synchronously on the agent's own thread; the bridge only
//! enqueues them there and one task per session translates and writes them, in order. The
//! prompt response, the permission requests and the `session/load` answer wait for a drain
//! barrier pushed through the same queue, so the client always sees a turn's updates before the
//! answer that ends it. A write that fails because the client is gone is logged (once) and
//! ignored: delivery must never fail a turn.

use std::path::PathBuf;
use std::sync::Arc;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{SessionNotification, SessionUpdate};
use dsh_kernel::ScopeTag;
use dsh_llm::ModelCatalog;
use dsh_session::{SessionEvent, SessionId};
use dsh_tools::ToolRuntime;
use tokio::sync::{mpsc, oneshot};

use crate::record::wire_id;
use crate::terminal::TerminalCards;
use crate::translate::{Source, Translator};

enum Item {
    Bind(Option<ScopeTag>, Option<PathBuf>),
    Event(Arc<SessionEvent>, Source),
    Replay(Vec<Arc<SessionEvent>>),
    Update(Box<SessionUpdate>),
    Drained(oneshot::Sender<()>),
}

/// The sending side of one session's delivery queue. Clones share the queue; the delivery task
/// ends when every clone is gone.
#[derive(Clone)]
pub(crate) struct UpdateQueue {
    tx: mpsc::UnboundedSender<Item>,
}

impl UpdateQueue {
    /// Starts the delivery task of session `id`, writing through `conn`.
    pub(crate) fn start(
        id: SessionId,
        conn: ConnectionTo<Client>,
        tools: Arc<ToolRuntime>,
        terminals: Arc<TerminalCards>,
        catalog: Option<ModelCatalog>,
    ) -> UpdateQueue {
        let (tx, rx) = mpsc::unbounded_channel();
        let translator = Translator::new(tools)
            .with_terminals(terminals)
            .with_prices(catalog);
        tokio::spawn(deliver(id, conn, translator, rx));
        UpdateQueue { tx }
    }

    fn push(&self, item: Item) {
        // The delivery task only stops once every sender is gone, so a send cannot fail while
        // `self` exists; a failure would mean the task panicked, and then there is nothing to
        // deliver to anyway.
        let _ = self.tx.send(item);
    }

    /// Tells the translator whose tools and which working directory to present calls with.
    pub(crate) fn bind(&self, tag: Option<ScopeTag>, cwd: Option<PathBuf>) {
        self.push(Item::Bind(tag, cwd));
    }

    /// Enqueues one committed event.
    pub(crate) fn event(&self, event: Arc<SessionEvent>, source: Source) {
        self.push(Item::Event(event, source));
    }

    /// Enqueues a replay of `events` (a `session/load` of a session that is already live):
    /// translated by a fresh translator, so the live one's pending calls are untouched, and
    /// in order with the live stream.
    pub(crate) fn replay(&self, events: Vec<Arc<SessionEvent>>) {
        self.push(Item::Replay(events));
    }

    /// Enqueues an update that does not come from the log (a mode change).
    pub(crate) fn update(&self, update: SessionUpdate) {
        self.push(Item::Update(Box::new(update)));
    }

    /// Resolves once everything enqueued before the call has been handed to the connection.
    pub(crate) async fn drained(&self) {
        let (tx, rx) = oneshot::channel();
        self.push(Item::Drained(tx));
        let _ = rx.await;
    }
}

async fn deliver(
    id: SessionId,
    conn: ConnectionTo<Client>,
    mut translator: Translator,
    mut rx: mpsc::UnboundedReceiver<Item>,
) {
    let mut failed = false;
    let mut send = |update: SessionUpdate| {
        let notification = SessionNotification::new(wire_id(&id), update);
        if let Err(error) = conn.send_notification(notification)
            && !failed
        {
            failed = true;
            tracing::warn!(session = %id, %error, "cannot deliver session updates (client gone?)");
        }
    };
    while let Some(item) = rx.recv().await {
        match item {
            Item::Bind(tag, cwd) => translator.bind(tag, cwd),
            Item::Event(event, source) => {
                for update in translator.translate(&event, source) {
                    send(update);
                }
            }
            Item::Replay(events) => {
                let mut replay = translator.fresh();
                for event in &events {
                    for update in replay.translate(event, Source::Replay) {
                        send(update);
                    }
                }
            }
            Item::Update(update) => send(*update),
            Item::Drained(done) => {
                let _ = done.send(());
            }
        }
    }
}
