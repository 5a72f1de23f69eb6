//! The guarded pipeline of one call, in three separately callable stages.
//!
//! The loop's scheduler runs [`ToolRuntime::prepare`] and [`ToolRuntime::finish`] in model
//! order and [`ToolRuntime::dispatch`] concurrently for parallel-safe calls; direct callers use
//! [`ToolRuntime::run`]. No stage returns `Err`: every ordinary fault becomes an error result,
//! so each call the model made receives exactly one result.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use dsh_kernel::{BoxError, ScopedRegistry};
use dsh_session::{Message, lossless};
use futures::FutureExt;
use futures::future::{BoxFuture, Either};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::approval::{ApprovalOutcome, ApprovalRequest, Approver};
use crate::call_context::ToolCallContext;
use crate::error::{INVALID_TOOL_OUTPUT, ToolError};
use crate::events::{
    DispatchCall, PostExecute, PostExecuteInput, PreExecute, ToolResultNotice, ToolsExecute,
    ToolsPostExecute, ToolsPreExecute, ToolsResult,
};
use crate::exec::{ExecView, ToolExec};
use crate::result::ToolCallResult;
use crate::runtime::ToolRuntime;
use crate::spill::ResultSpill;
use crate::tool::Tool;

/// A call's outcome on its way to [`ToolRuntime::finish`]: produced by
/// [`ToolRuntime::dispatch`], or early by [`ToolRuntime::prepare`] when the body must not run.
#[derive(Clone, Debug)]
pub struct Dispatched {
    result: ToolCallResult,
    post_execute: bool,
    body_invoked: bool,
}

impl Dispatched {
    fn post(result: ToolCallResult, body_invoked: bool) -> Self {
        Self {
            result,
            post_execute: true,
            body_invoked,
        }
    }

    fn fin(result: ToolCallResult, body_invoked: bool) -> Self {
        Self {
            result,
            post_execute: false,
            body_invoked,
        }
    }

    /// The outcome so far.
    pub fn result(&self) -> &ToolCallResult {
        &self.result
    }

    /// Whether `finish` will run `tools/post-execute` (denials and tool failures do; a
    /// pre-execute or wrapper failure, or cancellation before any policy ran, does not).
    pub fn needs_post_execute(&self) -> bool {
        self.post_execute
    }

    /// Whether the tool body was invoked (decides `ABORTED` vs `ABORTED_BEFORE_DISPATCH`).
    pub fn body_invoked(&self) -> bool {
        self.body_invoked
    }
}

/// What [`ToolRuntime::prepare`] decided.
#[derive(Clone, Debug)]
pub enum Prepared {
    /// Allowed: run [`ToolRuntime::dispatch`], then `finish`.
    Dispatch,
    /// Settled without the body (denied, aborted, or a policy failure): go straight to
    /// `finish`, in model order.
    Settled(Dispatched),
}

/// Per-dispatch state shared between the body (inside the `tools/execute` chain) and the
/// dispatcher (outside it).
#[derive(Default)]
struct BodyState {
    invoked: AtomicBool,
    deferred: Mutex<Vec<Message>>,
}

enum Gate {
    Allow,
    Deny {
        reason: String,
        approval_cancelled: bool,
    },
}

fn cancellation(body_invoked: bool, contexts: Vec<Message>) -> ToolCallResult {
    let result = if body_invoked {
        ToolCallResult::aborted()
    } else {
        ToolCallResult::aborted_before_dispatch()
    };
    result.with_contexts(contexts)
}

/// The result for a listener or wrapper failure. Logged as well: the model sees the message,
/// but a broken policy plugin is an operator's problem.
fn failure(stage: &'static str, exec: &ToolExec, error: &BoxError) -> ToolCallResult {
    tracing::warn!(stage, tool = %exec.name, call = %exec.call_id, %error, "tool policy failed");
    ToolCallResult::from_error(&ToolError::from_box(error))
}

impl ToolRuntime {
    /// Stage 1, in model order: cancellation check, the `tools/pre-execute` waterfall, approval
    /// for `Ask`, then guards (INV-PIPE-1, INV-PIPE-2).
    pub async fn prepare(&self, exec: &ToolExec) -> Prepared {
        exec.take_definition(self.get(exec.tag(), &exec.name));
        if exec.cancel.is_cancelled() {
            return Prepared::Settled(Dispatched::fin(
                ToolCallResult::aborted_before_dispatch(),
                false,
            ));
        }
        let view = ExecView::new(exec);
        let decision = self
            .ctx
            .events()
            .waterfall::<ToolsPreExecute>(exec.tag(), view, |_| {
                futures::future::ok(PreExecute::Allow).boxed()
            })
            .await;
        let decision = match decision {
            Ok(d) => d,
            Err(e) => {
                return Prepared::Settled(Dispatched::fin(
                    failure("tools/pre-execute", exec, &e),
                    false,
                ));
            }
        };
        let gate = match decision {
            PreExecute::Allow => Gate::Allow,
            PreExecute::Deny { reason } => Gate::Deny {
                reason,
                approval_cancelled: false,
            },
            PreExecute::Ask { reason } => self.ask(exec, reason).await,
        };
        let denial = match gate {
            Gate::Deny {
                approval_cancelled: true,
                ..
            } if exec.cancel.is_cancelled() => {
                return Prepared::Settled(Dispatched::post(
                    ToolCallResult::aborted_before_dispatch(),
                    false,
                ));
            }
            Gate::Deny { reason, .. } => Some(reason),
            // Guards run only on an allowed call and can only deny.
            Gate::Allow => self.guard_reason(exec),
        };
        if let Some(reason) = denial {
            return Prepared::Settled(Dispatched::post(ToolCallResult::denied(&reason), false));
        }
        if exec.cancel.is_cancelled() {
            return Prepared::Settled(Dispatched::post(
                ToolCallResult::aborted_before_dispatch(),
                false,
            ));
        }
        Prepared::Dispatch
    }

    /// Resolves `Ask` through the [`Approver`] service, failing closed.
    async fn ask(&self, exec: &ToolExec, reason: Option<String>) -> Gate {
        let deny = |reason: String| Gate::Deny {
            reason,
            approval_cancelled: false,
        };
        let name = &exec.name;
        let Some(approver) = self.ctx.get::<dyn Approver>() else {
            return deny(format!(
                "tool `{name}` requires approval, but no approval service is available"
            ));
        };
        let Some(caller) = &exec.caller else {
            return deny(format!(
                "tool `{name}` requires approval, but the call has no agent to route it through"
            ));
        };
        let request = ApprovalRequest {
            agent_id: caller.agent_id.clone(),
            tool_name: name.clone(),
            reason,
            call_id: exec.call_id.clone(),
            arguments: exec.arguments.clone(),
            effects: exec.effects().clone(),
            cancel: exec.cancel.clone(),
        };
        let outcome = AssertUnwindSafe(approver.request(request))
            .catch_unwind()
            .await;
        match outcome {
            Ok(ApprovalOutcome::AllowedOnce | ApprovalOutcome::AllowedForSession) => Gate::Allow,
            Ok(ApprovalOutcome::Rejected) => deny(format!("the user rejected tool `{name}`")),
            Ok(ApprovalOutcome::Cancelled) => Gate::Deny {
                reason: format!("approval for tool `{name}` was cancelled"),
                approval_cancelled: true,
            },
            Ok(ApprovalOutcome::Unavailable) => deny(format!(
                "tool `{name}` requires approval, but no approval channel is available"
            )),
            Err(_) => deny(format!("approval for tool `{name}` failed")),
        }
    }

    /// Stage 2, possibly concurrent with other calls: the `tools/execute` waterfall around
    /// the body. The body resolves the tool visible to the caller (else `UNKNOWN_TOOL`),
    /// checks cancellation (`ABORTED_BEFORE_DISPATCH`), and runs `execute` to completion even
    /// if cancellation arrives meanwhile (INV-PIPE-12); a success that lands after
    /// cancellation becomes `ABORTED`, a tool's own failure stays as it is.
    pub async fn dispatch(&self, exec: &ToolExec) -> Dispatched {
        let state = Arc::new(BodyState::default());
        let body = {
            let tools = self.tools.clone();
            let state = state.clone();
            let caller_cancel = exec.cancel.clone();
            move |call: DispatchCall| -> BoxFuture<'static, Result<ToolCallResult, BoxError>> {
                run_body(tools, state, caller_cancel, call).map(Ok).boxed()
            }
        };
        let payload = DispatchCall::new(ExecView::new(exec), exec.cancel.clone());
        let outcome = self
            .ctx
            .events()
            .waterfall::<ToolsExecute>(exec.tag(), payload, body)
            .await;
        let invoked = state.invoked.load(Ordering::Acquire);
        let mut result = match outcome {
            Ok(r) => r,
            // A failing wrapper is final: post-execute policy never sees it.
            Err(e) => return Dispatched::fin(failure("tools/execute", exec, &e), invoked),
        };
        let deferred = std::mem::take(&mut *state.deferred.lock());
        if !deferred.is_empty() {
            let later = std::mem::take(&mut result.additional_contexts);
            result.additional_contexts = deferred.into_iter().chain(later).collect();
        }
        if exec.cancel.is_cancelled() && !result.is_error {
            let contexts = std::mem::take(&mut result.additional_contexts);
            result = cancellation(invoked, contexts);
        }
        Dispatched::post(result, invoked)
    }

    /// Stage 3, in model order: the `tools/post-execute` waterfall (when the outcome needs
    /// it), cancellation superseding a success, the tool's
    /// [`finalize_content`](Tool::finalize_content), then the contained `tools/result`
    /// notification. Returns the final result.
    pub async fn finish(&self, exec: &ToolExec, outcome: Dispatched) -> ToolCallResult {
        let Dispatched {
            mut result,
            post_execute,
            body_invoked,
        } = outcome;
        let view = ExecView::new(exec);
        if post_execute {
            let input = PostExecuteInput::new(view.clone(), result.clone());
            let decision = self
                .ctx
                .events()
                .waterfall::<ToolsPostExecute>(exec.tag(), input, |_| {
                    futures::future::ok(PostExecute::accept()).boxed()
                })
                .await;
            result = match decision {
                Err(e) => failure("tools/post-execute", exec, &e),
                Ok(PostExecute::Block { feedback, contexts }) => ToolCallResult {
                    content: feedback,
                    is_error: true,
                    additional_contexts: contexts,
                    ..ToolCallResult::default()
                },
                Ok(PostExecute::Accept { content, contexts }) => {
                    if let Some(content) = content {
                        result.content = content;
                    }
                    result.additional_contexts.extend(contexts);
                    result
                }
            };
            if exec.cancel.is_cancelled() && !result.is_error {
                let contexts = std::mem::take(&mut result.additional_contexts);
                result = cancellation(body_invoked, contexts);
            }
        }
        result = materialize(exec, result);
        result = self.finalize(exec, result);
        // Last: what the tool and the policy settled on is what gets cut, and the log records
        // what the model reads.
        if let Some(spill) = self.ctx.get::<ResultSpill>() {
            result.content = spill.apply(&exec.name, std::mem::take(&mut result.content));
        }
        let notice = ToolResultNotice {
            exec: view,
            result: Arc::new(result.clone()),
        };
        self.ctx.events().emit::<ToolsResult>(exec.tag(), &notice);
        result
    }

    /// Applies the call's snapshotted definition's `finalize_content` once.
    fn finalize(&self, exec: &ToolExec, mut result: ToolCallResult) -> ToolCallResult {
        let snapshot = exec.state.definition.lock().clone();
        // A call finished without `prepare` uses what is visible now.
        let Some(tool) = snapshot.or_else(|| self.get(exec.tag(), &exec.name)) else {
            return result;
        };
        match std::panic::catch_unwind(AssertUnwindSafe(|| tool.finalize_content(exec, &result))) {
            Ok(Some(content)) => result.content = content,
            Ok(None) => {}
            Err(_) => {
                let contexts = std::mem::take(&mut result.additional_contexts);
                result = ToolCallResult::from_error(&ToolError::panicked(&exec.name))
                    .with_contexts(contexts);
            }
        }
        result
    }

    /// All three stages for one call, for direct (non-scheduled) callers.
    pub async fn run(&self, exec: &ToolExec) -> ToolCallResult {
        let outcome = match self.prepare(exec).await {
            Prepared::Dispatch => self.dispatch(exec).await,
            Prepared::Settled(outcome) => outcome,
        };
        self.finish(exec, outcome).await
    }
}

/// Checks that what the caller will record is lossless JSON: a result carrying, say, a `-0`
/// in its meta or in a context could not be logged, which would fail the whole step instead
/// of this call. Such a result becomes the call's own error (INV-PIPE-5).
fn materialize(exec: &ToolExec, result: ToolCallResult) -> ToolCallResult {
    let meta = result.meta.as_ref().map_or(Ok(()), lossless::check);
    let problem = meta.err().or_else(|| {
        result
            .additional_contexts
            .iter()
            .find_map(|m| lossless::to_value(m).err())
    });
    let Some(problem) = problem else {
        return result;
    };
    tracing::warn!(tool = %exec.name, call = %exec.call_id, %problem, "tool result is not lossless JSON");
    ToolCallResult::from_error(&ToolError::coded(
        "ToolOutputError",
        INVALID_TOOL_OUTPUT,
        format!(
            "tool `{}` produced a result that cannot be recorded: {problem}",
            exec.name
        ),
    ))
}

/// The innermost `tools/execute` step: the tool body itself.
async fn run_body(
    tools: Arc<ScopedRegistry<Arc<dyn Tool>>>,
    state: Arc<BodyState>,
    caller_cancel: CancellationToken,
    call: DispatchCall,
) -> ToolCallResult {
    let exec = call.exec().clone();
    let wrapper_cancel = call.cancel;
    // The body observes the caller's cancellation and whatever a wrapper substituted.
    let fused = caller_cancel.child_token();
    if wrapper_cancel.is_cancelled() {
        fused.cancel();
    }
    if fused.is_cancelled() {
        return ToolCallResult::aborted_before_dispatch();
    }
    let Some(tool) = tools.get(exec.tag(), &exec.name) else {
        return ToolCallResult::from_error(&ToolError::unknown_tool(&exec.name));
    };
    state.invoked.store(true, Ordering::Release);
    let cx = ToolCallContext::new(
        exec.call_id.clone(),
        exec.name.clone(),
        exec.raw_arguments.clone(),
        exec.caller.clone(),
        fused.clone(),
    );
    let body = AssertUnwindSafe(tool.execute((*exec.arguments).clone(), &cx)).catch_unwind();
    let relay = async {
        wrapper_cancel.cancelled().await;
        fused.cancel();
        // Never completes, so the select below only ever finishes with the body.
        std::future::pending::<()>().await;
    };
    let outcome = match futures::future::select(Box::pin(body), Box::pin(relay)).await {
        Either::Left((outcome, _relay)) => outcome,
        // Unreachable (the relay never completes); still await the body rather than drop it.
        Either::Right(((), body)) => body.await,
    };
    *state.deferred.lock() = cx.take_deferred();
    match outcome {
        Ok(Ok(output)) => {
            let result = ToolCallResult::success(output, cx.concludes_turn());
            if !result.is_error && fused.is_cancelled() {
                ToolCallResult::aborted()
            } else {
                result
            }
        }
        Ok(Err(error)) => ToolCallResult::from_error(&error),
        Err(_panic) => {
            tracing::warn!(tool = %exec.name, "tool body panicked");
            ToolCallResult::from_error(&ToolError::panicked(&exec.name))
        }
    }
}
