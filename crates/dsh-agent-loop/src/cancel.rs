//! A turn's cancellation: a token plus the first cause that fired it.

use std::sync::{Arc, OnceLock};

use dsh_session::CancelCause;
use tokio_util::sync::CancellationToken;

/// One per turn. The first cause wins: a later cancel (say, disposal racing a user cancel)
/// cannot rewrite why the turn stopped.
#[derive(Clone, Debug, Default)]
pub(crate) struct TurnCancel {
    token: CancellationToken,
    cause: Arc<OnceLock<CancelCause>>,
}

impl TurnCancel {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Records `cause` if none was recorded, then cancels the token.
    pub(crate) fn cancel(&self, cause: CancelCause) {
        let _ = self.cause.set(cause);
        self.token.cancel();
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.token.is_cancelled()
    }

    /// The winning cause, once cancelled.
    pub(crate) fn cause(&self) -> Option<CancelCause> {
        self.cause.get().cloned()
    }

    pub(crate) fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// `Err(Interrupt::Cancelled)` once cancelled: the loop calls it after every await.
    pub(crate) fn check(&self) -> Result<(), crate::turn::Interrupt> {
        if self.is_cancelled() {
            Err(crate::turn::Interrupt::Cancelled)
        } else {
            Ok(())
        }
    }
}
