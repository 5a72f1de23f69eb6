//! A set of servers started together for one scope (a process, or one ACP session).
//!
//! Lifecycle:
//! 1. [`McpServers::start`] starts every enabled server at once, each bounded by its own
//!    start-up timeout, and returns without waiting: the rest of the harness keeps composing
//!    while servers boot. A server that fails is reported (log, the `on_failure` callback the
//!    front end gave) and left out; the others are unaffected.
//! 2. The first prompt assembly (`system-prompt/assemble`, which the loop runs at the start of
//!    every step, before `agent/pre-step`) waits until every start has settled, so the first
//!    model request already offers the tools of every server that came up; the cost is the
//!    slowest server's start, not the sum (they start concurrently).
//! 3. Tools enter the tool runtime only at that step boundary: the initial lists, and any list
//!    a server changes later (`notifications/tools/list_changed`). Between boundaries the
//!    offered tools never change, so neither does the prompt prefix. The assembly being built
//!    gets the same tools (it was collected a moment before the registry was brought up to
//!    date): this set's tools are replaced by its current ones, in the canonical lexicographic
//!    order when the list was in it (a deployment `tool_order` keeps them last).
//! 4. Disposing the scope (or [`McpServers::shutdown`]) unregisters the tools, closes every
//!    session and stops every server process group.

use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::Duration;

use std::collections::BTreeSet;

use dsh_kernel::{BoxError, Context, Registration};
use dsh_llm::ToolSchema;
use dsh_prompt::{PromptAssemble, PromptAssembly};
use dsh_session::Attachments;
use dsh_tools::{Tool, ToolRuntime};
use futures::future::join_all;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::ServerConfig;
use crate::error::McpError;
use crate::resources::{ListResources, ReadResource};
use crate::server::{ConnectEnv, McpServer};
use crate::tool::McpTool;

/// How long a step boundary waits for a server to list its changed tools before going on with
/// the old list.
const RELIST_WAIT: Duration = Duration::from_secs(5);

/// How many times a stdio server that went away is started again, over a set's life, before
/// it is reported and left failed.
pub const MAX_RESTARTS: u32 = 3;

/// The longest a step boundary waits for servers being started again.
const RESTART_WAIT: Duration = Duration::from_secs(60);

/// The pause before the first restart; each further one doubles it.
const RESTART_PAUSE: Duration = Duration::from_millis(250);

/// Called once per server that fails to start (after it was logged), so a front end can show
/// it where its user looks: stderr, the UI, an ACP message.
pub type FailureReporter = Arc<dyn Fn(&McpError) + Send + Sync>;

/// Reads one variable of dsh's own environment (the bearer tokens).
pub type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// How a set of servers is started and offered.
#[derive(Clone)]
pub struct McpOptions {
    /// Working directory of stdio servers whose config names none (the session's).
    pub cwd: PathBuf,
    /// Variables never passed to a server by name (the provider key variables).
    pub hidden_env: Vec<String>,
    /// Where start failures are shown besides the log.
    pub on_failure: Option<FailureReporter>,
    /// Where bearer tokens are read (default: the process environment).
    pub lookup: EnvLookup,
}

impl McpOptions {
    /// Options for servers working in `cwd`: hide nothing extra, report failures only in the
    /// log, read tokens from the process environment.
    pub fn new(cwd: impl Into<PathBuf>) -> Self {
        Self {
            cwd: cwd.into(),
            hidden_env: Vec::new(),
            on_failure: None,
            lookup: Arc::new(|name| std::env::var(name).ok().filter(|v| !v.is_empty())),
        }
    }
}

impl std::fmt::Debug for McpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpOptions")
            .field("cwd", &self.cwd)
            .field("hidden_env", &self.hidden_env)
            .finish_non_exhaustive()
    }
}

/// Where one server stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerState {
    /// `enabled = false`: configured, never started.
    Disabled,
    /// Starting (or listing its tools).
    Starting,
    /// Connected; its tools are offered.
    Ready,
    /// Failed to start; the reason.
    Failed(String),
}

/// One server as `dsh mcp list` shows it.
#[derive(Clone, Debug)]
pub struct ServerStatus {
    /// Its configured name.
    pub name: String,
    /// Where it stands.
    pub state: ServerState,
    /// The model-facing names of its offered tools (empty unless ready).
    pub tools: Vec<String>,
    /// Its resources as `URI (MIME type)` (empty unless ready).
    pub resources: Vec<String>,
    /// Its prompts as the commands a person types, with their arguments (empty unless ready).
    pub prompts: Vec<String>,
    /// The local server's process id.
    pub pid: Option<u32>,
}

#[derive(Default)]
struct Entry {
    state: Option<Result<Arc<McpServer>, String>>,
    /// The list generation registered in the tool runtime, and its registrations.
    applied: Option<u64>,
    registrations: Vec<Registration>,
    /// The schemas of the tools registered now (what an assembly must offer).
    registered: Vec<ToolSchema>,
}

/// The servers of one scope. See the module docs for the lifecycle.
pub struct McpServers {
    /// Itself, for the tools that look its servers up when called.
    me: Weak<McpServers>,
    configs: Vec<ServerConfig>,
    entries: Mutex<Vec<Entry>>,
    settled: watch::Sender<usize>,
    closing: CancellationToken,
    starts: Mutex<Vec<JoinHandle<()>>>,
    /// Serializes step-boundary updates of the registry (agents of one scope step concurrently).
    apply: tokio::sync::Mutex<()>,
    /// Every tool name this set ever registered (what an assembly may hold stale).
    ever: Mutex<BTreeSet<String>>,
    /// How many servers are being started again.
    restarting: watch::Sender<usize>,
    /// Bumped whenever a server's state changes after its start (a restart).
    changes: watch::Sender<u64>,
    /// What servers are started with (kept for restarts).
    options: Arc<McpOptions>,
    supervision: Option<Arc<dyn dsh_shell::Supervision>>,
    /// The resource tools, registered once a server offers resources.
    resource_tools: Mutex<(Vec<Registration>, Vec<ToolSchema>)>,
    ctx: Context,
}

impl std::fmt::Debug for McpServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServers")
            .field("servers", &self.configs.len())
            .finish_non_exhaustive()
    }
}

impl McpServers {
    /// Starts every enabled server of `configs` in the background and wires the set into
    /// `ctx`: tools (registered at step boundaries through `ctx`, so an agent's context keeps
    /// them to that agent), the step-boundary listener, and shutdown when `ctx`'s scope is
    /// disposed. Stdio servers run under the [`dsh_shell::Supervision`] `ctx` provides, if
    /// any (dsh's: the session's sandbox, and every process a server starts is killed with
    /// it).
    /// Invalid configs are reported like failed starts.
    pub fn start(
        ctx: &Context,
        configs: Vec<ServerConfig>,
        options: McpOptions,
    ) -> Result<Arc<McpServers>, BoxError> {
        let set = Arc::new_cyclic(|me| McpServers {
            me: me.clone(),
            entries: Mutex::new(configs.iter().map(|_| Entry::default()).collect()),
            configs,
            settled: watch::channel(0).0,
            closing: CancellationToken::new(),
            starts: Mutex::new(Vec::new()),
            apply: tokio::sync::Mutex::new(()),
            ever: Mutex::new(BTreeSet::new()),
            resource_tools: Mutex::default(),
            restarting: watch::channel(0).0,
            changes: watch::channel(0).0,
            supervision: ctx.get::<dyn dsh_shell::Supervision>(),
            options: Arc::new(options),
            ctx: ctx.clone(),
        });
        // The scope owns the set (a caller may drop the returned handle): it lives, serves step
        // boundaries and list changes, until the scope is disposed, which stops it.
        let owned = set.clone();
        let _ = ctx
            .scope()
            .defer_async(move || async move { owned.shutdown().await })?;
        set.listen(ctx)?;
        let mut starts = Vec::new();
        for (index, config) in set.configs.iter().enumerate() {
            if !config.enabled {
                set.settle(index, None);
                continue;
            }
            let me = set.clone();
            starts.push(tokio::spawn(async move {
                let outcome = me.connect(index).await.map_err(|e| e.to_string());
                let started = outcome.as_ref().ok().cloned();
                me.settle(index, Some(outcome));
                if let Some(server) = started {
                    me.supervise(index, server);
                }
            }));
        }
        set.starts.lock().extend(starts);
        Ok(set)
    }

    /// Starts (or reaches) server `index`; a failure is logged and reported.
    async fn connect(&self, index: usize) -> Result<Arc<McpServer>, McpError> {
        let config = &self.configs[index];
        let env = ConnectEnv {
            cwd: &self.options.cwd,
            hidden_env: &self.options.hidden_env,
            lookup: &*self.options.lookup,
            closing: &self.closing,
            supervision: self.supervision.as_deref(),
        };
        let outcome = match config.validate() {
            Ok(()) => McpServer::connect(config, &env).await,
            Err(e) => Err(e),
        };
        match &outcome {
            Ok(server) => {
                tracing::info!(server = %config.name, tools = server.tools().1.len(), "MCP server ready");
            }
            Err(error) => self.report(error),
        }
        outcome
    }

    fn report(&self, error: &McpError) {
        tracing::warn!("{error}");
        if let Some(report) = &self.options.on_failure
            && !self.closing.is_cancelled()
        {
            report(error);
        }
    }

    /// Watches a started stdio server: when it goes away (exits, crashes, closes its output)
    /// it is started again after a growing pause, at most [`MAX_RESTARTS`] times over the
    /// set's life; then, or when a restart fails, it is reported and left failed. Its tools
    /// stay registered while it restarts (a call in between fails with the closed channel)
    /// and are replaced at the next step boundary, which waits for the restart.
    fn supervise(self: &Arc<Self>, index: usize, server: Arc<McpServer>) {
        let weak = Arc::downgrade(self);
        let closing = self.closing.clone();
        let watcher = tokio::spawn(async move {
            let mut server = server;
            let mut restarts = 0u32;
            loop {
                tokio::select! {
                    () = server.ended() => {}
                    () = closing.cancelled() => return,
                }
                let Some(set) = weak.upgrade() else {
                    return;
                };
                if closing.is_cancelled() {
                    return;
                }
                server.shutdown().await;
                let name = set.configs[index].name.clone();
                if restarts == MAX_RESTARTS {
                    let error = McpError::GoneAway {
                        server: name,
                        restarts,
                    };
                    set.report(&error);
                    set.set_state(index, Some(Err(error.to_string())));
                    return;
                }
                restarts += 1;
                tracing::warn!(server = %name, "MCP server went away; starting it again ({restarts} of {MAX_RESTARTS})");
                set.restarting.send_modify(|n| *n += 1);
                set.set_state(index, None);
                let pause = RESTART_PAUSE * 2u32.pow(restarts - 1);
                let restarted = tokio::select! {
                    () = tokio::time::sleep(pause) => Some(set.connect(index).await),
                    () = closing.cancelled() => None,
                };
                let outcome = match restarted {
                    Some(Ok(new)) => {
                        server = new.clone();
                        Ok(new)
                    }
                    Some(Err(error)) => Err(error.to_string()),
                    None => Err("dsh is shutting down".to_owned()),
                };
                let failed = outcome.is_err();
                set.set_state(index, Some(outcome));
                set.restarting.send_modify(|n| *n -= 1);
                set.changes.send_modify(|n| *n += 1);
                if failed {
                    return;
                }
            }
        });
        self.starts.lock().push(watcher);
    }

    /// Puts server `index` in `state`, so the next step boundary registers its tools anew
    /// (or withdraws them).
    fn set_state(&self, index: usize, state: Option<Result<Arc<McpServer>, String>>) {
        let late = {
            let mut entries = self.entries.lock();
            match entries.get_mut(index) {
                Some(entry) if !self.closing.is_cancelled() => {
                    entry.state = state;
                    entry.applied = None;
                    self.changes.send_modify(|n| *n += 1);
                    None
                }
                _ => state,
            }
        };
        if let Some(Ok(server)) = late {
            tokio::spawn(async move { server.shutdown().await });
        }
    }

    fn settle(&self, index: usize, outcome: Option<Result<Arc<McpServer>, String>>) {
        let late = {
            let mut entries = self.entries.lock();
            match entries.get_mut(index) {
                Some(entry) if !self.closing.is_cancelled() => {
                    entry.state = outcome;
                    None
                }
                _ => outcome,
            }
        };
        // A start that finished after shutdown began must not leave its server running.
        if let Some(Ok(server)) = late {
            tokio::spawn(async move { server.shutdown().await });
        }
        self.settled.send_modify(|n| *n += 1);
    }

    /// Registers the step-boundary listener. Approval is not this crate's: the guard decides
    /// MCP calls like every other tool's (`mcp__server__*` rules, the approval policy).
    fn listen(self: &Arc<Self>, ctx: &Context) -> Result<(), BoxError> {
        let weak = Arc::downgrade(self);
        let _ = ctx.on_waterfall::<PromptAssemble, _>(move |assembly, next| {
            let set = weak.upgrade();
            async move {
                let assembly = match set {
                    Some(set) => {
                        set.step_boundary().await;
                        set.offer_in(assembly)
                    }
                    None => assembly,
                };
                next.run(assembly).await
            }
        })?;
        Ok(())
    }

    /// Resolves once every enabled server has started or failed.
    pub async fn settled(&self) {
        let total = self.configs.len();
        let mut settled = self.settled.subscribe();
        let _ = settled.wait_for(|n| *n >= total).await;
    }

    /// What a step boundary does: wait for the starts, wait for announced list changes to be
    /// listed, then bring the registry up to date. The waiting gives up when the turn is
    /// cancelled (a Ctrl-C while a server is still starting must not wait for its start-up
    /// timeout); the registry is then left as it was for the next step.
    async fn step_boundary(&self) {
        let waited = async {
            self.settled().await;
            // A server that went away (its watcher may not have run yet) or is being started
            // again is waited for like a first start.
            let mut changes = self.changes.subscribe();
            let settled = async {
                while *self.restarting.borrow() > 0 || self.ready().iter().any(|s| s.has_ended()) {
                    if changes.changed().await.is_err() {
                        return;
                    }
                }
            };
            let _ = tokio::time::timeout(RESTART_WAIT, settled).await;
            let ready: Vec<Arc<McpServer>> = self.ready();
            join_all(ready.iter().map(|s| s.listed_up_to_date(RELIST_WAIT))).await;
        };
        match dsh_prompt::assembly_cancellation() {
            Some(cancel) => tokio::select! {
                () = waited => {}
                () = cancel.cancelled() => return,
            },
            None => waited.await,
        }
        if let Err(error) = self.apply().await {
            tracing::warn!(%error, "cannot offer the tools of MCP servers");
        }
    }

    /// The servers that started, in config order.
    pub fn ready(&self) -> Vec<Arc<McpServer>> {
        self.entries
            .lock()
            .iter()
            .filter_map(|e| match &e.state {
                Some(Ok(server)) => Some(server.clone()),
                _ => None,
            })
            .collect()
    }

    /// Registers every server's current tool list whose generation is not registered yet,
    /// replacing the previous one.
    async fn apply(&self) -> Result<(), BoxError> {
        let _serial = self.apply.lock().await;
        let Some(runtime) = self.ctx.get::<ToolRuntime>() else {
            return Ok(());
        };
        let count = self.configs.len();
        let mut withdrawn = Vec::new();
        for index in 0..count {
            let (server, old) = {
                let mut entries = self.entries.lock();
                let Some(entry) = entries.get_mut(index) else {
                    continue;
                };
                let Some(Ok(server)) = &entry.state else {
                    // A server that went away for good: withdraw its tools.
                    if matches!(entry.state, Some(Err(_))) && !entry.registrations.is_empty() {
                        withdrawn.append(&mut entry.registrations);
                        entry.registered.clear();
                    }
                    continue;
                };
                let generation = server.tools().0;
                if entry.applied == Some(generation) {
                    continue;
                }
                entry.applied = Some(generation);
                (server.clone(), std::mem::take(&mut entry.registrations))
            };
            for registration in old {
                registration.dispose().await;
            }
            let mut registrations = Vec::new();
            let mut registered = Vec::new();
            for offered in server.tools().1.iter() {
                let tool = Arc::new(McpTool {
                    offered: offered.clone(),
                    server: server.clone(),
                    attachments: self.ctx.get::<dyn Attachments>(),
                });
                match runtime.register(&self.ctx, tool) {
                    Ok(registration) => {
                        registrations.push(registration);
                        registered.push(ToolSchema {
                            name: offered.name.clone(),
                            description: offered.description.clone(),
                            parameters: offered.parameters.clone(),
                            needs_vision: false,
                        });
                    }
                    Err(error) => {
                        tracing::warn!(tool = %offered.name, %error, "cannot offer an MCP tool");
                    }
                }
            }
            let names: Vec<String> = registered.iter().map(|t| t.name.clone()).collect();
            self.ever.lock().extend(names);
            if let Some(entry) = self.entries.lock().get_mut(index) {
                entry.registrations = registrations;
                entry.registered = registered;
            }
        }
        for registration in withdrawn {
            registration.dispose().await;
        }
        self.offer_resource_tools(self.me.clone(), &runtime);
        Ok(())
    }

    /// Registers `list_mcp_resources` and `read_mcp_resource` once a ready server offers
    /// resources (once: they look the servers up when called).
    fn offer_resource_tools(&self, me: Weak<McpServers>, runtime: &ToolRuntime) {
        if !self.ready().iter().any(|s| s.offers_resources()) {
            return;
        }
        let mut offered = self.resource_tools.lock();
        if !offered.0.is_empty() {
            return;
        }
        let tools: [Arc<dyn Tool>; 2] = [
            Arc::new(ListResources { set: me.clone() }),
            Arc::new(ReadResource {
                set: me,
                attachments: self.ctx.get::<dyn Attachments>(),
            }),
        ];
        for tool in tools {
            let schema = ToolSchema {
                name: tool.name().to_owned(),
                description: tool.description().to_owned(),
                parameters: tool.parameters(),
                needs_vision: false,
            };
            match runtime.register(&self.ctx, tool) {
                Ok(registration) => {
                    self.ever.lock().insert(schema.name.clone());
                    offered.0.push(registration);
                    offered.1.push(schema);
                }
                Err(error) => {
                    tracing::warn!(tool = %schema.name, %error, "cannot offer the MCP resource tools");
                }
            }
        }
    }

    /// `assembly` with this set's tools replaced by the ones registered now.
    fn offer_in(&self, mut assembly: PromptAssembly) -> PromptAssembly {
        let sorted = assembly.tools.is_sorted_by(|a, b| a.name <= b.name);
        {
            let ever = self.ever.lock();
            assembly.tools.retain(|t| !ever.contains(&t.name));
        }
        let entries = self.entries.lock();
        assembly
            .tools
            .extend(entries.iter().flat_map(|e| e.registered.iter().cloned()));
        drop(entries);
        assembly
            .tools
            .extend(self.resource_tools.lock().1.iter().cloned());
        if sorted {
            assembly.tools.sort_by(|a, b| a.name.cmp(&b.name));
        }
        // The servers' instructions close the system prompt, the same bytes at every step.
        assembly
            .sections
            .retain(|s| s.name != crate::instructions::SECTION);
        if let Some(section) = crate::instructions::section(&self.ready()) {
            assembly.sections.push(section);
        }
        assembly
    }

    /// Every configured server, in config order, as it stands now.
    pub fn statuses(&self) -> Vec<ServerStatus> {
        let entries = self.entries.lock();
        self.configs
            .iter()
            .zip(entries.iter())
            .map(|(config, entry)| {
                let mut status = ServerStatus {
                    name: config.name.clone(),
                    state: ServerState::Starting,
                    tools: Vec::new(),
                    resources: Vec::new(),
                    prompts: Vec::new(),
                    pid: None,
                };
                match (&entry.state, config.enabled) {
                    (_, false) => status.state = ServerState::Disabled,
                    (None, true) => {}
                    (Some(Err(reason)), true) => status.state = ServerState::Failed(reason.clone()),
                    (Some(Ok(server)), true) => {
                        status.state = ServerState::Ready;
                        status.tools = server.tools().1.iter().map(|t| t.name.clone()).collect();
                        status.resources = server
                            .resources()
                            .iter()
                            .map(|r| match &r.mime_type {
                                Some(mime) => format!("{} ({mime})", r.uri),
                                None => r.uri.clone(),
                            })
                            .collect();
                        status.prompts =
                            crate::prompts::prompt_commands(std::slice::from_ref(server))
                                .into_iter()
                                .map(|p| match p.argument_hint {
                                    Some(hint) => format!("/{} {hint}", p.name),
                                    None => format!("/{}", p.name),
                                })
                                .collect();
                        status.pid = server.pid();
                    }
                }
                status
            })
            .collect()
    }

    /// Stops everything: starts in progress are abandoned (their processes stopped), tools
    /// unregistered, sessions closed, process groups killed. Idempotent.
    pub async fn shutdown(&self) {
        self.closing.cancel();
        let starts = std::mem::take(&mut *self.starts.lock());
        join_all(starts).await;
        let (servers, registrations): (Vec<_>, Vec<_>) = {
            let mut entries = self.entries.lock();
            entries
                .iter_mut()
                .map(|e| {
                    let server = match e.state.take() {
                        Some(Ok(server)) => Some(server),
                        other => {
                            e.state = other;
                            None
                        }
                    };
                    e.registered.clear();
                    (server, std::mem::take(&mut e.registrations))
                })
                .unzip()
        };
        let (resource_tools, _) = std::mem::take(&mut *self.resource_tools.lock());
        for registration in registrations.into_iter().flatten().chain(resource_tools) {
            registration.dispose().await;
        }
        join_all(servers.iter().flatten().map(|s| s.shutdown())).await;
    }
}
