//! Preparing requests: the endpoint URL, the HTTP client and the key header, with the checks
//! that keep a key out of URLs, redirects and `Debug` output.

use dsh_llm::{FailureCode, LlmFailure};
use reqwest::header::HeaderValue;

use crate::secret::Secret;

/// `{base_url}{path}` for a route, refusing a base URL that is not an absolute http(s) URL or
/// that carries credentials, a query or a fragment: the endpoint is quoted in every transport
/// failure, where a key must never appear, and a query would swallow the path.
pub fn endpoint_url(route: &str, base_url: &str, path: &str) -> Result<String, dsh_llm::LlmError> {
    let base = base_url.trim().trim_end_matches('/');
    let invalid = |why: String| {
        dsh_llm::LlmError::new(
            FailureCode::InvalidRequest,
            format!("the base URL of route `{route}` {why}"),
        )
    };
    let url = reqwest::Url::parse(base).map_err(|e| {
        if base.contains('@') {
            invalid(format!("is invalid: {e}"))
        } else {
            invalid(format!("`{base}` is invalid: {e}"))
        }
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid("must be an http(s) URL".into()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid(
            "must not carry credentials; configure the API key instead".into(),
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(invalid("must not have a query or a fragment".into()));
    }
    Ok(format!("{base}{path}"))
}

/// An HTTP client for streaming: dsh's user agent, no redirects (a redirect could carry the
/// key to another host).
pub fn http_client() -> Result<reqwest::Client, dsh_llm::LlmError> {
    reqwest::Client::builder()
        .user_agent(dsh_llm::USER_AGENT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| {
            dsh_llm::LlmError::new(
                FailureCode::Transport,
                format!("the HTTP client could not be built: {e}"),
            )
        })
}

/// `key` as a header value after `prefix` (`"Bearer "`, or `""` for `x-api-key`), marked
/// sensitive so no `Debug` output of the request shows it. A key that cannot be a header value
/// is an invalid credential, refused before any I/O.
pub fn key_header(prefix: &str, key: &Secret) -> Result<HeaderValue, LlmFailure> {
    let mut value = HeaderValue::from_str(&format!("{prefix}{}", key.expose())).map_err(|_| {
        LlmFailure::new(
            FailureCode::InvalidCredential,
            "the API key cannot be sent in an HTTP header",
        )
    })?;
    value.set_sensitive(true);
    Ok(value)
}
