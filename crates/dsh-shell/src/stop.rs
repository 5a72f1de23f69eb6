//! First-wins stop requests: why a command was stopped, decided exactly once.

use parking_lot::Mutex;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

/// Why the kill ladder was started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopCause {
    /// The executor's own foreground timer.
    Timeout,
    /// The request's cancellation token (or an abandoned `run` future).
    Cancelled,
    /// [`ShellExecutor::kill`](crate::ShellExecutor::kill) on a background task.
    Killed,
    /// The executor was disposed or dropped.
    Disposed,
    /// The task's owner was released ([`ShellExecutor::release_owner`](crate::ShellExecutor::release_owner)).
    Released,
}

/// Records the first stop cause and wakes the command's driver.
///
/// `timed_out` and `aborted` must be mutually exclusive and `kill` must return true at most
/// once, so every cause goes through [`request`](Self::request), which only the first caller
/// wins; [`finish`](Self::finish) closes the latch when the outcome is recorded, so a late
/// request cannot claim to have stopped a command that already ended.
#[derive(Debug, Default)]
pub(crate) struct StopLatch {
    state: Mutex<LatchState>,
    token: CancellationToken,
}

#[derive(Debug, Default)]
struct LatchState {
    cause: Option<StopCause>,
    finished: bool,
}

impl StopLatch {
    /// Asks the driver to stop the command; true if this call decided the cause.
    pub(crate) fn request(&self, cause: StopCause) -> bool {
        let mut state = self.state.lock();
        if state.finished || state.cause.is_some() {
            return false;
        }
        state.cause = Some(cause);
        self.token.cancel();
        true
    }

    /// Resolves once a stop was requested.
    pub(crate) fn requested(&self) -> WaitForCancellationFuture<'_> {
        self.token.cancelled()
    }

    /// Closes the latch and returns the cause, if any, that won.
    pub(crate) fn finish(&self) -> Option<StopCause> {
        let mut state = self.state.lock();
        state.finished = true;
        state.cause
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_cause_wins() {
        let latch = StopLatch::default();
        assert!(latch.request(StopCause::Timeout));
        assert!(!latch.request(StopCause::Cancelled));
        assert_eq!(latch.finish(), Some(StopCause::Timeout));
    }

    #[test]
    fn requests_after_finish_are_refused() {
        let latch = StopLatch::default();
        assert_eq!(latch.finish(), None);
        assert!(!latch.request(StopCause::Killed));
        assert_eq!(latch.finish(), None);
    }
}
