//! The MCP server dsh's tests talk to (feature `test-server`, binary `dsh-mcp-test-server`).
//!
//! A real process on rmcp's server side, speaking MCP on stdin/stdout, so tests exercise the
//! real transport, handshake, cancellation and process discipline. Its tools:
//!
//! - `echo {text}`: answers `text`.
//! - `slow {ms?}`: waits `ms` milliseconds (default: until cancelled); a cancellation is
//!   written to the log as `cancelled slow`.
//! - `fail`: answers an `isError` result `it failed`.
//! - `grow`: adds the tool `extra`, announces `notifications/tools/list_changed`, and answers
//!   `grown` only once the client listed the tools again (at most 5 s later), so a test knows
//!   the client heard the change before the call's result arrived.
//! - `extra` (after `grow`): answers `extra`.
//! - `log {text}`: sends `text` as a `notifications/message` (level warning, logger `test`)
//!   and answers `logged`.
//! - `env`: answers the names of its environment variables, one per line.
//! - `image`: answers a 2×1 PNG image block.
//! - `progress {steps, every_ms?}`: reports `i/steps` (`step i`) through
//!   `notifications/progress` for each step (each `every_ms` after the last), then answers
//!   `progressed` (`every_ms` after the last report).
//! - `write_file {path, text}`: writes `text` to `path` and answers `wrote PATH`, or an
//!   `isError` result with the operating system's reason (sandbox tests).
//!
//! - `ask`: sends a form `elicitation/create` (`name` text, `color` red|blue, `sure` boolean)
//!   and answers the result as JSON (or `elicitation failed: …`).
//! - `roots`: answers the client's `roots/list` as JSON; `sample`: sends
//!   `sampling/createMessage` and answers `sampled` or `sampling failed: …`.
//! - `exit`: logs `exiting` and exits with status 3 without answering (restart tests).
//! - `add_resource`: adds the resource `test://added`, announces
//!   `notifications/resources/list_changed`, and answers `added` once the client listed the
//!   resources again (at most 5 s later).
//!
//! Resources: `test://greeting` (text/plain `hello resource`), `test://dot` (a PNG), and
//! `test://added` after `add_resource`. Prompts: `review {file (required), focus?}`, one user
//! message `Please review FILE.` (plus ` Focus on FOCUS.`). `--instructions TEXT` answers
//! `initialize` with those instructions.
//!
//! Flags: `--announce-early` (on the first `tools/list`, add `extra` and announce
//! `notifications/tools/list_changed` before answering with the old list); `--log PATH` appends events (`started <pid>`, `child <pid>`, `slow started`,
//! `cancelled slow`, `listed`) to PATH; `--startup-delay-ms N` sleeps before serving (start-up timeouts, the
//! start-up benchmark); `--grandchild` starts a `sleep` child first (process-group tests);
//! `--daemon SECONDS` starts `setsid sleep SECONDS` and forgets it (a daemon that must not
//! outlive the server: give it a tagged duration, see `dsh_testkit::Tag`).

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, ImageContent, ListPromptsResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, Prompt, PromptArgument,
    PromptMessage, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, Role, ServerCapabilities, ServerConfig, TextContent, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// The server's command line.
#[derive(Clone, Debug, Default)]
pub struct Flags {
    /// Where events are appended.
    pub log: Option<PathBuf>,
    /// Sleep before serving.
    pub startup_delay: Duration,
    /// Start a long `sleep` child first.
    pub grandchild: bool,
    /// Start `setsid sleep <this>` and forget it.
    pub daemon: Option<String>,
    /// The `instructions` of the `initialize` answer.
    pub instructions: Option<String>,
    /// On the first `tools/list`, add `extra` and announce the change before answering with
    /// the list as it was (what server-everything does during start-up).
    pub announce_early: bool,
}

impl Flags {
    /// Parses `args` (without the program name); unknown flags are an error.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, String> {
        let mut flags = Flags::default();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--log" => flags.log = args.next().map(PathBuf::from),
                "--startup-delay-ms" => {
                    let ms = args
                        .next()
                        .and_then(|v| v.parse().ok())
                        .ok_or("--startup-delay-ms needs a number")?;
                    flags.startup_delay = Duration::from_millis(ms);
                }
                "--grandchild" => flags.grandchild = true,
                "--announce-early" => flags.announce_early = true,
                "--instructions" => {
                    flags.instructions = Some(args.next().ok_or("--instructions needs text")?);
                }
                "--daemon" => flags.daemon = Some(args.next().ok_or("--daemon needs seconds")?),
                other => return Err(format!("unknown flag {other}")),
            }
        }
        Ok(flags)
    }
}

/// A 2×1 PNG in base64 (dsh_testkit::TINY_PNG).
const TINY_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAABCAIAAAB7QOjdAAAADUlEQVR4nGP4zwAE/wEHAAH/4iOeWQAAAABJRU5ErkJggg==";

#[derive(Clone)]
struct TestServer {
    log: Option<PathBuf>,
    instructions: Option<String>,
    /// `add_resource` was called: `test://added` is listed.
    added: Arc<AtomicBool>,
    resources_listed: Arc<Notify>,
    announce_early: Arc<AtomicBool>,
    grown: Arc<AtomicBool>,
    listed: Arc<Notify>,
}

impl TestServer {
    fn log(&self, line: &str) {
        if let Some(path) = &self.log
            && let Ok(mut file) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
        {
            let _ = writeln!(file, "{line}");
        }
    }

    fn tools(&self) -> Vec<Tool> {
        let object = |properties: Value| -> Arc<serde_json::Map<String, Value>> {
            match json!({"type": "object", "properties": properties}) {
                Value::Object(map) => Arc::new(map),
                _ => Arc::default(),
            }
        };
        let mut tools = vec![
            Tool::new(
                "echo",
                "Answers its text.",
                object(json!({"text": {"type": "string"}})),
            ),
            Tool::new(
                "slow",
                "Waits ms milliseconds, or until cancelled.",
                object(json!({"ms": {"type": "integer"}})),
            ),
            Tool::new("fail", "Always fails.", object(json!({}))),
            Tool::new(
                "ask",
                "Asks the user (elicitation) and answers the result.",
                object(json!({})),
            ),
            Tool::new("roots", "Answers the client's roots.", object(json!({}))),
            Tool::new("exit", "Exits the server at once.", object(json!({}))),
            Tool::new("sample", "Asks the client to sample.", object(json!({}))),
            Tool::new(
                "add_resource",
                "Adds the resource test://added and announces the change.",
                object(json!({})),
            ),
            Tool::new(
                "grow",
                "Adds the tool `extra` and announces the change.",
                object(json!({})),
            ),
            Tool::new("env", "Lists its environment's names.", object(json!({}))),
            Tool::new(
                "log",
                "Sends text as a log message at level warning.",
                object(json!({"text": {"type": "string"}})),
            ),
            Tool::new("image", "Answers an image.", object(json!({}))),
            Tool::new(
                "progress",
                "Reports progress step by step.",
                object(json!({"steps": {"type": "integer"}, "every_ms": {"type": "integer"}})),
            ),
            Tool::new(
                "write_file",
                "Writes text to a file.",
                object(json!({"path": {"type": "string"}, "text": {"type": "string"}})),
            ),
        ];
        if self.grown.load(Ordering::SeqCst) {
            tools.push(Tool::new("extra", "Appears after grow.", object(json!({}))));
        }
        tools
    }
}

fn text(text: impl Into<String>) -> CallToolResponse {
    CallToolResult::success(vec![ContentBlock::Text(TextContent::new(text))]).into()
}

impl ServerHandler for TestServer {
    // Logging is deprecated by SEP-2577; the `log` tool still uses it.
    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        let config = ServerConfig::new(
            ServerCapabilities::builder()
                .enable_logging()
                .enable_prompts()
                .enable_resources()
                .enable_resources_list_changed()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        );
        match &self.instructions {
            Some(text) => config.with_instructions(text.clone()),
            None => config,
        }
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        self.log("resources listed");
        self.resources_listed.notify_waiters();
        let mut resources = vec![
            Resource::new("test://greeting", "greeting")
                .with_mime_type("text/plain")
                .with_description("A greeting."),
            Resource::new("test://dot", "dot").with_mime_type("image/png"),
        ];
        if self.added.load(Ordering::SeqCst) {
            resources.push(Resource::new("test://added", "added").with_mime_type("text/plain"));
        }
        Ok(ListResourcesResult {
            resources,
            ..Default::default()
        })
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let contents = match request.uri.as_str() {
            "test://greeting" => ResourceContents::TextResourceContents {
                uri: request.uri.clone(),
                mime_type: Some("text/plain".to_owned()),
                text: "hello resource".to_owned(),
                meta: None,
            },
            "test://dot" => ResourceContents::BlobResourceContents {
                uri: request.uri.clone(),
                mime_type: Some("image/png".to_owned()),
                blob: TINY_PNG.to_owned(),
                meta: None,
            },
            "test://added" if self.added.load(Ordering::SeqCst) => {
                ResourceContents::text("added later", request.uri.clone())
            }
            other => {
                return Err(ErrorData::resource_not_found(
                    format!("no resource {other}"),
                    None,
                ));
            }
        };
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult {
            prompts: vec![Prompt::new(
                "review",
                Some("Asks for a review of a file."),
                Some(vec![
                    PromptArgument::new("file")
                        .with_description("The file to review.")
                        .with_required(true),
                    PromptArgument::new("focus").with_description("What to look at."),
                ]),
            )],
            ..Default::default()
        })
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if request.name != "review" {
            return Err(ErrorData::invalid_params(
                format!("no prompt {}", request.name),
                None,
            ));
        }
        let args = request.arguments.unwrap_or_default();
        let Some(file) = args.get("file").and_then(Value::as_str) else {
            return Err(ErrorData::invalid_params("`file` is required", None));
        };
        let mut text = format!("Please review {file}.");
        if let Some(focus) = args.get("focus").and_then(Value::as_str) {
            text.push_str(&format!(" Focus on {focus}."));
        }
        Ok(GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)]).into())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.log("listed");
        self.listed.notify_waiters();
        let tools = self.tools();
        if self.announce_early.swap(false, Ordering::SeqCst) {
            // Sent before the answer, so the client hears of the change while it is still
            // starting the server.
            self.grown.store(true, Ordering::SeqCst);
            let _ = context.peer.notify_tool_list_changed().await;
        }
        Ok(ListToolsResult {
            tools,
            ..Default::default()
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        match &*request.name {
            "echo" => Ok(text(
                args.get("text").and_then(Value::as_str).unwrap_or_default(),
            )),
            "slow" => {
                let wait = args
                    .get("ms")
                    .and_then(Value::as_u64)
                    .map_or(Duration::from_secs(3600), Duration::from_millis);
                self.log("slow started");
                tokio::select! {
                    () = tokio::time::sleep(wait) => Ok(text("slept")),
                    () = context.ct.cancelled() => {
                        self.log("cancelled slow");
                        Ok(text("cancelled"))
                    }
                }
            }
            "fail" => Ok(
                CallToolResult::error(vec![ContentBlock::Text(TextContent::new("it failed"))])
                    .into(),
            ),
            "grow" => {
                let listed = self.listed.notified();
                tokio::pin!(listed);
                listed.as_mut().enable();
                self.grown.store(true, Ordering::SeqCst);
                let _ = context.peer.notify_tool_list_changed().await;
                let _ = tokio::time::timeout(Duration::from_secs(5), listed).await;
                Ok(text("grown"))
            }
            "ask" => {
                let params: rmcp::model::ElicitRequestParams = serde_json::from_value(json!({
                    "mode": "form",
                    "message": "About you",
                    "requestedSchema": {"type": "object", "properties": {
                        "name": {"type": "string", "description": "Your name"},
                        "color": {"type": "string", "enum": ["red", "blue"]},
                        "sure": {"type": "boolean"}
                    }, "required": ["name"]}
                }))
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                match context.peer.create_elicitation(params).await {
                    Ok(result) => Ok(text(serde_json::to_string(&result).unwrap_or_default())),
                    Err(error) => Ok(text(format!("elicitation failed: {error}"))),
                }
            }
            // Roots and sampling are deprecated by SEP-2577, still used by servers of the
            // current revision.
            #[allow(deprecated)]
            "roots" => match context.peer.list_roots().await {
                Ok(result) => Ok(text(
                    serde_json::to_string(&result.roots).unwrap_or_default(),
                )),
                Err(error) => Ok(text(format!("roots failed: {error}"))),
            },
            #[allow(deprecated)]
            "sample" => {
                let params: rmcp::model::CreateMessageRequestParams =
                    serde_json::from_value(json!({
                        "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
                        "maxTokens": 10
                    }))
                    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                match context.peer.create_message(params).await {
                    Ok(_) => Ok(text("sampled")),
                    Err(error) => Ok(text(format!("sampling failed: {error}"))),
                }
            }
            "exit" => {
                self.log("exiting");
                std::process::exit(3);
            }
            "add_resource" => {
                let listed = self.resources_listed.notified();
                tokio::pin!(listed);
                listed.as_mut().enable();
                self.added.store(true, Ordering::SeqCst);
                let _ = context.peer.notify_resource_list_changed().await;
                let _ = tokio::time::timeout(Duration::from_secs(5), listed).await;
                Ok(text("added"))
            }
            "extra" if self.grown.load(Ordering::SeqCst) => Ok(text("extra")),
            // Deprecated by SEP-2577, still sent by servers of the current revision.
            #[allow(deprecated)]
            "log" => {
                use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
                let said = args.get("text").and_then(Value::as_str).unwrap_or_default();
                let message = LoggingMessageNotificationParam::new(
                    LoggingLevel::Warning,
                    Value::String(said.to_owned()),
                )
                .with_logger("test");
                let _ = context.peer.notify_logging_message(message).await;
                Ok(text("logged"))
            }
            "env" => {
                let names: Vec<String> = std::env::vars_os()
                    .map(|(k, _)| k.to_string_lossy().into_owned())
                    .collect();
                Ok(text(names.join("\n")))
            }
            "image" => Ok(
                CallToolResult::success(vec![ContentBlock::Image(ImageContent::new(
                    TINY_PNG,
                    "image/png",
                ))])
                .into(),
            ),
            "progress" => {
                let steps = args.get("steps").and_then(Value::as_u64).unwrap_or(2);
                let every = args.get("every_ms").and_then(Value::as_u64).unwrap_or(0);
                if let Some(token) = context.meta.get_progress_token() {
                    for i in 1..=steps {
                        if every > 0 {
                            tokio::time::sleep(Duration::from_millis(every)).await;
                        }
                        let report = ProgressNotificationParam::new(token.clone(), i as f64)
                            .with_total(steps as f64)
                            .with_message(format!("step {i}"));
                        let _ = context.peer.notify_progress(report).await;
                    }
                    // The last report gets the same head start on the answer as the others
                    // had: the client dispatches notifications concurrently with responses.
                    if every > 0 {
                        tokio::time::sleep(Duration::from_millis(every)).await;
                    }
                }
                Ok(text("progressed"))
            }
            "write_file" => {
                let path = args.get("path").and_then(Value::as_str).unwrap_or_default();
                let body = args.get("text").and_then(Value::as_str).unwrap_or_default();
                Ok(match std::fs::write(path, body) {
                    Ok(()) => text(format!("wrote {path}")),
                    Err(error) => CallToolResult::error(vec![ContentBlock::Text(
                        TextContent::new(format!("cannot write {path}: {error}")),
                    )])
                    .into(),
                })
            }
            other => Err(ErrorData::invalid_params(
                format!("unknown tool {other}"),
                None,
            )),
        }
    }
}

/// Serves MCP on stdin/stdout until the client closes stdin.
pub async fn run(flags: Flags) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let server = TestServer {
        log: flags.log.clone(),
        instructions: flags.instructions.clone(),
        added: Arc::default(),
        resources_listed: Arc::new(Notify::new()),
        announce_early: Arc::new(AtomicBool::new(flags.announce_early)),
        grown: Arc::default(),
        listed: Arc::new(Notify::new()),
    };
    server.log(&format!("started {}", std::process::id()));
    // Held until the server exits; the process group (not this handle) must stop it.
    let _child = if flags.grandchild {
        let child = std::process::Command::new("sleep").arg("3600").spawn()?;
        server.log(&format!("child {}", child.id()));
        Some(child)
    } else {
        None
    };
    if let Some(seconds) = &flags.daemon {
        // Its own session, not waited for: only a supervisor that tracks every descendant
        // can still stop it.
        std::process::Command::new("setsid")
            .args(["sleep", seconds])
            .spawn()?;
        server.log("daemon started");
    }
    if !flags.startup_delay.is_zero() {
        tokio::time::sleep(flags.startup_delay).await;
    }
    let running = server
        .serve((tokio::io::stdin(), tokio::io::stdout()))
        .await?;
    running.waiting().await?;
    Ok(())
}

/// The binary's whole `main`: parses the flags, serves, exits 2 on a usage error and 1 on a
/// failure. Shared by every package that builds the test server for its own tests.
pub fn main() {
    let flags = match Flags::parse(std::env::args().skip(1)) {
        Ok(flags) => flags,
        Err(error) => {
            eprintln!("dsh-mcp-test-server: {error}");
            std::process::exit(2);
        }
    };
    let served = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.into())
        .and_then(|runtime| runtime.block_on(run(flags)));
    if let Err(error) = served {
        eprintln!("dsh-mcp-test-server: {error}");
        std::process::exit(1);
    }
}
