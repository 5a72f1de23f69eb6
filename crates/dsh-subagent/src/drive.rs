//! Waiting for a child's run and reading how it ended.

use dsh_agent::{AgentRef, CancelCause, CancelOptions};
use tokio_util::sync::CancellationToken;

use crate::outcome::{SubagentOutcome, read_outcome};
use crate::spawn::Spawned;

/// Resolves once `child` is idle. When `stop` fires first, the child is cancelled with cause
/// `parent` and still awaited: cancellation is cooperative, the child's final `turn/end` is
/// written before this returns.
pub(crate) async fn settle(child: &AgentRef, stop: &CancellationToken) {
    let idle = child.when_idle();
    tokio::select! {
        () = idle => return,
        () = stop.cancelled() => {}
    }
    child.cancel(CancelCause::Parent, CancelOptions::default());
    child.when_idle().await;
}

/// Waits for the run (see [`settle`]), reads its outcome from the child's log, then disposes
/// the child. The handle is disposed on every path, so a finished delegation leaves no agent,
/// session entry or scoped registration behind.
pub(crate) async fn finish(spawned: Spawned, stop: &CancellationToken) -> SubagentOutcome {
    let Spawned {
        handle,
        start,
        live,
    } = spawned;
    let child = handle.agent().clone();
    settle(&child, stop).await;
    let outcome = read_outcome(child.id().clone(), &child.session().events_from(start));
    handle.dispose().await;
    live.lock().remove(child.id());
    outcome
}
