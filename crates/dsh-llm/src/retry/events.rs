//! The durable records of a retry, as they appear in the session log.

use dsh_session::LlmFailure;
use serde::{Deserialize, Serialize};

/// Which policy mode made a retry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RetryMode {
    /// Bounded retries of transient codes.
    Normal,
    /// Unbounded retries of every failure.
    Always,
}

/// `llm/retry`: a failure was judged retryable and a backoff begins.
///
/// Written before the sleep so the budget survives a crash during the backoff; the loop's
/// retry log answers "how many retries so far" from these records.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LlmRetry {
    /// Stable across one sequence of retries of the same request.
    pub retry_id: String,
    /// Turn number.
    pub turn: u64,
    /// Step number within the turn.
    pub step: u64,
    /// Provider route that failed.
    pub provider: String,
    /// Policy mode.
    pub mode: RetryMode,
    /// [`super::RetryPolicy::policy_key`] of the deciding policy.
    pub policy_key: String,
    /// 1-based retry number.
    pub retry: u32,
    /// The budget (normal mode only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
    /// Backoff before the retry.
    pub delay_ms: u64,
    /// The failure being retried.
    pub failure: LlmFailure,
}

impl LlmRetry {
    /// The session event type name.
    pub const TYPE: &'static str = "llm/retry";

    /// Whether this record belongs to the retry sequence of (turn, step, provider, policy).
    pub fn matches(&self, turn: u64, step: u64, provider: &str, policy_key: &str) -> bool {
        self.turn == turn
            && self.step == step
            && self.provider == provider
            && self.policy_key == policy_key
    }
}

/// `llm/retry-started`: the backoff elapsed and the request is being re-issued. Absent when
/// the turn was cancelled during the backoff.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LlmRetryStarted {
    /// The sequence's retry id.
    pub retry_id: String,
    /// Turn number.
    pub turn: u64,
    /// Step number.
    pub step: u64,
    /// 1-based retry number.
    pub retry: u32,
}

impl LlmRetryStarted {
    /// The session event type name.
    pub const TYPE: &'static str = "llm/retry-started";
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_session::FailureCode;
    use serde_json::json;

    #[test]
    fn retry_records_use_reference_field_names() {
        let r = LlmRetry {
            retry_id: "r1".into(),
            turn: 1,
            step: 2,
            provider: "deepseek".into(),
            mode: RetryMode::Normal,
            policy_key: "k".into(),
            retry: 1,
            max_retries: Some(5),
            delay_ms: 500,
            failure: LlmFailure::new(FailureCode::Server, "x"),
        };
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"retryId": "r1", "turn": 1, "step": 2, "provider": "deepseek", "mode": "normal",
                   "policyKey": "k", "retry": 1, "maxRetries": 5, "delayMs": 500,
                   "failure": {"message": "x", "code": "SERVER"}})
        );
        let s = LlmRetryStarted {
            retry_id: "r1".into(),
            turn: 1,
            step: 2,
            retry: 1,
        };
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            json!({"retryId": "r1", "turn": 1, "step": 2, "retry": 1})
        );
    }
}
