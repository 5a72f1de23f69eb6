//! `session/new`: a fresh agent owned by the bridge.

use std::sync::Arc;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{NewSessionRequest, NewSessionResponse};
use agent_client_protocol::{Client, Error};
use dsh_agent::CreateAgentOptions;
use dsh_session::{EventDraft, EventKind, Persistence, SessionId, SessionMeta};

use crate::bridge::Bridge;
use crate::editor::EditorOffer;
use crate::errors::{chain, internal, invalid};
use crate::models;
use crate::modes::Mode;
use crate::record::{SessionRecord, SessionState, wire_id, wiring};
use crate::teardown::retire;

/// Rejects what the bridge does not support: a relative or missing `cwd` (every tool call would
/// fail later, less clearly), extra roots. (MCP servers are checked by [`crate::mcp::configs`].)
pub(crate) fn check_workspace(
    cwd: &std::path::Path,
    additional_directories: usize,
) -> Result<(), Error> {
    if !cwd.is_absolute() {
        return Err(invalid(format!(
            "cwd must be an absolute path, got {}",
            cwd.display()
        )));
    }
    if !cwd.is_dir() {
        return Err(invalid(format!(
            "cwd {} is not an existing directory",
            cwd.display()
        )));
    }
    if additional_directories > 0 {
        return Err(invalid(
            "additional directories are not supported by this agent",
        ));
    }
    Ok(())
}

/// Publishes `record`, or — when the bridge closed while the agent was being built — disposes
/// it, so a create that loses the race with the close leaves nothing behind.
pub(crate) async fn publish_or_dispose(
    bridge: &Bridge,
    record: Arc<SessionRecord>,
) -> Result<(), Error> {
    match bridge.publish(record) {
        Ok(()) => Ok(()),
        Err(record) => {
            retire(record).await;
            Err(internal("bridge has been disposed"))
        }
    }
}

/// The plugin event that marks a session an editor created: a session file holds a header
/// and at least one event, so without it a session never prompted would have no file.
pub(crate) const CREATED_EVENT: &str = "acp/session-created";

/// Marks a fresh session for the disk, so the editor can load it after a restart even if it
/// was never prompted. Without persistence there is nothing to do.
///
/// The event is only appended, not flushed: the store's write-behind publishes the file within
/// its batching window, together with whatever else is pending, and off the request path. A
/// `session/new` that waited for its own file (a write and two syncs) cost milliseconds each
/// and kept 10,000 sessions from being created in seconds; a session whose creation has not
/// reached the disk yet is lost by a crash exactly like a prompt not yet flushed, and
/// teardown (close, disconnect, a signal) drains it.
fn mark_created(bridge: &Bridge, handle: &dsh_agent::AgentHandle) -> Result<(), Error> {
    if bridge.ctx.get::<dyn Persistence>().is_none() {
        return Ok(());
    }
    // Ignorable: the conversation does not depend on it, so any reader may skip it.
    let mut draft = EventDraft::new(EventKind::other(
        CREATED_EVENT,
        serde_json::json!({ "via": "session/new" }),
    ));
    draft.ignorable = true;
    handle
        .agent()
        .session()
        .append_draft(draft)
        .map(drop)
        .map_err(|e| internal(format!("cannot save the new session: {e}")))
}

/// Creates a session: a new agent whose id is the ACP `sessionId`, working in `cwd`, persisted
/// like any other when persistence is mounted.
pub(crate) async fn new_session(
    bridge: Arc<Bridge>,
    request: NewSessionRequest,
    conn: ConnectionTo<Client>,
) -> Result<NewSessionResponse, Error> {
    if bridge.is_closed() {
        return Err(internal("bridge has been disposed"));
    }
    check_workspace(&request.cwd, request.additional_directories.len())?;
    let servers = crate::mcp::configs(&request.mcp_servers)?;
    let id = SessionId::generate();
    let plan = bridge
        .plan(None, &request.cwd)
        .await
        .map_err(|e| internal(format!("cannot create the session: {}", chain(&e))))?;
    let state = SessionState::new(id.clone(), conn, &bridge, plan.options.clone());
    let handle = bridge
        .registry
        .create(
            &bridge.ctx,
            CreateAgentOptions {
                session_id: Some(id.clone()),
                meta: SessionMeta {
                    cwd: Some(request.cwd.clone()),
                    ..SessionMeta::default()
                },
                agent_options: plan.options,
                setup: Some(crate::mcp::with_servers(
                    wiring(
                        state.clone(),
                        plan.setup,
                        &bridge.options,
                        bridge.owns_approver,
                        false,
                        EditorOffer::of(&bridge),
                    ),
                    servers,
                    request.cwd.clone(),
                    state.clone(),
                )),
                cancel: Some(bridge.closing.child_token()),
                ..CreateAgentOptions::default()
            },
        )
        .await
        .map_err(|e| internal(format!("cannot create the session: {}", chain(&e))))?;
    if let Err(e) = mark_created(&bridge, &handle) {
        handle.dispose().await;
        return Err(e);
    }
    publish_or_dispose(
        &bridge,
        Arc::new(SessionRecord {
            state: state.clone(),
            handle,
        }),
    )
    .await?;
    tracing::info!(session = %id, cwd = %request.cwd.display(), "ACP session created");
    let options = models::config_options(&bridge, &state);
    Ok(NewSessionResponse::new(wire_id(&id))
        .modes(Mode::state(state.mode()))
        .config_options((!options.is_empty()).then_some(options)))
}
