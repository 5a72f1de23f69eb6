//! Wiring the guard (dsh-guard) into a composition: the shell's supervision (sandbox and
//! containment of every command) and the approval policy on the tool pipeline.

use std::sync::Arc;

use dsh_guard::{
    ApprovalPolicy, Guard, GuardSupervision, Installed, NetworkProxy, SandboxPolicy,
    SessionPolicies, SupervisorProgram,
};
use dsh_kernel::Context;
use dsh_netproxy::LazyProxy;
use dsh_prompt::{Section, SystemPrompt};

use crate::config::Settings;
use crate::error::HarnessError;

/// The sandbox policy of `settings`; `workspace` is the fallback for calls whose session
/// has no working directory (every session normally has one, and it wins).
fn sandbox_policy(settings: &Settings) -> SandboxPolicy {
    let guard = &settings.guard;
    let workspace = std::env::current_dir().unwrap_or_else(|_| "/".into());
    let mut policy = SandboxPolicy::new(guard.sandbox.value, workspace);
    policy.network = guard.network.value;
    policy.writable_roots = guard.writable_roots.value.clone();
    policy.dsh_home = Some(settings.home.value.clone());
    policy.protect = guard.protect.value;
    policy.namespaces = guard.namespaces.value;
    policy.min_abi = guard.min_abi.as_ref().map(|m| m.value);
    policy
}

/// How the shell runs every command and how stdio MCP servers start: under a supervisor
/// forked by one zygote of dsh itself (`dsh __supervise --zygote`), inside the session's
/// sandbox, or refused. One supervision serves both, so a session starts one zygote.
pub fn supervision(settings: &Settings) -> Arc<GuardSupervision> {
    Arc::new(unnarrowed(settings))
}

/// [`supervision`] for a composition whose sessions may be narrowed in `policies` (plan
/// mode): their commands run under the narrower mode.
pub(crate) fn session_supervision(
    settings: &Settings,
    policies: Arc<SessionPolicies>,
) -> Arc<GuardSupervision> {
    Arc::new(unnarrowed(settings).with_session_policies(policies))
}

fn unnarrowed(settings: &Settings) -> GuardSupervision {
    let supervision = GuardSupervision::new(
        sandbox_policy(settings),
        SupervisorProgram::this_executable(),
    );
    match &settings.guard.allowlist {
        Some(list) => supervision.with_network_proxy(Arc::new(Proxy(LazyProxy::new(
            list.policy.clone(),
            dsh_netproxy::system_lookup(),
        )))),
        None => supervision,
    }
}

/// dsh-netproxy's proxy behind dsh-guard's seam (neither crate knows the other).
#[derive(Debug)]
struct Proxy(LazyProxy);

impl NetworkProxy for Proxy {
    fn port(&self) -> Result<u16, String> {
        self.0.get().map(dsh_netproxy::Proxy::port)
    }
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

/// What the sandbox enforces on this machine, as `dsh config show`'s last lines: the guard's
/// zygote is started to find out, as the first command of a session would.
pub fn sandbox_status(settings: &Settings) -> String {
    use std::fmt::Write as _;
    let mut out = String::from("\n# the sandbox on this machine:\n");
    match supervision(settings).enforcement() {
        Ok(found) => {
            let namespaces = match found.namespaces {
                dsh_guard::Namespaces::None => format!("none ({})", found.namespace_reason),
                kind => format!("mount and PID ({})", kind.as_str()),
            };
            let _ = writeln!(
                out,
                "#   landlock ABI {}; namespaces: {namespaces}",
                found.abi
            );
            for gap in &found.gaps {
                let _ = writeln!(out, "#   not enforced: {gap}");
            }
        }
        Err(e) => {
            let _ = writeln!(out, "#   unknown: the supervisor did not start ({e})");
        }
    }
    out
}
