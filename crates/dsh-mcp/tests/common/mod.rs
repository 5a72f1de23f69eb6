//! A harness for MCP tests: the real core services with the scripted model, MCP servers that
//! are real `dsh-mcp-test-server` processes, and bounded waits.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]
// Test helpers: a failed setup step should panic right there.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use dsh_agent::{AgentHandle, AgentOptions, AgentRef, CreateAgentOptions};
use dsh_agent_loop::{Core, CoreConfig, mount_core};
use dsh_kernel::{Context, PluginHandle};
use dsh_mcp::{McpOptions, McpPlugin, McpServers, ServerConfig};
use dsh_session::{
    ContentBlock, EventKind, Message, SessionCreated, SessionMeta, relational_validator,
};
use dsh_testkit::ScriptedAdapter;

/// How long a test waits for anything a server process does before failing.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// The test server binary.
pub fn server_bin() -> &'static str {
    env!("CARGO_BIN_EXE_dsh-mcp-test-server")
}

/// A stdio server `name` running the test server with `args` (no guard is installed unless a
/// test installs one, so its calls run without asking).
pub fn test_server(name: &str, args: &[&str]) -> ServerConfig {
    ServerConfig::stdio(
        name,
        server_bin(),
        args.iter().map(|a| (*a).to_owned()).collect(),
    )
}

/// A private directory for one test's logs.
pub fn scratch() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// The lines of a server's event log (empty until it exists).
pub fn log_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Waits (bounded) until the log at `path` holds `line`. Polling is the only way to watch
/// another process's file; the deadline turns a regression into a failure.
pub async fn until_logged(path: &Path, line: &str) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !log_lines(path).iter().any(|l| l == line) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server never logged {line:?}; log: {:?}",
            log_lines(path)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Whether process `pid` exists (a zombie counts as gone: it runs nothing).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// Waits (bounded) until process `pid` is gone.
pub async fn until_gone(pid: u32) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while alive(pid) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "process {pid} outlived its owner"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The pid a server logged as `<prefix> <pid>`.
pub async fn logged_pid(path: &Path, prefix: &str) -> u32 {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(pid) = log_lines(path)
            .iter()
            .find_map(|l| l.strip_prefix(&format!("{prefix} ")).map(str::to_owned))
        {
            return pid.parse().unwrap();
        }
        assert!(tokio::time::Instant::now() < deadline, "no `{prefix}` line");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub struct World {
    pub ctx: Context,
    pub core: Core,
    pub adapter: Arc<ScriptedAdapter>,
    pub mcp: Option<PluginHandle>,
}

/// The core with the scripted model and no MCP servers yet.
pub async fn world() -> World {
    let ctx = Context::new();
    let core = mount_core(&ctx, CoreConfig::default()).await.unwrap();
    let adapter = Arc::new(ScriptedAdapter::new());
    std::mem::forget(adapter.register(&core.llm).unwrap());
    // Where images servers return are kept (the harness provides the file-backed store).
    let attachments: Arc<dyn dsh_session::Attachments> =
        Arc::new(dsh_testkit::MemoryAttachments::new());
    ctx.provide::<dyn dsh_session::Attachments>(attachments)
        .unwrap();
    let _ = ctx
        .on::<SessionCreated>(|s| {
            s.add_validator(relational_validator());
        })
        .unwrap();
    World {
        ctx,
        core,
        adapter,
        mcp: None,
    }
}

/// The core plus `configs` mounted with `McpPlugin` (process-wide servers).
pub async fn world_with(configs: Vec<ServerConfig>) -> World {
    world_with_options(configs, McpOptions::new(std::env::temp_dir())).await
}

pub async fn world_with_options(configs: Vec<ServerConfig>, options: McpOptions) -> World {
    let mut w = world().await;
    w.mcp = Some(
        w.ctx
            .plugin(McpPlugin::new(configs, options))
            .await
            .unwrap(),
    );
    w
}

impl World {
    pub fn servers(&self) -> Arc<McpServers> {
        self.mcp
            .as_ref()
            .and_then(|p| p.ctx().get::<McpServers>())
            .unwrap()
    }

    pub async fn agent(&self, id: &str) -> AgentHandle {
        self.core
            .registry
            .create(
                &self.ctx,
                CreateAgentOptions {
                    session_id: Some(id.into()),
                    meta: SessionMeta {
                        cwd: Some(std::env::temp_dir()),
                        ..SessionMeta::default()
                    },
                    agent_options: AgentOptions::route(ScriptedAdapter::ROUTE, "test-model"),
                    ..CreateAgentOptions::default()
                },
            )
            .await
            .unwrap()
    }

    /// Sends `prompt` and waits (bounded) until the agent is idle again.
    pub async fn run(&self, agent: &AgentRef, prompt: &str) {
        agent.followup(Message::user_text(prompt)).unwrap();
        tokio::time::timeout(PATIENCE, agent.when_idle())
            .await
            .expect("the turn did not end");
    }

    /// Unmounts the MCP plugin (stopping every server).
    pub async fn stop_servers(&mut self) {
        if let Some(plugin) = self.mcp.take() {
            tokio::time::timeout(PATIENCE, plugin.dispose())
                .await
                .expect("stopping the servers hung");
        }
    }
}

/// `(call id, text, is_error, error code)` of every tool result in the log.
pub fn tool_results(agent: &AgentRef) -> Vec<(String, String, bool, Option<String>)> {
    agent
        .session()
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult(r) => match &r.message.content[0] {
                ContentBlock::ToolResult {
                    tool_call_id,
                    content,
                    is_error,
                    ..
                } => Some((
                    tool_call_id.to_string(),
                    content.iter().filter_map(ContentBlock::as_text).collect(),
                    *is_error,
                    r.error.as_ref().map(|e| e.code.clone()),
                )),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The first image block in the result of call `call_id`.
pub fn result_image(agent: &AgentRef, call_id: &str) -> Option<dsh_session::ImageRef> {
    agent.session().events().iter().find_map(|e| match &e.kind {
        EventKind::ToolResult(r) => match &r.message.content[0] {
            ContentBlock::ToolResult {
                tool_call_id,
                content,
                ..
            } if tool_call_id.as_str() == call_id => content.iter().find_map(|b| match b {
                ContentBlock::Image { attachment } => Some(attachment.clone()),
                _ => None,
            }),
            _ => None,
        },
        _ => None,
    })
}

/// The tool names offered in the adapter's `n`th request (0-based).
pub fn offered(adapter: &ScriptedAdapter, n: usize) -> Vec<String> {
    let mut names: Vec<String> = adapter.requests()[n]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .filter(|n| n.starts_with("mcp__"))
        .collect();
    names.sort();
    names
}

pub fn log_path(dir: &Path) -> PathBuf {
    dir.join("server.log")
}
