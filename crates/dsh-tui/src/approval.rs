//! Inline approvals: the [`Approver`] service the UI provides, and the card state.
//!
//! The tool pipeline asks the process-wide `dyn Approver` when a `tools/pre-execute` policy says
//! `Ask`. The UI's approver forwards each question to the app, which shows a card; the card's
//! answer goes back on a oneshot. "Allow for this session" is remembered here (per tool), so
//! later calls of that tool are allowed without a card. A question whose turn is cancelled is
//! withdrawn (answered `Cancelled`); a UI that went away answers `Unavailable`.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use dsh_agent::AgentRegistry;
use dsh_kernel::Context;
use dsh_session::Message;
use dsh_tools::{ApprovalOutcome, ApprovalRequest, Approver};
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};

/// Keys on a card arm this long after it appears and after the last printable key, so typing
/// that was meant for the draft never answers a card that popped up under it.
pub const ARMING: Duration = Duration::from_millis(500);

/// One question on its way to the app.
#[derive(Debug)]
pub struct Ask {
    /// The question.
    pub request: ApprovalRequest,
    /// Where the answer goes.
    pub reply: oneshot::Sender<Answer>,
}

/// The person's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Run it this time.
    Once,
    /// Run it, and every later call of this tool in this UI.
    Session,
    /// Do not run it; the optional reason is steered into the asking agent before the denial
    /// returns, so the model reads it at the step that reads the denial.
    Deny(Option<String>),
}

/// The approval service of the UI.
pub struct TuiApprover {
    tx: mpsc::UnboundedSender<Ask>,
    allowed: Mutex<HashSet<String>>,
    /// Where the asking agent is found (to steer a deny reason into it).
    ctx: Option<Context>,
}

impl TuiApprover {
    /// The approver and the receiving end the app reads questions from; `ctx` finds the asking
    /// agent for deny reasons (none: reasons are dropped).
    pub fn new(ctx: Option<Context>) -> (Self, mpsc::UnboundedReceiver<Ask>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Self {
                tx,
                allowed: Mutex::default(),
                ctx,
            },
            rx,
        )
    }

    /// Steers `reason` into the agent that asked. Done before the denial is returned: the steer
    /// is then in the inbox when the step that reads the denial ends, so both reach the model
    /// together (a steer sent after the answer could miss that step or the turn).
    fn steer_reason(&self, request: &ApprovalRequest, reason: &str) {
        let agent = self
            .ctx
            .as_ref()
            .and_then(|ctx| AgentRegistry::of(ctx).ok())
            .and_then(|registry| registry.get(&request.agent_id));
        if let Some(agent) = agent {
            let text = format!("I denied the `{}` call: {reason}", request.tool_name);
            let _ = agent.steer(Message::user_text(text));
        }
    }
}

#[async_trait]
impl Approver for TuiApprover {
    async fn request(&self, request: ApprovalRequest) -> ApprovalOutcome {
        if self.allowed.lock().contains(&request.tool_name) {
            return ApprovalOutcome::AllowedOnce;
        }
        let tool = request.tool_name.clone();
        let cancel = request.cancel.clone();
        let (reply, answer) = oneshot::channel();
        if self
            .tx
            .send(Ask {
                request: request.clone(),
                reply,
            })
            .is_err()
        {
            return ApprovalOutcome::Unavailable;
        }
        tokio::select! {
            answer = answer => match answer {
                Ok(Answer::Once) => ApprovalOutcome::AllowedOnce,
                Ok(Answer::Session) => {
                    self.allowed.lock().insert(tool);
                    ApprovalOutcome::AllowedForSession
                }
                Ok(Answer::Deny(reason)) => {
                    if let Some(reason) = reason {
                        self.steer_reason(&request, &reason);
                    }
                    ApprovalOutcome::Rejected
                }
                Err(_) => ApprovalOutcome::Unavailable,
            },
            () = cancel.cancelled() => ApprovalOutcome::Cancelled,
        }
    }
}

/// A card on screen.
#[derive(Debug)]
pub struct Card {
    /// The question.
    pub ask: Ask,
    /// When it appeared (arming starts then).
    pub shown: Instant,
    /// The deny reason being typed, once `n` was pressed.
    pub reason: Option<String>,
}

impl Card {
    /// A card shown at `now`.
    pub fn new(ask: Ask, now: Instant) -> Self {
        Self {
            ask,
            shown: now,
            reason: None,
        }
    }

    /// Whether answer keys count at `now`, given the last printable key's time.
    pub fn armed(&self, now: Instant, last_typed: Option<Instant>) -> bool {
        let since_shown = now.saturating_duration_since(self.shown) >= ARMING;
        let since_typed = last_typed.is_none_or(|t| now.saturating_duration_since(t) >= ARMING);
        since_shown && since_typed
    }

    /// Whether the turn behind it was cancelled (the card should go).
    pub fn withdrawn(&self) -> bool {
        self.ask.request.cancel.is_cancelled() || self.ask.reply.is_closed()
    }
}
