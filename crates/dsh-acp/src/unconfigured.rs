//! `dsh acp` with a configuration it cannot run: still a well-behaved ACP agent.
//!
//! An editor starts the agent and speaks `initialize` first; an agent that exits before
//! answering shows up as a broken pipe with no explanation. Instead the problem (no model for
//! the provider, a missing key, a broken config file) is kept and answered on every request
//! that would need a working agent, as an error whose message the editor shows in the thread.

use agent_client_protocol::Agent;
use agent_client_protocol::v1::schema::{
    AuthenticateRequest, AuthenticateResponse, InitializeRequest, ListSessionsRequest,
    ListSessionsResponse, LoadSessionRequest, NewSessionRequest, NewSessionResponse, PromptRequest,
};

use crate::errors::{AcpError, internal, unknown_session};
use crate::frames;
use crate::hangup::Hangup;
use crate::options::AcpOptions;
use crate::server::{initialize_response, log_refusal};

/// Serves one connection for an agent whose configuration is unusable: `initialize` and
/// `authenticate` are answered as usual, `session/list` lists nothing, and `session/new` /
/// `session/load` fail with `problem` as the message (`-32603`), so the editor tells the
/// person what to fix. Returns when the client hangs up.
pub async fn serve_unconfigured<R, W>(
    options: AcpOptions,
    problem: String,
    input: R,
    output: W,
) -> Result<(), AcpError>
where
    R: tokio::io::AsyncRead + Send + 'static,
    W: tokio::io::AsyncWrite + Send + 'static,
{
    let hangup = Hangup::default();
    let transport = frames::watched(input, output, hangup.clone());
    let refusal = format!("dsh is not configured: {problem}");
    let (new, load) = (refusal.clone(), refusal);
    let served = Agent
        .v1()
        .name("dsh-acp")
        .on_receive_request(
            async move |_r: InitializeRequest, responder, _cx| {
                // As the configured agent will answer: the harness attaches images.
                responder.respond(initialize_response(&options, true))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |_r: AuthenticateRequest, responder, _cx| {
                responder.respond(AuthenticateResponse::new())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |_r: NewSessionRequest, responder, _cx| {
                let result: Result<NewSessionResponse, _> = Err(internal(new.clone()));
                log_refusal(&result);
                responder.respond_with_result(result)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |_r: LoadSessionRequest, responder, _cx| {
                responder.respond_with_result(Err(internal(load.clone())))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |_r: ListSessionsRequest, responder, _cx| {
                responder.respond(ListSessionsResponse::new(Vec::new()))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |r: PromptRequest, responder, _cx| {
                let id = dsh_session::SessionId::new(&*r.session_id.0);
                responder.respond_with_result(Err(unknown_session(&id)))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(transport, async move |cx| {
            cx.incoming_closed().await;
            Ok(())
        })
        .await;
    hangup.excuse(served).map_err(AcpError::Transport)
}
