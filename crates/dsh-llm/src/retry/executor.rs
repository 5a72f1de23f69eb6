//! Carrying out a retry decision: record, back off, record again.

use std::sync::Arc;

use dsh_session::LlmFailure;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::decide::{RetryDecision, decide};
use super::events::{LlmRetry, LlmRetryStarted, RetryMode};
use super::policy::{RetryPolicy, millis};
use crate::error::BoxError;

/// Where retries are recorded: the session log, in the loop.
///
/// Synchronous because session appends are (the write-behind flush happens elsewhere).
pub trait RetryLog: Send + Sync {
    /// The retry id and number of the latest `llm/retry` of this (turn, step, provider,
    /// policy key), if any.
    fn previous(
        &self,
        turn: u64,
        step: u64,
        provider: &str,
        policy_key: &str,
    ) -> Option<(String, u32)>;

    /// Appends an `llm/retry` record.
    fn append_retry(&self, retry: &LlmRetry) -> Result<(), BoxError>;

    /// Appends an `llm/retry-started` record.
    fn append_retry_started(&self, started: &LlmRetryStarted) -> Result<(), BoxError>;
}

/// One failed request offered for recovery.
#[derive(Clone, Debug)]
pub struct RecoveryRequest {
    /// Turn number.
    pub turn: u64,
    /// Step number.
    pub step: u64,
    /// Provider route that failed.
    pub provider: String,
    /// The failure.
    pub failure: LlmFailure,
    /// The route's retry policy (`None`: never retried here).
    pub policy: Option<RetryPolicy>,
    /// The turn's cancellation token; cancelling it ends the backoff.
    pub cancel: CancellationToken,
}

/// What the loop should do after [`RetryExecutor::recover`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryOutcome {
    /// The backoff elapsed and `llm/retry-started` is recorded: re-issue the request.
    Retry,
    /// Not retried: the failure stands (unless someone else recovers it).
    Delegate,
    /// The turn was cancelled during the backoff; nothing more was recorded.
    Cancelled,
}

type RandomSource = Arc<dyn Fn() -> f64 + Send + Sync>;
type IdSource = Arc<dyn Fn() -> String + Send + Sync>;

/// Executes retry decisions for one agent (or process).
///
/// Randomness and retry ids are injectable so tests are deterministic; the backoff uses
/// `tokio::time::sleep`, so tests drive it with `tokio::time::pause()`.
pub struct RetryExecutor {
    random: RandomSource,
    new_id: IdSource,
    shutdown: CancellationToken,
    in_flight: TaskTracker,
}

impl Default for RetryExecutor {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for RetryExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryExecutor")
            .field("in_flight", &self.in_flight.len())
            .field("disposed", &self.shutdown.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl RetryExecutor {
    /// An executor using thread-local randomness and UUID retry ids.
    pub fn new() -> Self {
        Self {
            random: Arc::new(rand::random::<f64>),
            new_id: Arc::new(|| uuid::Uuid::new_v4().to_string()),
            shutdown: CancellationToken::new(),
            in_flight: TaskTracker::new(),
        }
    }

    /// Replaces the jitter source (uniform in `[0, 1)`).
    pub fn with_random(mut self, random: impl Fn() -> f64 + Send + Sync + 'static) -> Self {
        self.random = Arc::new(random);
        self
    }

    /// Replaces the retry-id generator.
    pub fn with_id_generator(
        mut self,
        new_id: impl Fn() -> String + Send + Sync + 'static,
    ) -> Self {
        self.new_id = Arc::new(new_id);
        self
    }

    /// Decides, records and waits for one retry.
    ///
    /// Order: `llm/retry` is appended before the backoff (so the budget is durable), the
    /// backoff sleeps unless the turn is cancelled (then nothing more is written and the
    /// outcome is `Cancelled`), and `llm/retry-started` is appended just before `Retry` is
    /// returned. A failure to append `llm/retry` delegates: an unrecorded retry would escape
    /// the budget.
    pub async fn recover(&self, req: RecoveryRequest, log: &dyn RetryLog) -> RecoveryOutcome {
        if self.shutdown.is_cancelled() {
            return RecoveryOutcome::Delegate;
        }
        self.in_flight
            .track_future(self.recover_inner(req, log))
            .await
    }

    async fn recover_inner(&self, req: RecoveryRequest, log: &dyn RetryLog) -> RecoveryOutcome {
        let Some(policy) = &req.policy else {
            return RecoveryOutcome::Delegate;
        };
        if req.cancel.is_cancelled() {
            return RecoveryOutcome::Cancelled;
        }
        let key = policy.policy_key();
        let previous = log.previous(req.turn, req.step, &req.provider, &key);
        let previous_attempt = previous.as_ref().map_or(0, |(_, n)| *n);
        let RetryDecision::Retry { attempt, delay } =
            decide(policy, &req.failure, previous_attempt, (self.random)())
        else {
            return RecoveryOutcome::Delegate;
        };
        let retry_id = previous.map_or_else(|| (self.new_id)(), |(id, _)| id);
        let (mode, max_retries) = match policy {
            RetryPolicy::Normal { max_retries, .. } => (RetryMode::Normal, Some(*max_retries)),
            RetryPolicy::Always { .. } => (RetryMode::Always, None),
        };
        let record = LlmRetry {
            retry_id: retry_id.clone(),
            turn: req.turn,
            step: req.step,
            provider: req.provider.clone(),
            mode,
            policy_key: key,
            retry: attempt,
            max_retries,
            delay_ms: millis(delay),
            failure: req.failure.clone(),
        };
        if let Err(e) = log.append_retry(&record) {
            tracing::warn!(error = %e, "could not record llm/retry; the failure stands");
            return RecoveryOutcome::Delegate;
        }
        tokio::select! {
            biased;
            _ = req.cancel.cancelled() => return RecoveryOutcome::Cancelled,
            _ = self.shutdown.cancelled() => return RecoveryOutcome::Delegate,
            _ = tokio::time::sleep(delay) => {}
        }
        let started = LlmRetryStarted {
            retry_id,
            turn: req.turn,
            step: req.step,
            retry: attempt,
        };
        if let Err(e) = log.append_retry_started(&started) {
            // The retry itself is recorded; re-issuing is still right.
            tracing::warn!(error = %e, "could not record llm/retry-started");
        }
        RecoveryOutcome::Retry
    }

    /// Stops every pending backoff (those recoveries delegate) and waits until every
    /// in-flight recovery has returned. Later recoveries delegate immediately.
    pub async fn dispose(&self) {
        self.shutdown.cancel();
        self.in_flight.close();
        self.in_flight.wait().await;
    }
}
