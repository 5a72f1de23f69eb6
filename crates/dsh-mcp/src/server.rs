//! One connected server: the MCP session, its process, its current tool list, and calls.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use dsh_session::Attachments;
use dsh_tools::{LivePublisher, ToolError, ToolOutput};
use futures::FutureExt;
use parking_lot::Mutex;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotification, CancelledNotificationParam,
    ClientRequest, GetPromptRequestParams, GetPromptResult, ProgressToken, Prompt,
    ReadResourceRequestParams, RequestId, Resource, ResourceContents, ServerResult,
    Tool as McpToolDef,
};
use rmcp::service::{PeerRequestOptions, RequestHandle, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{Peer, RoleClient, ServiceExt};
use serde_json::Value;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::config::{ServerConfig, Transport};
use crate::elicit::{Asker, RunningCall, RunningCalls};
use crate::env::server_env;
use crate::error::McpError;
use crate::exit::EndWatch;
use crate::handler::{Handler, ProgressSinks, Watched, workspace_roots};
use crate::listing::Listing;
use crate::naming::tool_name;
use crate::process::{Launch, ServerProcess, SpawnError};
use crate::result::to_output;
use crate::schema::normalize;

/// Error code of a call that outlived `tool_timeout_sec`.
pub const MCP_TOOL_TIMEOUT: &str = "MCP_TOOL_TIMEOUT";
/// Error code of a call the server or the connection failed (not a tool's own `isError`).
pub const MCP_CALL_FAILED: &str = "MCP_CALL_FAILED";

/// One tool as offered to the model.
#[derive(Clone, Debug, PartialEq)]
pub struct OfferedTool {
    /// The model-facing name (`mcp__server__tool`).
    pub name: String,
    /// The tool's name on its server.
    pub remote: String,
    /// What it does, as the server says.
    pub description: String,
    /// Its normalised input schema.
    pub parameters: Value,
}

/// What [`McpServer::connect`] needs besides the server's config.
pub(crate) struct ConnectEnv<'a> {
    /// Working directory of a stdio server whose config names none.
    pub cwd: &'a Path,
    /// Variables never passed to a server by name.
    pub hidden_env: &'a [String],
    /// Reads a variable of dsh's environment (the bearer token).
    pub lookup: &'a (dyn Fn(&str) -> Option<String> + Send + Sync),
    /// Stops a start in progress (the owning scope is going away).
    pub closing: &'a CancellationToken,
    /// The supervision (and sandbox) stdio servers run under (its workspace is `cwd`).
    pub supervision: Option<&'a dyn dsh_shell::Supervision>,
}

/// A connected server.
pub struct McpServer {
    config: ServerConfig,
    peer: Peer<RoleClient>,
    service: tokio::sync::Mutex<Option<RunningService<RoleClient, Handler>>>,
    process: Mutex<Option<ServerProcess>>,
    pid: Option<u32>,
    /// The offered tools, relisted when the server announces a change.
    tools: Listing<OfferedTool>,
    /// The server's resources (empty when it offers none).
    resources: Listing<Resource>,
    /// The server's prompts (empty when it offers none).
    prompts: Listing<Prompt>,
    /// What the server's `initialize` answer says about using it, if anything.
    instructions: Option<String>,
    /// Whether the server declared the resources capability.
    offers_resources: bool,
    progress: ProgressSinks,
    calls: RunningCalls,
    /// Turns `true` when a stdio server's output ends (`None` for HTTP servers).
    ended: Option<watch::Receiver<bool>>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.config.name)
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// Starts (stdio) or reaches (HTTP) the server, completes the MCP handshake and lists its
    /// tools, all within `startup_timeout`. On any failure nothing is left running.
    pub(crate) async fn connect(
        config: &ServerConfig,
        env: &ConnectEnv<'_>,
    ) -> Result<Arc<McpServer>, McpError> {
        let (tools_wanted, resources_wanted, prompts_wanted) = (
            watch::channel(0u64).0,
            watch::channel(0u64).0,
            watch::channel(0u64).0,
        );
        let progress = ProgressSinks::default();
        let calls = RunningCalls::default();
        let handler = Handler {
            server: config.name.clone(),
            tools_wanted: tools_wanted.clone(),
            resources_wanted: resources_wanted.clone(),
            prompts_wanted: prompts_wanted.clone(),
            progress: progress.clone(),
            calls: calls.clone(),
            roots: workspace_roots(env.cwd),
        };
        let mut process = None;
        let mut stderr = None;
        let mut exit = None;
        let handshake = match &config.transport {
            Transport::Stdio {
                command,
                args,
                env: explicit,
                env_vars,
                cwd,
            } => {
                let (vars, refused) =
                    server_env(std::env::vars_os(), env_vars, env.hidden_env, explicit);
                if !refused.is_empty() {
                    tracing::warn!(
                        server = %config.name,
                        "not passing {} to the MCP server: secret-looking or provider key \
                         variables are never passed by name; set the server's own value in its \
                         `env` table",
                        refused.join(", ")
                    );
                }
                let launch = Launch {
                    server: &config.name,
                    command,
                    args,
                    cwd: cwd.as_deref().unwrap_or(env.cwd),
                    env: &vars,
                    supervision: env.supervision.map(|s| (s, env.cwd)),
                };
                let (proc, stdout, stdin) =
                    ServerProcess::spawn(&launch).map_err(|error| match error {
                        SpawnError::Confinement(source) => McpError::Confinement {
                            server: config.name.clone(),
                            source,
                        },
                        SpawnError::Io(source) => McpError::Spawn {
                            server: config.name.clone(),
                            command: command.clone(),
                            source,
                        },
                    })?;
                stderr = Some(proc.stderr.clone());
                process = Some(proc);
                let (stdout, ended) = EndWatch::new(stdout);
                exit = Some(ended);
                handler.serve((stdout, stdin)).boxed_start()
            }
            Transport::Http {
                url,
                bearer_token_env_var,
                http_headers,
            } => {
                let transport =
                    http_transport(config, url, bearer_token_env_var, http_headers, env)?;
                handler.serve(transport).boxed_start()
            }
        };
        // The list generations the initial lists cover: a change announced before they are
        // asked for (during `initialize`) is already in them; one announced while they are
        // being answered may not be, and is listed again by the refreshers.
        let mut covered = (0, 0, 0);
        let started = async {
            let service = handshake.await.map_err(|e| ("initialize", e))?;
            covered = (
                *tools_wanted.borrow(),
                *resources_wanted.borrow(),
                *prompts_wanted.borrow(),
            );
            let tools = service
                .peer()
                .list_all_tools()
                .await
                .map_err(|e| ("tools/list", e.to_string()))?;
            let offers = service
                .peer()
                .peer_info()
                .map(|info| {
                    (
                        info.capabilities.resources.is_some(),
                        info.capabilities.prompts.is_some(),
                    )
                })
                .unwrap_or_default();
            // Resources and prompts are extras: a server that fails to list them still
            // serves its tools.
            let resources =
                if offers.0 {
                    list_resources(service.peer()).await.unwrap_or_else(|error| {
                    tracing::warn!(server = %config.name, %error, "cannot list the resources");
                    Vec::new()
                })
                } else {
                    Vec::new()
                };
            let prompts = if offers.1 {
                list_prompts(service.peer()).await.unwrap_or_else(|error| {
                    tracing::warn!(server = %config.name, %error, "cannot list the prompts");
                    Vec::new()
                })
            } else {
                Vec::new()
            };
            Ok::<_, (&'static str, String)>((service, tools, resources, prompts, offers.0))
        };
        let outcome = tokio::select! {
            outcome = tokio::time::timeout(config.startup_timeout, started) => outcome,
            () = env.closing.cancelled() => Ok(Err(("start", "dsh is shutting down".to_owned()))),
        };
        let (service, listed, resources, prompts, offers_resources) = match outcome {
            Ok(Ok(ok)) => ok,
            failed => {
                // Stopped first, so the report holds everything the server said before dying.
                if let Some(process) = process {
                    process.stop().await;
                }
                let stderr = stderr.as_ref().map(|s| s.text()).unwrap_or_default();
                return Err(match failed {
                    Ok(Err((stage, reason))) => McpError::Protocol {
                        server: config.name.clone(),
                        stage,
                        reason,
                        stderr,
                    },
                    _ => McpError::StartupTimeout {
                        server: config.name.clone(),
                        timeout: config.startup_timeout,
                        stderr,
                    },
                });
            }
        };
        let pid = process.as_ref().and_then(ServerProcess::id);
        let instructions = service
            .peer()
            .peer_info()
            .and_then(|info| info.instructions.clone())
            .filter(|text| !text.trim().is_empty());
        let server = Arc::new(McpServer {
            config: config.clone(),
            peer: service.peer().clone(),
            service: tokio::sync::Mutex::new(Some(service)),
            process: Mutex::new(process),
            pid,
            tools: Listing::new(tools_wanted, covered.0, offer(config, &listed)),
            resources: Listing::new(resources_wanted, covered.1, resources),
            prompts: Listing::new(prompts_wanted, covered.2, prompts),
            instructions,
            offers_resources,
            progress,
            calls,
            ended: exit,
        });
        // Bounded like a start: a server that never answers keeps its old list, and the
        // readers waiting for it go on.
        let limit = config.startup_timeout;
        let weak = Arc::downgrade(&server);
        Listing::follow(
            weak.clone(),
            |s: &McpServer| &s.tools,
            |s| {
                async move {
                    let listed = s.peer.list_all_tools().await.map_err(|e| e.to_string())?;
                    Ok(offer(&s.config, &listed))
                }
                .boxed()
            },
            limit,
            "tools",
        );
        Listing::follow(
            weak.clone(),
            |s: &McpServer| &s.resources,
            |s| async move { list_resources(&s.peer).await }.boxed(),
            limit,
            "resources",
        );
        Listing::follow(
            weak,
            |s: &McpServer| &s.prompts,
            |s| async move { list_prompts(&s.peer).await }.boxed(),
            limit,
            "prompts",
        );
        Ok(server)
    }

    /// Whether a stdio server has gone away already.
    pub(crate) fn has_ended(&self) -> bool {
        self.ended.as_ref().is_some_and(|e| *e.borrow())
    }

    /// Resolves when a stdio server has gone away (its output ended); never for an HTTP one.
    pub(crate) async fn ended(&self) {
        match self.ended.clone() {
            Some(mut ended) => {
                let _ = ended.wait_for(|e| *e).await;
            }
            None => std::future::pending().await,
        }
    }

    /// The server's config.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// The local server's process id (`None` for HTTP servers).
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// The tools offered now, and the list generation they belong to (bumped by every
    /// tools-list change the server announced and dsh listed again).
    pub fn tools(&self) -> (u64, Arc<Vec<OfferedTool>>) {
        self.tools.current()
    }

    /// The server's resources as last listed (a `resources/list_changed` lists them again).
    pub fn resources(&self) -> Arc<Vec<Resource>> {
        self.resources.current().1
    }

    /// The server's prompts as last listed (a `prompts/list_changed` lists them again).
    pub fn prompts(&self) -> Arc<Vec<Prompt>> {
        self.prompts.current().1
    }

    /// Whether the server offers resources (it declared the capability, even with none yet).
    pub fn offers_resources(&self) -> bool {
        self.offers_resources
    }

    /// The server's `instructions` (how to use it, in its own words), if it gave any.
    pub fn instructions(&self) -> Option<&str> {
        self.instructions.as_deref()
    }

    /// Resolves once every announced tools-list change has been listed again (or after
    /// `limit`): what a step boundary waits for, so a change the server announced before the
    /// boundary is applied at it.
    pub(crate) async fn listed_up_to_date(&self, limit: Duration) {
        self.tools.up_to_date(limit).await;
    }

    /// The resources once every announced change has been listed again (or after `limit`).
    pub(crate) async fn resources_up_to_date(&self, limit: Duration) -> Arc<Vec<Resource>> {
        self.resources.up_to_date(limit).await;
        self.resources()
    }

    /// The prompts once every announced change has been listed again (or after `limit`).
    pub async fn prompts_up_to_date(&self, limit: Duration) -> Arc<Vec<Prompt>> {
        self.prompts.up_to_date(limit).await;
        self.prompts()
    }

    /// Reads the resource `uri`, bounded by the tool timeout and `cancel`.
    pub async fn read_resource(
        &self,
        uri: &str,
        cancel: &CancellationToken,
    ) -> Result<Vec<ResourceContents>, String> {
        let read = self
            .peer
            .read_resource(ReadResourceRequestParams::new(uri.to_owned()));
        tokio::select! {
            () = cancel.cancelled() => Err("cancelled".to_owned()),
            read = tokio::time::timeout(self.config.tool_timeout, read) => match read {
                Ok(Ok(result)) => Ok(result.contents),
                Ok(Err(error)) => Err(error.to_string()),
                Err(_) => Err(format!("no answer within {:?} (tool_timeout_sec)", self.config.tool_timeout)),
            },
        }
    }

    /// Gets the prompt `name` with `arguments`, bounded by the tool timeout.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: serde_json::Map<String, Value>,
    ) -> Result<GetPromptResult, String> {
        let mut params = GetPromptRequestParams::new(name.to_owned());
        params.arguments = Some(arguments);
        match tokio::time::timeout(self.config.tool_timeout, self.peer.get_prompt(params)).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(error)) => Err(error.to_string()),
            Err(_) => Err(format!(
                "no answer within {:?} (tool_timeout_sec)",
                self.config.tool_timeout
            )),
        }
    }

    /// Calls `tool` (its name on the server) with `args`. Cancellation returns `ABORTED` at
    /// once and tells the server `notifications/cancelled`; so does the tool timeout, with its
    /// own code. The server's progress reports for this call go to `progress`'s live feed.
    pub(crate) async fn call(
        &self,
        tool: &str,
        args: Value,
        cancel: &CancellationToken,
        progress: Option<LivePublisher>,
        attachments: Option<&dyn Attachments>,
        asker: Option<Asker>,
    ) -> Result<ToolOutput, ToolError> {
        // Whom a server's elicitation during this call asks.
        let _running = asker.map(|a| RunningCall::register(&self.calls, a));
        let arguments = match args {
            Value::Object(map) => Some(map),
            Value::Null => None,
            other => {
                return Err(ToolError::invalid_arguments(
                    tool,
                    format!("expected a JSON object, got {other}"),
                ));
            }
        };
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = arguments;
        let timeout = self.config.tool_timeout;
        let server = &self.config.name;
        let failed = |error: ServiceError| {
            ToolError::coded(
                "McpCallError",
                MCP_CALL_FAILED,
                format!("MCP server `{server}` failed the call of `{tool}`: {error}"),
            )
        };
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        // A request handle (not `call_tool`) so the call's progress token is known before an
        // answer comes; the guards below keep what dropping `call_tool` did.
        let handle = self
            .peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
            .map_err(failed)?;
        let sink = ProgressSink::register(&self.progress, &handle, progress);
        let mut pending = CancelOnDrop {
            peer: self.peer.clone(),
            id: Some(handle.id.clone()),
        };
        // Each progress report starts the timeout again, never past the hard maximum.
        let started = tokio::time::Instant::now();
        let limit = started + self.config.tool_timeout_max.max(timeout);
        let mut deadline = (started + timeout).min(limit);
        let response = handle.await_response();
        tokio::pin!(response);
        let answer = loop {
            tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(ToolError::aborted()),
                answer = &mut response => break answer,
                () = sink.heard.notified() => {
                    deadline = (tokio::time::Instant::now() + timeout).min(limit);
                }
                () = tokio::time::sleep_until(deadline) => {
                    let why = if deadline >= limit && limit > started + timeout {
                        format!(
                            "did not finish within {:?} (tool_timeout_max_sec), though it \
                             reported progress",
                            self.config.tool_timeout_max
                        )
                    } else {
                        format!("did not answer within {timeout:?} (tool_timeout_sec)")
                    };
                    return Err(ToolError::coded(
                        "McpTimeoutError",
                        MCP_TOOL_TIMEOUT,
                        format!(
                            "MCP tool `{tool}` of server `{server}` {why}; the call was cancelled"
                        ),
                    ));
                }
            }
        };
        // Answered (or failed by the connection): nothing left to cancel.
        pending.id = None;
        match answer.map_err(failed)? {
            ServerResult::CallToolResult(result) => {
                Ok(to_output(server, tool, result, attachments))
            }
            _ => Err(failed(ServiceError::UnexpectedResponse)),
        }
    }

    /// Closes the MCP session and stops the process (its whole group). Idempotent.
    pub async fn shutdown(&self) {
        if let Some(service) = self.service.lock().await.take() {
            // Closing the transport closes the server's stdin: a well-behaved server exits.
            let _ = service.cancel().await;
        }
        let process = self.process.lock().take();
        if let Some(process) = process {
            process.stop().await;
        }
    }
}

/// A call's entry among the watched calls, registered under its request's progress token
/// while the call runs.
struct ProgressSink {
    sinks: ProgressSinks,
    token: ProgressToken,
    heard: Arc<Notify>,
}

impl ProgressSink {
    fn register(
        sinks: &ProgressSinks,
        handle: &RequestHandle<RoleClient>,
        publisher: Option<LivePublisher>,
    ) -> Self {
        let heard = Arc::new(Notify::new());
        sinks.lock().insert(
            handle.progress_token.clone(),
            Watched {
                publisher,
                heard: heard.clone(),
            },
        );
        Self {
            sinks: sinks.clone(),
            token: handle.progress_token.clone(),
            heard,
        }
    }
}

impl Drop for ProgressSink {
    fn drop(&mut self) {
        self.sinks.lock().remove(&self.token);
    }
}

/// Tells the server a request is abandoned (cancelled, timed out) unless it was answered:
/// what dropping rmcp's `call_tool` future did.
struct CancelOnDrop {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let peer = self.peer.clone();
        let notice = CancelledNotification::new(CancelledNotificationParam::new(
            Some(id),
            Some("cancelled by dsh".into()),
        ));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = peer.send_notification(notice.into()).await;
            });
        }
    }
}

/// Every resource of the server, page by page.
async fn list_resources(peer: &Peer<RoleClient>) -> Result<Vec<Resource>, String> {
    peer.list_all_resources().await.map_err(|e| e.to_string())
}

/// Every prompt of the server, page by page.
async fn list_prompts(peer: &Peer<RoleClient>) -> Result<Vec<Prompt>, String> {
    peer.list_all_prompts().await.map_err(|e| e.to_string())
}

/// The offered subset of `listed`, named and normalised.
fn offer(config: &ServerConfig, listed: &[McpToolDef]) -> Vec<OfferedTool> {
    let mut taken = HashSet::new();
    listed
        .iter()
        .filter(|t| config.offers(&t.name))
        .map(|t| OfferedTool {
            name: tool_name(&config.name, &t.name, &mut taken),
            remote: t.name.to_string(),
            description: t
                .description
                .as_deref()
                .map(str::to_owned)
                .unwrap_or_else(|| {
                    format!("Tool `{}` of the MCP server `{}`.", t.name, config.name)
                }),
            parameters: normalize(&Value::Object((*t.input_schema).clone())),
        })
        .collect()
}

fn http_transport(
    config: &ServerConfig,
    url: &str,
    bearer_token_env_var: &Option<String>,
    http_headers: &BTreeMap<String, String>,
    env: &ConnectEnv<'_>,
) -> Result<StreamableHttpClientTransport<reqwest::Client>, McpError> {
    let invalid = |reason: String| McpError::InvalidConfig {
        server: config.name.clone(),
        reason,
    };
    let mut transport = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    if let Some(var) = bearer_token_env_var {
        let token = (env.lookup)(var).ok_or_else(|| McpError::MissingToken {
            server: config.name.clone(),
            var: var.clone(),
        })?;
        transport = transport.auth_header(token);
    }
    let mut headers = std::collections::HashMap::new();
    for (name, value) in http_headers {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| invalid(format!("invalid HTTP header name `{name}`")))?;
        // The value is not echoed: headers are where people put credentials.
        let value = HeaderValue::from_str(value)
            .map_err(|_| invalid(format!("invalid value for HTTP header `{name}`")))?;
        headers.insert(name, value);
    }
    transport = transport.custom_headers(headers);
    let client = reqwest::Client::builder()
        .build()
        .map_err(|e| invalid(format!("cannot build the HTTP client: {e}")))?;
    Ok(StreamableHttpClientTransport::with_client(
        client, transport,
    ))
}

/// The handshake future with the transport's type erased, so both arms of `connect` agree.
trait BoxedStart {
    fn boxed_start(
        self,
    ) -> futures::future::BoxFuture<'static, Result<RunningService<RoleClient, Handler>, String>>;
}

impl<F, E> BoxedStart for F
where
    F: Future<Output = Result<RunningService<RoleClient, Handler>, E>> + Send + 'static,
    E: std::fmt::Display,
{
    fn boxed_start(
        self,
    ) -> futures::future::BoxFuture<'static, Result<RunningService<RoleClient, Handler>, String>>
    {
        use futures::FutureExt;
        self.map(|r| r.map_err(|e| e.to_string())).boxed()
    }
}
