//! The cancellation of the assembly being built, for `system-prompt/assemble` listeners that
//! wait (an MCP set waiting for its servers to start).
//!
//! The payload of the waterfall is the assembly itself (plain data, compared and cloned by
//! tests); the turn's token travels beside it in a task-local for the duration of the dispatch,
//! so a listener that waits can give up when the turn is cancelled instead of holding the turn
//! (and a person's Ctrl-C) until its own timeout.

use tokio_util::sync::CancellationToken;

tokio::task_local! {
    static ASSEMBLY_CANCEL: CancellationToken;
}

/// The cancellation of the turn whose prompt is being assembled, inside a
/// `system-prompt/assemble` listener; `None` outside one or for an assembly nobody can cancel.
pub fn assembly_cancellation() -> Option<CancellationToken> {
    ASSEMBLY_CANCEL.try_with(CancellationToken::clone).ok()
}

/// Runs `fut` with `cancel` as the assembly's cancellation.
pub(crate) async fn with_cancellation<F: Future>(
    cancel: Option<CancellationToken>,
    fut: F,
) -> F::Output {
    match cancel {
        Some(token) => ASSEMBLY_CANCEL.scope(token, fut).await,
        None => fut.await,
    }
}
