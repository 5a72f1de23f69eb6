//! Test support shared by the PostgreSQL store's tests: the throwaway cluster, and one harness
//! over both session stores so the conformance suite runs unchanged against JSONL files and
//! PostgreSQL.

#![allow(dead_code)] // Each test file uses a different subset.

pub mod cluster;
#[path = "../../../dsh-store-jsonl/tests/common/mod.rs"]
pub mod jsonl;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dsh_kernel::{Context, PluginHandle};
use dsh_session::*;
use dsh_store_jsonl::{JsonlPersistencePlugin, JsonlStore};
use dsh_store_postgres::{PostgresConfig, PostgresPersistencePlugin, PostgresStore};

/// Where a suite's sessions are stored: shared by every [`Mounted`] store made from it, as
/// several dsh processes share `~/.dsh` or one database.
pub enum Storage {
    Jsonl {
        _dir: tempfile::TempDir,
        root: PathBuf,
    },
    Postgres {
        db: String,
        config: Box<PostgresConfig>,
    },
}

#[derive(Clone)]
pub enum Backend {
    Jsonl(Arc<JsonlStore>),
    Postgres(Arc<PostgresStore>),
}

/// One mounted store, as one dsh process has it.
pub struct Mounted {
    pub ctx: Context,
    pub sessions: Arc<SessionStore>,
    pub backend: Backend,
    pub plugin: PluginHandle,
}

/// Bounds every wait on a store in the suite.
pub const WAIT: Duration = Duration::from_secs(30);

pub async fn bounded<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, f)
        .await
        .expect("a store operation did not finish in time")
}

impl Storage {
    pub async fn jsonl() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("sessions");
        Self::Jsonl { _dir: dir, root }
    }

    pub async fn postgres() -> Self {
        let (db, config) = cluster::fresh_db().await;
        Self::Postgres {
            db,
            config: Box::new(config),
        }
    }

    /// A newly mounted store over this storage (a new dsh process, as far as storage sees).
    pub async fn mount(&self) -> Mounted {
        let ctx = Context::new();
        let (backend, plugin) = match self {
            Self::Jsonl { root, .. } => {
                let store = JsonlStore::new(root);
                let plugin = ctx
                    .plugin(JsonlPersistencePlugin::new(store.clone()))
                    .await
                    .unwrap();
                (Backend::Jsonl(store), plugin)
            }
            Self::Postgres { config, .. } => {
                let store =
                    PostgresStore::with_window((**config).clone(), Duration::from_millis(20));
                let plugin = ctx
                    .plugin(PostgresPersistencePlugin::new(store.clone()))
                    .await
                    .unwrap();
                (Backend::Postgres(store), plugin)
            }
        };
        Mounted {
            sessions: SessionStore::new(&ctx),
            ctx,
            backend,
            plugin,
        }
    }

    /// Stores `s`'s log as a crashed writer left it: no repair, nothing closed.
    pub async fn plant(&self, s: &Arc<Session>) {
        match self {
            Self::Jsonl { root, .. } => {
                jsonl::write_file(root, s, &jsonl::jsonl(s));
            }
            Self::Postgres { .. } => {
                // Through the real writer: a session whose events count as already stored is
                // adopted and written from seq 0, then its writer goes away without repairing.
                let m = self.mount().await;
                let copy = m
                    .sessions
                    .prepare_loaded(
                        s.header().clone(),
                        s.events().iter().map(|e| (**e).clone()).collect(),
                    )
                    .unwrap();
                let (copy, detach) = m.publish(copy);
                bounded(m.sessions.flush(&copy)).await.unwrap();
                detach.detach();
                bounded(m.close()).await.unwrap();
            }
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Self::Jsonl { .. } => "jsonl",
            Self::Postgres { .. } => "postgres",
        }
    }
}

impl Mounted {
    pub fn store(&self) -> Arc<dyn Persistence> {
        match &self.backend {
            Backend::Jsonl(s) => s.clone(),
            Backend::Postgres(s) => s.clone(),
        }
    }

    /// Drains every writer (as unmounting does) and reports the outcome.
    pub async fn close(&self) -> Result<(), PersistenceError> {
        match &self.backend {
            Backend::Jsonl(s) => s.close().await,
            Backend::Postgres(s) => s.close().await,
        }
    }

    /// A live, announced session.
    pub fn live(&self, id: &str, cwd: Option<&str>) -> (Arc<Session>, SessionDetach) {
        let meta = SessionMeta {
            cwd: cwd.map(PathBuf::from),
            ..SessionMeta::default()
        };
        let s = self
            .sessions
            .prepare(Some(SessionId::new(id)), meta, None)
            .unwrap();
        self.publish(s)
    }

    pub fn publish(&self, s: Arc<Session>) -> (Arc<Session>, SessionDetach) {
        let detach = self.sessions.enter(&s, None).unwrap();
        self.sessions.announce(&s).unwrap();
        (s, detach)
    }

    /// Resumes a stored session the way the agent factory does.
    pub async fn resume(&self, id: &str) -> (Arc<Session>, SessionDetach) {
        let stored = bounded(self.store().load(&SessionId::new(id)))
            .await
            .unwrap();
        let s = self
            .sessions
            .prepare_loaded(stored.header, stored.events)
            .unwrap();
        self.publish(s)
    }

    pub async fn flush(&self, s: &Arc<Session>) {
        bounded(self.sessions.flush(s)).await.unwrap();
    }
}

/// Each event exactly as serialized: what byte-identical means for a log.
pub fn lines(events: &[SessionEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| serde_json::to_string(e).unwrap())
        .collect()
}

pub fn arc_lines(events: &[Arc<SessionEvent>]) -> Vec<String> {
    events
        .iter()
        .map(|e| serde_json::to_string(&**e).unwrap())
        .collect()
}
