//! Retry policies and their validation.

use std::time::Duration;

use dsh_session::FailureCode;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Exponential backoff parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "BackoffWire", into = "BackoffWire")]
pub struct Backoff {
    /// Delay before the first retry (before jitter).
    pub initial: Duration,
    /// Ceiling of every delay, jitter included.
    pub max: Duration,
    /// Relative jitter in `[0, 1]`: a delay `d` becomes `d · (1 − j + 2j·rand)`.
    pub jitter_ratio: f64,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(500),
            max: Duration::from_secs(10),
            jitter_ratio: 0.1,
        }
    }
}

/// Why a policy was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// A delay is zero.
    #[error("backoff delays must be positive")]
    NonPositiveDelay,
    /// The initial delay exceeds the ceiling.
    #[error("the initial backoff delay exceeds the maximum delay")]
    InitialAboveMax,
    /// The jitter ratio is outside `[0, 1]`.
    #[error("the jitter ratio must be within [0, 1]")]
    JitterOutOfRange,
    /// No code is retryable.
    #[error("a normal policy needs at least one retryable code")]
    NoRetryableCodes,
    /// A code is listed twice.
    #[error("retryable code {0} is listed twice")]
    DuplicateCode(String),
}

impl Backoff {
    /// Checks the parameters are usable.
    pub fn validate(&self) -> Result<(), PolicyError> {
        if self.initial.is_zero() || self.max.is_zero() {
            return Err(PolicyError::NonPositiveDelay);
        }
        if self.initial > self.max {
            return Err(PolicyError::InitialAboveMax);
        }
        if !(0.0..=1.0).contains(&self.jitter_ratio) {
            return Err(PolicyError::JitterOutOfRange);
        }
        Ok(())
    }
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct BackoffWire {
    #[serde(default = "default_initial_ms")]
    initial_delay_ms: u64,
    #[serde(default = "default_max_ms")]
    max_delay_ms: u64,
    #[serde(default = "default_jitter")]
    jitter_ratio: f64,
}

fn default_initial_ms() -> u64 {
    500
}
fn default_max_ms() -> u64 {
    10_000
}
fn default_jitter() -> f64 {
    0.1
}

impl TryFrom<BackoffWire> for Backoff {
    type Error = PolicyError;
    fn try_from(w: BackoffWire) -> Result<Self, PolicyError> {
        let b = Backoff {
            initial: Duration::from_millis(w.initial_delay_ms),
            max: Duration::from_millis(w.max_delay_ms),
            jitter_ratio: w.jitter_ratio,
        };
        b.validate()?;
        Ok(b)
    }
}

impl From<Backoff> for BackoffWire {
    fn from(b: Backoff) -> Self {
        Self {
            initial_delay_ms: millis(b.initial),
            max_delay_ms: millis(b.max),
            jitter_ratio: b.jitter_ratio,
        }
    }
}

pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// How a provider route's failed requests are retried.
///
/// Serialized as `{mode: "normal", maxRetries, retryableCodes, backoff}` or
/// `{mode: "always", backoff}`; unknown keys are rejected so a typo in configuration does not
/// silently become the default.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "PolicyWire", into = "PolicyWire")]
pub enum RetryPolicy {
    /// Retry transient failures a bounded number of times.
    Normal {
        /// Retries allowed per (turn, step, provider); the failure after the last one is
        /// terminal.
        max_retries: u32,
        /// Codes worth retrying.
        retryable: Vec<FailureCode>,
        /// Delay schedule.
        backoff: Backoff,
    },
    /// Retry every failure, without bound (for routes fronted by a flaky local server).
    Always {
        /// Delay schedule.
        backoff: Backoff,
    },
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self::Normal {
            max_retries: 5,
            retryable: default_retryable(),
            backoff: Backoff::default(),
        }
    }
}

fn default_retryable() -> Vec<FailureCode> {
    vec![
        FailureCode::EmptyResponse,
        FailureCode::RateLimit,
        FailureCode::Server,
        FailureCode::Timeout,
        FailureCode::Transport,
    ]
}

fn default_max_retries() -> u32 {
    5
}

impl RetryPolicy {
    /// The delay schedule.
    pub fn backoff(&self) -> &Backoff {
        match self {
            Self::Normal { backoff, .. } | Self::Always { backoff } => backoff,
        }
    }

    /// Checks the policy is usable: valid backoff, and for `normal` a non-empty list of
    /// distinct codes.
    pub fn validate(&self) -> Result<(), PolicyError> {
        self.backoff().validate()?;
        if let Self::Normal { retryable, .. } = self {
            if retryable.is_empty() {
                return Err(PolicyError::NoRetryableCodes);
            }
            for (i, code) in retryable.iter().enumerate() {
                if retryable[..i].contains(code) {
                    return Err(PolicyError::DuplicateCode(code.to_string()));
                }
            }
        }
        Ok(())
    }

    /// Canonical JSON of every behaviour field (keys sorted, codes sorted).
    ///
    /// The retry budget is keyed by it: after a policy change (settings reload, a different
    /// route) the count starts again instead of inheriting an unrelated budget.
    pub fn policy_key(&self) -> String {
        let b = self.backoff();
        // Keys are written in sorted order; `preserve_order` keeps insertion order.
        let backoff = json!({
            "initialDelayMs": millis(b.initial),
            "jitterRatio": b.jitter_ratio,
            "maxDelayMs": millis(b.max),
        });
        let value = match self {
            Self::Normal {
                max_retries,
                retryable,
                ..
            } => {
                let mut codes: Vec<String> = retryable.iter().map(|c| c.to_string()).collect();
                codes.sort();
                json!({
                    "backoff": backoff,
                    "maxRetries": max_retries,
                    "mode": "normal",
                    "retryableCodes": codes,
                })
            }
            Self::Always { .. } => json!({"backoff": backoff, "mode": "always"}),
        };
        value.to_string()
    }
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "lowercase", deny_unknown_fields)]
enum PolicyWire {
    #[serde(rename_all = "camelCase")]
    Normal {
        #[serde(default = "default_max_retries")]
        max_retries: u32,
        #[serde(default = "default_retryable")]
        retryable_codes: Vec<FailureCode>,
        #[serde(default)]
        backoff: Backoff,
    },
    Always {
        #[serde(default)]
        backoff: Backoff,
    },
}

impl TryFrom<PolicyWire> for RetryPolicy {
    type Error = PolicyError;
    fn try_from(w: PolicyWire) -> Result<Self, PolicyError> {
        let p = match w {
            PolicyWire::Normal {
                max_retries,
                retryable_codes,
                backoff,
            } => RetryPolicy::Normal {
                max_retries,
                retryable: retryable_codes,
                backoff,
            },
            PolicyWire::Always { backoff } => RetryPolicy::Always { backoff },
        };
        p.validate()?;
        Ok(p)
    }
}

impl From<RetryPolicy> for PolicyWire {
    fn from(p: RetryPolicy) -> Self {
        match p {
            RetryPolicy::Normal {
                max_retries,
                retryable,
                backoff,
            } => PolicyWire::Normal {
                max_retries,
                retryable_codes: retryable,
                backoff,
            },
            RetryPolicy::Always { backoff } => PolicyWire::Always { backoff },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_key_is_canonical_whatever_the_code_order() {
        let a = RetryPolicy::default();
        let RetryPolicy::Normal {
            max_retries,
            mut retryable,
            backoff,
        } = a.clone()
        else {
            unreachable!()
        };
        retryable.reverse();
        let b = RetryPolicy::Normal {
            max_retries,
            retryable,
            backoff,
        };
        assert_eq!(a.policy_key(), b.policy_key());
        assert_eq!(
            a.policy_key(),
            r#"{"backoff":{"initialDelayMs":500,"jitterRatio":0.1,"maxDelayMs":10000},"maxRetries":5,"mode":"normal","retryableCodes":["EMPTY_RESPONSE","RATE_LIMIT","SERVER","TIMEOUT","TRANSPORT"]}"#
        );
        assert_ne!(
            a.policy_key(),
            RetryPolicy::Always {
                backoff: Backoff::default()
            }
            .policy_key()
        );
    }

    #[test]
    fn invalid_policies_are_rejected_on_parse() {
        for bad in [
            r#"{"mode":"normal","retryableCodes":[]}"#,
            r#"{"mode":"normal","retryableCodes":["SERVER","SERVER"]}"#,
            r#"{"mode":"always","backoff":{"initialDelayMs":0}}"#,
            r#"{"mode":"always","backoff":{"initialDelayMs":20000,"maxDelayMs":10000}}"#,
            r#"{"mode":"always","backoff":{"jitterRatio":1.5}}"#,
            r#"{"mode":"normal","maxRetrys":3}"#,
            r#"{"mode":"always","backoff":{"initialDelay":3}}"#,
            r#"{"mode":"sometimes"}"#,
        ] {
            assert!(
                serde_json::from_str::<RetryPolicy>(bad).is_err(),
                "accepted {bad}"
            );
        }
    }

    #[test]
    fn policy_round_trips_and_defaults_fill_missing_fields() {
        let p: RetryPolicy = serde_json::from_str(r#"{"mode":"normal"}"#).unwrap();
        assert_eq!(p, RetryPolicy::default());
        let text = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<RetryPolicy>(&text).unwrap(), p);
    }
}
