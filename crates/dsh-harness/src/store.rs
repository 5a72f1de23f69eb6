//! The session store every command uses: the JSONL files under `$DSH_HOME/sessions` or a
//! PostgreSQL database, as `[store]` and `DSH_STORE_URL` select (see `config::store`).
//!
//! Both implement [`Persistence`], which is what resume, listing, fork and the chat need; this
//! enum adds the few things the seam does not cover (mounting the writer plugin, reading a
//! session without repairing it, draining at exit, saying where sessions are) and keeps the
//! PostgreSQL-only commands (`--follow`, import, export) one match away.

use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;

use dsh_kernel::{Context, PluginHandle};
use dsh_session::persistence::SessionListing;
use dsh_session::{Persistence, PersistenceError, SessionId, SessionOrigin, StoredSession};
use dsh_store_jsonl::{JsonlPersistencePlugin, JsonlStore};
use dsh_store_postgres::{PostgresConfig, PostgresPersistencePlugin, PostgresStore};

use crate::config::Settings;
use crate::config::store::StoreSettings;
use crate::error::HarnessError;

/// Which sessions a listing keeps, by who started them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OriginFilter {
    /// Sessions a person started (not subagents).
    Top,
    /// Sessions subagents ran in.
    Subagent,
}

/// A session store of either kind.
#[derive(Clone, Debug)]
pub enum Store {
    /// JSONL files under `$DSH_HOME/sessions`.
    Jsonl(Arc<JsonlStore>),
    /// A PostgreSQL database shared by many machines.
    Postgres(Arc<PostgresStore>),
}

impl Deref for Store {
    type Target = dyn Persistence;

    fn deref(&self) -> &Self::Target {
        match self {
            Self::Jsonl(store) => store.as_ref(),
            Self::Postgres(store) => store.as_ref(),
        }
    }
}

impl Store {
    /// The store `settings` select. Nothing is touched yet (see [`Store::check`]); the
    /// PostgreSQL password is read here, from dsh's private copy of the variable `password_env`
    /// names (it was moved out of the environment at start-up, see `secrets`).
    pub fn open(settings: &Settings) -> Result<Self, HarnessError> {
        match &settings.store {
            StoreSettings::Jsonl => Ok(Self::Jsonl(JsonlStore::new(settings.sessions_root()))),
            StoreSettings::Postgres { url, password_env } => {
                // The url's parse error never repeats the url (it may hold a password).
                let mut config = PostgresConfig::from_url(&url.value).map_err(|e| {
                    HarnessError::store(
                        format!("cannot use the session store (from {})", url.source),
                        e,
                    )
                })?;
                if let Some(var) = password_env {
                    let password = crate::env::process_env(var).ok_or_else(|| {
                        HarnessError::store_message(format!(
                            "the session store's password variable {var} (store.password_env) is \
                             not set"
                        ))
                    })?;
                    config = config.with_password(password);
                }
                Ok(Self::Postgres(PostgresStore::new(config)))
            }
        }
    }

    /// Fails, saying why, when sessions cannot be stored: the directory is not writable, or
    /// the database cannot be reached or migrated. Checked before anything runs, so the first
    /// turn never fails after the provider was already asked.
    pub async fn check(&self) -> Result<(), HarnessError> {
        match self {
            Self::Jsonl(store) => crate::storage::check_writable(store.root()),
            Self::Postgres(store) => store.check().await.map_err(|e| {
                HarnessError::store(format!("cannot store sessions in {}", self.describe()), e)
            }),
        }
    }

    /// Mounts the store's writer plugin on `ctx` (which also provides it as `dyn Persistence`).
    pub async fn mount(&self, ctx: &Context) -> Result<PluginHandle, HarnessError> {
        let handle = match self {
            Self::Jsonl(store) => ctx.plugin(JsonlPersistencePlugin::new(store.clone())).await,
            Self::Postgres(store) => {
                ctx.plugin(PostgresPersistencePlugin::new(store.clone()))
                    .await
            }
        };
        handle.map_err(|e| HarnessError::start("mount session persistence", e))
    }

    /// A stored session as it is, without repairing it or taking it from its writer, so a
    /// session running elsewhere can be shown.
    pub async fn read(&self, id: &SessionId) -> Result<StoredSession, PersistenceError> {
        match self {
            Self::Jsonl(store) => store.read(id).await,
            Self::Postgres(store) => store.read(id).await,
        }
    }

    /// Stops admission and drains every session writer; returns the first failure.
    pub async fn close(&self) -> Result<(), PersistenceError> {
        match self {
            Self::Jsonl(store) => store.close().await,
            Self::Postgres(store) => store.close().await,
        }
    }

    /// Where sessions are: the directory, or the database (never its password).
    pub fn describe(&self) -> String {
        match self {
            Self::Jsonl(store) => store.root().display().to_string(),
            Self::Postgres(store) => format!("the PostgreSQL database {}", store.describe()),
        }
    }

    /// Listing rows of the sessions started in `cwd` (when given) with `origin` (when given):
    /// filtered by the database for PostgreSQL, here for the files. A directory that exists
    /// here is compared canonicalized; one that does not (another machine's) as written.
    pub async fn listings_where(
        &self,
        cwd: Option<&Path>,
        origin: Option<OriginFilter>,
    ) -> Result<Vec<SessionListing>, PersistenceError> {
        let cwd = cwd.map(|dir| dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf()));
        match self {
            Self::Postgres(store) => {
                let origin = origin.map(|o| match o {
                    OriginFilter::Top => "",
                    OriginFilter::Subagent => "subagent",
                });
                let cwd = cwd.as_ref().map(|dir| dir.to_string_lossy().into_owned());
                store.listings_where(cwd.as_deref(), origin).await
            }
            Self::Jsonl(store) => {
                let mut listings = store.listings().await?;
                listings.retain(|l| {
                    let subagent = l.header.origin == Some(SessionOrigin::Subagent);
                    let origin_ok = match origin {
                        None => true,
                        Some(OriginFilter::Top) => !subagent,
                        Some(OriginFilter::Subagent) => subagent,
                    };
                    let cwd_ok = cwd.as_deref().is_none_or(|want| {
                        l.header
                            .cwd
                            .as_deref()
                            .is_some_and(|dir| crate::workspace::same_dir(dir, want))
                    });
                    origin_ok && cwd_ok
                });
                Ok(listings)
            }
        }
    }

    /// The stored session `reference` names: that exact id, else the only one whose id
    /// starts with it; a reference matching nothing is passed on verbatim, so the store's own
    /// error says what is wrong with it.
    pub async fn resolve(&self, reference: &str) -> Result<SessionId, HarnessError> {
        crate::session_ref::resolve(self, reference).await
    }

    /// The PostgreSQL store, or an error saying that `what` needs one.
    pub fn postgres(&self, what: &str) -> Result<&Arc<PostgresStore>, HarnessError> {
        match self {
            Self::Postgres(store) => Ok(store),
            Self::Jsonl(_) => Err(HarnessError::store_message(format!(
                "{what} needs the PostgreSQL session store: set [store] kind = \"postgres\" and \
                 url in config.toml, or DSH_STORE_URL"
            ))),
        }
    }
}
