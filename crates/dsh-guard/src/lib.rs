//! Guard what the agent does: sandbox modes enforced with Landlock, containment of every
//! process a command starts, and the approval policy with allow/ask/deny rules.
//!
//! - [`SandboxMode`] and [`SandboxPolicy`]: read-only, workspace-write (default),
//!   danger-full-access; network on/off; writable roots.
//! - [`GuardSupervision`] plugs into dsh-shell's supervision seam: each command runs under a
//!   supervisor ([`supervise`], dsh re-executed as `dsh __supervise`) that is a child
//!   subreaper, applies the Landlock ruleset with `no_new_privs` in the command's process
//!   before exec (so every descendant inherits it), and kills every remaining descendant when
//!   the command ends, is stopped, or dsh dies. A confining mode that cannot be enforced is
//!   refused with `SANDBOX_UNAVAILABLE`, never run unconfined.
//! - [`SandboxPolicy::confined_command`] runs a long-lived program (an MCP server, a hook)
//!   under the same Landlock policy, its stdio untouched; [`ProgramConfinement`] probes the
//!   kernel first and refuses ([`ProgramRefused`]) what a confining mode cannot enforce.
//! - [`Guard`] decides every tool call from the rules (deny > ask > allow), the mode and the
//!   [`ApprovalPolicy`]; [`install`] puts it on `tools/pre-execute` and logs each decision in
//!   the session (`approval/decided`). Asking the user is the front end's
//!   [`dsh_tools::Approver`]; a front end can change one session's policy while it runs
//!   through [`SessionPolicies`] (an editor's "auto" mode).

mod approval;
mod landlock;
mod mode;
mod plugin;
mod policy;
mod program;
mod prompt;
mod rules;
mod session_policy;
mod shell;
mod supervisor;
mod sweep;

pub use crate::landlock::{
    ABI_PIN, KernelProbe, LandlockProbe, Unavailable, UnavailableProbe, ruleset,
};
pub use approval::{
    ApprovalPolicy, CallView, Decision, Guard, Rules, UnknownPolicy, Verdict, is_safe_command,
};
pub use mode::{SandboxMode, UnknownMode};
pub use plugin::{DECISION_EVENT, Installed, describe_decision, install, logged_decisions};
pub use policy::{DEVICE_ROOTS, SandboxPolicy};
pub use program::{ProgramConfinement, ProgramRefused};
pub use rules::{CallFacts, MCP_TOOL_PREFIX, Rule, RuleAction, RuleError};
pub use session_policy::SessionPolicies;
pub use shell::{GuardSupervision, SANDBOX_UNAVAILABLE, SupervisorProgram};
pub use supervisor::{REFUSED_CODE, SUPERVISE_ARG, supervise};
