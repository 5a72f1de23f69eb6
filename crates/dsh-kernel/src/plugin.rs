//! Plugins: units of registration that can be mounted, unmounted and mounted again.

use crate::context::Context;
use crate::error::BoxError;

/// Something that registers services, listeners, tools or prompt sections through a
/// [`Context`]. Everything it registers through the context it is given is owned by the
/// plugin's own scope, so unmounting undoes exactly what mounting did.
///
/// State that must survive an unmount/remount (for example the owner of a background task)
/// belongs in a longer-lived service, not in the plugin.
pub trait Plugin: Send + 'static {
    /// The plugin's name, for diagnostics and scope labels.
    fn name(&self) -> &str;

    /// Registers the plugin's effects through `ctx`.
    fn apply(&self, ctx: &Context) -> impl Future<Output = Result<(), BoxError>> + Send;
}

/// A mounted plugin.
#[derive(Debug)]
pub struct PluginHandle {
    name: String,
    ctx: Context,
}

impl PluginHandle {
    pub(crate) fn new(name: String, ctx: Context) -> Self {
        Self { name, ctx }
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The context the plugin was applied with (owned by the plugin's scope).
    pub fn ctx(&self) -> &Context {
        &self.ctx
    }

    /// Unmounts the plugin, undoing its registrations in reverse order.
    pub async fn dispose(&self) {
        self.ctx.scope().dispose().await;
    }
}
