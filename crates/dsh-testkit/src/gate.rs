//! A one-shot release handle shared between a test and a test double.

use tokio_util::sync::CancellationToken;

/// A point where a scripted stream (or a mock server response) stops until the test says go.
///
/// The double marks the gate *reached* when it arrives there, so a test can wait for "the
/// stream is now parked" without sleeping, then act (cancel, inspect) and `release` it.
/// Clones share state.
#[derive(Clone, Debug, Default)]
pub struct Gate {
    released: CancellationToken,
    reached: CancellationToken,
}

/// The mock server's name for a [`Gate`]: where a response holds.
pub type Hold = Gate;

impl Gate {
    /// A closed gate nobody has reached.
    pub fn new() -> Self {
        Self::default()
    }

    /// Lets the waiting side go on (now or whenever it arrives).
    pub fn release(&self) {
        self.released.cancel();
    }

    /// Whether [`Gate::release`] was called.
    pub fn is_released(&self) -> bool {
        self.released.is_cancelled()
    }

    /// Resolves once the double has arrived at the gate.
    pub async fn reached(&self) {
        self.reached.cancelled().await;
    }

    /// Whether the double has arrived at the gate.
    pub fn is_reached(&self) -> bool {
        self.reached.is_cancelled()
    }

    /// Called by the double: marks the gate reached and waits for release.
    pub async fn pass(&self) {
        self.reached.cancel();
        self.released.cancelled().await;
    }
}
