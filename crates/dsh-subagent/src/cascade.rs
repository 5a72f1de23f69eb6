//! Cancellation cascade: cancelling an agent cancels the agents it owns.
//!
//! Ownership is the registry's live relation (`children_of`): every agent created through
//! another agent's scoped context, whichever tool or plugin created it. The listener hears
//! `agent/cancel-requested`, which an effective cancel emits before it clears the inbox or
//! aborts the turn (R3), and cancels each live child with cause `parent`. Each child's own
//! cancellation re-enters here, so the cascade reaches the whole subtree. Idle children with
//! nothing pending are untouched (their cancel is a no-op).

use dsh_agent::events::{AgentCancelRequested, CancelNotice};
use dsh_agent::{AgentRegistry, CancelCause, CancelOptions};
use dsh_kernel::{Context, KernelError, Registration};

/// Listens through `ctx` (globally: every agent's cancellation is heard) for as long as
/// `ctx`'s scope lives.
pub(crate) fn install(ctx: &Context) -> Result<Registration, KernelError> {
    let lookup = ctx.clone();
    ctx.global()
        .on::<AgentCancelRequested>(move |notice: &CancelNotice| {
            let Some(registry) = lookup.get::<AgentRegistry>() else {
                return;
            };
            // `children_of` returns a snapshot: no registry lock is held while cancelling.
            for child in registry.children_of(&notice.agent) {
                child.cancel(CancelCause::Parent, CancelOptions::default());
            }
        })
}
