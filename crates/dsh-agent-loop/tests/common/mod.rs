//! Shared harness for loop tests: the real core services, the scripted adapter, an event log
//! and small test tools.

#![allow(dead_code, clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use dsh_agent::events::{AgentStatusChanged, StatusChange};
use dsh_agent::*;
use dsh_agent_loop::{Core, CoreConfig, LoopConfig, mount_core};
use dsh_kernel::Context;
use dsh_session::*;
#[allow(unused_imports)]
pub use dsh_testkit::bounded;
use dsh_testkit::{Gate, Script, ScriptedAdapter};
use dsh_tools::{Tool, ToolCallContext, ToolError, ToolOutput};
use parking_lot::Mutex;
use serde_json::{Value, json};

pub type Log = Arc<Mutex<Vec<String>>>;

pub struct H {
    pub ctx: Context,
    pub core: Core,
    pub adapter: Arc<ScriptedAdapter>,
    pub statuses: Arc<Mutex<Vec<(SessionId, AgentStatus)>>>,
    pub log: Log,
}

pub async fn harness() -> H {
    harness_with(CoreConfig::default()).await
}

pub async fn harness_with(config: CoreConfig) -> H {
    let ctx = Context::new();
    let core = mount_core(&ctx, config).await.unwrap();
    let adapter = Arc::new(ScriptedAdapter::new());
    let _registration = adapter.register(&core.llm).unwrap();
    std::mem::forget(_registration);
    let statuses: Arc<Mutex<Vec<(SessionId, AgentStatus)>>> = Arc::default();
    let s = statuses.clone();
    let _ = ctx
        .on::<AgentStatusChanged>(move |c: &StatusChange| {
            s.lock().push((c.agent.id().clone(), c.status))
        })
        .unwrap();
    // Every test also checks the relational invariants on every append.
    let _ = ctx
        .on::<SessionCreated>(|s| {
            s.add_validator(relational_validator());
        })
        .unwrap();
    H {
        ctx,
        core,
        adapter,
        statuses,
        log: Arc::default(),
    }
}

pub fn parallel(n: usize) -> CoreConfig {
    CoreConfig {
        loop_config: LoopConfig {
            max_parallel_tool_calls: n,
            ..LoopConfig::default()
        },
        ..CoreConfig::default()
    }
}

impl H {
    pub async fn agent(&self) -> AgentHandle {
        self.agent_named("s").await
    }

    pub async fn agent_named(&self, id: &str) -> AgentHandle {
        self.core
            .registry
            .create(
                &self.ctx,
                CreateAgentOptions {
                    session_id: Some(id.into()),
                    agent_options: AgentOptions::route("scripted", "test-model"),
                    ..CreateAgentOptions::default()
                },
            )
            .await
            .unwrap()
    }

    pub fn script(&self, script: Script) -> &Self {
        self.adapter.push(script);
        self
    }

    pub fn statuses_of(&self, id: &str) -> Vec<AgentStatus> {
        self.statuses
            .lock()
            .iter()
            .filter(|(s, _)| s == id)
            .map(|(_, st)| *st)
            .collect()
    }

    pub fn log(&self) -> Vec<String> {
        self.log.lock().clone()
    }

    pub fn tool(&self, tool: TestTool) {
        let _ = self.core.tools.register(&self.ctx, Arc::new(tool)).unwrap();
    }
}

pub fn types(agent: &AgentRef) -> Vec<String> {
    agent
        .session()
        .events()
        .iter()
        .map(|e| e.type_name().to_owned())
        .collect()
}

/// Event types without the streaming noise and inbox splices.
pub fn boundaries(agent: &AgentRef) -> Vec<String> {
    types(agent)
        .into_iter()
        .filter(|t| {
            !matches!(
                t.as_str(),
                "assistant/chunk" | "agent/inbox/spliced" | "request/header" | "request/context"
            )
        })
        .collect()
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

pub fn aborted(cause: CancelCause) -> TurnEndReason {
    TurnEndReason::Aborted { reason: cause }
}

pub fn user_texts(agent: &AgentRef) -> Vec<String> {
    agent
        .session()
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::UserMessage(m) => Some(m.text()),
            _ => None,
        })
        .collect()
}

pub fn tool_results(agent: &AgentRef) -> Vec<(String, String, Option<String>)> {
    agent
        .session()
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult(r) => {
                let (id, text) = match &r.message.content[0] {
                    ContentBlock::ToolResult {
                        tool_call_id,
                        content,
                        ..
                    } => (
                        tool_call_id.to_string(),
                        content.iter().filter_map(ContentBlock::as_text).collect(),
                    ),
                    _ => unreachable!(),
                };
                Some((id, text, r.error.as_ref().map(|e| e.code.clone())))
            }
            _ => None,
        })
        .collect()
}

/// The texts of every user-visible message in the nth request the adapter received.
pub fn request_texts(h: &H, n: usize) -> Vec<String> {
    h.adapter.request_texts(n)
}

/// `script`, but parked at `gate` before its first chunk.
pub fn gated(gate: &Gate, script: Script) -> Script {
    let mut out = Script::new().wait_for(gate);
    for step in script.steps() {
        out = out.then(step.clone());
    }
    out
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

pub fn is(ty: &'static str) -> impl Fn(&SessionEvent) -> bool + Send + Sync + 'static {
    move |e| e.type_name() == ty
}

pub fn assert_balanced(agent: &AgentRef) {
    check_balanced(&agent.session().events()).unwrap();
}

/// A configurable test tool: logs `<name>-start-<call>` / `<name>-end-<call>`, optionally
/// waits at a per-call gate, and echoes its `text` argument.
pub struct TestTool {
    pub name: String,
    pub parallel: bool,
    pub log: Log,
    pub gates: Arc<Mutex<HashMap<String, Gate>>>,
    pub fail: bool,
    pub conclude: bool,
    pub context: Option<String>,
    pub vision: bool,
}

impl TestTool {
    pub fn new(name: &str, log: &Log) -> Self {
        Self {
            name: name.into(),
            parallel: false,
            log: log.clone(),
            gates: Arc::default(),
            fail: false,
            conclude: false,
            context: None,
            vision: false,
        }
    }

    /// The tool returns images: only a model that reads them is offered it.
    pub fn vision(mut self) -> Self {
        self.vision = true;
        self
    }

    pub fn parallel(mut self) -> Self {
        self.parallel = true;
        self
    }

    /// The body of call `id` waits at the returned gate.
    pub fn gate(&self, id: &str) -> Gate {
        self.gates.lock().entry(id.to_owned()).or_default().clone()
    }
}

#[async_trait]
impl Tool for TestTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        "test tool"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"text": {"type": "string"}}})
    }
    fn is_concurrency_safe(&self, _args: &Value) -> bool {
        self.parallel
    }
    fn needs_vision(&self) -> bool {
        self.vision
    }
    async fn execute(&self, args: Value, call: &ToolCallContext) -> Result<ToolOutput, ToolError> {
        let id = call.call_id().to_string();
        self.log.lock().push(format!("{}-start-{id}", self.name));
        let gate = self.gates.lock().get(&id).cloned();
        if let Some(gate) = gate {
            gate.pass().await;
        }
        self.log.lock().push(format!("{}-end-{id}", self.name));
        if let Some(text) = &self.context {
            call.defer_context(Message::plugin_text("test", format!("{text}-{id}")));
        }
        if self.conclude {
            call.conclude_turn();
        }
        if self.fail {
            return Err(ToolError::new("tool failed on purpose"));
        }
        let text = args.get("text").and_then(Value::as_str).unwrap_or("");
        Ok(ToolOutput::text(format!("echo: {text}")))
    }
}

/// Statuses as observed by a listener must follow the phase order (INV-STAT-1): they start
/// `running`, alternate, and (once `when_idle` resolved) end `idle` (INV-STAT-3).
pub fn assert_status_order(statuses: &[AgentStatus]) {
    for (i, s) in statuses.iter().enumerate() {
        let expected = if i.is_multiple_of(2) {
            AgentStatus::Running
        } else {
            AgentStatus::Idle
        };
        assert_eq!(*s, expected, "status {i} out of phase order: {statuses:?}");
    }
    assert!(
        statuses.len().is_multiple_of(2),
        "the last idle was not published before when_idle resolved: {statuses:?}"
    );
}
