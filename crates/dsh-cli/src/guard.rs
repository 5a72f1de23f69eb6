//! Wiring the guard (dsh-guard) into a composition: the shell's supervision (sandbox and
//! containment of every command) and the approval policy on the tool pipeline.

use std::sync::Arc;

use dsh_guard::{
    ApprovalPolicy, Guard, GuardSupervision, Installed, SandboxPolicy, SupervisorProgram,
    UnavailableProbe,
};
use dsh_kernel::Context;
use dsh_prompt::{Section, SystemPrompt};
use dsh_shell::Supervision;

use crate::config::Settings;
use crate::config::guard::Protect;

/// The sandbox policy of `settings`; `workspace` is the fallback for calls whose session
/// has no working directory (every session normally has one, and it wins).
fn sandbox_policy(settings: &Settings) -> SandboxPolicy {
    let guard = &settings.guard;
    let workspace = std::env::current_dir().unwrap_or_else(|_| "/".into());
    let mut policy = SandboxPolicy::new(guard.sandbox.value, workspace);
    policy.network = guard.network.value;
    policy.writable_roots = guard.writable_roots.value.clone();
    policy
}

/// How the shell runs every command: under dsh itself re-executed as the supervisor
/// (`dsh __supervise`). With `protect = "require"` a confining mode refuses every command,
/// because `.git` and `.dsh` cannot be kept read-only without a mount namespace (not
/// implemented yet): failing closed is what "require" asks for.
pub fn supervision(settings: &Settings) -> Arc<dyn Supervision> {
    let policy = sandbox_policy(settings);
    let program = SupervisorProgram::this_executable();
    let supervision = match settings.guard.protect.value {
        Protect::Require if policy.mode.confines() => GuardSupervision::with_probe(
            policy,
            program,
            Arc::new(UnavailableProbe(
                "[sandbox] protect = \"require\" needs a mount namespace to keep .git and .dsh \
                 read-only, which this dsh does not set up yet"
                    .to_owned(),
            )),
        ),
        _ => GuardSupervision::new(policy, program),
    };
    Arc::new(supervision)
}

/// Puts the guard on `ctx`'s tool pipeline with the configured approval policy, or the front
/// end's `default` when none is configured, and tells the model about it in the system prompt.
pub fn install(
    ctx: &Context,
    prompt: &SystemPrompt,
    settings: &Settings,
    default: ApprovalPolicy,
) -> anyhow::Result<Installed> {
    let guard = Guard {
        sandbox: sandbox_policy(settings),
        approval: settings.guard.approval_or(default),
        rules: settings.guard.rules.clone(),
    };
    // Right after the bash section (105): the model reads the limits where it reads the tool.
    let _ = prompt.section(ctx, Section::new("guard:sandbox", 106, guard.prompt_text()))?;
    Ok(dsh_guard::install(ctx, Arc::new(guard))?)
}
