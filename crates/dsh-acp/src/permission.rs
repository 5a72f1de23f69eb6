//! Permission requests: which calls of a bridge-owned agent wait for the person at the editor,
//! and how the question travels (`session/request_permission`).
//!
//! Two halves. A `tools/pre-execute` listener registered through each bridge agent's scoped
//! context decides *whether* to ask (the session mode, the approval policy, "allow always"),
//! after every inner policy had its say: a denial stays a denial. The asking itself is the
//! [`Approver`] service when the bridge provides it; when the process already has another
//! approver (one the bridge must not replace), the listener asks the client itself and turns
//! the answer into allow or deny. Either way every failure — a client error, a disconnect, a
//! cancelled turn, a closed session — denies: nothing runs without a yes.

use std::sync::{Arc, Weak};

use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    ToolCallId, ToolCallUpdate,
};
use async_trait::async_trait;
use dsh_kernel::{BoxError, Context};
use dsh_session::CallId;
use dsh_tools::{ApprovalOutcome, ApprovalRequest, Approver, PreExecute, ToolsPreExecute};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::bridge::Bridge;
use crate::modes::Mode;
use crate::record::{SessionState, wire_id};
use crate::translate::describe_call;

const ALLOW_ONCE: &str = "allow-once";
const ALLOW_ALWAYS: &str = "allow-always";
const REJECT_ONCE: &str = "reject-once";

fn permission_options() -> Vec<PermissionOption> {
    vec![
        PermissionOption::new(ALLOW_ONCE, "Allow once", PermissionOptionKind::AllowOnce),
        PermissionOption::new(
            ALLOW_ALWAYS,
            "Allow always (this session)",
            PermissionOptionKind::AllowAlways,
        ),
        PermissionOption::new(REJECT_ONCE, "Reject", PermissionOptionKind::RejectOnce),
    ]
}

/// Asks the client whether call `call_id` of `tool` may run, and waits for the answer, the
/// turn's cancellation or the session's closing, whichever comes first. Dropping the pending
/// request on cancellation sends `$/cancel_request`, so the editor can withdraw its card.
pub(crate) async fn ask(
    state: &SessionState,
    tool: &str,
    call_id: &CallId,
    args: &Value,
    cancel: &CancellationToken,
) -> ApprovalOutcome {
    if cancel.is_cancelled() {
        return ApprovalOutcome::Cancelled;
    }
    if state.closed.is_cancelled() {
        return ApprovalOutcome::Unavailable;
    }
    // The call's card (queued when `tool/call` was logged) reaches the client first.
    state.updates.drained().await;
    let (tag, cwd) = state.presentation_scope();
    let fields = describe_call(&state.tools, tag, cwd, tool, args);
    let request = RequestPermissionRequest::new(
        wire_id(&state.id),
        ToolCallUpdate::new(ToolCallId::new(call_id.as_str()), fields),
        permission_options(),
    );
    let answer = state.conn.send_request(request).block_task();
    let outcome = tokio::select! {
        answer = answer => match answer {
            Ok(response) => response.outcome,
            Err(error) => {
                tracing::warn!(session = %state.id, tool, %error, "permission request failed; denying");
                return ApprovalOutcome::Unavailable;
            }
        },
        () = cancel.cancelled() => return ApprovalOutcome::Cancelled,
        () = state.closed.cancelled() => return ApprovalOutcome::Unavailable,
    };
    match outcome {
        RequestPermissionOutcome::Selected(selected) => match &*selected.option_id.0 {
            ALLOW_ONCE => ApprovalOutcome::AllowedOnce,
            ALLOW_ALWAYS => {
                state.allow_always(tool);
                ApprovalOutcome::AllowedForSession
            }
            // Any other option id, known or not, is never a grant.
            _ => ApprovalOutcome::Rejected,
        },
        RequestPermissionOutcome::Cancelled => ApprovalOutcome::Cancelled,
        _ => ApprovalOutcome::Rejected,
    }
}

/// The denial text the model reads for a negative answer (mirrors the tool pipeline's own).
fn denial(tool: &str, outcome: ApprovalOutcome) -> Option<String> {
    match outcome {
        ApprovalOutcome::AllowedOnce | ApprovalOutcome::AllowedForSession => None,
        ApprovalOutcome::Rejected => Some(format!("the user rejected tool `{tool}`")),
        ApprovalOutcome::Cancelled => Some(format!("approval for tool `{tool}` was cancelled")),
        ApprovalOutcome::Unavailable => Some(format!(
            "tool `{tool}` requires approval, but no approval channel is available"
        )),
    }
}

/// Registers the session's approval policy on the agent's scoped `tools/pre-execute` chain.
/// `asks_through_approver` says whether the process-wide [`Approver`] is the bridge's own (then
/// `Ask` is answered by it); otherwise the listener asks the client itself.
pub(crate) fn install_policy(
    ctx: &Context,
    state: Arc<SessionState>,
    asks_through_approver: bool,
) -> Result<(), BoxError> {
    let _ = ctx.on_waterfall::<ToolsPreExecute, _>(move |call, next| {
        let state = state.clone();
        // Read from what the tool declared (an MCP tool declares nothing, so it counts).
        let mutating = !call.effects().is_read_only();
        // The listener hears the agent's descendants too (subagents). Delegation never widens
        // what runs without consent: a read-only session stays read-only all the way down, and
        // in the ask mode a child's mutating call is an `Ask` that the child's own runtime
        // settles (it cannot reach the editor: by default it is refused with a reason the
        // child's model can act on) unless the user allowed the tool for the whole session.
        let own = call.caller.as_ref().is_some_and(|c| c.agent_id == state.id);
        async move {
            let name = call.name.clone();
            let call_id = call.call_id.clone();
            let args = call.arguments.clone();
            let cancel = call.cancel.clone();
            let inner = next.run(call).await?;
            if inner != PreExecute::Allow || !mutating {
                return Ok(inner);
            }
            Ok(match state.mode() {
                // Plan mode itself refused what a planning session may not do; what is left
                // reads, or runs confined read-only.
                Mode::Plan => PreExecute::Allow,
                Mode::ReadOnly => PreExecute::Deny {
                    reason: format!(
                        "the session is in read-only mode: `{name}` may not run; \
                         ask the user to switch modes if it is needed"
                    ),
                },
                Mode::Auto => PreExecute::Allow,
                Mode::Ask if state.is_always_allowed(&name) => PreExecute::Allow,
                Mode::Ask if asks_through_approver || !own => PreExecute::Ask {
                    reason: Some(format!("`{name}` changes the workspace")),
                },
                Mode::Ask => {
                    let outcome = ask(&state, &name, &call_id, &args, &cancel).await;
                    match denial(&name, outcome) {
                        None => PreExecute::Allow,
                        Some(reason) => PreExecute::Deny { reason },
                    }
                }
            })
        }
    })?;
    Ok(())
}

/// The [`Approver`] the bridge provides when the process has none: questions about its own
/// sessions go to their client; questions about any other agent are answered `Unavailable`
/// (no channel to a person), so they fail closed as they would with no approver at all.
pub(crate) struct BridgeApprover {
    pub(crate) bridge: Weak<Bridge>,
}

#[async_trait]
impl Approver for BridgeApprover {
    async fn request(&self, request: ApprovalRequest) -> ApprovalOutcome {
        let Some(record) = self
            .bridge
            .upgrade()
            .and_then(|b| b.record(&request.agent_id))
        else {
            return ApprovalOutcome::Unavailable;
        };
        ask(
            &record.state,
            &request.tool_name,
            &request.call_id,
            &request.arguments,
            &request.cancel,
        )
        .await
    }
}
