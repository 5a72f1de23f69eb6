//! The pure retry decision.

use std::time::Duration;

use dsh_session::LlmFailure;

use super::policy::{Backoff, RetryPolicy, millis};

/// What to do about one failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryDecision {
    /// Not ours to retry: the failure goes on (and, if nobody else acts, ends the turn).
    Delegate,
    /// Re-issue the request after `delay`; this is retry number `attempt` (1-based).
    Retry {
        /// 1-based retry number within the (turn, step, provider, policy) sequence.
        attempt: u32,
        /// How long to wait first.
        delay: Duration,
    },
}

/// Decides whether `failure` is retried and after how long.
///
/// `previous_attempt` is the retry number of the latest retry of the same sequence (0 when
/// none); `rand` is a uniform sample in `[0, 1)` (injected so decisions are reproducible).
/// A provider `Retry-After` within the backoff ceiling is used exactly, without jitter; one
/// beyond the ceiling makes a normal policy give up (waiting that long is the caller's call)
/// while an always policy falls back to its own backoff.
pub fn decide(
    policy: &RetryPolicy,
    failure: &LlmFailure,
    previous_attempt: u32,
    rand: f64,
) -> RetryDecision {
    let attempt = previous_attempt.saturating_add(1);
    let backoff = policy.backoff();
    let normal = match policy {
        RetryPolicy::Normal {
            max_retries,
            retryable,
            ..
        } => {
            if !retryable.contains(&failure.code) || previous_attempt >= *max_retries {
                return RetryDecision::Delegate;
            }
            true
        }
        RetryPolicy::Always { .. } => false,
    };
    let retry_after = failure
        .provider_retry_after_ms
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis);
    let delay = match retry_after {
        Some(d) if d <= backoff.max => d,
        Some(_) if normal => return RetryDecision::Delegate,
        _ => backoff_delay(backoff, attempt, rand),
    };
    RetryDecision::Retry { attempt, delay }
}

/// `min(initial · 2^(n−1), max) · (1 − j + 2j·rand)`, capped at `max`, in whole milliseconds.
fn backoff_delay(b: &Backoff, attempt: u32, rand: f64) -> Duration {
    let rand = if rand.is_finite() {
        rand.clamp(0.0, 1.0)
    } else {
        0.5
    };
    let exponent = attempt.saturating_sub(1).min(62);
    let base = millis(b.initial).saturating_mul(1u64 << exponent);
    let max = millis(b.max);
    let base = base.min(max) as f64;
    let j = b.jitter_ratio;
    let jittered = (base * (1.0 - j + 2.0 * j * rand)).round();
    // `jittered` is finite and non-negative; the cast saturates.
    Duration::from_millis((jittered as u64).min(max))
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_session::FailureCode;

    fn server() -> LlmFailure {
        LlmFailure::new(FailureCode::Server, "boom")
    }

    fn delay(d: RetryDecision) -> u64 {
        match d {
            RetryDecision::Retry { delay, .. } => millis(delay),
            RetryDecision::Delegate => panic!("delegated"),
        }
    }

    #[test]
    fn backoff_doubles_from_initial_up_to_the_ceiling_with_centered_jitter() {
        let p = RetryPolicy::default();
        let seq: Vec<u64> = (0..5)
            .map(|n| delay(decide(&p, &server(), n, 0.5)))
            .collect();
        assert_eq!(seq, [500, 1000, 2000, 4000, 8000]);
        let p = RetryPolicy::Always {
            backoff: Backoff::default(),
        };
        assert_eq!(delay(decide(&p, &server(), 9, 0.5)), 10_000);
        // Jitter spreads ±10 % and never exceeds the ceiling.
        assert_eq!(delay(decide(&p, &server(), 0, 0.0)), 450);
        assert_eq!(delay(decide(&p, &server(), 0, 1.0)), 550);
        assert_eq!(delay(decide(&p, &server(), 20, 1.0)), 10_000);
    }

    #[test]
    fn unretryable_codes_and_spent_budgets_delegate() {
        let p = RetryPolicy::default();
        let auth = LlmFailure::new(FailureCode::Auth, "no");
        assert_eq!(decide(&p, &auth, 0, 0.5), RetryDecision::Delegate);
        assert_eq!(decide(&p, &server(), 5, 0.5), RetryDecision::Delegate);
        assert!(matches!(
            decide(&p, &server(), 4, 0.5),
            RetryDecision::Retry { attempt: 5, .. }
        ));
        let always = RetryPolicy::Always {
            backoff: Backoff::default(),
        };
        assert!(matches!(
            decide(&always, &auth, 100, 0.5),
            RetryDecision::Retry { attempt: 101, .. }
        ));
    }

    #[test]
    fn retry_after_within_the_cap_is_used_exactly_and_beyond_it_normal_delegates() {
        let mut f = LlmFailure::new(FailureCode::RateLimit, "slow down");
        f.provider_retry_after_ms = Some(7_250);
        let p = RetryPolicy::default();
        assert_eq!(delay(decide(&p, &f, 0, 0.99)), 7_250);
        f.provider_retry_after_ms = Some(60_000);
        assert_eq!(decide(&p, &f, 0, 0.5), RetryDecision::Delegate);
        let always = RetryPolicy::Always {
            backoff: Backoff::default(),
        };
        assert_eq!(delay(decide(&always, &f, 0, 0.5)), 500);
        f.provider_retry_after_ms = Some(0);
        assert_eq!(delay(decide(&p, &f, 1, 0.5)), 1000);
    }
}
