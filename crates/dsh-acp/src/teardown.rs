//! Letting go of sessions: `session/close`, and the whole bridge when the client disconnects.
//!
//! Seed decision 000: the bridge holds each session's [`dsh_agent::AgentHandle`] and runs its
//! disposer, so a disconnect leaves no registered agent and no session-store entry for any
//! bridge-owned session — including one whose creation was still running (it sees the bridge
//! closed when it tries to publish and disposes its own handle). Work is stopped with a `user`
//! cancel first, so a running turn ends `aborted{user}` and is durable before the agent's
//! ordered teardown detaches the session; sessions of other front ends are never touched.

use std::sync::Arc;

use agent_client_protocol::Error;
use agent_client_protocol::v1::schema::{CloseSessionRequest, CloseSessionResponse};
use dsh_session::SessionId;

use crate::bridge::{Bridge, BridgeClosing};
use crate::errors::unknown_session;
use crate::prompt::cancel_record;
use crate::record::SessionRecord;

/// Stops a record's work and tears its agent down: approvals fail closed, the outstanding
/// prompt answers `cancelled`, the agent is cancelled (`user`) and drained, its output is
/// handed to the connection, and then its handle is disposed (agent and session detached).
pub(crate) async fn retire(record: Arc<SessionRecord>) {
    record.state.closed.cancel();
    record.state.forget_policy();
    cancel_record(&record);
    record.agent().when_idle().await;
    record.state.updates.drained().await;
    record.handle.dispose().await;
    tracing::debug!(session = %record.state.id, "ACP session disposed");
}

/// `session/close`: disposes that session only.
pub(crate) async fn close_session(
    bridge: Arc<Bridge>,
    request: CloseSessionRequest,
) -> Result<CloseSessionResponse, Error> {
    let id = SessionId::new(&*request.session_id.0);
    if bridge.watching.stop(&id) {
        return Ok(CloseSessionResponse::new());
    }
    let record = bridge.remove(&id).ok_or_else(|| unknown_session(&id))?;
    retire(record).await;
    Ok(CloseSessionResponse::new())
}

/// The bridge's teardown, run once when the connection ends: close to new sessions, stop every
/// session's work before any slow await, drain and dispose them all in parallel, wait for
/// request work still running (creations that lost the race dispose their own handles), and
/// finally unwind the bridge's scope (its approver).
pub(crate) async fn quiesce(bridge: &Bridge) {
    let records = bridge.close_all();
    bridge.closing.cancel();
    bridge.ctx.emit::<BridgeClosing>(&());
    for record in &records {
        record.state.closed.cancel();
        cancel_record(record);
    }
    futures::future::join_all(records.into_iter().map(retire)).await;
    bridge.tasks.close();
    bridge.tasks.wait().await;
    bridge.ctx.scope().dispose().await;
}
