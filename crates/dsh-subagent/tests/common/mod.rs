//! Shared harness for subagent tests: the real core services, the subagent runtime and tools,
//! scripted models, and log helpers.

#![allow(dead_code, clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::Arc;

use dsh_agent::events::{AgentCreated, AgentDisposed, AgentRequest, InboxInserted};
use dsh_agent::{AgentHandle, AgentOptions, AgentRef, CreateAgentOptions};
use dsh_agent_loop::{Core, CoreConfig, mount_core};
use dsh_kernel::{Context, PluginHandle};
use dsh_session::{
    CallId, ContentBlock, EventKind, Message, SessionCreated, SessionDisposed, SessionEvent,
    SessionEventFired, SessionMeta, SessionOrigin, TurnEndReason, check_balanced,
    relational_validator,
};
use dsh_subagent::{SubagentConfig, SubagentPlugin, SubagentRuntime};
use dsh_testkit::{Gate, Script, ScriptedAdapter};
use dsh_tools::{ToolCallResult, ToolCaller, ToolExec};
use parking_lot::Mutex;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// The route children use in a split harness.
pub const CHILD_ROUTE: &str = "child-scripted";

pub struct H {
    pub ctx: Context,
    pub core: Core,
    /// Serves the parent (and, in a shared harness, the children too, in FIFO order).
    pub adapter: Arc<ScriptedAdapter>,
    /// Serves the children in a split harness.
    pub child_adapter: Arc<ScriptedAdapter>,
    pub runtime: Arc<SubagentRuntime>,
    pub plugin: Option<PluginHandle>,
    /// Every agent announced, in order.
    pub created: Arc<Mutex<Vec<AgentRef>>>,
    /// `agent:<id>` / `session:<id>` per disposal, in order.
    pub disposals: Arc<Mutex<Vec<String>>>,
}

/// One scripted model serves parent and child requests in FIFO order.
pub async fn harness() -> H {
    build(SubagentConfig::default(), false).await
}

/// Like [`harness`], with sessions kept in JSONL files under `home` (so a finished child can
/// be loaded again and continued).
pub async fn persistent_harness(home: &std::path::Path) -> H {
    persistent(home, false).await
}

/// [`persistent_harness`] whose children are served by `h.child_adapter` (see
/// [`split_harness`]).
pub async fn persistent_split_harness(home: &std::path::Path) -> H {
    persistent(home, true).await
}

async fn persistent(home: &std::path::Path, split: bool) -> H {
    let ctx = Context::new();
    let store = dsh_store_jsonl::JsonlStore::new(home.join("sessions"));
    std::mem::forget(
        ctx.plugin(dsh_store_jsonl::JsonlPersistencePlugin::new(store))
            .await
            .unwrap(),
    );
    build_on(ctx, SubagentConfig::default(), split).await
}

/// Like [`harness`] with a runtime configured by `config`.
pub async fn harness_with(config: SubagentConfig) -> H {
    build(config, false).await
}

/// Children's requests are served by `h.child_adapter`, so a background child and its parent
/// can run at the same time deterministically.
pub async fn split_harness() -> H {
    build(SubagentConfig::default(), true).await
}

pub async fn split_harness_with(config: SubagentConfig) -> H {
    build(config, true).await
}

async fn build(config: SubagentConfig, split: bool) -> H {
    build_on(Context::new(), config, split).await
}

async fn build_on(ctx: Context, config: SubagentConfig, split: bool) -> H {
    let core = mount_core(&ctx, CoreConfig::default()).await.unwrap();
    let adapter = Arc::new(ScriptedAdapter::new());
    std::mem::forget(adapter.register(&core.llm).unwrap());
    let child_adapter = Arc::new(ScriptedAdapter::new());
    std::mem::forget(
        core.llm
            .register_adapter(&[CHILD_ROUTE], child_adapter.clone())
            .unwrap(),
    );
    if split {
        let _ = ctx
            .on_waterfall::<AgentRequest, _>(|mut proposal, next| async move {
                if proposal.agent.session().header().origin == Some(SessionOrigin::Subagent) {
                    proposal.config.provider = CHILD_ROUTE.to_owned();
                }
                next.run(proposal).await
            })
            .unwrap();
    }
    let _ = ctx
        .on::<SessionCreated>(|s| {
            s.add_validator(relational_validator());
        })
        .unwrap();
    let created: Arc<Mutex<Vec<AgentRef>>> = Arc::default();
    let c = created.clone();
    let _ = ctx
        .on::<AgentCreated>(move |a| c.lock().push(a.clone()))
        .unwrap();
    let disposals: Arc<Mutex<Vec<String>>> = Arc::default();
    let d = disposals.clone();
    let _ = ctx
        .on::<AgentDisposed>(move |a| d.lock().push(format!("agent:{}", a.id())))
        .unwrap();
    let d = disposals.clone();
    let _ = ctx
        .on::<SessionDisposed>(move |s| d.lock().push(format!("session:{}", s.id())))
        .unwrap();
    let plugin = ctx.plugin(SubagentPlugin::new(config)).await.unwrap();
    let runtime = SubagentRuntime::of(&ctx).unwrap();
    H {
        ctx,
        core,
        adapter,
        child_adapter,
        runtime,
        plugin: Some(plugin),
        created,
        disposals,
    }
}

/// A root context with the core and a runtime provided at the root (outliving any tools
/// plugin), children served by `child_adapter`, and no tools plugin mounted yet.
pub async fn rooted_harness() -> H {
    let mut h = split_harness().await;
    if let Some(plugin) = h.plugin.take() {
        plugin.dispose().await;
    }
    assert!(SubagentRuntime::of(&h.ctx).is_none());
    h.runtime = SubagentRuntime::provide(&h.ctx, SubagentConfig::default()).unwrap();
    h
}

pub fn cwd() -> PathBuf {
    std::env::temp_dir()
}

impl H {
    /// A top-level agent on the scripted route, working in [`cwd`].
    pub async fn parent(&self, id: &str) -> AgentHandle {
        self.agent_with(
            id,
            SessionMeta {
                cwd: Some(cwd()),
                ..SessionMeta::default()
            },
        )
        .await
    }

    pub async fn agent_with(&self, id: &str, meta: SessionMeta) -> AgentHandle {
        self.core
            .registry
            .create(
                &self.ctx,
                CreateAgentOptions {
                    session_id: Some(id.into()),
                    meta,
                    agent_options: AgentOptions::route(ScriptedAdapter::ROUTE, "test-model"),
                    ..CreateAgentOptions::default()
                },
            )
            .await
            .unwrap()
    }

    /// Parent `p` delegating "work long" to a foreground child that streams `partial` and then
    /// hangs; returns once the child's partial output is logged. The handle is the parent's.
    pub async fn delegating_to_a_hanging_child(
        &self,
        partial: &str,
    ) -> (AgentHandle, AgentRef, AgentRef) {
        self.script(Script::tool_call(
            "c1",
            "subagent",
            &subagent_args("work long"),
        ))
        .script(Script::partial_then_hang(partial));
        let handle = self.parent("p").await;
        let parent = handle.agent().clone();
        parent.followup(Message::user_text("go")).unwrap();
        self.adapter.wait_for_requests(2).await;
        let child = self.children()[0].clone();
        until(&child, is("assistant/chunk")).await;
        (handle, parent, child)
    }

    pub fn script(&self, script: Script) -> &Self {
        self.adapter.push(script);
        self
    }

    pub fn child_script(&self, script: Script) -> &Self {
        self.child_adapter.push(script);
        self
    }

    /// Agents announced with origin `subagent`, in order.
    pub fn children(&self) -> Vec<AgentRef> {
        self.created
            .lock()
            .iter()
            .filter(|a| a.session().header().origin == Some(SessionOrigin::Subagent))
            .cloned()
            .collect()
    }

    pub fn disposals(&self) -> Vec<String> {
        self.disposals.lock().clone()
    }

    /// Runs one call through the tool pipeline as `caller`.
    pub async fn call(&self, tool: &str, args: Value, caller: Option<&AgentRef>) -> ToolCallResult {
        let exec = ToolExec::new(
            CallId::new("direct-1"),
            tool,
            args.to_string(),
            caller.map(caller_of),
            CancellationToken::new(),
        );
        self.core.tools.run(&exec).await
    }
}

pub fn caller_of(agent: &AgentRef) -> ToolCaller {
    ToolCaller {
        agent_id: agent.id().clone(),
        session: agent.session().clone(),
        ctx: agent.ctx().clone(),
        cwd: agent.session().header().cwd.clone(),
    }
}

/// `script`, but parked at `gate` before its first chunk.
pub fn gated(gate: &Gate, script: Script) -> Script {
    let mut out = Script::new().wait_for(gate);
    for step in script.steps() {
        out = out.then(step.clone());
    }
    out
}

pub fn subagent_args(prompt: &str) -> String {
    serde_json::json!({"description": "look into it", "prompt": prompt}).to_string()
}

pub fn background_args(prompt: &str) -> String {
    serde_json::json!({"description": "look into it", "prompt": prompt, "run_in_background": true})
        .to_string()
}

pub fn turn_ends(agent: &AgentRef) -> Vec<TurnEndReason> {
    agent
        .session()
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::TurnEnd(t) => Some(t.reason.clone()),
            _ => None,
        })
        .collect()
}

/// `(call id, text, error code)` of every tool result in the log.
pub fn tool_results(agent: &AgentRef) -> Vec<(String, String, Option<String>)> {
    agent
        .session()
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult(r) => match &r.message.content[0] {
                ContentBlock::ToolResult {
                    tool_call_id,
                    content,
                    ..
                } => Some((
                    tool_call_id.to_string(),
                    content.iter().filter_map(ContentBlock::as_text).collect(),
                    r.error.as_ref().map(|e| e.code.clone()),
                )),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

pub fn result_of(agent: &AgentRef, call: &str) -> (String, Option<String>) {
    let (_, text, code) = tool_results(agent)
        .into_iter()
        .find(|(id, _, _)| id == call)
        .unwrap_or_else(|| panic!("no tool result for {call}"));
    (text, code)
}

/// A `subagent` call's report without the line naming the child's session (which
/// `resume.rs` checks on its own).
pub fn report_of(agent: &AgentRef, call: &str) -> (String, Option<String>) {
    let (text, code) = result_of(agent, call);
    let report = match text.rsplit_once("\n\n[subagent session ") {
        Some((report, note)) if note.ends_with(": continue it with `resume`]") => report.to_owned(),
        _ => text,
    };
    (report, code)
}

/// The user messages in the log.
pub fn user_messages(agent: &AgentRef) -> Vec<Arc<Message>> {
    agent
        .session()
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::UserMessage(m) => Some(m.clone()),
            _ => None,
        })
        .collect()
}

/// The texts of every message in the nth request `adapter` received.
pub fn request_texts(adapter: &ScriptedAdapter, n: usize) -> Vec<String> {
    adapter.request_texts(n)
}

/// Resolves once `agent`'s log holds an event matching `pred` (already there, or appended
/// later).
pub async fn until(agent: &AgentRef, pred: impl Fn(&SessionEvent) -> bool + Send + Sync + 'static) {
    let notify = Arc::new(tokio::sync::Notify::new());
    let n = notify.clone();
    let reg = agent
        .ctx()
        .on::<SessionEventFired>(move |_| n.notify_waiters())
        .unwrap();
    loop {
        let notified = notify.notified();
        if agent.session().events().iter().any(|e| pred(e)) {
            break;
        }
        notified.await;
    }
    reg.dispose().await;
}

/// Resolves once `agent`'s log holds `n` `turn/end`s.
pub async fn turns_ended(agent: &AgentRef, n: usize) {
    let notify = Arc::new(tokio::sync::Notify::new());
    let x = notify.clone();
    let reg = agent
        .ctx()
        .on::<SessionEventFired>(move |_| x.notify_waiters())
        .unwrap();
    loop {
        let notified = notify.notified();
        if turn_ends(agent).len() >= n {
            break;
        }
        notified.await;
    }
    reg.dispose().await;
}

/// A receiver of every message inserted into `agent`'s inbox from now on.
pub fn inbox_inserts(
    h: &H,
    agent: &AgentRef,
) -> tokio::sync::mpsc::UnboundedReceiver<Arc<Message>> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let id = agent.id().clone();
    let _ = h
        .ctx
        .on::<InboxInserted>(move |notice| {
            if *notice.agent.id() == id {
                let _ = tx.send(notice.message.clone());
            }
        })
        .unwrap();
    rx
}

pub fn assert_balanced(agent: &AgentRef) {
    check_balanced(&agent.session().events()).unwrap();
}

pub fn is(ty: &'static str) -> impl Fn(&SessionEvent) -> bool + Send + Sync + 'static {
    move |e| e.type_name() == ty
}
