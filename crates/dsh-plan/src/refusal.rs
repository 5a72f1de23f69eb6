//! What plan mode refuses, read from what each call declares it does (never from tool
//! names): anything that writes, anything that does not say what it does (an MCP tool, a
//! third-party tool), and commands that would not run read-only. Each refusal says what to
//! do instead, so the model can go on planning.

use dsh_tools::ToolEffects;

/// Why a planning session may not make this call, or `None` when it may: reading, searching
/// and the network are fine; a command is fine when `commands_confined` (it runs in the
/// read-only sandbox) and not escalated.
pub fn refusal(tool: &str, effects: &ToolEffects, commands_confined: bool) -> Option<String> {
    if !effects.is_declared() {
        return Some(format!(
            "plan mode: `{tool}` does not declare what it does, so it could change something, \
             and nothing is changed while planning. Put it in the plan and call \
             `exit_plan_mode`; once the user approves, it can run."
        ));
    }
    if let Some(path) = effects.write_paths().first() {
        return Some(format!(
            "plan mode: `{tool}` would change {}, and nothing is changed while planning. Put \
             the change in the plan and call `exit_plan_mode`; once the user approves, make it.",
            path.display()
        ));
    }
    if let Some(command) = effects.command() {
        if command.escalation.is_some() {
            return Some(
                "plan mode: commands run read-only while planning and cannot be escalated. Run \
                 it without `escalate` to read or check something, or put it in the plan."
                    .to_owned(),
            );
        }
        if !commands_confined {
            return Some(format!(
                "plan mode: commands cannot be confined to read-only here, so `{tool}` does not \
                 run while planning. Use the read and search tools, or put the command in the \
                 plan."
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_declared_read_only_calls_and_confined_commands_pass() {
        assert!(refusal("read", &ToolEffects::none().reads("a"), true).is_none());
        assert!(
            refusal(
                "web_fetch",
                &ToolEffects::none().reaches("example.com"),
                true
            )
            .is_none()
        );
        assert!(refusal("bash", &ToolEffects::none().runs("ls"), true).is_none());

        let write = refusal("write", &ToolEffects::none().writes("src/a.rs"), true).unwrap();
        assert!(
            write.contains("src/a.rs") && write.contains("exit_plan_mode"),
            "{write}"
        );
        let mcp = refusal("mcp__db__drop", &ToolEffects::undeclared(), true).unwrap();
        assert!(mcp.contains("does not declare"), "{mcp}");
        let escalated = ToolEffects::none().runs("make").escalated("needs root");
        assert!(
            refusal("bash", &escalated, true)
                .unwrap()
                .contains("escalate")
        );
        let unconfined = refusal("bash", &ToolEffects::none().runs("ls"), false).unwrap();
        assert!(unconfined.contains("cannot be confined"), "{unconfined}");
    }
}
