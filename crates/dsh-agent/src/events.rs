//! The `agent/*` live event vocabulary.
//!
//! Declared here, beside the interface, so plugins (front ends, hooks, retry, compaction) can
//! listen without depending on the concrete loop. Every event is dispatched with the subject
//! agent's tag as carrier, so a listener registered through `agent.ctx()` hears only that agent
//! (and its descendants); listeners registered through an untagged context hear every agent.
//!
//! Turn and step boundaries and the token stream are *not* mirrored here: they are durable
//! `session/event` facts.

use std::sync::Arc;

use dsh_kernel::{Notification, Serial, Waterfall};
use dsh_llm::{LlmCallConfig, RetryPolicy};
use dsh_session::{CancelCause, LlmFailure, Message};
use tokio_util::sync::CancellationToken;

use crate::agent::{AgentRef, AgentStatus};

/// `agent/created`: the agent is in both registries and its setup finished. A synchronous
/// listener failure vetoes publication (the creator rolls back, pairing it with
/// `agent/disposed`).
pub struct AgentCreated;
impl Notification for AgentCreated {
    const NAME: &'static str = "agent/created";
    type Payload = AgentRef;
}

/// `agent/disposed`: the exact agent left the registry.
pub struct AgentDisposed;
impl Notification for AgentDisposed {
    const NAME: &'static str = "agent/disposed";
    type Payload = AgentRef;
}

/// Payload of [`AgentStatusChanged`].
#[derive(Clone, Debug)]
pub struct StatusChange {
    /// The subject.
    pub agent: AgentRef,
    /// The new status.
    pub status: AgentStatus,
}

/// `agent/status`: emitted only on an actual change.
pub struct AgentStatusChanged;
impl Notification for AgentStatusChanged {
    const NAME: &'static str = "agent/status";
    type Payload = StatusChange;
}

/// Payload of the inbox notifications.
#[derive(Clone, Debug)]
pub struct InboxNotice {
    /// The subject.
    pub agent: AgentRef,
    /// The message concerned.
    pub message: Arc<Message>,
}

/// `agent/inbox/inserted`: one per inserted message.
pub struct InboxInserted;
impl Notification for InboxInserted {
    const NAME: &'static str = "agent/inbox/inserted";
    type Payload = InboxNotice;
}

/// `agent/inbox/discarded`: a pending message was cancelled or replaced.
pub struct InboxDiscarded;
impl Notification for InboxDiscarded {
    const NAME: &'static str = "agent/inbox/discarded";
    type Payload = InboxNotice;
}

/// Payload of [`InboxClaimed`].
#[derive(Clone, Debug)]
pub struct ClaimNotice {
    /// The subject.
    pub agent: AgentRef,
    /// The claimed message.
    pub message: Arc<Message>,
    /// The turn that claimed it.
    pub turn: u64,
}

/// `agent/inbox/claimed`: one per claimed message, after the claim splices are durable.
pub struct InboxClaimed;
impl Notification for InboxClaimed {
    const NAME: &'static str = "agent/inbox/claimed";
    type Payload = ClaimNotice;
}

/// Why an agent's session started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionStartSource {
    /// A fresh agent.
    Startup,
    /// A resumed session.
    Resume,
}

/// Payload of [`AgentSessionStart`].
#[derive(Clone, Debug)]
pub struct SessionStartNotice {
    /// The subject.
    pub agent: AgentRef,
    /// Why it started.
    pub source: SessionStartSource,
}

/// `agent/session-start`: once, right after `agent/created`; the first supported startup
/// injection point (it cannot veto).
pub struct AgentSessionStart;
impl Notification for AgentSessionStart {
    const NAME: &'static str = "agent/session-start";
    type Payload = SessionStartNotice;
}

/// A proposed step and its claimed input.
#[derive(Clone, Debug)]
pub struct PreStepRequest {
    /// The subject.
    pub agent: AgentRef,
    /// The claimed batch (may be empty when tools already require another request).
    pub messages: Vec<Arc<Message>>,
    /// Proposed turn.
    pub turn: u64,
    /// Proposed step.
    pub step: u64,
    /// The turn's cancellation token (cooperate with it; never keep it beyond the call).
    pub cancel: CancellationToken,
}

/// What a pre-step listener decides.
#[derive(Clone, Debug)]
pub enum PreStepDecision {
    /// Refuse the step: the turn ends `blocked`; the claimed input is gone.
    Reject,
    /// Enter the step with exactly these messages.
    Enter(Vec<Arc<Message>>),
}

/// `agent/pre-step`: admission of each step (R1). The default enters the claimed batch.
pub struct AgentPreStep;
impl Waterfall for AgentPreStep {
    const NAME: &'static str = "agent/pre-step";
    type Payload = PreStepRequest;
    type Output = PreStepDecision;
}

/// The proposed call configuration of one model request.
#[derive(Clone, Debug)]
pub struct RequestProposal {
    /// The subject.
    pub agent: AgentRef,
    /// Turn.
    pub turn: u64,
    /// Step.
    pub step: u64,
    /// The loop's proposal; the default returns it unchanged.
    pub config: LlmCallConfig,
    /// The turn's cancellation token.
    pub cancel: CancellationToken,
}

/// `agent/request`: listeners may switch provider/model or tune the call; the outermost
/// return is what is sent (and logged in `request/header`).
pub struct AgentRequest;
impl Waterfall for AgentRequest {
    const NAME: &'static str = "agent/request";
    type Payload = RequestProposal;
    type Output = LlmCallConfig;
}

/// A failed model request offered for recovery while its step is still open.
#[derive(Clone, Debug)]
pub struct RequestFailure {
    /// The subject.
    pub agent: AgentRef,
    /// Turn.
    pub turn: u64,
    /// Step.
    pub step: u64,
    /// Provider route that failed.
    pub provider: String,
    /// Normalized failure facts.
    pub failure: LlmFailure,
    /// The serving registration's retry policy, when the route had one.
    pub retry_policy: Option<RetryPolicy>,
    /// The turn's cancellation token.
    pub cancel: CancellationToken,
}

/// What a recovery listener decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryAction {
    /// Re-issue the request in the same step.
    Retry,
}

/// `agent/request-error`: a listener that owns recovery returns `Some(Retry)` without calling
/// `next`; `None` makes the failure end the turn.
pub struct AgentRequestError;
impl Waterfall for AgentRequestError {
    const NAME: &'static str = "agent/request-error";
    type Payload = RequestFailure;
    type Output = Option<RecoveryAction>;
}

/// Payload of [`AgentTurnStopping`].
#[derive(Clone, Debug)]
pub struct TurnStopping {
    /// The subject.
    pub agent: AgentRef,
    /// The turn about to close.
    pub turn: u64,
    /// The turn's cancellation token.
    pub cancel: CancellationToken,
}

/// `agent/turn-stopping`: runs before an otherwise completed turn closes; steering added here
/// continues the turn; an error ends it `error`.
pub struct AgentTurnStopping;
impl Serial for AgentTurnStopping {
    const NAME: &'static str = "agent/turn-stopping";
    type Payload = TurnStopping;
}

/// Payload of [`AgentTurnEnding`].
#[derive(Clone, Debug)]
pub struct TurnEnding {
    /// The subject.
    pub agent: AgentRef,
    /// The turn about to close.
    pub turn: u64,
    /// Its last step (0 when it had none).
    pub step: u64,
}

/// `agent/turn-ending`: every turn, however it ends (completed, cancelled, failed, disposed),
/// right before its `turn/end` is appended. For listeners that record what the turn left
/// behind (a checkpoint of the workspace); a listener's error is logged and changes nothing
/// about how the turn ends. Unlike `agent/turn-stopping` it cannot continue the turn.
pub struct AgentTurnEnding;
impl Serial for AgentTurnEnding {
    const NAME: &'static str = "agent/turn-ending";
    type Payload = TurnEnding;
}

/// Payload of [`AgentErrorReported`].
#[derive(Clone, Debug)]
pub struct AgentErrorNotice {
    /// The subject.
    pub agent: AgentRef,
    /// The turn that failed.
    pub turn: u64,
    /// The step that failed (0 before any step).
    pub step: u64,
    /// The failure (code `UNKNOWN` for non-LLM failures).
    pub error: LlmFailure,
}

/// `agent/error`: every non-cancellation failure of a turn.
pub struct AgentErrorReported;
impl Notification for AgentErrorReported {
    const NAME: &'static str = "agent/error";
    type Payload = AgentErrorNotice;
}

/// Payload of [`AgentCancelRequested`].
#[derive(Clone, Debug)]
pub struct CancelNotice {
    /// The subject.
    pub agent: AgentRef,
    /// The requested cause.
    pub cause: CancelCause,
}

/// `agent/cancel-requested`: an *effective* cancel, emitted before the inbox is cleared or the
/// turn aborted (R3). Idle cancellation with nothing pending emits nothing.
pub struct AgentCancelRequested;
impl Notification for AgentCancelRequested {
    const NAME: &'static str = "agent/cancel-requested";
    type Payload = CancelNotice;
}
