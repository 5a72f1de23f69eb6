//! The token every request must carry.
//!
//! Anyone who can reach the port could otherwise drive the agent (run commands, read files):
//! other users of the machine on loopback, every host of the network on a wider bind, and web
//! pages the person visits, through their browser. A token fresh per start, printed once in
//! the URL the person opens, shuts all three out; the browser then keeps it in an `HttpOnly`
//! cookie (see [`crate::guard`]). It is compared in constant time and never written to a log:
//! its `Debug` form is redacted.

use std::fmt;

use rand::RngCore as _;
use subtle::ConstantTimeEq as _;

use crate::WebError;

/// Bytes of randomness in a generated token (256 bits).
const TOKEN_BYTES: usize = 32;

/// The shortest token accepted from the environment: shorter ones are guessable over the
/// network in a long afternoon.
pub const MIN_TOKEN_CHARS: usize = 16;

/// A secret that grants the use of one `dsh web` server.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// A fresh random token: 32 bytes from the operating system's generator, as hex.
    pub fn generate() -> Token {
        let mut bytes = [0u8; TOKEN_BYTES];
        rand::rng().fill_bytes(&mut bytes);
        Token(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// A token given by the person (`DSH_WEB_TOKEN`, so scripts know it in advance). It must
    /// be at least [`MIN_TOKEN_CHARS`] characters of `[A-Za-z0-9._~-]`, so it travels in a
    /// URL and a cookie without escaping.
    pub fn given(value: &str) -> Result<Token, WebError> {
        if value.chars().count() < MIN_TOKEN_CHARS {
            return Err(WebError::Token(format!(
                "it must be at least {MIN_TOKEN_CHARS} characters long"
            )));
        }
        if let Some(bad) = value
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || "._~-".contains(*c)))
        {
            return Err(WebError::Token(format!(
                "it may only hold letters, digits and `._~-`, not {bad:?}"
            )));
        }
        Ok(Token(value.to_owned()))
    }

    /// The token's text, for the URL printed to the person and for clients.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `candidate` is this token, in time independent of where they differ.
    pub fn matches(&self, candidate: &str) -> bool {
        self.0.as_bytes().ct_eq(candidate.as_bytes()).into()
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn generated_tokens_are_long_fresh_and_url_safe() {
        let a = Token::generate();
        let b = Token::generate();
        assert_ne!(a, b);
        assert_eq!(a.expose().len(), 64);
        assert!(Token::given(a.expose()).is_ok());
    }

    #[test]
    fn a_given_token_must_be_long_and_url_safe_and_matches_only_itself() {
        assert!(Token::given("short").is_err());
        assert!(Token::given("has space in the middle").is_err());
        assert!(Token::given("semi;colon-but-long-enough").is_err());
        let t = Token::given("fixed-token-for-scripts").unwrap();
        assert!(t.matches("fixed-token-for-scripts"));
        assert!(!t.matches("fixed-token-for-script"));
        assert!(!t.matches(""));
    }

    #[test]
    fn the_debug_form_never_shows_the_token() {
        let t = Token::given("fixed-token-for-scripts").unwrap();
        assert!(!format!("{t:?}").contains("fixed"));
    }
}
