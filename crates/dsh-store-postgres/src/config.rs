//! Where the session database is, without ever holding the password in config or logs.

use std::str::FromStr;

/// Why a store configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The URL does not parse as a PostgreSQL connection string.
    #[error("invalid PostgreSQL store url: {reason}")]
    Url {
        /// The parser's reason (never includes the password: the url is not echoed).
        reason: String,
    },
    /// `password_env` names a variable that is not set.
    #[error("the store password variable {name} is not set")]
    MissingPassword {
        /// The variable's name.
        name: String,
    },
}

/// Connection settings of a [`crate::PostgresStore`].
///
/// Its `Debug` never shows the password (it shows only whether one is set).
#[derive(Clone)]
pub struct PostgresConfig {
    pub(crate) inner: tokio_postgres::Config,
}

impl std::fmt::Debug for PostgresConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresConfig")
            .field("hosts", &self.inner.get_hosts().len())
            .field("dbname", &self.inner.get_dbname())
            .field("user", &self.inner.get_user())
            .field("password", &self.inner.get_password().map(|_| "<redacted>"))
            .finish()
    }
}

impl PostgresConfig {
    /// Parses `url` (`postgres://user@host:port/db` or `key=value` form). A password in the url
    /// is accepted but discouraged: config files get shared; prefer [`Self::with_password`].
    pub fn from_url(url: &str) -> Result<Self, ConfigError> {
        let mut inner = tokio_postgres::Config::from_str(url).map_err(|e| ConfigError::Url {
            reason: e.to_string(),
        })?;
        // A lease must die with a writer that vanished without closing its socket (a machine
        // that lost power or network), not hours later.
        inner
            .keepalives(true)
            .keepalives_idle(std::time::Duration::from_secs(30))
            .keepalives_interval(std::time::Duration::from_secs(5))
            .keepalives_retries(3)
            .connect_timeout(std::time::Duration::from_secs(10));
        if inner.get_application_name().is_none() {
            inner.application_name("dsh");
        }
        Ok(Self { inner })
    }

    /// Sets the password (taken from the environment by the caller, never from a file).
    pub fn with_password(mut self, password: impl AsRef<[u8]>) -> Self {
        self.inner.password(password);
        self
    }

    /// Whether a password is set (in the url, or by [`Self::with_password`]): a config file's
    /// url must not hold one.
    pub fn has_password(&self) -> bool {
        self.inner.get_password().is_some()
    }

    /// `user@host:port/dbname`, for messages and `dsh config show`: never the password.
    pub fn describe(&self) -> String {
        let host = self
            .inner
            .get_hosts()
            .first()
            .map_or_else(String::new, |h| match h {
                tokio_postgres::config::Host::Tcp(name) => name.clone(),
                tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
            });
        let port = self
            .inner
            .get_ports()
            .first()
            .map_or_else(String::new, |p| format!(":{p}"));
        let user = self
            .inner
            .get_user()
            .map_or_else(String::new, |u| format!("{u}@"));
        let db = self.inner.get_dbname().unwrap_or_default();
        format!("{user}{host}{port}/{db}")
    }

    /// Reads the password from the environment variable `name`.
    pub fn with_password_from_env(self, name: &str) -> Result<Self, ConfigError> {
        let value = std::env::var_os(name).ok_or_else(|| ConfigError::MissingPassword {
            name: name.to_owned(),
        })?;
        Ok(self.with_password(value.as_encoded_bytes()))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn debug_output_never_shows_the_password() {
        let config = PostgresConfig::from_url("postgres://dsh:url-secret@db.example/sessions")
            .unwrap()
            .with_password("env-secret");
        let shown = format!("{config:?}");
        assert!(!shown.contains("secret"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
    }

    #[test]
    fn the_description_names_the_server_and_never_the_password() {
        let config =
            PostgresConfig::from_url("postgres://dsh:url-secret@db.example:6543/sessions").unwrap();
        assert!(config.has_password());
        assert_eq!(config.describe(), "dsh@db.example:6543/sessions");
        assert!(
            !PostgresConfig::from_url("postgres://dsh@h/d")
                .unwrap()
                .has_password()
        );
    }

    #[test]
    fn a_missing_password_variable_is_named() {
        let err = PostgresConfig::from_url("postgres://dsh@localhost/s")
            .unwrap()
            .with_password_from_env("DSH_TEST_NO_SUCH_PASSWORD_VAR")
            .unwrap_err();
        assert!(err.to_string().contains("DSH_TEST_NO_SUCH_PASSWORD_VAR"));
    }

    #[test]
    fn a_bad_url_is_refused_without_echoing_it() {
        let err =
            PostgresConfig::from_url("postgres://dsh:pw-secret@host:notaport/db").unwrap_err();
        assert!(!err.to_string().contains("pw-secret"), "{err}");
    }
}
