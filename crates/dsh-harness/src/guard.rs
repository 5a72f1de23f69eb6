//! Wiring the guard (dsh-guard) into a composition: the shell's supervision (sandbox and
//! containment of every command) and the approval policy on the tool pipeline.

use std::sync::Arc;

use dsh_guard::{
    ApprovalPolicy, Guard, GuardSupervision, Installed, KernelProbe, LandlockProbe,
    ProgramConfinement, SandboxPolicy, SessionPolicies, SupervisorProgram, UnavailableProbe,
};
use dsh_kernel::Context;
use dsh_prompt::{Section, SystemPrompt};
use dsh_shell::Supervision;

use crate::config::Settings;
use crate::config::guard::Protect;
use crate::error::HarnessError;

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

/// Whether confinement can be enforced: the kernel's answer, except that with
/// `protect = "require"` a confining mode refuses everything, because `.git` and `.dsh` cannot
/// be kept read-only without a mount namespace (not implemented yet): failing closed is what
/// "require" asks for.
fn probe(settings: &Settings, policy: &SandboxPolicy) -> Arc<dyn LandlockProbe> {
    match settings.guard.protect.value {
        Protect::Require if policy.mode.confines() => Arc::new(UnavailableProbe(
            "[sandbox] protect = \"require\" needs a mount namespace to keep .git and .dsh \
             read-only, which this dsh does not set up yet"
                .to_owned(),
        )),
        _ => Arc::new(KernelProbe::default()),
    }
}

/// How the shell runs every command: under dsh itself re-executed as the supervisor
/// (`dsh __supervise`), or refused (see [`probe`]); a session narrowed in `policies` (plan
/// mode) runs its commands under the narrower mode.
pub fn supervision(settings: &Settings, policies: Arc<SessionPolicies>) -> Arc<dyn Supervision> {
    let policy = sandbox_policy(settings);
    let probe = probe(settings, &policy);
    Arc::new(
        GuardSupervision::with_probe(policy, SupervisorProgram::this_executable(), probe)
            .with_session_policies(policies),
    )
}

/// How stdio MCP servers start: inside the session's sandbox mode, confined by dsh itself
/// re-executed (`dsh __supervise --exec`), or refused like a command would be.
pub fn mcp_confinement(settings: &Settings) -> Arc<dyn dsh_mcp::CommandConfinement> {
    let policy = sandbox_policy(settings);
    let probe = probe(settings, &policy);
    let confinement =
        ProgramConfinement::with_probe(policy, SupervisorProgram::this_executable(), probe);
    dsh_mcp::confinement(move |workspace, program, args| {
        Ok(confinement.command(workspace, program, args)?)
    })
}

/// Puts the guard on `ctx`'s tool pipeline with the configured approval policy, or the front
/// end's `default` when none is configured, and tells the model about it in the system prompt.
pub fn install(
    ctx: &Context,
    prompt: &SystemPrompt,
    settings: &Settings,
    default: ApprovalPolicy,
) -> Result<Installed, HarnessError> {
    let guard = Guard {
        sandbox: sandbox_policy(settings),
        approval: settings.guard.approval_or(default),
        rules: settings.guard.rules.clone(),
    };
    // Right after the bash section (105): the model reads the limits where it reads the tool.
    let _ = prompt
        .section(ctx, Section::new("guard:sandbox", 106, guard.prompt_text()))
        .map_err(|e| HarnessError::start("describe the sandbox to the model", e))?;
    dsh_guard::install(ctx, Arc::new(guard))
        .map_err(|e| HarnessError::start("install the guard", e))
}
