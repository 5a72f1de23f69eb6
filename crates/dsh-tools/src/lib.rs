//! Tools for dsh: what a tool is, where tools are registered, and the guarded pipeline every
//! call goes through.
//!
//! - [`Tool`] (and the typed convenience [`TypedTool`]): name, description, JSON-schema
//!   parameters, a per-call concurrency classification and an async `execute`.
//! - [`ToolRuntime`]: the scoped registry (an agent's tools shadow global ones for that agent
//!   only), monotonic guards, schemas for the prompt, and the pipeline
//!   `tools/pre-execute` → (approval) → guards → `tools/execute` → body → `tools/post-execute`
//!   → `tools/result`, split into [`ToolRuntime::prepare`], [`ToolRuntime::dispatch`] and
//!   [`ToolRuntime::finish`] so the loop's scheduler can keep policy in model order while
//!   bodies run concurrently.
//! - Ordinary faults (unknown tools, bad arguments, tool errors, listener errors or panics,
//!   cancellation) never escape as `Err`: they become error [`ToolCallResult`]s, so every call
//!   the model made gets exactly one result.

mod approval;
mod call_context;
mod caller;
mod effects;
mod error;
mod events;
mod exec;
mod file_access;
mod live;
mod output;
mod pipeline;
mod plugin;
mod presentation;
mod question;
mod result;
mod routes;
mod runtime;
mod spill;
mod tool;
mod typed;
mod write_scope;

pub use approval::{ApprovalOutcome, ApprovalRequest, Approver};
pub use call_context::ToolCallContext;
pub use caller::ToolCaller;
pub use effects::{CommandEffect, ToolEffects, is_private_address, names_private_address};
pub use error::{
    INVALID_ARGUMENTS, INVALID_TOOL_OUTPUT, TOOL_ABORTED, TOOL_ABORTED_BEFORE_DISPATCH,
    TOOL_PANICKED, ToolError, ToolsError, UNKNOWN_TOOL,
};
pub use events::{
    DispatchCall, PostExecute, PostExecuteInput, PreExecute, ToolResultNotice, ToolsChange,
    ToolsChanged, ToolsExecute, ToolsPostExecute, ToolsPreExecute, ToolsResult,
};
pub use exec::{ExecView, ToolExec, parse_arguments};
pub use file_access::{FileAccess, FileAccessError};
pub use live::{LIVE_INTERVAL, LIVE_PENDING_MAX, LiveOutputFeed, LivePublisher, LivePusher};
pub use output::ToolOutput;
pub use pipeline::{Dispatched, Prepared};
pub use plugin::ToolsPlugin;
pub use presentation::{ToolKind, ToolPresentation};
pub use question::{
    Question, QuestionIntent, QuestionOption, QuestionOutcome, QuestionRequest, Questioner, Reply,
};
pub use result::ToolCallResult;
pub use routes::{Routes, routed};
pub use runtime::{ExecutionMode, Guard, ToolRuntime};
pub use spill::{DEFAULT_SPILL_BYTES, ResultSpill};
pub use tool::Tool;
pub use typed::TypedTool;
pub use write_scope::{WritePlace, WriteRoot, WriteScope};
