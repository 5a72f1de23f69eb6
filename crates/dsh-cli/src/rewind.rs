//! The chat's `/rewind`: the turns of the session, or a rewind of a live, idle one.

use std::fmt::Write as _;

use dsh_agent::{AgentRef, AgentStatus};
use dsh_checkpoint::{RewindRequest, TurnSummary};
use dsh_harness::Harness;

/// The turns a rewind can go back to: number, files changed, prompt.
pub fn describe_turns(turns: &[TurnSummary]) -> String {
    if turns.is_empty() {
        return "no turns to rewind to\n".to_owned();
    }
    let mut out = String::from("turns (/rewind N goes back to the start of turn N):\n");
    for t in turns {
        let files = match t.changed_files {
            Some(1) => "1 file".to_owned(),
            Some(n) => format!("{n} files"),
            None => "no checkpoint".to_owned(),
        };
        let _ = writeln!(out, "  {:>3}  {:<14} {}", t.turn, files, t.prompt);
    }
    out
}

/// `/rewind [N …]` on the chat's session.
pub async fn command(harness: &Harness, agent: &AgentRef, args: &[&str]) -> String {
    let Some(service) = harness.checkpoints() else {
        return "checkpoints are not available".to_owned();
    };
    let request = match RewindRequest::parse_args(args) {
        Ok(Some(request)) => request,
        Ok(None) => return describe_turns(&service.turns(agent.session()).await),
        Err(usage) => return usage,
    };
    if agent.status() == AgentStatus::Running {
        return "the agent is working; /cancel first, then rewind".to_owned();
    }
    match service.rewind(agent.session(), request).await {
        Ok(report) => report.describe(request.to_turn),
        Err(e) => format!("dsh: {e}"),
    }
}
