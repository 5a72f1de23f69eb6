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

use anyhow::{Context as _, anyhow};
use dsh_kernel::{Context, PluginHandle};
use dsh_session::persistence::SessionListing;
use dsh_session::{Persistence, PersistenceError, SessionId, SessionOrigin, StoredSession};
use dsh_store_jsonl::{JsonlPersistencePlugin, JsonlStore};
use dsh_store_postgres::{PostgresConfig, PostgresPersistencePlugin, PostgresStore};

use crate::cli::OriginFilter;
use crate::config::Settings;
use crate::config::store::StoreSettings;

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
    pub fn open(settings: &Settings) -> anyhow::Result<Self> {
        match &settings.store {
            StoreSettings::Jsonl => Ok(Self::Jsonl(JsonlStore::new(settings.sessions_root()))),
            StoreSettings::Postgres { url, password_env } => {
                // The url's parse error never repeats the url (it may hold a password).
                let mut config = PostgresConfig::from_url(&url.value).with_context(|| {
                    format!("cannot use the session store (from {})", url.source)
                })?;
                if let Some(var) = password_env {
                    let password = crate::config::process_env(var).ok_or_else(|| {
                        anyhow!(
                            "the session store's password variable {var} (store.password_env) is \
                             not set"
                        )
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
    pub async fn check(&self) -> anyhow::Result<()> {
        match self {
            Self::Jsonl(store) => crate::storage::check_writable(store.root()),
            Self::Postgres(store) => store
                .check()
                .await
                .with_context(|| format!("cannot store sessions in {}", self.describe())),
        }
    }

    /// Mounts the store's writer plugin on `ctx` (which also provides it as `dyn Persistence`).
    pub async fn mount(&self, ctx: &Context) -> anyhow::Result<PluginHandle> {
        let handle = match self {
            Self::Jsonl(store) => ctx.plugin(JsonlPersistencePlugin::new(store.clone())).await,
            Self::Postgres(store) => {
                ctx.plugin(PostgresPersistencePlugin::new(store.clone()))
                    .await
            }
        };
        handle.context("cannot mount session persistence")
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
                            .is_some_and(|dir| crate::same_dir(dir, want))
                    });
                    origin_ok && cwd_ok
                });
                Ok(listings)
            }
        }
    }

    /// The PostgreSQL store, or an error saying that `what` needs one.
    pub fn postgres(&self, what: &str) -> anyhow::Result<&Arc<PostgresStore>> {
        match self {
            Self::Postgres(store) => Ok(store),
            Self::Jsonl(_) => Err(anyhow!(
                "{what} needs the PostgreSQL session store: set [store] kind = \"postgres\" and \
                 url in config.toml, or DSH_STORE_URL"
            )),
        }
    }
}
