//! `[store]`: where sessions are kept, the JSONL files under `$DSH_HOME/sessions` (the
//! default) or a PostgreSQL database shared by many machines.
//!
//! ```toml
//! [store]
//! kind = "postgres"
//! url = "postgres://dsh@db.example/sessions"
//! password_env = "DSH_STORE_PASSWORD"
//! ```
//!
//! `DSH_STORE_URL` selects PostgreSQL and overrides the file's `url` (and, since it may carry a
//! password, is treated as a secret like the provider keys). A password is never read from the
//! file: a `url` there that holds one is refused, and `password_env` names the variable it is
//! read from when the store opens. Every mistake is reported at its `file:line:column`.

use std::path::Path;

use serde::Deserialize;

use super::{Source, Sourced, located};
use crate::error::{ConfigError, config_error};

/// The variable that selects PostgreSQL and names its url.
pub const STORE_URL_ENV: &str = "DSH_STORE_URL";

/// The `[store]` table as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileStore {
    kind: Option<toml::Spanned<String>>,
    url: Option<toml::Spanned<String>>,
    password_env: Option<toml::Spanned<String>>,
}

/// Which session store dsh uses. Its `Debug` never shows the url (it may hold a password).
#[derive(Clone, Default, PartialEq, Eq)]
pub enum StoreSettings {
    /// JSONL files under `$DSH_HOME/sessions`.
    #[default]
    Jsonl,
    /// A PostgreSQL database.
    Postgres {
        /// The connection url (from the file, or `DSH_STORE_URL`).
        url: Sourced<String>,
        /// The variable holding the password, if one is needed.
        password_env: Option<String>,
    },
}

impl std::fmt::Debug for StoreSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Jsonl => f.write_str("Jsonl"),
            Self::Postgres { url, password_env } => f
                .debug_struct("Postgres")
                .field("url", &"<redacted>")
                .field("url_source", &url.source)
                .field("password_env", password_env)
                .finish(),
        }
    }
}

impl StoreSettings {
    /// The variable holding the database password, hidden from commands like provider keys.
    pub fn password_env(&self) -> Option<&str> {
        match self {
            Self::Postgres {
                password_env: Some(var),
                ..
            } => Some(var),
            _ => None,
        }
    }
}

/// The store selected by the file's `[store]` table and the environment.
pub(super) fn resolve(
    env: &dyn Fn(&str) -> Option<String>,
    file: Option<toml::Spanned<FileStore>>,
    path: &Path,
    text: &str,
) -> Result<StoreSettings, ConfigError> {
    let env_url = env(STORE_URL_ENV);
    let Some(file) = file else {
        return Ok(match env_url {
            Some(url) => StoreSettings::Postgres {
                url: Sourced::new(url, Source::Env(STORE_URL_ENV)),
                password_env: None,
            },
            None => StoreSettings::Jsonl,
        });
    };
    let table_at = located(path, text, file.span().start);
    let file = file.into_inner();
    let fail = |at: String, reason: String| config_error!("invalid config file {at}: {reason}");
    let postgres = match &file.kind {
        None => file.url.is_some() || env_url.is_some(),
        Some(kind) => match kind.get_ref().as_str() {
            "jsonl" => false,
            "postgres" => true,
            other => {
                return Err(fail(
                    located(path, text, kind.span().start),
                    format!("store.kind: unknown store `{other}` (\"jsonl\" or \"postgres\")"),
                ));
            }
        },
    };
    if let Some(var) = &file.password_env
        && var.get_ref().trim().is_empty()
    {
        return Err(fail(
            located(path, text, var.span().start),
            "store.password_env: empty; name the variable holding the password".to_owned(),
        ));
    }
    if !postgres && env_url.is_none() {
        if let Some(url) = &file.url {
            return Err(fail(
                located(path, text, url.span().start),
                "store.url applies to kind = \"postgres\" only".to_owned(),
            ));
        }
        return Ok(StoreSettings::Jsonl);
    }
    if let Some(url) = &file.url {
        check_file_url(url.get_ref()).map_err(|reason| {
            fail(
                located(path, text, url.span().start),
                format!("store.url: {reason}"),
            )
        })?;
    }
    let url = match (env_url, file.url) {
        (Some(url), _) => Sourced::new(url, Source::Env(STORE_URL_ENV)),
        (None, Some(url)) => Sourced::new(url.into_inner(), Source::File),
        (None, None) => {
            return Err(fail(
                table_at,
                format!("store: kind = \"postgres\" needs `url` (or the {STORE_URL_ENV} variable)"),
            ));
        }
    };
    Ok(StoreSettings::Postgres {
        url,
        password_env: file.password_env.map(toml::Spanned::into_inner),
    })
}

impl super::Settings {
    /// Where sessions are kept, for `dsh config show`: the directory, or the database and
    /// where its url came from (never the password).
    pub fn store_description(&self) -> String {
        match &self.store {
            StoreSettings::Jsonl => self.sessions_root().display().to_string(),
            StoreSettings::Postgres { url, password_env } => {
                let at = dsh_store_postgres::PostgresConfig::from_url(&url.value)
                    .map_or_else(|_| "(invalid url)".to_owned(), |c| c.describe());
                let password = password_env
                    .as_ref()
                    .map(|var| format!(", password from {var}"))
                    .unwrap_or_default();
                format!("PostgreSQL {at} (url from {}{password})", url.source)
            }
        }
    }
}

/// A url in the config file must parse and must not hold a password (config files get
/// copied and shared). The reason never repeats the url.
fn check_file_url(url: &str) -> Result<(), String> {
    let config = dsh_store_postgres::PostgresConfig::from_url(url).map_err(|e| e.to_string())?;
    if config.has_password() {
        return Err(
            "holds a password; put it in a variable and name that with `password_env`".to_owned(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[derive(Debug, Deserialize)]
    struct Doc {
        store: Option<toml::Spanned<FileStore>>,
    }

    fn settings(text: &str, env: &[(&str, &str)]) -> Result<StoreSettings, ConfigError> {
        let doc: Doc = toml::from_str(text).unwrap();
        let lookup = |name: &str| {
            env.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        };
        resolve(&lookup, doc.store, Path::new("/h/config.toml"), text)
    }

    #[test]
    fn without_a_store_table_or_variable_sessions_stay_in_jsonl_files() {
        assert_eq!(settings("", &[]).unwrap(), StoreSettings::Jsonl);
        assert_eq!(
            settings("[store]\nkind = \"jsonl\"\n", &[]).unwrap(),
            StoreSettings::Jsonl
        );
    }

    #[test]
    fn the_store_url_variable_selects_postgres_and_overrides_the_file() {
        let StoreSettings::Postgres { url, password_env } = settings(
            "[store]\nkind = \"postgres\"\nurl = \"postgres://dsh@file/db\"\npassword_env = \"PW\"\n",
            &[(STORE_URL_ENV, "postgres://dsh:pw@env/db")],
        )
        .unwrap() else {
            panic!("postgres expected");
        };
        assert_eq!(url.value, "postgres://dsh:pw@env/db");
        assert_eq!(url.source, Source::Env(STORE_URL_ENV));
        assert_eq!(password_env.as_deref(), Some("PW"));
        assert!(matches!(
            settings("", &[(STORE_URL_ENV, "postgres://x@h/d")]).unwrap(),
            StoreSettings::Postgres { .. }
        ));
    }

    #[test]
    fn store_mistakes_are_reported_at_their_line_and_column() {
        let unknown = settings("[store]\nkind = \"mysql\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(unknown.contains("/h/config.toml:2:8"), "{unknown}");
        assert!(unknown.contains("unknown store `mysql`"), "{unknown}");
        let no_url = settings("\n[store]\nkind = \"postgres\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(no_url.contains("/h/config.toml:2:1"), "{no_url}");
        assert!(no_url.contains("needs `url`"), "{no_url}");
        let misplaced = settings("[store]\nkind = \"jsonl\"\nurl = \"postgres://h/d\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(misplaced.contains("/h/config.toml:3:7"), "{misplaced}");
        let empty = settings(
            "[store]\nkind = \"postgres\"\nurl = \"postgres://h/d\"\npassword_env = \"\"\n",
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(empty.contains("/h/config.toml:4:16"), "{empty}");
    }

    #[test]
    fn debug_output_never_shows_the_store_url() {
        let settings = settings("", &[(STORE_URL_ENV, "postgres://u:pw-secret@h/d")]).unwrap();
        let shown = format!("{settings:?}");
        assert!(!shown.contains("pw-secret"), "{shown}");
    }

    #[test]
    fn a_password_in_the_files_url_is_refused_without_repeating_it() {
        let err = settings(
            "[store]\nurl = \"postgres://dsh:hunter2-secret@db/s\"\n",
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("/h/config.toml:2:7"), "{err}");
        assert!(err.contains("password_env"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
        let bad = settings(
            "[store]\nurl = \"postgres://dsh:pw-secret@h:port/d\"\n",
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(!bad.contains("pw-secret"), "{bad}");
    }
}
