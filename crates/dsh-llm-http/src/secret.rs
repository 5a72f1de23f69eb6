//! API keys: held opaquely so they never reach a log, a Debug dump or an error message.

use std::fmt;

use dsh_llm::{FailureCode, LlmFailure, normalize_api_key};

/// A secret string. Its `Debug` prints `***` and it has no `Display`, so formatting a config
/// or an adapter can never leak it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// Where a route's API key comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApiKeySource {
    /// Read this environment variable on every request, so a rotated key is picked up and a
    /// key set after start-up works without re-registering the route.
    Env(String),
    /// A fixed key.
    Value(Secret),
    /// A key read once from the environment variable `env` by a front end that then removed
    /// it from its own environment (so the commands it runs cannot find it there). Errors
    /// still name the variable, as for [`ApiKeySource::Env`].
    Captured {
        /// The variable the key came from.
        env: String,
        /// The key.
        key: Secret,
    },
    /// No key configured. Requests fail `MISSING_CREDENTIAL`, telling the user to set `env`.
    Missing {
        /// The environment variable the user should set.
        env: String,
    },
    /// The server needs no key (local servers); no `authorization` header is sent.
    NotRequired,
}

impl ApiKeySource {
    /// A fixed key.
    pub fn value(key: impl Into<String>) -> Self {
        Self::Value(Secret::new(key))
    }

    /// A key taken from the variable `env` (see [`ApiKeySource::Captured`]).
    pub fn captured(env: impl Into<String>, key: impl Into<String>) -> Self {
        Self::Captured {
            env: env.into(),
            key: Secret::new(key),
        }
    }

    /// Resolves the key for one request: `Ok(None)` when none is needed.
    pub fn resolve(&self) -> Result<Option<Secret>, LlmFailure> {
        let (raw, source, env) = match self {
            Self::NotRequired => return Ok(None),
            Self::Missing { env } => return Err(missing(env)),
            Self::Env(env) => match std::env::var(env) {
                Ok(raw) => (raw, format!("environment variable {env}"), env.as_str()),
                Err(_) => return Err(missing(env)),
            },
            Self::Captured { env, key } => (
                key.expose().to_owned(),
                format!("environment variable {env}"),
                env.as_str(),
            ),
            Self::Value(secret) => (
                secret.expose().to_owned(),
                "the adapter configuration".to_owned(),
                "",
            ),
        };
        if raw.trim().is_empty() && !env.is_empty() {
            return Err(missing(env));
        }
        normalize_api_key(&raw, &source).map(|k| Some(Secret::new(k)))
    }
}

fn missing(env: &str) -> LlmFailure {
    LlmFailure::new(
        FailureCode::MissingCredential,
        format!("no API key is configured; set the {env} environment variable"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_debug_print() {
        let s = ApiKeySource::value("sk-very-secret");
        assert!(!format!("{s:?}").contains("sk-very-secret"));
        assert!(!format!("{:#?}", Secret::new("sk-very-secret")).contains("secret"));
    }

    #[test]
    fn missing_and_malformed_keys_fail_with_distinct_codes() {
        let f = ApiKeySource::Missing {
            env: "DEEPSEEK_API_KEY".into(),
        }
        .resolve()
        .unwrap_err();
        assert_eq!(f.code, FailureCode::MissingCredential);
        assert!(f.message.contains("DEEPSEEK_API_KEY"));
        let f = ApiKeySource::value("sk bad").resolve().unwrap_err();
        assert_eq!(f.code, FailureCode::InvalidCredential);
        assert!(!f.message.contains("sk bad"));
        let f = ApiKeySource::captured("MY_KEY", " ").resolve().unwrap_err();
        assert_eq!(f.code, FailureCode::MissingCredential);
        assert!(f.message.contains("MY_KEY"));
        let f = ApiKeySource::captured("MY_KEY", "sk bad")
            .resolve()
            .unwrap_err();
        assert!(f.message.contains("MY_KEY") && !f.message.contains("sk bad"));
        let k = ApiKeySource::value(" sk-ok\n").resolve().unwrap().unwrap();
        assert_eq!(k.expose(), "sk-ok");
        assert_eq!(ApiKeySource::NotRequired.resolve().unwrap(), None);
    }
}
