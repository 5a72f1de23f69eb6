//! The retry executor, on paused time.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use dsh_llm::retry::{
    Backoff, LlmRetry, LlmRetryStarted, MemoryRetryLog, RecoveryOutcome, RecoveryRequest,
    RetryExecutor, RetryLog, RetryLogEntry, RetryMode, RetryPolicy,
};
use dsh_llm::{BoxError, FailureCode, LlmFailure};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

fn executor() -> RetryExecutor {
    let ids = AtomicU32::new(0);
    RetryExecutor::new()
        .with_random(|| 0.5)
        .with_id_generator(move || format!("retry-{}", ids.fetch_add(1, Ordering::Relaxed)))
}

fn request(failure: LlmFailure, policy: Option<RetryPolicy>) -> RecoveryRequest {
    RecoveryRequest {
        turn: 1,
        step: 1,
        provider: "deepseek".into(),
        failure,
        policy,
        cancel: CancellationToken::new(),
    }
}

fn server() -> LlmFailure {
    LlmFailure::new(FailureCode::Server, "overloaded")
}

fn retries(log: &MemoryRetryLog) -> Vec<LlmRetry> {
    log.entries()
        .into_iter()
        .filter_map(|e| match e {
            RetryLogEntry::Retry(r) => Some(r),
            RetryLogEntry::Started(_) => None,
        })
        .collect()
}

fn started(log: &MemoryRetryLog) -> Vec<LlmRetryStarted> {
    log.entries()
        .into_iter()
        .filter_map(|e| match e {
            RetryLogEntry::Started(s) => Some(s),
            RetryLogEntry::Retry(_) => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn backoff_doubles_until_the_budget_is_spent_then_delegates() {
    let exec = executor();
    let log = MemoryRetryLog::new();
    let mut waited = Vec::new();
    for _ in 0..5 {
        let t0 = Instant::now();
        let outcome = exec
            .recover(request(server(), Some(RetryPolicy::default())), &log)
            .await;
        assert_eq!(outcome, RecoveryOutcome::Retry);
        waited.push(t0.elapsed().as_millis());
    }
    assert_eq!(waited, [500, 1000, 2000, 4000, 8000]);
    let outcome = exec
        .recover(request(server(), Some(RetryPolicy::default())), &log)
        .await;
    assert_eq!(outcome, RecoveryOutcome::Delegate);

    let records = retries(&log);
    assert_eq!(records.len(), 5);
    assert!(records.iter().all(|r| r.retry_id == "retry-0"));
    assert_eq!(
        records.iter().map(|r| r.retry).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5]
    );
    assert_eq!(
        records.iter().map(|r| r.delay_ms).collect::<Vec<_>>(),
        [500, 1000, 2000, 4000, 8000]
    );
    assert!(
        records
            .iter()
            .all(|r| r.mode == RetryMode::Normal && r.max_retries == Some(5))
    );
    assert_eq!(started(&log).len(), 5);
    // Each llm/retry precedes its llm/retry-started.
    assert!(matches!(log.entries()[0], RetryLogEntry::Retry(_)));
    assert!(matches!(log.entries()[1], RetryLogEntry::Started(_)));
}

#[tokio::test(start_paused = true)]
async fn retry_after_within_the_cap_is_waited_exactly_and_beyond_it_delegates() {
    let exec = executor();
    let log = MemoryRetryLog::new();
    let mut failure = LlmFailure::new(FailureCode::RateLimit, "slow down");
    failure.provider_retry_after_ms = Some(3_000);
    let t0 = Instant::now();
    let outcome = exec
        .recover(request(failure.clone(), Some(RetryPolicy::default())), &log)
        .await;
    assert_eq!(outcome, RecoveryOutcome::Retry);
    assert_eq!(t0.elapsed(), Duration::from_millis(3_000));
    assert_eq!(retries(&log)[0].delay_ms, 3_000);

    failure.provider_retry_after_ms = Some(60_000);
    let outcome = exec
        .recover(request(failure, Some(RetryPolicy::default())), &log)
        .await;
    assert_eq!(outcome, RecoveryOutcome::Delegate);
    assert_eq!(retries(&log).len(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_budget_is_keyed_by_policy_and_position() {
    let exec = executor();
    let log = MemoryRetryLog::new();
    let tight = RetryPolicy::Normal {
        max_retries: 1,
        retryable: vec![FailureCode::Server],
        backoff: Backoff::default(),
    };
    let r = |step, policy: &RetryPolicy| RecoveryRequest {
        step,
        ..request(server(), Some(policy.clone()))
    };
    assert_eq!(
        exec.recover(r(1, &tight), &log).await,
        RecoveryOutcome::Retry
    );
    assert_eq!(
        exec.recover(r(1, &tight), &log).await,
        RecoveryOutcome::Delegate
    );
    // Another step, or another policy, starts a fresh sequence.
    assert_eq!(
        exec.recover(r(2, &tight), &log).await,
        RecoveryOutcome::Retry
    );
    let looser = RetryPolicy::default();
    assert_eq!(
        exec.recover(r(1, &looser), &log).await,
        RecoveryOutcome::Retry
    );
    let ids: Vec<(u64, u32, String)> = retries(&log)
        .into_iter()
        .map(|x| (x.step, x.retry, x.retry_id))
        .collect();
    assert_eq!(
        ids,
        [
            (1, 1, "retry-0".to_owned()),
            (2, 1, "retry-1".to_owned()),
            (1, 1, "retry-2".to_owned())
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn unretryable_codes_and_missing_policies_delegate_without_writing() {
    let exec = executor();
    let log = MemoryRetryLog::new();
    let auth = LlmFailure::new(FailureCode::Auth, "bad key");
    let outcome = exec
        .recover(request(auth.clone(), Some(RetryPolicy::default())), &log)
        .await;
    assert_eq!(outcome, RecoveryOutcome::Delegate);
    assert_eq!(
        exec.recover(request(server(), None), &log).await,
        RecoveryOutcome::Delegate
    );
    assert!(log.entries().is_empty());
    let always = RetryPolicy::Always {
        backoff: Backoff::default(),
    };
    assert_eq!(
        exec.recover(request(auth, Some(always)), &log).await,
        RecoveryOutcome::Retry
    );
    let r = &retries(&log)[0];
    assert_eq!((r.mode, r.max_retries), (RetryMode::Always, None));
}

/// A log that tells the test when `llm/retry` has been written.
struct SignallingLog {
    inner: MemoryRetryLog,
    retried: Arc<Notify>,
}

impl RetryLog for SignallingLog {
    fn previous(&self, turn: u64, step: u64, provider: &str, key: &str) -> Option<(String, u32)> {
        self.inner.previous(turn, step, provider, key)
    }
    fn append_retry(&self, retry: &LlmRetry) -> Result<(), BoxError> {
        self.inner.append_retry(retry)?;
        self.retried.notify_one();
        Ok(())
    }
    fn append_retry_started(&self, started: &LlmRetryStarted) -> Result<(), BoxError> {
        self.inner.append_retry_started(started)
    }
}

#[tokio::test(start_paused = true)]
async fn cancel_during_backoff_writes_no_retry_started() {
    let retried = Arc::new(Notify::new());
    let log = Arc::new(SignallingLog {
        inner: MemoryRetryLog::new(),
        retried: retried.clone(),
    });
    let exec = Arc::new(executor());
    let req = request(server(), Some(RetryPolicy::default()));
    let cancel = req.cancel.clone();
    let task = {
        let (exec, log) = (exec.clone(), log.clone());
        tokio::spawn(async move { exec.recover(req, &*log).await })
    };
    retried.notified().await;
    let t0 = Instant::now();
    cancel.cancel();
    assert_eq!(task.await.unwrap(), RecoveryOutcome::Cancelled);
    assert!(t0.elapsed() < Duration::from_millis(500));
    assert_eq!(retries(&log.inner).len(), 1);
    assert!(started(&log.inner).is_empty());
}

#[tokio::test(start_paused = true)]
async fn dispose_ends_pending_backoffs_and_waits_for_them() {
    let retried = Arc::new(Notify::new());
    let log = Arc::new(SignallingLog {
        inner: MemoryRetryLog::new(),
        retried: retried.clone(),
    });
    let exec = Arc::new(executor());
    let task = {
        let (exec, log) = (exec.clone(), log.clone());
        tokio::spawn(async move {
            exec.recover(request(server(), Some(RetryPolicy::default())), &*log)
                .await
        })
    };
    retried.notified().await;
    exec.dispose().await;
    assert_eq!(task.await.unwrap(), RecoveryOutcome::Delegate);
    assert!(started(&log.inner).is_empty());
    assert_eq!(
        exec.recover(request(server(), Some(RetryPolicy::default())), &*log)
            .await,
        RecoveryOutcome::Delegate
    );
}
