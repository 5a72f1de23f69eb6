//! The plugin that connects a [`PostgresStore`] to a kernel context.

use std::sync::Arc;

use dsh_kernel::{BoxError, Context, Plugin};
use dsh_session::{Persistence, SessionDisposed, SessionEventFired, SessionFlush};

use crate::store::PostgresStore;

/// Mounts PostgreSQL persistence on a context: provides the store as `dyn Persistence`, feeds
/// every committed session event to its session's writer (`session/event`), answers the
/// `session/flush` barrier (resolved once committed), drains and releases a writer and its
/// lease on `session/disposed`, and on unmount stops admission and drains every writer.
#[derive(Clone, Debug)]
pub struct PostgresPersistencePlugin {
    store: Arc<PostgresStore>,
}

impl PostgresPersistencePlugin {
    /// A plugin feeding `store`.
    pub fn new(store: Arc<PostgresStore>) -> Self {
        Self { store }
    }

    /// The store this plugin feeds.
    pub fn store(&self) -> &Arc<PostgresStore> {
        &self.store
    }
}

impl Plugin for PostgresPersistencePlugin {
    fn name(&self) -> &str {
        "store-postgres"
    }

    async fn apply(&self, ctx: &Context) -> Result<(), BoxError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| format!("the PostgreSQL persistence plugin needs a tokio runtime: {e}"))?;
        // Registered first so it is undone last: admission stops before every writer drains.
        let store = self.store.clone();
        ctx.scope().defer_async(move || async move {
            if let Err(error) = store.close().await {
                tracing::error!(%error, "draining session writers at unmount failed");
            }
        })?;
        self.store.open(runtime);
        ctx.provide::<dyn Persistence>(self.store.clone())?;
        let global = ctx.global();
        let store = self.store.clone();
        let _ = global.on::<SessionEventFired>(move |notice| store.admit(&notice.session))?;
        let store = self.store.clone();
        let _ = global.on::<SessionDisposed>(move |session| store.release(session))?;
        let store = self.store.clone();
        let _ = global.on_parallel::<SessionFlush, _>(move |session| {
            let store = store.clone();
            async move { store.flush_session(&session).await.map_err(BoxError::from) }
        })?;
        Ok(())
    }
}
