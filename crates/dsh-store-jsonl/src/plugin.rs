//! The plugin that connects a [`JsonlStore`] to a kernel context.

use std::sync::Arc;

use dsh_kernel::{BoxError, Context, Plugin};

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
        dsh_write_behind::mount(ctx, &self.store)
    }
}
