//! `session/resume`: reattach a stored session without replaying it. The client still shows
//! the thread (it resumed it from its own history), so only the agent comes back; the answer
//! carries the session's modes and config options as `session/load`'s does.

use std::sync::Arc;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{ResumeSessionRequest, ResumeSessionResponse};
use agent_client_protocol::{Client, Error};
use dsh_session::SessionId;

use crate::bridge::Bridge;
use crate::models;
use crate::modes::Mode;
use crate::replay::{Place, Reattached, Replay, reattach};

/// Resumes session `request.session_id` (or takes the live one of this connection) and
/// answers once it is published, without sending its history.
pub(crate) async fn resume_session(
    bridge: Arc<Bridge>,
    request: ResumeSessionRequest,
    conn: ConnectionTo<Client>,
) -> Result<ResumeSessionResponse, Error> {
    let place = Place {
        cwd: &request.cwd,
        additional_directories: request.additional_directories.len(),
        mcp_servers: &request.mcp_servers,
    };
    let id = SessionId::new(&*request.session_id.0);
    let state = match reattach(&bridge, &id, place, conn, Replay::No).await? {
        Reattached::Live(state) => state,
        // Never produced without a replay; refused rather than answered half-way.
        Reattached::Watching(_) => return Err(crate::watch::read_only(&id)),
    };
    let options = models::config_options(&bridge, &state);
    Ok(ResumeSessionResponse::new()
        .modes(Mode::state(state.mode()))
        .config_options((!options.is_empty()).then_some(options)))
}
