//! Classifying provider errors into normalized failure codes.

use std::time::{Duration, SystemTime};

use dsh_llm::{FailureCode, LlmFailure};
use reqwest::header::HeaderMap;

use crate::wire::{ErrorBody, ErrorEnvelope};

const QUOTA_WORDING: &[&str] = &[
    "insufficient balance",
    "insufficient_balance",
    "insufficient quota",
    "insufficient_quota",
    "insufficient credits",
    "insufficient credit",
    "quota exceeded",
    "exceeded your current quota",
    "out of credits",
    "credit balance is too low",
];

const CONTEXT_WORDING: &[&str] = &[
    "maximum context length",
    "context_length_exceeded",
    "context length",
    "too long",
    "exceeds context",
    "exceeds the context",
    "context window",
];

/// The failure code for an error with HTTP `status` (absent mid-stream) and `text` (message,
/// type and code of the provider's error, lower-cased by the caller or not).
pub(crate) fn classify(status: Option<u16>, text: &str) -> FailureCode {
    let text = text.to_ascii_lowercase();
    if QUOTA_WORDING.iter().any(|w| text.contains(w)) {
        return FailureCode::Quota;
    }
    match status {
        Some(401 | 403) => FailureCode::Auth,
        Some(429) => FailureCode::RateLimit,
        Some(413) => FailureCode::InvalidRequest,
        Some(400) if CONTEXT_WORDING.iter().any(|w| text.contains(w)) => {
            FailureCode::ContextWindowExceeded
        }
        Some(400) => FailureCode::InvalidRequest,
        Some(s) if s >= 500 => FailureCode::Server,
        Some(s) => FailureCode::Http(s),
        None if CONTEXT_WORDING.iter().any(|w| text.contains(w)) => {
            FailureCode::ContextWindowExceeded
        }
        None => FailureCode::Server,
    }
}

/// A failure from a parsed `{error: {...}}` object.
pub(crate) fn failure_from_body(status: Option<u16>, error: ErrorBody) -> LlmFailure {
    let code_text = match &error.code {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    let message = error.message.unwrap_or_default();
    let kind = error.kind.unwrap_or_default();
    let code = classify(status, &format!("{message} {kind} {code_text}"));
    let mut text = if message.is_empty() {
        "the provider reported an error".to_owned()
    } else {
        message
    };
    if !kind.is_empty() || !code_text.is_empty() {
        let detail: Vec<&str> = [kind.as_str(), code_text.as_str()]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect();
        text = format!("{text} ({})", detail.join(", "));
    }
    let mut failure = LlmFailure::new(code, text);
    failure.status = status;
    failure
}

/// The failure for a non-2xx response with `body`.
pub(crate) fn failure_from_response(
    route: &str,
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
) -> LlmFailure {
    let mut failure = match serde_json::from_slice::<ErrorEnvelope>(body) {
        Ok(envelope) => failure_from_body(Some(status), envelope.error),
        Err(_) => {
            let text = String::from_utf8_lossy(body);
            let excerpt: String = text.trim().chars().take(500).collect();
            let mut f = LlmFailure::new(classify(Some(status), &excerpt), excerpt);
            f.status = Some(status);
            f
        }
    };
    failure.message = format!("{route}: HTTP {status}: {}", failure.message);
    failure.provider_retry_after_ms = retry_after_ms(headers, SystemTime::now());
    failure.request_id = ["x-request-id", "x-deepseek-request-id"]
        .iter()
        .find_map(|h| headers.get(*h)?.to_str().ok())
        .map(str::to_owned);
    failure
}

/// `Retry-After` in milliseconds: delta-seconds or an HTTP date, positive only.
pub(crate) fn retry_after_ms(headers: &HeaderMap, now: SystemTime) -> Option<u64> {
    let value = headers.get("retry-after")?.to_str().ok()?.trim();
    let delay = match value.parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs > 0.0 => Duration::from_secs_f64(secs.min(1e9)),
        Ok(_) => return None,
        Err(_) => httpdate::parse_http_date(value)
            .ok()?
            .duration_since(now)
            .ok()?,
    };
    let ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
    (ms > 0).then_some(ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn status_and_wording_map_to_codes() {
        let cases: &[(Option<u16>, &str, FailureCode)] = &[
            (Some(401), "bad key", FailureCode::Auth),
            (Some(403), "forbidden", FailureCode::Auth),
            (Some(402), "Insufficient Balance", FailureCode::Quota),
            (
                Some(429),
                "You exceeded your current quota",
                FailureCode::Quota,
            ),
            (Some(429), "slow down", FailureCode::RateLimit),
            (Some(413), "payload", FailureCode::InvalidRequest),
            (
                Some(400),
                "This model's maximum context length is 65536 tokens",
                FailureCode::ContextWindowExceeded,
            ),
            (Some(400), "bad field", FailureCode::InvalidRequest),
            (Some(503), "overloaded", FailureCode::Server),
            (Some(418), "teapot", FailureCode::Http(418)),
        ];
        for (status, text, code) in cases {
            assert_eq!(&classify(*status, text), code, "{status:?} {text}");
        }
    }

    #[test]
    fn retry_after_accepts_seconds_and_http_dates_and_ignores_the_rest() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after_ms(&h, now), Some(2000));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        h.insert("retry-after", HeaderValue::from_str(&later).unwrap());
        assert_eq!(retry_after_ms(&h, now), Some(30_000));
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(30));
        h.insert("retry-after", HeaderValue::from_str(&earlier).unwrap());
        assert_eq!(retry_after_ms(&h, now), None);
        for bad in ["0", "-3", "soon"] {
            h.insert("retry-after", HeaderValue::from_static(bad));
            assert_eq!(retry_after_ms(&h, now), None, "{bad}");
        }
    }
}
