//! The hub: one ACP bridge for the whole server, shared by every browser connection.
//!
//! `dsh acp` gives each client its own bridge, and a bridge's sessions end with its connection.
//! A browser is not an editor: a person reloads the page, opens a second tab on the same
//! session, closes the laptop lid while the agent works. So the server runs one bridge
//! ([`dsh_acp::serve_frames_until`] over an in-process channel) and the hub multiplexes the
//! browsers' WebSockets onto it, at the JSON-RPC level:
//!
//! - each browser's requests get hub-wide ids on the way in and their own ids back on the way
//!   out; `initialize` is answered from the hub's own handshake (a browser offers no files or
//!   terminals; commands run under dsh's sandbox);
//! - a session's updates go to every connection that opened it; a connection that opens a
//!   session another one already has gets everything said about it so far (the hub keeps it)
//!   and then the live stream, so two tabs show one thread;
//! - a permission question goes to every connection watching the session; the first answer
//!   wins and the others are told to withdraw their card (`$/cancel_request`), and a
//!   connection that opens the session while it waits gets the question too;
//! - a connection that goes away leaves its sessions running; a session nobody watches is
//!   closed once nothing runs in it (its file is then free for another dsh).
//!
//! Two extensions ride the same socket, prefixed `_dsh/` as ACP reserves `_` for them:
//! `_dsh/steer` (a message for the running turn, taken at its next step, as Enter does in the
//! terminal UI) and a deny reason in a permission answer's `_meta.dsh.reason` (steered into the
//! agent before the denial, so the model reads why). `_dsh/session_closed` tells the other
//! watchers that someone closed a session.

mod bridge_side;
mod client_side;
pub(crate) mod frame;
mod view;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io;
use std::sync::Arc;

use dsh_acp::AcpOptions;
use dsh_agent::AgentRegistry;
use dsh_kernel::Context;
use futures::SinkExt as _;
use futures::channel::mpsc as fmpsc;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::WebError;
use frame::Text;
pub(crate) use view::ClientId;
use view::View;

/// Why the hub sent a request to the bridge, i.e. what to do with its answer.
enum Purpose {
    /// Hand the answer back unchanged.
    Forward,
    /// The hub's own handshake.
    Initialize,
    /// `session/new`: the asker watches the new session.
    New,
    /// `session/load` of a session no connection had open.
    Load(String),
    /// `session/prompt`: one fewer thing running in the session.
    Prompt(String),
    /// `session/close` by a connection: the other watchers are told.
    Close(String),
    /// `session/set_config_option`: the other watchers see the new options.
    SetConfig(String),
    /// The hub closing a session nobody watches.
    Release(String),
}

/// A request the hub sent to the bridge and waits for.
struct Pending {
    /// The connection that asked (`None`: the hub itself).
    client: Option<ClientId>,
    /// The id the connection used.
    id: Value,
    purpose: Purpose,
}

/// A question the bridge asked (`session/request_permission`) and nobody answered yet.
struct Ask {
    session: Option<String>,
    frame: Text,
    /// The tool call's title, for a deny reason steered into the agent.
    title: String,
    /// The connections that were shown it.
    shown: BTreeSet<ClientId>,
}

#[derive(Default)]
struct State {
    next_client: ClientId,
    next_id: u64,
    /// Each connection's outgoing frames.
    clients: HashMap<ClientId, mpsc::UnboundedSender<Text>>,
    pending: HashMap<u64, Pending>,
    sessions: HashMap<String, View>,
    asks: HashMap<String, Ask>,
    /// Sessions the hub is closing: a `session/load` of one waits here for the close's
    /// answer, so it never races the close inside the bridge.
    releasing: HashSet<String>,
    held: HashMap<String, Vec<(ClientId, Value)>>,
    /// The bridge's `initialize` answer, given to every connection.
    initialized: Option<Value>,
    init_done: Option<oneshot::Sender<Result<(), String>>>,
    /// The bridge has gone: no connection is accepted any more.
    closed: bool,
    /// Told to every connection in the `initialize` answer (`_meta.dsh.cwd`).
    default_cwd: Option<std::path::PathBuf>,
}

impl State {
    /// Queues `text` for connection `client` (dropped when it is gone).
    fn send(&self, client: ClientId, text: Text) {
        if let Some(tx) = self.clients.get(&client) {
            let _ = tx.send(text);
        }
    }

    /// Queues `text` for every connection watching `session` except `except`.
    fn broadcast(&self, session: &str, text: &Text, except: Option<ClientId>) {
        if let Some(view) = self.sessions.get(session) {
            for client in &view.subscribers {
                if Some(*client) != except {
                    self.send(*client, text.clone());
                }
            }
        }
    }

    fn take_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}

/// The multiplexer between the browsers' connections and the one bridge.
pub(crate) struct Hub {
    state: Mutex<State>,
    /// Frames into the bridge.
    bridge: fmpsc::UnboundedSender<io::Result<String>>,
    /// Where `_dsh/steer` and deny reasons find the session's agent.
    registry: Option<Arc<AgentRegistry>>,
}

/// The bridge's task: ends when the bridge has torn its sessions down.
pub(crate) type Served = tokio::task::JoinHandle<Result<(), dsh_acp::AcpError>>;

impl Hub {
    /// Starts the bridge over `ctx` and performs the hub's handshake with it. The bridge stops
    /// (cancelling and saving every session, answering outstanding prompts `cancelled`) when
    /// `stop` resolves; every connection is closed after that.
    pub(crate) async fn start<S>(
        ctx: Context,
        options: AcpOptions,
        default_cwd: Option<std::path::PathBuf>,
        stop: S,
    ) -> Result<(Arc<Hub>, Served), WebError>
    where
        S: std::future::Future<Output = ()> + Send + 'static,
    {
        let (to_bridge, bridge_in) = fmpsc::unbounded::<io::Result<String>>();
        let (bridge_out, mut from_bridge) = fmpsc::unbounded::<String>();
        let outgoing = bridge_out.sink_map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe));
        let registry = AgentRegistry::of(&ctx).ok();
        let served = tokio::spawn(dsh_acp::serve_frames_until(
            ctx, options, bridge_in, outgoing, stop,
        ));
        let (init_tx, init_rx) = oneshot::channel();
        let hub = Arc::new(Hub {
            state: Mutex::new(State {
                init_done: Some(init_tx),
                default_cwd,
                ..State::default()
            }),
            bridge: to_bridge,
            registry,
        });
        let dispatcher = hub.clone();
        tokio::spawn(async move {
            use futures::StreamExt as _;
            while let Some(text) = from_bridge.next().await {
                dispatcher.bridge_frame(&text);
            }
            dispatcher.bridge_gone();
        });
        {
            let mut state = hub.state.lock();
            let id = state.take_id();
            state.pending.insert(
                id,
                Pending {
                    client: None,
                    id: Value::Null,
                    purpose: Purpose::Initialize,
                },
            );
            hub.to_bridge(json!({
                "jsonrpc": "2.0", "id": id, "method": "initialize",
                "params": {
                    "protocolVersion": 1,
                    "clientCapabilities": {},
                    "clientInfo": {"name": "dsh-web", "version": env!("CARGO_PKG_VERSION")}
                }
            }));
        }
        match init_rx.await {
            Ok(Ok(())) => Ok((hub, served)),
            Ok(Err(message)) => Err(WebError::Bridge(message)),
            Err(_) => Err(WebError::Bridge(
                "the ACP bridge ended before its handshake".to_owned(),
            )),
        }
    }

    /// A new browser connection: its number and the frames to write to it. `None` once the
    /// bridge is gone.
    pub(crate) fn connect(&self) -> Option<(ClientId, mpsc::UnboundedReceiver<Text>)> {
        let mut state = self.state.lock();
        if state.closed {
            return None;
        }
        state.next_client += 1;
        let client = state.next_client;
        let (tx, rx) = mpsc::unbounded_channel();
        state.clients.insert(client, tx);
        Some((client, rx))
    }

    /// Connection `client` went away: it stops watching its sessions, and each one nobody
    /// watches any more is closed once nothing runs in it.
    pub(crate) fn disconnect(&self, client: ClientId) {
        let mut state = self.state.lock();
        state.clients.remove(&client);
        let mut idle = Vec::new();
        for (id, view) in &mut state.sessions {
            view.subscribers.remove(&client);
            view.waiters.retain(|(c, _)| *c != client);
            if view.idle() {
                idle.push(id.clone());
            }
        }
        for ask in state.asks.values_mut() {
            ask.shown.remove(&client);
        }
        for id in idle {
            self.release(&mut state, &id);
        }
    }

    fn to_bridge(&self, frame: Value) {
        // The receiver lives as long as the bridge; after it ended, nothing is listening.
        let _ = self.bridge.unbounded_send(Ok(frame.to_string()));
    }

    /// Sends `frame` (a request of `client`, or of the hub) to the bridge under a fresh id.
    fn forward(&self, state: &mut State, client: Option<ClientId>, frame: Value, purpose: Purpose) {
        let id = state.take_id();
        let original = frame.get("id").cloned().unwrap_or(Value::Null);
        state.pending.insert(
            id,
            Pending {
                client,
                id: original,
                purpose,
            },
        );
        self.to_bridge(frame::with_id(frame, json!(id)));
    }

    /// Closes session `id` in the bridge when nobody needs it open.
    fn release(&self, state: &mut State, id: &str) {
        if !state.sessions.get(id).is_some_and(View::idle) {
            return;
        }
        state.sessions.remove(id);
        state.releasing.insert(id.to_owned());
        let request = json!({
            "jsonrpc": "2.0", "id": 0, "method": "session/close",
            "params": {"sessionId": id}
        });
        self.forward(state, None, request, Purpose::Release(id.to_owned()));
    }

    /// Steers `text` into session `session`'s agent (`_dsh/steer`, a deny reason).
    fn steer(&self, session: &str, text: String) -> Result<(), String> {
        let agent = self
            .registry
            .as_ref()
            .and_then(|r| r.get(&dsh_session::SessionId::new(session)))
            .ok_or_else(|| format!("session {session} has no running agent"))?;
        agent
            .steer(dsh_session::Message::user_text(text))
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}
