//! The plugin that offers the web tools.

use std::sync::Arc;

use dsh_kernel::{BoxError, Context, Plugin};
use dsh_tools::ToolRuntime;

use crate::config::SearchConfig;
use crate::fetch::WebFetchTool;
use crate::limits::FetchLimits;
use crate::search::WebSearchTool;

/// Registers `web_fetch` (always) and `web_search` (when a search API is configured; a tool
/// the model cannot use is not offered) in the tool runtime of the context it is applied on.
#[derive(Clone, Debug, Default)]
pub struct WebPlugin {
    /// Bounds of each fetch.
    pub limits: FetchLimits,
    /// The search API, if any.
    pub search: Option<SearchConfig>,
}

impl Plugin for WebPlugin {
    fn name(&self) -> &str {
        "dsh-fetch"
    }

    async fn apply(&self, ctx: &Context) -> Result<(), BoxError> {
        let runtime = ctx.require::<ToolRuntime>()?;
        let _ = runtime.register(ctx, Arc::new(WebFetchTool::new(self.limits.clone())))?;
        if let Some(search) = &self.search {
            let _ = runtime.register(ctx, Arc::new(WebSearchTool::new(search.clone())?))?;
        }
        Ok(())
    }
}
