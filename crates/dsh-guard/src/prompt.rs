//! What the model is told about the guard, so it plans within the sandbox instead of learning
//! it from failures: the mode, where it may write, the network, and whether it may escalate.

use crate::approval::{ApprovalPolicy, Guard};
use crate::mode::SandboxMode;

impl Guard {
    /// A system-prompt paragraph describing this guard. `{{cwd}}` stands for the session's
    /// working directory (the prompt service fills it in).
    pub fn prompt_text(&self) -> String {
        let sandbox = &self.sandbox;
        let mut text = match sandbox.mode {
            SandboxMode::DangerFullAccess => {
                "Commands run without a sandbox (danger-full-access).".to_owned()
            }
            SandboxMode::ReadOnly => "Commands run in a read-only sandbox: they may write \
                                      nowhere but their private $TMPDIR."
                .to_owned(),
            SandboxMode::WorkspaceWrite => {
                let mut roots = vec![
                    "{{cwd}}".to_owned(),
                    "/tmp".to_owned(),
                    "$TMPDIR".to_owned(),
                ];
                roots.extend(
                    sandbox
                        .writable_roots
                        .iter()
                        .map(|r| r.display().to_string()),
                );
                format!(
                    "Commands run in a sandbox: they may write only under {}; elsewhere a \
                     write fails with `Permission denied` or `Read-only file system`, and \
                     `.git`, `.dsh` and dsh's home stay read-only.",
                    roots.join(", ")
                )
            }
        };
        if sandbox.mode.confines() && !sandbox.network {
            text.push_str(" The network is off for commands (no TCP connect or listen).");
        }
        text.push_str(match self.approval {
            ApprovalPolicy::Ask if sandbox.mode.confines() => {
                " To run one command outside the sandbox, call `bash` with `escalate: true` \
                 and a `justification`; the user decides. Writing files outside these places \
                 with `write`/`edit` also asks the user."
            }
            ApprovalPolicy::Ask => " Commands that change things ask the user first.",
            ApprovalPolicy::Never | ApprovalPolicy::Auto if sandbox.mode.confines() => {
                " Nobody can approve exceptions in this session: escalation is unavailable, \
                 so keep every write inside these places."
            }
            ApprovalPolicy::Never => {
                " Nobody can approve commands in this session: only read-only commands run."
            }
            ApprovalPolicy::Auto => "",
        });
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::Rules;
    use crate::policy::SandboxPolicy;

    #[test]
    fn the_prompt_names_the_roots_the_network_and_escalation() {
        let mut sandbox = SandboxPolicy::new(SandboxMode::WorkspaceWrite, "/ws");
        sandbox.network = false;
        sandbox.writable_roots = vec!["/cache".into()];
        let guard = Guard {
            sandbox,
            approval: ApprovalPolicy::Ask,
            rules: Rules::default(),
        };
        let text = guard.prompt_text();
        assert!(text.contains("{{cwd}}, /tmp, $TMPDIR, /cache"), "{text}");
        assert!(text.contains("network is off"), "{text}");
        assert!(text.contains("escalate: true"), "{text}");
        let never = Guard {
            approval: ApprovalPolicy::Never,
            ..guard
        };
        assert!(never.prompt_text().contains("escalation is unavailable"));
    }
}
