//! Wiring the guard (dsh-guard) into a composition: the shell's supervision (sandbox and
//! containment of every command) and the approval policy on the tool pipeline.

use std::sync::Arc;

use dsh_guard::{
    ApprovalPolicy, Guard, GuardSupervision, Hosts, Installed, NetworkProxy, SandboxPolicy,
    SessionPolicies, SupervisorProgram,
};
use dsh_kernel::Context;
use dsh_netproxy::{Asking, DEFAULT_ASK_TIMEOUT, LazyProxy};
use dsh_prompt::{Section, SystemPrompt};

use crate::config::Settings;
use crate::error::HarnessError;
use crate::network::{AskThePerson, ListedHosts, NetProxy};

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
    policy.hosts = guard
        .allowlist
        .as_ref()
        .map(|list| Hosts(Arc::new(ListedHosts(list.policy.clone()))));
    policy
}

/// How the shell runs every command and how stdio MCP servers start: under a supervisor
/// forked by one zygote of dsh itself (`dsh __supervise --zygote`), inside the session's
/// sandbox, or refused. One supervision serves both, so a session starts one zygote.
pub fn supervision(settings: &Settings) -> Arc<GuardSupervision> {
    Arc::new(unnarrowed(settings))
}

/// [`supervision`] for a composition whose sessions may be narrowed in `policies` (plan
/// mode): their commands run under the narrower mode. With the network by allow-list, the
/// proxy asks the person of a command's session about a blocked host (under `approval`, or
/// the session's own policy in `policies`) and is provided on `ctx`, where the guard takes
/// what it refused for each call's result.
pub(crate) fn session_supervision(
    ctx: &Context,
    settings: &Settings,
    policies: Arc<SessionPolicies>,
    approval: ApprovalPolicy,
) -> Result<Arc<GuardSupervision>, HarnessError> {
    let mut supervision = confined(settings);
    if let Some(list) = &settings.guard.allowlist {
        let asker = AskThePerson {
            ctx: ctx.clone(),
            approval,
            policies: policies.clone(),
            runtime: tokio::runtime::Handle::try_current().ok(),
        };
        let lazy =
            LazyProxy::new(list.policy.clone(), dsh_netproxy::system_lookup()).asking(Asking {
                asker: Arc::new(asker),
                timeout: DEFAULT_ASK_TIMEOUT,
            });
        let proxy = Arc::new(NetProxy(lazy));
        ctx.provide::<dyn NetworkProxy>(proxy.clone())
            .map_err(|e| HarnessError::start("provide the network proxy", e))?;
        supervision = supervision.with_network_proxy(proxy);
    }
    Ok(Arc::new(supervision.with_session_policies(policies)))
}

/// The supervision of `settings`; with the allow-list, a proxy that asks nobody.
fn unnarrowed(settings: &Settings) -> GuardSupervision {
    let supervision = confined(settings);
    match &settings.guard.allowlist {
        Some(list) => supervision.with_network_proxy(Arc::new(NetProxy(LazyProxy::new(
            list.policy.clone(),
            dsh_netproxy::system_lookup(),
        )))),
        None => supervision,
    }
}

fn confined(settings: &Settings) -> GuardSupervision {
    GuardSupervision::new(
        sandbox_policy(settings),
        SupervisorProgram::this_executable(),
    )
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
