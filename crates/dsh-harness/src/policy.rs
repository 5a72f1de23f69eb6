//! What a session runs under, as a front end shows it: the sandbox, the approval policy and
//! the model. Read from the harness, never re-derived by a front end, so the status line of
//! the terminal UI, `/mode` and an editor's mode say the same thing the guard enforces.

use std::path::PathBuf;

use dsh_guard::{ApprovalPolicy, SandboxMode};
use dsh_llm::catalog::ModelFacts;

/// The effective policy of one session.
#[derive(Clone, Debug)]
pub struct EffectivePolicy {
    /// Whether the session is in plan mode (read-only until the person approves a plan).
    pub plan: bool,
    /// The sandbox mode commands run in.
    pub sandbox: SandboxMode,
    /// Whether confined commands reach the network.
    pub network: bool,
    /// Directories writable besides the workspace (confining modes).
    pub writable_roots: Vec<PathBuf>,
    /// Who decides about calls that need approval: the session's own choice (an editor's
    /// `auto` mode) over the configured policy over the front end's default.
    pub approval: ApprovalPolicy,
    /// The provider route.
    pub provider: String,
    /// The model, with its window and prices from the catalog.
    pub model: ModelFacts,
}

impl EffectivePolicy {
    /// `workspace-write · ask · network off`: the sandbox and approval policy as a person
    /// names them.
    pub fn describe(&self) -> String {
        let network = if self.sandbox.confines() {
            if self.network {
                " · network on"
            } else {
                " · network off"
            }
        } else {
            ""
        };
        let plan = if self.plan { "plan · " } else { "" };
        format!(
            "{plan}{} · {}{network}",
            self.sandbox.as_str(),
            self.approval.as_str()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_description_names_mode_policy_and_network_only_when_confined() {
        let mut policy = EffectivePolicy {
            plan: false,
            sandbox: SandboxMode::WorkspaceWrite,
            network: false,
            writable_roots: Vec::new(),
            approval: ApprovalPolicy::Ask,
            provider: "deepseek".into(),
            model: dsh_llm::ModelCatalog::builtin().facts("deepseek-v4-flash"),
        };
        assert_eq!(policy.describe(), "workspace-write · ask · network off");
        policy.sandbox = SandboxMode::DangerFullAccess;
        policy.approval = ApprovalPolicy::Auto;
        assert_eq!(policy.describe(), "danger-full-access · auto");
        policy.plan = true;
        policy.sandbox = SandboxMode::ReadOnly;
        assert_eq!(policy.describe(), "plan · read-only · auto · network off");
    }
}
