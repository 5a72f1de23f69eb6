//! The plugin that connects a [`PostgresStore`] to a kernel context.

use std::sync::Arc;

use dsh_kernel::{BoxError, Context, Plugin};

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
        dsh_write_behind::mount(ctx, &self.store)
    }
}
