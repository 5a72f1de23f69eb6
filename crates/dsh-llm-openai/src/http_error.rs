//! Turning chat-completions and Responses error objects into failures. The codes and the
//! cleaned-up wording come from `dsh-llm-http`, shared with every other route.

use std::time::SystemTime;

use dsh_llm::LlmFailure;
use dsh_llm_http::{classify_failure, readable_error, retry_after_ms};
use reqwest::header::HeaderMap;

use crate::wire::{ErrorBody, ErrorEnvelope};

/// A failure from a parsed `{error: {...}}` object.
pub(crate) fn failure_from_body(status: Option<u16>, error: ErrorBody) -> LlmFailure {
    let code_text = match &error.code {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    let code_text = readable_error(&code_text);
    let message = readable_error(&error.message.unwrap_or_default());
    let kind = readable_error(&error.kind.unwrap_or_default());
    let code = classify_failure(status, &format!("{message} {kind} {code_text}"));
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
            let excerpt = readable_error(&String::from_utf8_lossy(body));
            let mut f = LlmFailure::new(classify_failure(Some(status), &excerpt), excerpt);
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
