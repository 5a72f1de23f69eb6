//! A runtime with the built-in tools mounted on a real shell executor, callers standing in
//! for sessions, a minimal driverless agent for completion notices, and bounded waits.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]
// Test helpers: a failed setup step should panic right there.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use dsh_agent::{
    Agent, AgentDetach, AgentError, AgentLocal, AgentOptions, AgentRef, AgentRegistry, AgentStatus,
    CancelCause, CancelOptions, Inbox, InboxTarget,
};
use dsh_kernel::{Context, PluginHandle, ScopeTag};
use dsh_session::{
    CallId, Message, MessageId, Session, SessionHeader, SessionId, SessionMeta, SessionStore,
};
use dsh_shell::{LocalShellExecutor, ShellConfig, ShellExecutor, TaskId, TaskStatus};
use dsh_tools::{ToolCallResult, ToolCaller, ToolExec, ToolRuntime};
use dsh_tools_builtin::BuiltinToolsPlugin;
use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// How long a test waits for anything an external process does before failing.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// Executor settings with a short kill grace so stop tests stay quick.
pub fn config() -> ShellConfig {
    ShellConfig {
        grace: Duration::from_millis(300),
        ..ShellConfig::default()
    }
}

/// A root context with the tool runtime, a session store, an agent registry, a real local
/// shell executor and the built-in tools mounted globally.
pub struct World {
    pub ctx: Context,
    pub runtime: Arc<ToolRuntime>,
    pub executor: Arc<LocalShellExecutor>,
    pub store: Arc<SessionStore>,
    pub registry: Arc<AgentRegistry>,
    pub plugin: PluginHandle,
}

pub async fn world() -> World {
    world_with(config()).await
}

pub async fn world_with(config: ShellConfig) -> World {
    let ctx = Context::new();
    let runtime = ToolRuntime::new(&ctx);
    ctx.provide::<ToolRuntime>(runtime.clone()).unwrap();
    let store = SessionStore::new(&ctx);
    let registry = AgentRegistry::new(&ctx);
    ctx.provide::<AgentRegistry>(registry.clone()).unwrap();
    let executor = Arc::new(LocalShellExecutor::new(config).unwrap());
    let shared: Arc<dyn ShellExecutor> = executor.clone();
    ctx.provide::<dyn ShellExecutor>(shared).unwrap();
    let plugin = ctx.plugin(BuiltinToolsPlugin).await.unwrap();
    World {
        ctx,
        runtime,
        executor,
        store,
        registry,
        plugin,
    }
}

impl World {
    /// A caller standing for session `id` (not registered as a live agent).
    pub fn caller(&self, id: &str) -> ToolCaller {
        self.caller_in(id, None)
    }

    /// A caller for session `id` whose session working directory is `cwd`.
    pub fn caller_in(&self, id: &str, cwd: Option<&Path>) -> ToolCaller {
        let ctx = self.ctx.tagged_child(id, ScopeTag::new(id)).unwrap();
        let session_id = SessionId::new(id);
        let session = Session::new(
            SessionHeader::new(session_id.clone(), 0, SessionMeta::default()),
            None,
        )
        .unwrap();
        ToolCaller {
            agent_id: session_id,
            session,
            ctx,
            cwd: cwd.map(Path::to_path_buf),
        }
    }

    /// Runs one call through the whole pipeline.
    pub async fn call(
        &self,
        tool: &str,
        args: Value,
        caller: Option<&ToolCaller>,
    ) -> ToolCallResult {
        self.call_with(tool, args, caller, CancellationToken::new())
            .await
    }

    /// Runs one call whose cancellation the test controls.
    pub async fn call_with(
        &self,
        tool: &str,
        args: Value,
        caller: Option<&ToolCaller>,
        cancel: CancellationToken,
    ) -> ToolCallResult {
        let exec = ToolExec::new(
            CallId::new("call-1"),
            tool,
            args.to_string(),
            caller.cloned(),
            cancel,
        );
        self.runtime.run(&exec).await
    }

    /// Starts `command` as a background task through `bash`; returns its id.
    pub async fn start(&self, command: &str, caller: Option<&ToolCaller>) -> TaskId {
        let result = self
            .call(
                "bash",
                serde_json::json!({
                    "command": command,
                    "description": "start a background task",
                    "run_in_background": true,
                }),
                caller,
            )
            .await;
        assert!(!result.is_error, "{}", result.text());
        let text = result.text();
        let id = text
            .strip_prefix("started background task ")
            .unwrap_or_else(|| panic!("unexpected start result {text:?}"));
        TaskId::new(id)
    }

    /// The task's status as the executor lists it (no output is consumed).
    pub fn status(&self, id: &TaskId) -> TaskStatus {
        self.executor
            .list()
            .into_iter()
            .find(|t| t.id == *id)
            .unwrap()
            .status
    }

    /// Waits (bounded polling: the process ends at its own pace) until the task has ended.
    pub async fn wait_finished(&self, id: &TaskId) -> TaskStatus {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let status = self.status(id);
            if !status.is_running() {
                return status;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "task {id} never finished"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Reads through `bash_output` until `want` has appeared in the accumulated text.
    pub async fn read_until(&self, id: &TaskId, caller: Option<&ToolCaller>, want: &str) -> String {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        let mut seen = String::new();
        loop {
            let result = self
                .call(
                    "bash_output",
                    serde_json::json!({"task_id": id.as_str()}),
                    caller,
                )
                .await;
            assert!(!result.is_error, "{}", result.text());
            seen.push_str(&result.text());
            seen.push('\n');
            if seen.contains(want) {
                return seen;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "never saw {want:?}; got {seen:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// A live, registered test agent with id `id`.
    pub fn agent(&self, id: &str) -> Arc<TestAgent> {
        let session = self
            .store
            .prepare(Some(id.into()), SessionMeta::default(), None)
            .unwrap();
        let agent = test_agent(&self.ctx, session.clone());
        let _ = self
            .store
            .enter(&session, agent.ctx().tag().cloned())
            .unwrap();
        let a: AgentRef = agent.clone();
        let _ = self.registry.register(&self.ctx, a).unwrap();
        agent
    }

    /// A live test agent with the capability to detach it (which announces its disposal).
    pub fn detachable_agent(&self, id: &str) -> (Arc<TestAgent>, AgentDetach) {
        let session = self
            .store
            .prepare(Some(id.into()), SessionMeta::default(), None)
            .unwrap();
        let agent = test_agent(&self.ctx, session);
        let a: AgentRef = agent.clone();
        let detach = self.registry.enter(a.clone(), None).unwrap();
        self.registry.announce(&a).unwrap();
        (agent, detach)
    }

    pub async fn shutdown(&self) {
        self.executor.dispose().await;
    }
}

/// The caller a live agent's calls carry.
pub fn caller_of(agent: &TestAgent, cwd: Option<&Path>) -> ToolCaller {
    ToolCaller {
        agent_id: agent.id().clone(),
        session: agent.session().clone(),
        ctx: agent.ctx().clone(),
        cwd: cwd.map(Path::to_path_buf),
    }
}

/// A driverless agent: `send` appends to its inbox, nothing ever runs.
pub struct TestAgent {
    session: Arc<Session>,
    ctx: Context,
    inbox: Inbox,
    options: AgentOptions,
}

impl Agent for TestAgent {
    fn id(&self) -> &SessionId {
        self.session.id()
    }
    fn session(&self) -> &Arc<Session> {
        &self.session
    }
    fn status(&self) -> AgentStatus {
        AgentStatus::Idle
    }
    fn options(&self) -> &AgentOptions {
        &self.options
    }
    fn ctx(&self) -> &Context {
        &self.ctx
    }
    fn inbox(&self) -> &Inbox {
        &self.inbox
    }
    fn send(
        &self,
        message: Message,
        target: InboxTarget,
        _wakeup: bool,
    ) -> Result<MessageId, AgentError> {
        let id = message.id.clone();
        self.inbox.append(target, message)?;
        Ok(id)
    }
    fn cancel(&self, _cause: CancelCause, options: CancelOptions) {
        if !options.keep_inbox {
            let _ = self.inbox.clear();
        }
    }
    fn when_idle(&self) -> BoxFuture<'static, ()> {
        futures::future::ready(()).boxed()
    }
}

fn test_agent(root: &Context, session: Arc<Session>) -> Arc<TestAgent> {
    let tag = ScopeTag::new(session.id().as_str());
    let base = root.tagged_child(session.id().as_str(), tag).unwrap();
    Arc::new_cyclic(|weak: &std::sync::Weak<TestAgent>| {
        let weak_dyn: std::sync::Weak<dyn Agent> = weak.clone();
        let ctx = base.with_local(Arc::new(AgentLocal(weak_dyn.clone())));
        let inbox = Inbox::restore(session.clone()).unwrap();
        inbox.bind(weak_dyn);
        TestAgent {
            session,
            ctx,
            inbox,
            options: AgentOptions::default(),
        }
    })
}

/// A fresh temporary directory (unique per test, removed on drop).
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// `path` with symlinks resolved, for comparing with what a command prints.
pub fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap()
}
