//! What a running tool body can see and do.

use std::sync::atomic::{AtomicBool, Ordering};

use dsh_session::{CallId, Message};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::caller::ToolCaller;

/// The per-call context handed to [`crate::Tool::execute`].
///
/// Besides identity and cancellation, it carries the two side channels a body may use:
/// [`conclude_turn`](Self::conclude_turn) (a successful result ends the turn after this step,
/// e.g. a "submit answer" tool) and [`defer_context`](Self::defer_context) (messages that
/// enter the agent's next-step inbox after the step's results, preserving tool/result
/// adjacency).
#[derive(Debug)]
pub struct ToolCallContext {
    call_id: CallId,
    name: String,
    raw_arguments: String,
    caller: Option<ToolCaller>,
    cancel: CancellationToken,
    concluded: AtomicBool,
    deferred: Mutex<Vec<Message>>,
}

impl ToolCallContext {
    /// A context for one call. The pipeline builds it; tests of a single tool may too.
    pub fn new(
        call_id: CallId,
        name: impl Into<String>,
        raw_arguments: impl Into<String>,
        caller: Option<ToolCaller>,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            call_id,
            name: name.into(),
            raw_arguments: raw_arguments.into(),
            caller,
            cancel,
            concluded: AtomicBool::new(false),
            deferred: Mutex::new(Vec::new()),
        }
    }

    /// The model's call id.
    pub fn call_id(&self) -> &CallId {
        &self.call_id
    }

    /// The tool name as called.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The model's raw argument text.
    pub fn raw_arguments(&self) -> &str {
        &self.raw_arguments
    }

    /// The calling agent, if any.
    pub fn caller(&self) -> Option<&ToolCaller> {
        self.caller.as_ref()
    }

    /// Fires when the call should stop. Cooperative: the pipeline keeps awaiting the body
    /// until it returns, so a body that ignores this delays quiescence.
    pub fn cancel(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Whether cancellation was requested.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Marks a successful result as ending the turn after this step.
    pub fn conclude_turn(&self) {
        self.concluded.store(true, Ordering::Relaxed);
    }

    /// Whether [`conclude_turn`](Self::conclude_turn) was called.
    pub fn concludes_turn(&self) -> bool {
        self.concluded.load(Ordering::Relaxed)
    }

    /// Adds a context message that lands in the agent's next-step inbox after the results,
    /// in call order.
    pub fn defer_context(&self, message: Message) {
        self.deferred.lock().push(message);
    }

    /// The contexts deferred so far.
    pub fn deferred_contexts(&self) -> Vec<Message> {
        self.deferred.lock().clone()
    }

    pub(crate) fn take_deferred(&self) -> Vec<Message> {
        std::mem::take(&mut *self.deferred.lock())
    }
}
