//! `session/load` of a session another dsh process is running: followed, read-only.
//!
//! The session's writer (a terminal UI, `dsh run`, another `dsh acp` or `dsh web`, on this
//! machine or, with PostgreSQL, another one) holds it; loading it here would take it from
//! that writer, which the store refuses. What a person opening it in an editor or the web UI
//! wants is to see it: so the load answers with the committed conversation, replayed as
//! usual, and then every event the other process commits, as it commits it
//! (`dsh_session::SessionFollow`, which the stores provide). The answer's
//! `_meta.dsh.watching` says so; a prompt to the session is refused with the reason (send it
//! where the session runs, or load it again once that dsh has finished); `session/close`
//! stops following. Nothing is written and no lease or lock is taken.

use std::collections::HashMap;
use std::sync::Arc;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::LoadSessionResponse;
use agent_client_protocol::{Client, Error};
use dsh_session::{SessionFollow, SessionId};
use futures::StreamExt as _;
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::bridge::Bridge;
use crate::errors::{chain, internal, invalid};
use crate::terminal::TerminalCards;
use crate::translate::Source;
use crate::updates::UpdateQueue;

/// The sessions a bridge follows, each with the token that stops its follower.
#[derive(Default)]
pub(crate) struct Watching(Mutex<HashMap<SessionId, CancellationToken>>);

impl Watching {
    /// Records `id` as followed by the follower `stop` ends, ending an earlier one.
    fn start(&self, id: &SessionId, stop: CancellationToken) {
        if let Some(earlier) = self.0.lock().insert(id.clone(), stop) {
            earlier.cancel();
        }
    }

    /// Stops following `id`; `false` when it was not followed.
    pub(crate) fn stop(&self, id: &SessionId) -> bool {
        match self.0.lock().remove(id) {
            Some(stop) => {
                stop.cancel();
                true
            }
            None => false,
        }
    }

    /// Whether `id` is followed here.
    pub(crate) fn contains(&self, id: &SessionId) -> bool {
        self.0.lock().contains_key(id)
    }
}

/// The error for anything but watching a followed session.
pub(crate) fn read_only(id: &SessionId) -> Error {
    invalid(format!(
        "session {id} is running in another dsh process; this view follows it read-only \
         (prompt it there, or load it again once that dsh has closed it)"
    ))
}

/// Answers `session/load` of `id`, held by another writer, by following it (module docs).
pub(crate) async fn watch(
    bridge: &Arc<Bridge>,
    follow: Arc<dyn SessionFollow>,
    id: &SessionId,
    cwd: &std::path::Path,
    conn: ConnectionTo<Client>,
) -> Result<LoadSessionResponse, Error> {
    let stored = follow
        .read(id)
        .await
        .map_err(|e| internal(format!("cannot read session {id}: {}", chain(&e))))?;
    crate::replay::check_cwd(id, stored.header.cwd.as_deref(), cwd)?;
    // Subscribed before the replay is sent: whatever is committed from here on follows it.
    let from = stored.events.len() as u64;
    let mut events = follow
        .follow(id, from)
        .await
        .map_err(|e| internal(format!("cannot follow session {id}: {}", chain(&e))))?;
    let queue = UpdateQueue::start(
        id.clone(),
        conn,
        bridge.tools.clone(),
        Arc::new(TerminalCards::default()),
        bridge.options.catalog.clone(),
    );
    queue.bind(None, stored.header.cwd.clone());
    queue.replay(stored.events.into_iter().map(Arc::new).collect());
    queue.drained().await;
    let stop = bridge.closing.child_token();
    bridge.watching.start(id, stop.clone());
    let who = id.clone();
    bridge.tasks.spawn(async move {
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                next = events.next() => match next {
                    // Committed messages, as a replay shows them: the other process's raw
                    // deltas are not here to stream.
                    Some(Ok(event)) => queue.event(Arc::new(event), Source::Replay),
                    Some(Err(e)) => {
                        tracing::warn!(session = %who, "following stopped: {}", chain(&e));
                        break;
                    }
                    None => break,
                },
            }
        }
    });
    tracing::info!(session = %id, "ACP session followed read-only (held by another writer)");
    let mut meta = serde_json::Map::new();
    meta.insert("dsh".into(), json!({ "watching": true }));
    Ok(LoadSessionResponse::new().meta(meta))
}
