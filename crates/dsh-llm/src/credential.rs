//! Helpers every HTTP adapter needs: credential hygiene and attribution.

use dsh_session::{FailureCode, LlmFailure};

/// The `User-Agent` every provider request carries, so providers can attribute traffic.
pub const USER_AGENT: &str = concat!("dsh/", env!("CARGO_PKG_VERSION"));

/// Checks and trims an API key read from configuration or the environment.
///
/// Keys are pasted by hand and often carry a trailing newline or a stray space; a trimmed key
/// is accepted, but a key that is empty or contains spaces or non-printable characters would
/// only produce a confusing `AUTH` error (or an invalid header) later, so it fails now with
/// `INVALID_CREDENTIAL`. `source` names where the key came from (for example an environment
/// variable); the key itself never appears in the message.
pub fn normalize_api_key(raw: &str, source: &str) -> Result<String, LlmFailure> {
    let key = raw.trim();
    if key.is_empty() {
        return Err(LlmFailure::new(
            FailureCode::InvalidCredential,
            format!("the API key from {source} is empty"),
        ));
    }
    if !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(LlmFailure::new(
            FailureCode::InvalidCredential,
            format!(
                "the API key from {source} contains spaces or non-printable characters; \
                 check it was copied whole"
            ),
        ));
    }
    Ok(key.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_trimmed_and_malformed_keys_rejected_without_echo() {
        assert_eq!(normalize_api_key(" sk-1\n", "ENV").unwrap(), "sk-1");
        for bad in ["", "  ", "sk 1", "sk-\u{7}x", "sk-é"] {
            let f = normalize_api_key(bad, "ENV").unwrap_err();
            assert_eq!(f.code, FailureCode::InvalidCredential);
            if !bad.trim().is_empty() {
                assert!(!f.message.contains(bad.trim()), "{}", f.message);
            }
        }
    }
}
