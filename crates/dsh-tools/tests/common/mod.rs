//! Small test tools and helpers shared by the integration tests.

#![allow(dead_code, clippy::unwrap_used)]

use std::sync::Arc;

use async_trait::async_trait;
use dsh_kernel::{Context, ScopeTag};
use dsh_session::{CallId, Session, SessionHeader, SessionId, SessionMeta};
use dsh_tools::{
    Tool, ToolCallContext, ToolCaller, ToolEffects, ToolError, ToolExec, ToolOutput, ToolRuntime,
    ToolsExecute, ToolsPostExecute, ToolsPreExecute, ToolsResult,
};
use futures::FutureExt;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub type Log = Arc<Mutex<Vec<String>>>;

pub fn log() -> Log {
    Arc::new(Mutex::new(Vec::new()))
}

pub fn push(log: &Log, s: impl Into<String>) {
    log.lock().push(s.into());
}

pub fn entries(log: &Log) -> Vec<String> {
    log.lock().clone()
}

/// A root context with a provided tool runtime.
pub fn runtime() -> (Context, Arc<ToolRuntime>) {
    let ctx = Context::new();
    let rt = ToolRuntime::new(&ctx);
    ctx.provide::<ToolRuntime>(rt.clone()).unwrap();
    (ctx, rt)
}

/// An agent-like caller: a tagged child context plus a session of the same id.
pub fn agent(root: &Context, label: &str) -> ToolCaller {
    agent_with_tag(root, label, ScopeTag::new(label))
}

/// A caller whose context carries `tag` (e.g. a child tag of another agent's).
pub fn agent_with_tag(root: &Context, label: &str, tag: ScopeTag) -> ToolCaller {
    let ctx = root.tagged_child(label, tag).unwrap();
    let id = SessionId::new(label);
    let session = Session::new(
        SessionHeader::new(id.clone(), 0, SessionMeta::default()),
        None,
    )
    .unwrap();
    ToolCaller {
        agent_id: id,
        session,
        ctx,
        cwd: None,
    }
}

pub fn exec(name: &str, args: &str, caller: Option<&ToolCaller>) -> ToolExec {
    exec_id("c1", name, args, caller)
}

pub fn exec_id(id: &str, name: &str, args: &str, caller: Option<&ToolCaller>) -> ToolExec {
    ToolExec::new(
        CallId::new(id),
        name,
        args,
        caller.cloned(),
        CancellationToken::new(),
    )
}

/// Logs `body:<name>` and answers `<name> ok`; parallel-safe when `args.safe == true`.
pub struct Recorder {
    pub name: String,
    pub log: Log,
}

impl Recorder {
    pub fn new(name: &str, log: &Log) -> Arc<Self> {
        Arc::new(Self {
            name: name.to_owned(),
            log: log.clone(),
        })
    }
}

#[async_trait]
impl Tool for Recorder {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        "records its calls"
    }

    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }

    fn is_concurrency_safe(&self, args: &Value) -> bool {
        args.get("safe") == Some(&Value::Bool(true))
    }

    fn effects(&self, args: &Value) -> ToolEffects {
        effects_like_builtins(&self.name, args)
    }

    async fn execute(&self, args: Value, call: &ToolCallContext) -> Result<ToolOutput, ToolError> {
        push(&self.log, format!("body:{}:{}", self.name, call.call_id()));
        Ok(ToolOutput::text(format!("{} ok", self.name)).with_meta(args))
    }
}

/// Effects declared from the arguments the way the built-in tools declare theirs:
/// `file_path` is written, `command` is run (escalated with `escalate: true`); a tool named like
/// an MCP server's declares nothing, as those do.
pub fn effects_like_builtins(name: &str, args: &Value) -> ToolEffects {
    if name.starts_with("mcp__") {
        return ToolEffects::undeclared();
    }
    let text = |k: &str| args.get(k).and_then(Value::as_str);
    let mut effects = ToolEffects::none();
    if let Some(path) = text("file_path") {
        effects = effects.writes(path);
    }
    if let Some(command) = text("command") {
        effects = effects.runs(command);
        if args.get("escalate") == Some(&Value::Bool(true)) {
            effects = effects.escalated(text("justification").unwrap_or(""));
        }
    }
    effects
}

/// A tool with fixed behaviour supplied as a closure.
pub struct FnTool<F> {
    pub name: String,
    pub f: F,
}

pub fn fn_tool<F>(name: &str, f: F) -> Arc<FnTool<F>>
where
    F: Fn(Value, &ToolCallContext) -> Result<ToolOutput, ToolError> + Send + Sync + 'static,
{
    Arc::new(FnTool {
        name: name.to_owned(),
        f,
    })
}

#[async_trait]
impl<F> Tool for FnTool<F>
where
    F: Fn(Value, &ToolCallContext) -> Result<ToolOutput, ToolError> + Send + Sync + 'static,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        "a closure"
    }

    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }

    fn effects(&self, args: &Value) -> ToolEffects {
        effects_like_builtins(&self.name, args)
    }

    async fn execute(&self, args: Value, call: &ToolCallContext) -> Result<ToolOutput, ToolError> {
        (self.f)(args, call)
    }
}

/// Registers listeners on every phase that log their names.
pub fn observe_phases(ctx: &Context, log: &Log) {
    let l = log.clone();
    let _ = ctx
        .on_waterfall::<ToolsPreExecute, _>(move |exec, next| {
            push(&l, format!("pre:{}", exec.call_id));
            next.run(exec)
        })
        .unwrap();
    let l = log.clone();
    let _ = ctx
        .on_waterfall::<ToolsExecute, _>(move |call, next| {
            let l = l.clone();
            async move {
                push(&l, "execute:enter");
                let out = next.run(call).await;
                push(&l, "execute:leave");
                out
            }
            .boxed()
        })
        .unwrap();
    let l = log.clone();
    let _ = ctx
        .on_waterfall::<ToolsPostExecute, _>(move |input, next| {
            push(&l, format!("post:{}", input.result().text()));
            next.run(input)
        })
        .unwrap();
    let l = log.clone();
    let _ = ctx
        .on::<ToolsResult>(move |n| push(&l, format!("result:{}", n.result.text())))
        .unwrap();
}

/// The texts of a result's additional contexts, in order.
pub fn context_texts(result: &dsh_tools::ToolCallResult) -> Vec<String> {
    result
        .additional_contexts
        .iter()
        .map(dsh_session::Message::text)
        .collect()
}
