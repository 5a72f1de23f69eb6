//! A bounded wait for tests: a regression that deadlocks fails instead of hanging CI.

use std::future::Future;
use std::time::Duration;

/// How long [`bounded`] waits. Generous: it only has to tell "stuck" from "slow on a busy
/// 2-core CI machine".
pub const BOUND: Duration = Duration::from_secs(60);

/// Awaits `fut`, panicking (so the test fails) if it has not completed within [`BOUND`].
///
/// Under `tokio::time::pause` the runtime auto-advances to the deadline once every task is
/// idle, so a deadlock fails at once there too.
pub async fn bounded<F: Future>(fut: F) -> F::Output {
    match tokio::time::timeout(BOUND, fut).await {
        Ok(out) => out,
        Err(_) => panic!("a bounded wait did not complete within {BOUND:?} (deadlock?)"),
    }
}
