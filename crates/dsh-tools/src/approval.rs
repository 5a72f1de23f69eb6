//! The approval seam: asking a person before a call runs.

use std::sync::Arc;

use async_trait::async_trait;
use dsh_session::{CallId, SessionId};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::effects::ToolEffects;

/// One question to the user: may this call run?
#[derive(Clone, Debug)]
pub struct ApprovalRequest {
    /// The calling agent (the front end routes the question to its session).
    pub agent_id: SessionId,
    /// The tool to run.
    pub tool_name: String,
    /// Why the policy asks, when it said.
    pub reason: Option<String>,
    /// The call in question.
    pub call_id: CallId,
    /// The parsed arguments, for showing what will run.
    pub arguments: Arc<Value>,
    /// What the call does, as its tool declared it: the command or the file a front end
    /// names in its question.
    pub effects: ToolEffects,
    /// The turn's cancellation; an approver should stop waiting (answer `Cancelled`) when it
    /// fires.
    pub cancel: CancellationToken,
}

impl ApprovalRequest {
    /// What the call does in one phrase a person recognises: the command it runs, else the
    /// first file it writes, else the first file it reads; empty when it declared none.
    pub fn subject(&self) -> String {
        if let Some(command) = self.effects.command() {
            return command.line.clone();
        }
        self.effects
            .paths()
            .next()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    }
}

/// The user's answer. Everything but `AllowedOnce` denies, each with its own reason so the
/// model can tell a human "no" from an absent approval channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApprovalOutcome {
    /// Run this call, once.
    AllowedOnce,
    /// Run this call, and the like of it for the rest of the session ("allow for this
    /// session"). The approver may remember the grant itself; a caller that keeps its own
    /// grants (the network proxy's session allow-list) learns of it from this answer.
    AllowedForSession,
    /// The user said no.
    Rejected,
    /// The question was withdrawn (usually the turn was cancelled).
    Cancelled,
    /// Nobody could be asked (no UI attached).
    Unavailable,
}

/// The approval service, provided as `ctx.provide::<dyn Approver>(arc)` by a front end. When
/// none is provided, a `tools/pre-execute` `Ask` denies: the pipeline fails closed.
#[async_trait]
pub trait Approver: Send + Sync + 'static {
    /// Asks and waits for the answer.
    async fn request(&self, request: ApprovalRequest) -> ApprovalOutcome;
}
