//! The connection: protocol v1 over newline-delimited JSON-RPC, one handler per method.
//!
//! Handlers run inside the SDK's dispatch loop, so each one does only synchronous work there
//! (validation, prompt admission, cancel) and moves anything that awaits the agent, the
//! registry or persistence into a tracked task that answers through its responder. That keeps
//! `session/cancel` and permission answers flowing while prompts are outstanding.

use std::future::Future;
use std::sync::Arc;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::Responder;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, AuthenticateRequest, AuthenticateResponse, CancelNotification,
    CloseSessionRequest, ContentBlock, ContentChunk, Implementation, InitializeRequest,
    InitializeResponse, ListSessionsRequest, LoadSessionRequest, McpCapabilities,
    NewSessionRequest, PromptCapabilities, PromptRequest, PromptResponse, ResumeSessionRequest,
    SessionCapabilities, SessionCloseCapabilities, SessionListCapabilities,
    SessionResumeCapabilities, SessionUpdate, SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse, SetSessionModeRequest, SetSessionModeResponse, StopReason,
};
use agent_client_protocol::{Agent, Error, JsonRpcResponse};
use dsh_kernel::Context;
use dsh_session::{MessageId, SessionId};
use futures::FutureExt;

use crate::bridge::Bridge;
use crate::errors::{AcpError, invalid, is_client_error, unknown_session};
use crate::hangup::Hangup;
use crate::modes::Mode;
use crate::options::AcpOptions;
use crate::record::SessionRecord;
use crate::settle::{Inflight, settle};
use crate::{commands, frames, list, models, open, prompt, replay, resume, teardown};

/// Runs the ACP agent side of one connection until the client closes its end, then tears every
/// session it created down and returns.
///
/// `ctx` must already carry the core services (`dsh_agent_loop::mount_core`: agent registry
/// with the loop factory, session store, tool runtime) plus whatever else sessions should get
/// (tools, shell executor, persistence — `session/load` and `session/list` use `dyn
/// Persistence` when it is provided). `input` carries the client's frames, `output` only
/// protocol frames: the bridge never writes anything else there and logs through `tracing`,
/// so the front end must route tracing to stderr.
///
/// When `input` reaches end of file (the client hung up; frames that can no longer be written
/// then are not an error) or the connection fails, every bridge-owned session is
/// cancelled (`user`), drained, and disposed — afterwards no agent and no session-store entry of
/// the bridge remains, and each persisted session ends balanced with its last turn `aborted`.
/// Other sessions of the process are untouched.
///
/// Every future the SDK drives is `Send`, so this runs on a multi-threaded runtime as well as
/// a current-thread one; no `LocalSet` is needed.
pub async fn serve<R, W>(
    ctx: Context,
    options: AcpOptions,
    input: R,
    output: W,
) -> Result<(), AcpError>
where
    R: tokio::io::AsyncRead + Send + 'static,
    W: tokio::io::AsyncWrite + Send + 'static,
{
    serve_until(ctx, options, input, output, std::future::pending()).await
}

/// [`serve`], which also ends when `stop` resolves — how a front end turns SIGTERM or Ctrl-C
/// into the bridge's own orderly teardown instead of dropping the connection mid-turn.
///
/// On `stop` the bridge closes to new sessions and tears every session down exactly as on a
/// hangup (cancel with cause `user`, drain, dispose), but while the connection is still open:
/// each outstanding `session/prompt` is answered `cancelled` and its last updates reach the
/// client before the answer. Then the connection is closed (frames already queued are written
/// first) and this returns `Ok`. The teardown itself is not bounded here; a front end that must
/// exit within a deadline wraps the call in a timeout.
pub async fn serve_until<R, W, S>(
    ctx: Context,
    options: AcpOptions,
    input: R,
    output: W,
    stop: S,
) -> Result<(), AcpError>
where
    R: tokio::io::AsyncRead + Send + 'static,
    W: tokio::io::AsyncWrite + Send + 'static,
    S: Future<Output = ()> + Send + 'static,
{
    let hangup = Hangup::default();
    let transport = frames::watched(input, output, hangup.clone());
    run(ctx, options, transport, hangup, stop).await
}

/// [`serve_until`] over a message transport instead of a byte pipe: every item of `incoming`
/// is one whole JSON-RPC frame and every frame the bridge sends is one item of `outgoing`, so
/// no line framing applies. This is how the same bridge serves a WebSocket (one text message
/// per frame) or an in-process channel.
///
/// A client that goes away is told apart from a failed connection as on stdio: `incoming`
/// ending, or an item or send failing with `BrokenPipe`, `ConnectionReset`,
/// `ConnectionAborted` or `NotConnected`, is a hangup, and the connection ends `Ok` after the
/// teardown. The transport bounds its own frames (a WebSocket's maximum message size);
/// [`MAX_FRAME_BYTES`](crate::MAX_FRAME_BYTES) is the size it should use.
pub async fn serve_frames_until<I, O, S>(
    ctx: Context,
    options: AcpOptions,
    incoming: I,
    outgoing: O,
    stop: S,
) -> Result<(), AcpError>
where
    I: futures::Stream<Item = std::io::Result<String>> + Send + 'static,
    O: futures::Sink<String, Error = std::io::Error> + Send + 'static,
    S: Future<Output = ()> + Send + 'static,
{
    let hangup = Hangup::default();
    let transport = frames::watched_frames(incoming, outgoing, hangup.clone());
    run(ctx, options, transport, hangup, stop).await
}

/// One connection over `transport`, whatever carries its frames.
async fn run<T, S>(
    ctx: Context,
    options: AcpOptions,
    transport: T,
    hangup: Hangup,
    stop: S,
) -> Result<(), AcpError>
where
    T: agent_client_protocol::ConnectTo<Agent> + 'static,
    S: Future<Output = ()> + Send + 'static,
{
    let bridge = Bridge::new(&ctx, options)?;
    // One teardown shared by both ends of the connection. It may start inside the connection
    // (on `stop`) and be cut off there when the transport fails; the clone awaited below then
    // drives the same future to its end instead of starting over without the records.
    let quiesce = {
        let bridge = bridge.clone();
        async move { teardown::quiesce(&bridge).await }
            .boxed()
            .shared()
    };
    let on_stop = quiesce.clone();
    let served = connection(&bridge)
        .connect_with(transport, async move |cx| {
            tokio::select! {
                () = cx.incoming_closed() => {}
                () = stop => on_stop.await,
            }
            Ok(())
        })
        .await;
    let served = hangup.excuse(served).inspect_err(|error| {
        tracing::warn!(%error, "ACP connection ended with an error");
    });
    quiesce.await;
    served.map_err(AcpError::Transport)
}

/// Runs `work` outside the dispatch loop and answers `responder` with its result. An answer
/// that cannot be written (the client is gone) is only logged.
fn answer<T, F>(bridge: &Bridge, responder: Responder<T>, work: F)
where
    T: JsonRpcResponse,
    F: Future<Output = Result<T, Error>> + Send + 'static,
{
    answer_then(bridge, responder, work, |_| {});
}

/// [`answer`], then `after` with a successful answer: what must reach the client only once it
/// knows the session (updates about a session it has not been told about would be dropped).
fn answer_then<T, F, A>(bridge: &Bridge, responder: Responder<T>, work: F, after: A)
where
    T: JsonRpcResponse + Clone,
    F: Future<Output = Result<T, Error>> + Send + 'static,
    A: FnOnce(&T) + Send + 'static,
{
    bridge.tasks.spawn(async move {
        let result = work.await;
        log_refusal(&result);
        let done = result.as_ref().ok().cloned();
        if let Err(error) = responder.respond_with_result(result) {
            tracing::debug!(%error, "cannot answer an ACP request (client gone?)");
        }
        if let Some(done) = done {
            after(&done);
        }
    });
}

/// Tells the client which slash commands the session takes.
fn advertise_commands(bridge: &Bridge, id: &SessionId) {
    if let Some(record) = bridge.record(id) {
        record
            .state
            .updates
            .update(commands::advertised(bridge, &record));
    }
}

/// `session/set_config_option`: the session's model, answered once the choice is on disk.
async fn set_config_option(
    bridge: Arc<Bridge>,
    request: SetSessionConfigOptionRequest,
) -> Result<SetSessionConfigOptionResponse, Error> {
    let id = SessionId::new(&*request.session_id.0);
    let record = bridge.record(&id).ok_or_else(|| unknown_session(&id))?;
    if &*request.config_id.0 != models::MODEL_OPTION {
        return Err(invalid(format!(
            "unknown config option: {}",
            request.config_id.0
        )));
    }
    let value = request
        .value
        .as_value_id()
        .ok_or_else(|| invalid("the model option takes a value id"))?;
    models::choose_durably(&bridge, &record, &value.0).await?;
    Ok(SetSessionConfigOptionResponse::new(models::config_options(
        &bridge,
        &record.state,
    )))
}

fn reply<T: JsonRpcResponse>(responder: Responder<T>, result: Result<T, Error>) {
    log_refusal(&result);
    if let Err(error) = responder.respond_with_result(result) {
        tracing::debug!(%error, "cannot answer an ACP request (client gone?)");
    }
}

/// Logs an error answer: a client's mistake (unknown session, bad params) at debug level, so
/// an editor probing sessions does not fill the log with warnings; our own failures as
/// warnings.
pub(crate) fn log_refusal<T>(result: &Result<T, Error>) {
    if let Err(error) = result {
        if is_client_error(error) {
            tracing::debug!(code = error.code.value(), message = %error.message, "ACP request refused");
        } else {
            tracing::warn!(code = error.code.value(), message = %error.message, "ACP request failed");
        }
    }
}

/// The `initialize` answer: protocol v1, what dsh supports, and who it is. Shared with the
/// unconfigured agent, which must look the same to the editor until a session is asked for.
/// `images`: image blocks are taken (the composition root provides
/// [`PromptImages`](dsh_agent::PromptImages)); whether a session's model reads them is decided
/// per prompt, and a model that does not is refused by name.
pub(crate) fn initialize_response(options: &AcpOptions, images: bool) -> InitializeResponse {
    let capabilities = AgentCapabilities::new()
        .load_session(true)
        // Stdio MCP servers are the baseline; streamable HTTP ones are supported too.
        .mcp_capabilities(McpCapabilities::new().http(true).sse(false))
        .prompt_capabilities(
            PromptCapabilities::new()
                .image(images)
                .audio(false)
                .embedded_context(false),
        )
        .session_capabilities(
            SessionCapabilities::new()
                .list(SessionListCapabilities::new())
                .close(SessionCloseCapabilities::new())
                .resume(SessionResumeCapabilities::new()),
        );
    InitializeResponse::new(ProtocolVersion::V1)
        .agent_capabilities(capabilities)
        .auth_methods(Vec::new())
        .agent_info(Implementation::new(
            options.agent_name.clone(),
            options.agent_version.clone(),
        ))
}

/// `initialize`: remembers what the editor offers (its files and terminals), then answers.
fn initialize(bridge: &Bridge, request: &InitializeRequest) -> InitializeResponse {
    bridge.set_client_capabilities(request.client_capabilities.clone());
    let images = bridge.ctx.get::<dyn dsh_agent::PromptImages>().is_some();
    initialize_response(&bridge.options, images)
}

fn set_mode(bridge: &Bridge, request: &SetSessionModeRequest) -> Result<(), Error> {
    let id = SessionId::new(&*request.session_id.0);
    let record = bridge.record(&id).ok_or_else(|| unknown_session(&id))?;
    let mode = Mode::from_id(&request.mode_id.0)
        .ok_or_else(|| invalid(format!("unknown mode: {}", request.mode_id.0)))?;
    crate::planning::choose_mode(bridge, &record, mode)
}

fn connection(
    bridge: &Arc<Bridge>,
) -> agent_client_protocol::v1::Builder<
    Agent,
    impl agent_client_protocol::HandleDispatchFrom<agent_client_protocol::Client> + 'static,
> {
    let builder = Agent.v1().name("dsh-acp");
    let b = bridge.clone();
    let builder = builder.on_receive_request(
        async move |request: InitializeRequest, responder, _cx| {
            responder.respond(initialize(&b, &request))
        },
        agent_client_protocol::on_receive_request!(),
    );
    let builder = builder.on_receive_request(
        async move |_request: AuthenticateRequest, responder, _cx| {
            responder.respond(AuthenticateResponse::new())
        },
        agent_client_protocol::on_receive_request!(),
    );
    let b = bridge.clone();
    let builder = builder.on_receive_request(
        async move |request: NewSessionRequest, responder, cx| {
            let work = open::new_session(b.clone(), request, cx);
            let after = b.clone();
            answer_then(&b, responder, work, move |response| {
                advertise_commands(&after, &SessionId::new(&*response.session_id.0));
            });
            Ok(())
        },
        agent_client_protocol::on_receive_request!(),
    );
    let b = bridge.clone();
    let builder = builder.on_receive_request(
        async move |request: LoadSessionRequest, responder, cx| {
            let id = SessionId::new(&*request.session_id.0);
            let work = replay::load_session(b.clone(), request, cx);
            let after = b.clone();
            answer_then(&b, responder, work, move |_| {
                advertise_commands(&after, &id)
            });
            Ok(())
        },
        agent_client_protocol::on_receive_request!(),
    );
    let b = bridge.clone();
    let builder = builder.on_receive_request(
        async move |request: ResumeSessionRequest, responder, cx| {
            let id = SessionId::new(&*request.session_id.0);
            let work = resume::resume_session(b.clone(), request, cx);
            let after = b.clone();
            answer_then(&b, responder, work, move |_| {
                advertise_commands(&after, &id)
            });
            Ok(())
        },
        agent_client_protocol::on_receive_request!(),
    );
    let b = bridge.clone();
    let builder = builder.on_receive_request(
        async move |request: ListSessionsRequest, responder, _cx| {
            answer(&b, responder, list::list_sessions(b.clone(), request));
            Ok(())
        },
        agent_client_protocol::on_receive_request!(),
    );
    let b = bridge.clone();
    let builder = builder.on_receive_request(
        async move |request: CloseSessionRequest, responder, _cx| {
            answer(&b, responder, teardown::close_session(b.clone(), request));
            Ok(())
        },
        agent_client_protocol::on_receive_request!(),
    );
    let b = bridge.clone();
    let builder = builder.on_receive_request(
        async move |request: PromptRequest, responder, _cx| {
            prompt_request(&b, &request, responder);
            Ok(())
        },
        agent_client_protocol::on_receive_request!(),
    );
    let b = bridge.clone();
    let builder = builder.on_receive_notification(
        async move |notification: CancelNotification, _cx| {
            prompt::cancel(&b, &SessionId::new(&*notification.session_id.0));
            Ok(())
        },
        agent_client_protocol::on_receive_notification!(),
    );
    let b = bridge.clone();
    let builder = builder.on_receive_request(
        async move |request: SetSessionConfigOptionRequest, responder, _cx| {
            answer(&b, responder, set_config_option(b.clone(), request));
            Ok(())
        },
        agent_client_protocol::on_receive_request!(),
    );
    let b = bridge.clone();
    builder.on_receive_request(
        async move |request: SetSessionModeRequest, responder, _cx| {
            mode_request(&b, &request, responder);
            Ok(())
        },
        agent_client_protocol::on_receive_request!(),
    )
}

/// `session/prompt`: admitted in the dispatch loop, settled outside it. A `$/cancel_request`
/// for the prompt means what `session/cancel` means; the answer is still sent, as `cancelled`.
/// A command's answer, shown in the thread as the agent's message.
fn say(record: &SessionRecord, text: String) {
    record
        .state
        .updates
        .update(SessionUpdate::AgentMessageChunk(ContentChunk::new(
            ContentBlock::from(text),
        )));
}

fn prompt_request(
    bridge: &Arc<Bridge>,
    request: &PromptRequest,
    responder: Responder<PromptResponse>,
) {
    if let Some(record) = bridge.record(&SessionId::new(&*request.session_id.0))
        && let Ok(text) = prompt::render(&request.prompt)
    {
        match commands::run(bridge, &record, &text) {
            None => {}
            Some(commands::Started::Now(out)) => {
                // A slash command: no model request; its answer streams like a reply.
                say(&record, out);
                return answer(bridge, responder, async move {
                    record.state.updates.drained().await;
                    Ok(PromptResponse::new(StopReason::EndTurn))
                });
            }
            Some(commands::Started::Later(pending)) => {
                // A waiting command holds the prompt slot under its own (never queued)
                // message id, so a prompt sent meanwhile is refused and session/cancel
                // reaches it.
                let slot = Inflight::new(MessageId::generate());
                let after = match record.state.reserve_slot(&slot) {
                    Ok(after) => after,
                    Err(e) => return reply(responder, Err(e)),
                };
                let cancellation = responder.cancellation();
                let b = bridge.clone();
                return answer(bridge, responder, async move {
                    // Interrupt and send: the cancelled prompt settles first.
                    if let Some(after) = after {
                        after.settled().await;
                    }
                    let work = pending.start(&b, record.clone(), slot.cancel_token());
                    tokio::pin!(work);
                    let done = tokio::select! {
                        done = &mut work => done,
                        () = cancellation.cancelled() => {
                            slot.request_cancel();
                            work.await
                        }
                    };
                    let stop = match done {
                        commands::Answer::Cancelled => StopReason::Cancelled,
                        commands::Answer::Text(out) => {
                            say(&record, out);
                            StopReason::EndTurn
                        }
                    };
                    record.state.updates.drained().await;
                    record.state.release_slot(&slot);
                    Ok(PromptResponse::new(stop))
                });
            }
        }
    }
    // `/name args` naming one of the session's custom commands or skills is sent expanded.
    let mut expanded = None;
    if let Some(record) = bridge.record(&SessionId::new(&*request.session_id.0))
        && let Ok(text) = prompt::render(&request.prompt)
    {
        match commands::custom(bridge, &record, &text) {
            None => {}
            Some(Ok(prompt)) => expanded = Some(prompt),
            Some(Err(error)) => {
                say(&record, error);
                return answer(bridge, responder, async move {
                    record.state.updates.drained().await;
                    Ok(PromptResponse::new(StopReason::EndTurn))
                });
            }
        }
    }
    let mut admitted = match prompt::admit(bridge, request, expanded) {
        Ok(admitted) => admitted,
        Err(e) => return reply(responder, Err(e)),
    };
    let cancellation = responder.cancellation();
    let b = bridge.clone();
    answer(bridge, responder, async move {
        let record = admitted.record.clone();
        let inflight = admitted.inflight.clone();
        let settled = async {
            if !admitted.queue_when_ready(&b).await? {
                return Ok(StopReason::Cancelled);
            }
            settle(&record.state, record.agent(), &inflight).await
        };
        tokio::pin!(settled);
        tokio::select! {
            stop = &mut settled => return stop.map(PromptResponse::new),
            () = cancellation.cancelled() => {
                if record.state.holds(&inflight) {
                    prompt::cancel_record(&record);
                }
            }
        }
        settled.await.map(PromptResponse::new)
    });
}

/// `session/set_mode`: the `current_mode_update` reaches the client before the answer.
fn mode_request(
    bridge: &Bridge,
    request: &SetSessionModeRequest,
    responder: Responder<SetSessionModeResponse>,
) {
    let result = set_mode(bridge, request).map(|()| SetSessionModeResponse::new());
    match bridge.record(&SessionId::new(&*request.session_id.0)) {
        Some(record) if result.is_ok() => answer(bridge, responder, async move {
            record.state.updates.drained().await;
            result
        }),
        _ => reply(responder, result),
    }
}
