//! `session/load`: resume a stored session and replay its conversation before answering.
//!
//! The stored log is queued for replay during the resumed agent's unpublished setup, before
//! its live listener exists and before it can commit anything, so the client sees the whole
//! history first and then the live stream, with nothing duplicated or lost in between. Replay
//! uses the same translator as live streaming (committed messages instead of raw deltas, plus
//! the user's own prompts), so a reloaded conversation reads the way it did live.

use std::sync::Arc;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{LoadSessionRequest, LoadSessionResponse};
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
    check_workspace(&request.cwd, request.additional_directories.len())?;
    crate::mcp::configs(&request.mcp_servers)?;
    let persistence = bridge.ctx.get::<dyn Persistence>().ok_or_else(|| {
        internal("session/load needs session persistence, which is not configured")
    })?;
    let id = SessionId::new(&*request.session_id.0);
    if let Some(record) = bridge.record(&id) {
        return reload(&bridge, &record, &request).await;
    }
    bridge.reserve_load(&id)?;
    let loaded = resume(&bridge, persistence.as_ref(), &id, &request, conn).await;
    if loaded.is_err() {
        bridge.release_load(&id);
    }
    loaded
}

async fn resume(
    bridge: &Arc<Bridge>,
    persistence: &dyn Persistence,
    id: &SessionId,
    request: &LoadSessionRequest,
    conn: ConnectionTo<Client>,
) -> Result<LoadSessionResponse, Error> {
    if bridge.store.get(id).is_some() {
        return Err(invalid(format!(
            "session {id} is already live in this process"
        )));
    }
    // The workspace check happens before any agent is built: a mismatch builds nothing.
    let stored = match persistence.load(id).await {
        Ok(stored) => stored,
        // Another dsh runs it: shown read-only, as it goes on there.
        Err(e) if e.is_held_elsewhere() => {
            if let Some(follow) = bridge.ctx.get::<dyn SessionFollow>() {
                bridge.release_load(id);
                return crate::watch::watch(bridge, follow, id, request, conn).await;
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
    check_cwd(id, stored.header.cwd.as_deref(), &request.cwd)?;
    drop(stored);
    let servers = crate::mcp::configs(&request.mcp_servers)?;
    let plan = bridge
        .plan(Some(id), &request.cwd)
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
            true,
            EditorOffer::of(bridge),
        ),
        servers,
        request.cwd.clone(),
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
    tracing::info!(session = %id, "ACP session loaded");
    let options = models::config_options(bridge, &state);
    Ok(LoadSessionResponse::new()
        .modes(Mode::state(state.mode()))
        .config_options((!options.is_empty()).then_some(options)))
}

/// `session/load` of a session this connection already has live: its conversation is
/// replayed again (an editor reopening a thread expects the history, as codex-acp sends it),
/// in order with whatever the live stream delivers, and the answer follows the replay.
async fn reload(
    bridge: &Bridge,
    record: &SessionRecord,
    request: &LoadSessionRequest,
) -> Result<LoadSessionResponse, Error> {
    let id = &record.state.id;
    let (_, cwd) = record.state.presentation_scope();
    if let Some(cwd) = cwd
        && !same_dir(&cwd, &request.cwd)
    {
        return Err(invalid(format!(
            "session {id} belongs to {}, not {}",
            cwd.display(),
            request.cwd.display()
        )));
    }
    record
        .state
        .updates
        .replay(record.agent().session().events());
    record.state.updates.drained().await;
    tracing::debug!(session = %id, "ACP session replayed again");
    let options = models::config_options(bridge, &record.state);
    Ok(LoadSessionResponse::new()
        .modes(Mode::state(record.state.mode()))
        .config_options((!options.is_empty()).then_some(options)))
}

/// Whether two spellings name one directory: equal, or equal once symlinks are resolved (a
/// session started under `/tmp/x` is the same workspace when an editor opens `/private/tmp/x`).
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

fn same_dir(a: &std::path::Path, b: &std::path::Path) -> bool {
    a == b
        || matches!(
            (std::fs::canonicalize(a), std::fs::canonicalize(b)),
            (Ok(a), Ok(b)) if a == b
        )
}
