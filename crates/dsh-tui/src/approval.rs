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
    /// Do not run it; the optional reason is sent to the model as a steer.
    Deny(Option<String>),
}

/// The approval service of the UI.
pub struct TuiApprover {
    tx: mpsc::UnboundedSender<Ask>,
    allowed: Mutex<HashSet<String>>,
}

impl TuiApprover {
    /// The approver and the receiving end the app reads questions from.
    pub fn new() -> (Self, mpsc::UnboundedReceiver<Ask>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Self {
                tx,
                allowed: Mutex::default(),
            },
            rx,
        )
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
        if self.tx.send(Ask { request, reply }).is_err() {
            return ApprovalOutcome::Unavailable;
        }
        tokio::select! {
            answer = answer => match answer {
                Ok(Answer::Once) => ApprovalOutcome::AllowedOnce,
                Ok(Answer::Session) => {
                    self.allowed.lock().insert(tool);
                    ApprovalOutcome::AllowedOnce
                }
                Ok(Answer::Deny(_)) => ApprovalOutcome::Rejected,
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
