//! Guard what the agent does: sandbox modes enforced with Landlock, containment of every
//! process a command starts, and the approval policy with allow/ask/deny rules.
//!
//! - [`SandboxMode`] and [`SandboxPolicy`]: read-only, workspace-write (default),
//!   danger-full-access; network on/off; writable roots.
//! - [`GuardSupervision`] plugs into dsh-shell's supervision seam: each command (and each
//!   stdio MCP server) runs under a supervisor forked by one long-lived zygote ([`supervise`],
//!   dsh re-executed once as `dsh __supervise --zygote`). The supervisor is a child subreaper
//!   (or the init of the command's PID namespace), gives the command a read-only view of
//!   everything but its writable roots where the kernel allows a mount namespace, and in the
//!   command's own process cuts capabilities, installs a seccomp filter and the Landlock
//!   ruleset with `no_new_privs` before exec (so every descendant inherits them); it kills
//!   every remaining descendant when the command ends, is stopped, or dsh dies. A confining
//!   mode that cannot be enforced is refused with `SANDBOX_UNAVAILABLE`, never run
//!   unconfined.
//! - [`Guard`] decides every tool call from the rules (deny > ask > allow), the mode and the
//!   [`ApprovalPolicy`]; [`install`] puts it on `tools/pre-execute` and logs each decision in
//!   the session (`approval/decided`). Asking the user is the front end's
//!   [`dsh_tools::Approver`]; a front end can change one session's policy while it runs
//!   through [`SessionPolicies`] (an editor's "auto" mode).

mod approval;
mod args;
mod confine;
mod git;
mod job;
mod landlock;
mod mode;
mod namespace;
mod plugin;
mod policy;
mod prompt;
mod proxy;
mod rules;
mod seccomp;
mod session_policy;
mod shell;
mod supervisor;
mod sweep;
mod writes;
mod zygote;

pub use crate::landlock::{
    ABI_PIN, KernelProbe, LandlockProbe, Unavailable, UnavailableProbe, gaps, kernel_abi, ruleset,
};
pub use approval::{
    ApprovalPolicy, CallView, Decision, Guard, Rules, UnknownPolicy, Verdict, is_safe_command,
};
pub use mode::{SandboxMode, UnknownMode};
pub use namespace::Namespaces;
pub use plugin::NETWORK_BLOCKED_EVENT;
pub use plugin::{DECISION_EVENT, Installed, describe_decision, install, logged_decisions};
pub use policy::{DEVICE_ROOTS, Protect, SandboxPolicy};
pub use proxy::{
    BlockedHost, CALL_ID_VARIABLE, HostPolicy, HostRefusal, Hosts, NetworkProxy, ProxyEndpoint,
    ProxyOwner,
};
pub use rules::{CallFacts, MCP_TOOL_PREFIX, Rule, RuleAction, RuleError};
pub use session_policy::SessionPolicies;
pub use shell::{Enforcement, GuardSupervision, SANDBOX_UNAVAILABLE, SupervisorProgram};
pub use supervisor::{REFUSED_CODE, SUPERVISE_ARG, supervise};
pub use zygote::{Hello, ZYGOTE_ARG};
