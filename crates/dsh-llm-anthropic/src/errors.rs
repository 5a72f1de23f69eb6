//! Classifying Messages API errors with the same codes as every other route.

use std::time::SystemTime;

use dsh_llm::{FailureCode, LlmFailure};
use dsh_llm_http::{classify_failure, readable_error, retry_after_ms};
use reqwest::header::HeaderMap;

use crate::wire::{ErrorBody, ErrorEnvelope};

/// The failure for an `error` object (mid-stream when `status` is `None`). Anthropic's types
/// map onto dsh's codes: `overloaded_error` (HTTP 529) is a retryable server failure,
/// `rate_limit_error` a rate limit, "prompt is too long" the context-window error.
pub(crate) fn failure_from_body(status: Option<u16>, error: &ErrorBody) -> LlmFailure {
    let kind = error.kind.as_deref().unwrap_or("");
    let message = error.message.as_deref().unwrap_or("");
    let code = match kind {
        "overloaded_error" | "api_error" => FailureCode::Server,
        "rate_limit_error" => FailureCode::RateLimit,
        "authentication_error" | "permission_error" => FailureCode::Auth,
        _ => classify_failure(status, &format!("{kind} {message}")),
    };
    let text = if message.is_empty() { kind } else { message };
    let mut failure = LlmFailure::new(code, readable_error(&format!("anthropic: {text}")));
    failure.status = status;
    failure
}

/// The failure for a non-2xx response.
pub(crate) fn failure_from_response(status: u16, headers: &HeaderMap, body: &[u8]) -> LlmFailure {
    let text = String::from_utf8_lossy(body);
    let mut failure = match serde_json::from_str::<ErrorEnvelope>(&text) {
        Ok(envelope) => failure_from_body(Some(status), &envelope.error),
        Err(_) => {
            let mut f = LlmFailure::new(
                classify_failure(Some(status), &text),
                readable_error(&format!("HTTP {status}: {text}")),
            );
            f.status = Some(status);
            f
        }
    };
    failure.provider_retry_after_ms = retry_after_ms(headers, SystemTime::now());
    failure.request_id = headers
        .get("request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    failure
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(kind: &str, message: &str) -> ErrorBody {
        ErrorBody {
            kind: Some(kind.into()),
            message: Some(message.into()),
        }
    }

    #[test]
    fn anthropic_error_types_map_onto_dsh_codes() {
        let cases = [
            (529, "overloaded_error", "Overloaded", FailureCode::Server),
            (429, "rate_limit_error", "slow down", FailureCode::RateLimit),
            (401, "authentication_error", "bad key", FailureCode::Auth),
            (
                400,
                "invalid_request_error",
                "prompt is too long: 210000 tokens > 200000 maximum",
                FailureCode::ContextWindowExceeded,
            ),
            (
                400,
                "invalid_request_error",
                "bad field",
                FailureCode::InvalidRequest,
            ),
            (500, "api_error", "oops", FailureCode::Server),
        ];
        for (status, kind, message, code) in cases {
            let f = failure_from_body(Some(status), &body(kind, message));
            assert_eq!(f.code, code, "{kind}: {message}");
            assert_eq!(f.status, Some(status));
        }
    }

    #[test]
    fn a_non_json_error_is_classified_by_status() {
        let f = failure_from_response(503, &HeaderMap::new(), b"<html><title>down</title></html>");
        assert_eq!(f.code, FailureCode::Server);
        assert!(f.message.contains("down"), "{}", f.message);
    }
}
