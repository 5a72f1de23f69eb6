//! The plugin that connects a [`JsonlStore`] to a kernel context.

use std::sync::Arc;

use dsh_kernel::{BoxError, Context, Plugin};
use dsh_session::{Persistence, SessionDisposed, SessionEventFired, SessionFlush};

use crate::store::JsonlStore;

/// Mounts durable JSONL persistence on a context: provides the store as `dyn Persistence`,
/// copies every committed session event into its session's write-behind writer
/// (`session/event`), answers the `session/flush` barrier, drains and releases a session's
/// writer on `session/disposed`, and on unmount stops admission and drains every writer.
///
/// The store outlives the plugin: unmounting and mounting again continues each live session's
/// file where it stopped.
#[derive(Clone, Debug)]
pub struct JsonlPersistencePlugin {
    store: Arc<JsonlStore>,
}

impl JsonlPersistencePlugin {
    /// A plugin feeding `store`.
    pub fn new(store: Arc<JsonlStore>) -> Self {
        Self { store }
    }

    /// The store this plugin feeds.
    pub fn store(&self) -> &Arc<JsonlStore> {
        &self.store
    }
}

impl Plugin for JsonlPersistencePlugin {
    fn name(&self) -> &str {
        "store-jsonl"
    }

    async fn apply(&self, ctx: &Context) -> Result<(), BoxError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| format!("the JSONL persistence plugin needs a tokio runtime: {e}"))?;
        // Registered first so it is undone last: the listeners are gone (admission stopped)
        // before every writer drains.
        let store = self.store.clone();
        ctx.scope().defer_async(move || async move {
            if let Err(error) = store.close().await {
                tracing::error!(%error, "draining session writers at unmount failed");
            }
        })?;
        self.store.open(runtime);
        ctx.provide::<dyn Persistence>(self.store.clone())?;
        // Persistence hears every session, whatever scope the plugin was mounted in.
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
