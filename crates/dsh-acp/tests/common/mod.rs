//! In-process harness: the real core services with the scripted adapter, `dsh_acp::serve` on
//! one end of a duplex pipe, and an ACP client built from the `agent-client-protocol` crate on
//! the other.

#![allow(dead_code, clippy::unwrap_used)]

pub mod child;
pub mod editor;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CancelNotification, ClientCapabilities, ContentBlock as AcpBlock, CreateTerminalRequest,
    FileSystemCapabilities, InitializeRequest, InitializeResponse, KillTerminalRequest,
    LoadSessionRequest, LoadSessionResponse, NewSessionRequest, PermissionOptionId, PromptRequest,
    PromptResponse, ReadTextFileRequest, ReleaseTerminalRequest, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, SelectedPermissionOutcome,
    SessionNotification, SessionUpdate, StopReason, TerminalOutputRequest, TextContent,
    WaitForTerminalExitRequest, WriteTextFileRequest,
};
use agent_client_protocol::v1::schema::{
    CreateElicitationRequest, CreateElicitationResponse, ElicitationAcceptAction,
    ElicitationAction, ElicitationCapabilities, ElicitationContentValue,
    ElicitationFormCapabilities,
};
use agent_client_protocol::{Agent, ByteStreams, Client, Error};
use async_trait::async_trait;
use dsh_acp::{AcpError, AcpOptions};
use dsh_agent::{AgentOptions, AgentRef};
use dsh_agent_loop::{Core, CoreConfig, mount_core};
use dsh_kernel::Context;
use dsh_session::{
    EventKind, Persistence, Session, SessionEvent, SessionId, TurnEndReason, check_balanced,
};
use dsh_store_jsonl::{JsonlOptions, JsonlPersistencePlugin, JsonlStore};
use dsh_testkit::ScriptedAdapter;
use dsh_tools::{Tool, ToolCallContext, ToolEffects, ToolError, ToolOutput};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};
use tokio_util::sync::CancellationToken;

/// How the test client answers `session/request_permission`.
#[derive(Clone, Debug)]
pub enum Answer {
    /// Select this option id.
    Select(&'static str),
    /// Answer `cancelled`.
    Cancelled,
    /// Fail the request with a JSON-RPC error.
    Error,
    /// Never answer (until the request is cancelled or the connection ends).
    Hold,
}

/// How the test client answers `elicitation/create`.
#[derive(Clone, Debug)]
pub enum Elicit {
    /// Accept with these string fields.
    Accept(Vec<(&'static str, &'static str)>),
    /// Decline.
    Decline,
}

/// The core services, the scripted model and the served bridge.
pub struct H {
    pub ctx: Context,
    pub core: Core,
    pub adapter: Arc<ScriptedAdapter>,
    /// The JSONL store of [`H::persistent`] and the directory it lives in.
    pub store: Option<(Arc<JsonlStore>, Arc<tempfile::TempDir>)>,
    pub cwd: PathBuf,
}

pub fn route() -> AgentOptions {
    AgentOptions::route("scripted", "test-model")
}

pub fn options() -> AcpOptions {
    AcpOptions::new(route())
}

impl H {
    pub async fn new() -> H {
        Self::build(false, None).await
    }

    /// Retries a `SERVER` failure twice, after a millisecond.
    pub async fn with_fast_retries() -> H {
        let policy = dsh_llm::RetryPolicy::Normal {
            max_retries: 2,
            retryable: vec![dsh_session::FailureCode::Server],
            backoff: dsh_llm::Backoff {
                initial: std::time::Duration::from_millis(1),
                max: std::time::Duration::from_millis(2),
                jitter_ratio: 0.0,
            },
        };
        Self::build(false, Some(policy)).await
    }

    /// With the real JSONL persistence under a fresh temporary directory (for `session/load`
    /// and `session/list`).
    pub async fn persistent() -> H {
        Self::build(true, None).await
    }

    /// [`H::persistent`] with these store options (a file-operations double, say).
    pub async fn persistent_with(options: JsonlOptions) -> H {
        Self::build_with(Some(options), None).await
    }

    async fn build(persistent: bool, retry: Option<dsh_llm::RetryPolicy>) -> H {
        Self::build_with(persistent.then(JsonlOptions::default), retry).await
    }

    async fn build_with(store: Option<JsonlOptions>, retry: Option<dsh_llm::RetryPolicy>) -> H {
        let ctx = Context::new();
        let store = if let Some(store_options) = store {
            let dir = Arc::new(tempfile::tempdir().unwrap());
            let store = JsonlStore::with_options(dir.path().join("sessions"), store_options);
            std::mem::forget(
                ctx.plugin(JsonlPersistencePlugin::new(store.clone()))
                    .await
                    .unwrap(),
            );
            Some((store, dir))
        } else {
            None
        };
        let core = mount_core(&ctx, CoreConfig::default()).await.unwrap();
        let adapter = Arc::new(ScriptedAdapter::new());
        if let Some(policy) = retry {
            adapter.set_retry_policy(Some(policy));
        }
        std::mem::forget(adapter.register(&core.llm).unwrap());
        let _ = core.tools.register(&ctx, Arc::new(EchoTool)).unwrap();
        H {
            ctx,
            core,
            adapter,
            store,
            cwd: std::env::temp_dir(),
        }
    }

    pub fn register(&self, tool: impl Tool) {
        let _ = self.core.tools.register(&self.ctx, Arc::new(tool)).unwrap();
    }

    /// Serves a new connection with `options` and connects a client to it.
    pub async fn connect(&self, options: AcpOptions) -> Conn {
        self.connect_until(options, std::future::pending()).await
    }

    /// Like [`H::connect`], the server also stopping when `stop` resolves
    /// (`dsh_acp::serve_until`).
    pub async fn connect_until(
        &self,
        options: AcpOptions,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Conn {
        let (client_io, server_io) = tokio::io::duplex(1 << 16);
        let (sr, sw) = tokio::io::split(server_io);
        let server = tokio::spawn(dsh_acp::serve_until(
            self.ctx.clone(),
            options,
            sr,
            sw,
            stop,
        ));
        let (cr, cw) = tokio::io::split(client_io);
        let mut conn = Conn::over(cr, cw, self.cwd.clone()).await;
        conn.server = Some(server);
        conn
    }

    /// The stored log of session `id` (repaired and balanced, as a resume would see it).
    pub async fn stored(&self, id: &str) -> Vec<Arc<SessionEvent>> {
        let (store, _) = self.store.as_ref().unwrap();
        store
            .load(&SessionId::new(id))
            .await
            .unwrap()
            .events
            .into_iter()
            .map(Arc::new)
            .collect()
    }

    pub fn agent(&self, id: &str) -> Option<AgentRef> {
        self.core.registry.get(&SessionId::new(id))
    }
}

/// A connected test client.
pub struct Conn {
    pub cx: ConnectionTo<Agent>,
    pub updates: mpsc::UnboundedReceiver<SessionNotification>,
    pub asked: mpsc::UnboundedReceiver<RequestPermissionRequest>,
    pub answer: Arc<Mutex<Answer>>,
    /// The forms the agent asked the person to fill (`elicitation/create`).
    pub elicited: mpsc::UnboundedReceiver<CreateElicitationRequest>,
    /// How the client answers them.
    pub elicit: Arc<Mutex<Elicit>>,
    /// The editor's files and terminals (used only when offered in `initialize`).
    pub editor: Arc<editor::Editor>,
    /// Everything the client received, in arrival order: update kinds and `ask:<call id>`.
    pub arrivals: Arc<Mutex<Vec<String>>>,
    done: CancellationToken,
    client: Option<JoinHandle<Result<(), Error>>>,
    server: Option<JoinHandle<Result<(), AcpError>>>,
    pub cwd: PathBuf,
}

pub fn text(t: &str) -> Vec<AcpBlock> {
    vec![AcpBlock::Text(TextContent::new(t))]
}

impl Conn {
    /// An ACP client speaking over `read`/`write` (a duplex pipe, or a child's stdio).
    pub async fn over<R, W>(read: R, write: W, cwd: PathBuf) -> Conn
    where
        R: tokio::io::AsyncRead + Send + 'static,
        W: tokio::io::AsyncWrite + Send + 'static,
    {
        let (updates_tx, updates) = mpsc::unbounded_channel();
        let (asked_tx, asked) = mpsc::unbounded_channel();
        let answer = Arc::new(Mutex::new(Answer::Select("allow-once")));
        let (elicited_tx, elicited) = mpsc::unbounded_channel();
        let elicit = Arc::new(Mutex::new(Elicit::Decline));
        let form_answer = elicit.clone();
        let (cx_tx, cx_rx) = oneshot::channel();
        let arrivals: Arc<Mutex<Vec<String>>> = Arc::default();
        let (seen_updates, seen_asks) = (arrivals.clone(), arrivals.clone());
        let seen_forms = arrivals.clone();
        let done = CancellationToken::new();
        let until = done.clone();
        let policy = answer.clone();
        let editor = Arc::new(editor::Editor::default());
        let (e1, e2, e3, e4, e5, e6, e7) = (
            editor.clone(),
            editor.clone(),
            editor.clone(),
            editor.clone(),
            editor.clone(),
            editor.clone(),
            editor.clone(),
        );
        let client = tokio::spawn(
            Client
                .v1()
                .name("test-client")
                .on_receive_request(
                    async move |r: ReadTextFileRequest, responder, _cx| {
                        responder.respond_with_result(e1.read(&r))
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    async move |r: WriteTextFileRequest, responder, _cx| {
                        responder.respond_with_result(e2.write(&r))
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    async move |r: CreateTerminalRequest, responder, _cx| {
                        responder.respond_with_result(e3.create(&r))
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    async move |r: TerminalOutputRequest, responder, _cx| {
                        responder.respond_with_result(e4.output(&r))
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    async move |r: WaitForTerminalExitRequest, responder, cx| {
                        // Off the dispatch loop: the wait lasts as long as the command.
                        let editor = e5.clone();
                        cx.spawn(
                            async move { responder.respond_with_result(editor.wait(&r).await) },
                        )?;
                        Ok(())
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    async move |r: KillTerminalRequest, responder, _cx| {
                        responder.respond_with_result(e6.kill(&r))
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    async move |r: ReleaseTerminalRequest, responder, _cx| {
                        responder.respond_with_result(e7.release(&r))
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_notification(
                    async move |n: SessionNotification, _cx| {
                        seen_updates.lock().push(kind_of(&n.update).to_owned());
                        let _ = updates_tx.send(n);
                        Ok(())
                    },
                    agent_client_protocol::on_receive_notification!(),
                )
                .on_receive_request(
                    async move |r: RequestPermissionRequest, responder, cx| {
                        seen_asks
                            .lock()
                            .push(format!("ask:{}", r.tool_call.tool_call_id.0));
                        let _ = asked_tx.send(r);
                        let answer = policy.lock().clone();
                        let outcome = match answer {
                            Answer::Select(id) => RequestPermissionOutcome::Selected(
                                SelectedPermissionOutcome::new(PermissionOptionId::new(id)),
                            ),
                            Answer::Cancelled => RequestPermissionOutcome::Cancelled,
                            Answer::Error => {
                                return responder.respond_with_error(Error::internal_error());
                            }
                            Answer::Hold => {
                                // Keep the responder alive until the agent withdraws the
                                // question or the connection ends.
                                let cancellation = responder.cancellation();
                                cx.spawn(async move {
                                    cancellation.cancelled().await;
                                    responder.respond(RequestPermissionResponse::new(
                                        RequestPermissionOutcome::Cancelled,
                                    ))
                                })?;
                                return Ok(());
                            }
                        };
                        responder.respond(RequestPermissionResponse::new(outcome))
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    async move |r: CreateElicitationRequest, responder, _cx| {
                        seen_forms.lock().push("elicit".to_owned());
                        let _ = elicited_tx.send(r);
                        let action = match form_answer.lock().clone() {
                            Elicit::Accept(fields) => ElicitationAction::Accept(
                                ElicitationAcceptAction::new().content(
                                    fields
                                        .into_iter()
                                        .map(|(k, v)| {
                                            (k.to_owned(), ElicitationContentValue::from(v))
                                        })
                                        .collect::<std::collections::BTreeMap<_, _>>(),
                                ),
                            ),
                            Elicit::Decline => ElicitationAction::Decline,
                        };
                        responder.respond(CreateElicitationResponse::new(action))
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .connect_with(
                    ByteStreams::new(write.compat_write(), read.compat()),
                    async move |cx: ConnectionTo<Agent>| {
                        let _ = cx_tx.send(cx);
                        until.cancelled().await;
                        Ok(())
                    },
                ),
        );
        let cx = cx_rx.await.unwrap();
        Conn {
            cx,
            updates,
            asked,
            answer,
            elicited,
            elicit,
            editor,
            arrivals,
            done,
            client: Some(client),
            server: None,
            cwd,
        }
    }

    pub async fn initialize(&self) -> InitializeResponse {
        self.cx
            .send_request(InitializeRequest::new(ProtocolVersion::V1))
            .block_task()
            .await
            .unwrap()
    }

    /// Initializes as a client that can show forms (`elicitation.form`).
    pub async fn initialize_with_forms(&self) -> InitializeResponse {
        let capabilities = ClientCapabilities::new()
            .elicitation(ElicitationCapabilities::new().form(ElicitationFormCapabilities::new()));
        self.cx
            .send_request(
                InitializeRequest::new(ProtocolVersion::V1).client_capabilities(capabilities),
            )
            .block_task()
            .await
            .unwrap()
    }

    /// Initializes as an editor that offers its files and terminals.
    pub async fn initialize_as_editor(&self) -> InitializeResponse {
        let capabilities = ClientCapabilities::new()
            .fs(FileSystemCapabilities::new()
                .read_text_file(true)
                .write_text_file(true))
            .terminal(true);
        self.cx
            .send_request(
                InitializeRequest::new(ProtocolVersion::V1).client_capabilities(capabilities),
            )
            .block_task()
            .await
            .unwrap()
    }

    /// Opens a session without initializing again.
    pub async fn open(&self) -> String {
        let response = self
            .cx
            .send_request(NewSessionRequest::new(self.cwd.clone()))
            .block_task()
            .await
            .unwrap();
        response.session_id.0.to_string()
    }

    /// Initializes (once is enough, but repeating is harmless) and opens a session.
    pub async fn session(&self) -> String {
        self.initialize().await;
        let response = self
            .cx
            .send_request(NewSessionRequest::new(self.cwd.clone()))
            .block_task()
            .await
            .unwrap();
        response.session_id.0.to_string()
    }

    /// `session/load` of `session` in this client's workspace.
    pub async fn load(&self, session: &str) -> Result<LoadSessionResponse, Error> {
        self.cx
            .send_request(LoadSessionRequest::new(
                session.to_owned(),
                self.cwd.clone(),
            ))
            .block_task()
            .await
    }

    /// Sends a prompt; the returned task resolves with its answer.
    pub fn prompt(&self, session: &str, prompt: &str) -> JoinHandle<Result<PromptResponse, Error>> {
        let fut = self
            .cx
            .send_request(PromptRequest::new(session.to_owned(), text(prompt)))
            .block_task();
        tokio::spawn(fut)
    }

    pub async fn prompt_now(&self, session: &str, prompt: &str) -> Result<StopReason, Error> {
        self.prompt(session, prompt)
            .await
            .unwrap()
            .map(|r| r.stop_reason)
    }

    pub fn cancel(&self, session: &str) {
        self.cx
            .send_notification(CancelNotification::new(session.to_owned()))
            .unwrap();
    }

    /// Every update received so far.
    pub fn received(&mut self) -> Vec<SessionNotification> {
        let mut out = Vec::new();
        while let Ok(n) = self.updates.try_recv() {
            out.push(n);
        }
        out
    }

    /// Waits for the next update of `session` matching `pred`, returning it; the ones before it
    /// are dropped.
    pub async fn wait_update(
        &mut self,
        session: &str,
        pred: impl Fn(&SessionUpdate) -> bool,
    ) -> SessionUpdate {
        loop {
            let n = self.updates.recv().await.unwrap();
            if &*n.session_id.0 == session && pred(&n.update) {
                return n.update;
            }
        }
    }

    pub fn set_answer(&self, answer: Answer) {
        *self.answer.lock() = answer;
    }

    /// Closes the client's end (as an editor exiting would) and waits for `serve` to return.
    pub async fn disconnect(self) -> Result<(), AcpError> {
        self.begin_disconnect();
        self.served().await
    }

    /// Starts closing the client's end without waiting.
    pub fn begin_disconnect(&self) {
        self.done.cancel();
    }

    /// Waits for the server alone to return, the client still connected.
    pub async fn server_returned(&mut self) -> Result<(), AcpError> {
        self.server.take().unwrap().await.unwrap()
    }

    /// Waits for `serve` to return (after [`Conn::begin_disconnect`]).
    pub async fn served(mut self) -> Result<(), AcpError> {
        let _ = self.client.take().unwrap().await;
        match self.server.take() {
            Some(server) => server.await.unwrap(),
            None => Ok(()),
        }
    }
}

/// A short name for an update's kind.
pub fn kind_of(update: &SessionUpdate) -> &'static str {
    match update {
        SessionUpdate::UserMessageChunk(_) => "user_message_chunk",
        SessionUpdate::AgentMessageChunk(_) => "agent_message_chunk",
        SessionUpdate::AgentThoughtChunk(_) => "agent_thought_chunk",
        SessionUpdate::ToolCall(_) => "tool_call",
        SessionUpdate::ToolCallUpdate(_) => "tool_call_update",
        SessionUpdate::UsageUpdate(_) => "usage_update",
        SessionUpdate::CurrentModeUpdate(_) => "current_mode_update",
        _ => "other",
    }
}

/// The text of a message or thought chunk.
pub fn chunk_text(update: &SessionUpdate) -> Option<(&'static str, String)> {
    let (kind, chunk) = match update {
        SessionUpdate::AgentMessageChunk(c) => ("agent", c),
        SessionUpdate::AgentThoughtChunk(c) => ("thought", c),
        SessionUpdate::UserMessageChunk(c) => ("user", c),
        _ => return None,
    };
    match &chunk.content {
        AcpBlock::Text(t) => Some((kind, t.text.clone())),
        _ => None,
    }
}

/// The concatenated agent message text among `updates`.
pub fn agent_text(updates: &[SessionNotification]) -> String {
    updates
        .iter()
        .filter_map(|n| chunk_text(&n.update))
        .filter(|(k, _)| *k == "agent")
        .map(|(_, t)| t)
        .collect()
}

pub fn turn_ends(session: &Session) -> Vec<TurnEndReason> {
    session
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::TurnEnd(t) => Some(t.reason.clone()),
            _ => None,
        })
        .collect()
}

pub fn assert_balanced(session: &Session) {
    check_balanced(&session.events()).unwrap();
}

/// `echo`: answers with its `text` argument.
pub struct EchoTool;

#[async_trait]
impl Tool for EchoTool {
    fn name(&self) -> &str {
        "echo"
    }
    fn description(&self) -> &str {
        "echoes text"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"text": {"type": "string"}}})
    }
    fn effects(&self, _args: &Value) -> ToolEffects {
        ToolEffects::none()
    }
    async fn execute(&self, args: Value, _call: &ToolCallContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(
            args.get("text")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
        ))
    }
}

/// `touch`: a mutating test tool that counts how often its body ran.
#[derive(Clone, Default)]
pub struct TouchTool {
    pub runs: Arc<AtomicUsize>,
}

impl TouchTool {
    pub fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Tool for TouchTool {
    fn name(&self) -> &str {
        "touch"
    }
    fn description(&self) -> &str {
        "changes the workspace"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    fn effects(&self, _args: &Value) -> ToolEffects {
        ToolEffects::none().writes("touched")
    }
    async fn execute(
        &self,
        _args: Value,
        _call: &ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput::text("touched"))
    }
}

/// `wait`: a tool whose body ignores cancellation until the test releases it (a command that
/// shrugs off SIGTERM), reporting when it started.
#[derive(Clone)]
pub struct WaitTool {
    pub started: Arc<tokio::sync::Notify>,
    pub release: CancellationToken,
}

impl Default for WaitTool {
    fn default() -> Self {
        Self {
            started: Arc::new(tokio::sync::Notify::new()),
            release: CancellationToken::new(),
        }
    }
}

#[async_trait]
impl Tool for WaitTool {
    fn name(&self) -> &str {
        "wait"
    }
    fn description(&self) -> &str {
        "waits"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    fn effects(&self, _args: &Value) -> ToolEffects {
        ToolEffects::none()
    }
    async fn execute(
        &self,
        _args: Value,
        _call: &ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        self.started.notify_one();
        self.release.cancelled().await;
        Ok(ToolOutput::text("waited"))
    }
}
