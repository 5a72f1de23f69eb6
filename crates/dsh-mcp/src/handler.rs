//! The client side of one server's MCP session: what dsh answers and hears.
//!
//! Notifications bump list generations (tools, resources, prompts), route progress to the
//! running call, and put server log messages in the debug log; requests are answered for
//! roots (the session's workspace), form elicitation (the person, through the question
//! seam) and sampling (refused).
//!
//! Logging, roots and sampling are deprecated by the protocol's next revision (SEP-2577) but
//! are what servers of the current one use, hence the module-wide allowance.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::Arc;

use dsh_tools::LivePublisher;
use parking_lot::Mutex;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ElicitationCapability, ErrorData, FormElicitationCapability,
    Implementation, ListRootsResult, ProgressNotificationParam, ProgressToken, Root,
    RootsCapabilities,
};
use rmcp::service::{MaybeSendFuture, NotificationContext, RequestContext};
use rmcp::{ClientHandler, RoleClient};
use serde_json::Value;
use tokio::sync::{Notify, watch};

use crate::elicit::RunningCalls;

/// A running call as its progress reports find it: where they are shown, and the signal that
/// starts the call's timeout again.
pub(crate) struct Watched {
    pub(crate) publisher: Option<LivePublisher>,
    pub(crate) heard: Arc<Notify>,
}

/// The running calls, by the progress token of their requests.
pub(crate) type ProgressSinks = Arc<Mutex<HashMap<ProgressToken, Watched>>>;

/// Receives the server's notifications: a tools-list change bumps the wanted generation, and
/// the server's refresher lists the tools again; a progress report goes to the live feed of
/// the call whose request carried its token.
pub(crate) struct Handler {
    pub(crate) server: String,
    pub(crate) tools_wanted: watch::Sender<u64>,
    pub(crate) resources_wanted: watch::Sender<u64>,
    pub(crate) prompts_wanted: watch::Sender<u64>,
    pub(crate) progress: ProgressSinks,
    /// The running calls, whose person a server's elicitation asks.
    pub(crate) calls: RunningCalls,
    /// The roots offered: the session's workspace.
    pub(crate) roots: Vec<Root>,
}

impl ClientHandler for Handler {
    fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        let watched = self
            .progress
            .lock()
            .get(&params.progress_token)
            .map(|w| (w.publisher.clone(), w.heard.clone()));
        if let Some((publisher, heard)) = watched {
            // A stored permit: a report that arrives between two polls of the call still
            // counts.
            heard.notify_one();
            if let Some(publisher) = publisher {
                publisher.progress(params.progress, params.total, params.message);
            }
        }
        std::future::ready(())
    }

    /// A server's log message goes to dsh's log at debug level (it is the server's chatter,
    /// not dsh's: `DSH_LOG=dsh_mcp=debug` shows it), whatever level the server gave it.
    /// Logging is deprecated by the spec's next revision (SEP-2577), but servers of the
    /// current one send it.
    #[allow(deprecated)]
    fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        let level = serde_json::to_value(params.level)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let text = match &params.data {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        tracing::debug!(
            server = %self.server,
            level = %level,
            logger = params.logger.as_deref().unwrap_or(""),
            "MCP server log: {text}"
        );
        std::future::ready(())
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        self.tools_wanted.send_modify(|g| *g += 1);
        std::future::ready(())
    }

    fn on_resource_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        self.resources_wanted.send_modify(|g| *g += 1);
        std::future::ready(())
    }

    fn on_prompt_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        self.prompts_wanted.send_modify(|g| *g += 1);
        std::future::ready(())
    }

    /// What dsh does for a server, declared honestly: roots (the session's workspace) and
    /// form elicitation (asked through the front end's questions; declined where nobody can
    /// answer). Sampling is not declared: dsh does not let servers use the session's model.
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.roots = Some(RootsCapabilities::default());
        capabilities.elicitation =
            Some(ElicitationCapability::new().with_form(FormElicitationCapability::new()));
        ClientConfig::new(
            capabilities,
            Implementation::new("dsh", env!("CARGO_PKG_VERSION")),
        )
    }

    fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<ListRootsResult, ErrorData>> + MaybeSendFuture + '_ {
        std::future::ready(Ok(ListRootsResult::new(self.roots.clone())))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(crate::elicit::elicit(&self.server, &self.calls, request).await)
    }

    fn create_message(
        &self,
        _params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<CreateMessageResult, ErrorData>> + MaybeSendFuture + '_ {
        tracing::info!(server = %self.server, "refused an MCP server's sampling request");
        std::future::ready(Err(ErrorData::invalid_request(
            format!(
                "dsh does not let MCP servers sample its model (server `{}`)",
                self.server
            ),
            None,
        )))
    }
}

/// The roots dsh offers: the session's workspace (`cwd`), as a `file://` URI.
pub(crate) fn workspace_roots(cwd: &std::path::Path) -> Vec<Root> {
    reqwest::Url::from_file_path(cwd)
        .map(|url| {
            let mut root = Root::new(url.to_string());
            root.name = Some("workspace".to_owned());
            vec![root]
        })
        .unwrap_or_default()
}
