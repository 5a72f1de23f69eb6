//! The `tools/*` events and the decisions their listeners return.
//!
//! Every call-level event is dispatched with the caller's context tag as carrier, so a
//! listener registered through an agent's scoped context only sees that agent's calls
//! (INV-SCOPE-3); listeners on an untagged context see every call.

use std::sync::Arc;

use dsh_kernel::{Notification, ScopeTag, Waterfall};
use dsh_session::{ContentBlock, Message};
use tokio_util::sync::CancellationToken;

use crate::exec::ExecView;
use crate::result::ToolCallResult;

/// A pre-dispatch policy decision.
///
/// There is deliberately no way to rewrite arguments: they are already logged and presented.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PreExecute {
    /// Run the call (subject to guards).
    Allow,
    /// Do not run it; the model reads `Error: <reason>`.
    Deny {
        /// Why, for the model.
        reason: String,
    },
    /// Run it only if the [`crate::Approver`] says `AllowedOnce`.
    Ask {
        /// Why approval is needed, shown to the user.
        reason: Option<String>,
    },
}

/// `tools/pre-execute`: allow, deny or ask before dispatch. Waterfall; the default is
/// [`PreExecute::Allow`]. A failing listener makes the call a final error result that skips
/// post-execute.
pub struct ToolsPreExecute;

impl Waterfall for ToolsPreExecute {
    const NAME: &'static str = "tools/pre-execute";
    type Payload = ExecView;
    type Output = PreExecute;
}

/// What flows down the `tools/execute` chain: the call, and the cancellation the next layer
/// should observe. A wrapper (a timeout policy, say) may replace the token for what it
/// delegates; the caller's own cancellation is always fused back in before the body runs, so
/// a wrapper cannot detach it.
#[derive(Clone, Debug)]
pub struct DispatchCall {
    exec: ExecView,
    /// Cancellation seen by inner wrappers and, fused with the caller's, by the body.
    pub cancel: CancellationToken,
}

impl DispatchCall {
    pub(crate) fn new(exec: ExecView, cancel: CancellationToken) -> Self {
        Self { exec, cancel }
    }

    /// The call.
    pub fn exec(&self) -> &ExecView {
        &self.exec
    }

    /// The same call with a replacement token for the rest of the chain.
    pub fn with_cancel(mut self, cancel: CancellationToken) -> Self {
        self.cancel = cancel;
        self
    }
}

/// `tools/execute`: around-middleware over the tool body (timeouts, retries, metrics). A
/// wrapper that fails makes the call a final error result that skips post-execute. A wrapper
/// must await `next` to completion: dropping it would abandon a started body.
pub struct ToolsExecute;

impl Waterfall for ToolsExecute {
    const NAME: &'static str = "tools/execute";
    type Payload = DispatchCall;
    type Output = ToolCallResult;
}

/// What `tools/post-execute` listeners see: the call and its (read-only) outcome.
#[derive(Clone, Debug)]
pub struct PostExecuteInput {
    exec: ExecView,
    result: Arc<ToolCallResult>,
}

impl PostExecuteInput {
    pub(crate) fn new(exec: ExecView, result: ToolCallResult) -> Self {
        Self {
            exec,
            result: Arc::new(result),
        }
    }

    /// The call.
    pub fn exec(&self) -> &ExecView {
        &self.exec
    }

    /// The outcome so far (tool errors and denials arrive here too).
    pub fn result(&self) -> &ToolCallResult {
        &self.result
    }
}

/// A post-dispatch decision.
#[derive(Clone, Debug, PartialEq)]
pub enum PostExecute {
    /// Keep the outcome, optionally replacing its content; `contexts` are appended after the
    /// tool's own deferred contexts.
    Accept {
        /// Replacement content, if any.
        content: Option<Vec<ContentBlock>>,
        /// Extra contexts for the next step.
        contexts: Vec<Message>,
    },
    /// Turn the outcome into an error whose content is `feedback`; the tool's deferred
    /// contexts are dropped and only `contexts` are kept.
    Block {
        /// Corrective feedback for the model.
        feedback: Vec<ContentBlock>,
        /// Contexts for the next step.
        contexts: Vec<Message>,
    },
}

impl PostExecute {
    /// Accept unchanged (the default).
    pub fn accept() -> Self {
        Self::Accept {
            content: None,
            contexts: Vec::new(),
        }
    }
}

/// `tools/post-execute`: accept, rewrite, enrich or block an outcome. Waterfall; default
/// [`PostExecute::accept`]. A failing listener turns the call into an error result.
pub struct ToolsPostExecute;

impl Waterfall for ToolsPostExecute {
    const NAME: &'static str = "tools/post-execute";
    type Payload = PostExecuteInput;
    type Output = PostExecute;
}

/// The final outcome of one call.
#[derive(Clone, Debug)]
pub struct ToolResultNotice {
    /// The call.
    pub exec: ExecView,
    /// Its final result (what the caller receives).
    pub result: Arc<ToolCallResult>,
}

/// `tools/result`: observe final outcomes. Contained notification: a failing observer is
/// logged and changes nothing.
pub struct ToolsResult;

impl Notification for ToolsResult {
    const NAME: &'static str = "tools/result";
    type Payload = ToolResultNotice;
}

/// A tool appeared or disappeared.
#[derive(Clone, Debug)]
pub struct ToolsChanged {
    /// The tool's name.
    pub name: String,
    /// The layer it belongs to (`None` = global).
    pub tag: Option<ScopeTag>,
    /// `true` when registered, `false` when removed.
    pub registered: bool,
}

/// `tools/change`: the available tool set changed, possibly for one scope only. Emitted
/// unrouted (carrier `None`): a scoped listener must subscribe with `Context::on_global`
/// to hear it, because a global change concerns every agent.
pub struct ToolsChange;

impl Notification for ToolsChange {
    const NAME: &'static str = "tools/change";
    type Payload = ToolsChanged;
}
