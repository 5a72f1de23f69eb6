//! One tool call as the pipeline sees it.

use std::fmt;
use std::ops::Deref;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, OnceLock};

use dsh_kernel::ScopeTag;
use dsh_session::CallId;
use parking_lot::Mutex;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::caller::ToolCaller;
use crate::effects::ToolEffects;
use crate::tool::Tool;

/// Parses the model's raw argument text once: `""` → `{}`, valid JSON → that value, anything
/// else → the raw text as a JSON string, so a malformed call reaches the tool (which reports
/// it) instead of being lost.
pub fn parse_arguments(raw: &str) -> Value {
    if raw.is_empty() {
        return Value::Object(serde_json::Map::new());
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

/// Per-call state the pipeline carries between its stages (clones of one [`ToolExec`] share
/// it), so the stages can be called separately without the caller threading it through.
#[derive(Default)]
pub(crate) struct CallState {
    /// The definition visible when the call started; its `finalize_content` is the one applied.
    pub(crate) definition: Mutex<Option<Arc<dyn Tool>>>,
    /// What that definition declared for these arguments, set with the definition.
    pub(crate) effects: OnceLock<ToolEffects>,
}

impl fmt::Debug for CallState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallState").finish_non_exhaustive()
    }
}

/// The scheduler's description of one call. Arguments are parsed once here and shared, so
/// every phase sees the same value (INV-PIPE-3). Build it with [`ToolExec::new`] and pass the
/// same value (or clones of it) to every pipeline stage of that call.
#[derive(Clone, Debug)]
pub struct ToolExec {
    /// The model's call id.
    pub call_id: CallId,
    /// The tool name the model asked for.
    pub name: String,
    /// The argument text exactly as the model produced it.
    pub raw_arguments: String,
    /// The parsed arguments (see [`parse_arguments`]).
    pub arguments: Arc<Value>,
    /// The calling agent; `None` for a direct, agentless call.
    pub caller: Option<ToolCaller>,
    /// The caller's cancellation (the turn's token).
    pub cancel: CancellationToken,
    pub(crate) state: Arc<CallState>,
}

impl ToolExec {
    /// A call with its arguments parsed from `raw_arguments`.
    pub fn new(
        call_id: CallId,
        name: impl Into<String>,
        raw_arguments: impl Into<String>,
        caller: Option<ToolCaller>,
        cancel: CancellationToken,
    ) -> Self {
        let raw_arguments = raw_arguments.into();
        Self {
            call_id,
            name: name.into(),
            arguments: Arc::new(parse_arguments(&raw_arguments)),
            raw_arguments,
            caller,
            cancel,
            state: Arc::default(),
        }
    }

    /// What the call does, as the tool visible when it started declared it (see
    /// [`Tool::effects`]). Fixed when the pipeline takes the call up, so every stage and
    /// listener reads the same facts. Before that, or when the tool's declaration panicked,
    /// it is [`ToolEffects::undeclared`]: fail closed.
    pub fn effects(&self) -> &ToolEffects {
        static UNDECLARED: OnceLock<ToolEffects> = OnceLock::new();
        self.state
            .effects
            .get()
            .unwrap_or_else(|| UNDECLARED.get_or_init(ToolEffects::undeclared))
    }

    /// Snapshots `definition` and its effects for these arguments. An unknown tool's call
    /// fails before anything runs, so it does nothing.
    pub(crate) fn take_definition(&self, definition: Option<Arc<dyn Tool>>) {
        let effects = match &definition {
            None => ToolEffects::none(),
            Some(tool) => {
                let args = &self.arguments;
                std::panic::catch_unwind(AssertUnwindSafe(|| tool.effects(args)))
                    .unwrap_or_else(|_| ToolEffects::undeclared())
            }
        };
        *self.state.definition.lock() = definition;
        let _ = self.state.effects.set(effects);
    }

    /// The routing tag: the caller's context tag, `None` for agentless calls.
    pub fn tag(&self) -> Option<&ScopeTag> {
        self.caller.as_ref().and_then(ToolCaller::tag)
    }
}

/// A read-only view of a call handed to `tools/*` listeners.
///
/// Listeners receive it by value and must pass it on to `next`; because only the runtime can
/// construct one, no listener can hand the rest of the chain a different call (the call's
/// identity and arguments are immutable, INV-PIPE-3).
#[derive(Clone, Debug)]
pub struct ExecView(Arc<ToolExec>);

impl ExecView {
    pub(crate) fn new(exec: &ToolExec) -> Self {
        Self(Arc::new(exec.clone()))
    }
}

impl Deref for ExecView {
    type Target = ToolExec;

    fn deref(&self) -> &ToolExec {
        &self.0
    }
}
