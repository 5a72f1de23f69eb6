//! `session/load`: resume a stored session and replay its conversation before answering (and
//! the reattaching that `session/resume` shares, without the replay).
//!
//! The stored log is queued for replay during the resumed agent's unpublished setup, before
//! its live listener exists and before it can commit anything, so the client sees the whole
//! history first and then the live stream, with nothing duplicated or lost in between. Replay
//! uses the same translator as live streaming (committed messages instead of raw deltas, plus
//! the user's own prompts), so a reloaded conversation reads the way it did live.

use std::sync::Arc;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{LoadSessionRequest, LoadSessionResponse, McpServer};
use agent_client_protocol::{Client, Error};
use dsh_agent::ResumeAgentOptions;
use dsh_session::{Persistence, PersistenceError, SessionFollow, SessionId};

use crate::bridge::Bridge;
use crate::editor::EditorOffer;
use crate::errors::{chain, internal, invalid, unknown_session};
use crate::models;
use crate::modes::Mode;
use crate::open::{check_workspace, publish_or_dispose};
use crate::record::{SessionRecord, SessionState, wiring};

/// Loads session `request.session_id` from persistence, resumes it as a bridge-owned agent,
/// replays it, and answers once the replay has reached the client.
pub(crate) async fn load_session(
    bridge: Arc<Bridge>,
    request: LoadSessionRequest,
    conn: ConnectionTo<Client>,
) -> Result<LoadSessionResponse, Error> {
    let place = Place {
        cwd: &request.cwd,
        additional_directories: request.additional_directories.len(),
        mcp_servers: &request.mcp_servers,
    };
    let id = SessionId::new(&*request.session_id.0);
    let state = match reattach(&bridge, &id, place, conn, Replay::Yes).await? {
        Reattached::Live(state) => state,
        Reattached::Watching(answer) => return Ok(answer),
    };
    let options = models::config_options(&bridge, &state);
    Ok(LoadSessionResponse::new()
        .modes(Mode::state(state.mode()))
        .config_options((!options.is_empty()).then_some(options)))
}

/// Whether a reattached session's stored conversation is sent to the client.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Replay {
    /// `session/load`: the client rebuilds the thread from the replay.
    Yes,
    /// `session/resume`: the client still shows the thread.
    No,
}

/// What reattaching gave the client.
pub(crate) enum Reattached {
    /// One of this connection's sessions.
    Live(Arc<SessionState>),
    /// Another dsh holds it: followed read-only ([`crate::watch`]); the load's answer.
    Watching(LoadSessionResponse),
}

/// Where the client asks a stored session to be reattached.
#[derive(Clone, Copy)]
pub(crate) struct Place<'a> {
    pub(crate) cwd: &'a std::path::Path,
    pub(crate) additional_directories: usize,
    pub(crate) mcp_servers: &'a [McpServer],
}

/// Makes stored session `id` one of this connection's sessions again (`session/load`,
/// `session/resume`): resumed from persistence as a bridge-owned agent, or, when it is live in
/// this connection already, the live one. With [`Replay::Yes`] its conversation reaches the
/// client before this returns.
pub(crate) async fn reattach(
    bridge: &Arc<Bridge>,
    id: &SessionId,
    place: Place<'_>,
    conn: ConnectionTo<Client>,
    replay: Replay,
) -> Result<Reattached, Error> {
    check_workspace(place.cwd, place.additional_directories)?;
    crate::mcp::configs(place.mcp_servers)?;
    let persistence = bridge.ctx.get::<dyn Persistence>().ok_or_else(|| {
        internal("reattaching a session needs session persistence, which is not configured")
    })?;
    if let Some(record) = bridge.record(id) {
        reload(&record, place.cwd, replay).await?;
        return Ok(Reattached::Live(record.state.clone()));
    }
    bridge.reserve_load(id)?;
    let loaded = resume(bridge, persistence.as_ref(), id, place, conn, replay).await;
    if loaded.is_err() {
        bridge.release_load(id);
    }
    loaded
}

async fn resume(
    bridge: &Arc<Bridge>,
    persistence: &dyn Persistence,
    id: &SessionId,
    place: Place<'_>,
    conn: ConnectionTo<Client>,
    replay: Replay,
) -> Result<Reattached, Error> {
    if bridge.store.get(id).is_some() {
        return Err(invalid(format!(
            "session {id} is already live in this process"
        )));
    }
    // The workspace check happens before any agent is built: a mismatch builds nothing.
    let stored = match persistence.load(id).await {
        Ok(stored) => stored,
        // Another dsh runs it: a load shows it read-only, as it goes on there; a resume (the
        // client already shows the thread) has nothing to attach to.
        Err(e) if e.is_held_elsewhere() => {
            if replay == Replay::Yes
                && let Some(follow) = bridge.ctx.get::<dyn SessionFollow>()
            {
                bridge.release_load(id);
                return crate::watch::watch(bridge, follow, id, place.cwd, conn)
                    .await
                    .map(Reattached::Watching);
            }
            return Err(internal(format!("cannot load session {id}: {}", chain(&e))));
        }
        Err(e) => {
            return Err(match e {
                PersistenceError::NotFound { .. } => unknown_session(id),
                // An id no session can have (say, empty) is the client's mistake.
                invalid_id @ PersistenceError::InvalidId { .. } => invalid(invalid_id.to_string()),
                other => internal(format!("cannot load session {id}: {}", chain(&other))),
            });
        }
    };
    check_cwd(id, stored.header.cwd.as_deref(), place.cwd)?;
    drop(stored);
    let servers = crate::mcp::configs(place.mcp_servers)?;
    let plan = bridge
        .plan(Some(id), place.cwd)
        .await
        .map_err(|e| internal(format!("cannot resume session {id}: {}", chain(&e))))?;
    if let Some(notice) = &plan.notice {
        tracing::info!(session = %id, "{notice}");
    }
    let state = SessionState::new(id.clone(), conn, bridge, plan.options.clone());
    let mut options = ResumeAgentOptions::new(id.clone());
    options.agent_options = plan.options;
    options.setup = Some(crate::mcp::with_servers(
        wiring(
            state.clone(),
            plan.setup,
            &bridge.options,
            bridge.owns_approver,
            replay == Replay::Yes,
            EditorOffer::of(bridge),
        ),
        servers,
        place.cwd.to_path_buf(),
        state.clone(),
    ));
    options.cancel = Some(bridge.closing.child_token());
    let handle = bridge
        .registry
        .resume(&bridge.ctx, options)
        .await
        .map_err(|e| internal(format!("cannot resume session {id}: {}", chain(&e))))?;
    publish_or_dispose(
        bridge,
        Arc::new(SessionRecord {
            state: state.clone(),
            handle,
        }),
    )
    .await?;
    state.updates.drained().await;
    tracing::info!(session = %id, "ACP session reattached");
    Ok(Reattached::Live(state))
}

/// `session/load` or `session/resume` of a session this connection already has live. A load
/// replays its conversation again (an editor reopening a thread expects the history, as
/// codex-acp sends it), in order with whatever the live stream delivers, and returns once the
/// replay has reached the client; a resume has nothing to do.
async fn reload(
    record: &SessionRecord,
    cwd: &std::path::Path,
    replay: Replay,
) -> Result<(), Error> {
    let id = &record.state.id;
    let (_, own) = record.state.presentation_scope();
    if let Some(own) = own
        && !same_dir(&own, cwd)
    {
        return Err(invalid(format!(
            "session {id} belongs to {}, not {}",
            own.display(),
            cwd.display()
        )));
    }
    if replay == Replay::Yes {
        record
            .state
            .updates
            .replay(record.agent().session().events());
        record.state.updates.drained().await;
        tracing::debug!(session = %id, "ACP session replayed again");
    }
    Ok(())
}

/// Refuses a session stored for another directory than the one the client names (or for
/// none: an editor needs one).
pub(crate) fn check_cwd(
    id: &SessionId,
    stored: Option<&std::path::Path>,
    requested: &std::path::Path,
) -> Result<(), Error> {
    match stored {
        Some(cwd) if same_dir(cwd, requested) => Ok(()),
        Some(cwd) => Err(invalid(format!(
            "session {id} belongs to {}, not {}",
            cwd.display(),
            requested.display()
        ))),
        None => Err(invalid(format!(
            "session {id} has no working directory and cannot be loaded by an editor"
        ))),
    }
}

/// Whether two spellings name one directory: equal, or equal once symlinks are resolved (a
/// session started under `/tmp/x` is the same workspace when an editor opens `/private/tmp/x`).
fn same_dir(a: &std::path::Path, b: &std::path::Path) -> bool {
    a == b
        || matches!(
            (std::fs::canonicalize(a), std::fs::canonicalize(b)),
            (Ok(a), Ok(b)) if a == b
        )
}
