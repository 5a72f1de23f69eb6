//! The guard's side of dsh-shell's supervision seam: every command starts under the
//! supervisor program with the session's sandbox policy, or is refused.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::sync::Arc;

use dsh_shell::{ShellError, SuperviseRequest, Supervision, SupervisorLaunch};

use dsh_session::SessionId;

use crate::landlock::{KernelProbe, LandlockProbe};
use crate::policy::SandboxPolicy;
use crate::session_policy::SessionPolicies;
use crate::supervisor::SUPERVISE_ARG;

/// The error code of a command refused because its confining mode cannot be enforced.
pub const SANDBOX_UNAVAILABLE: &str = "SANDBOX_UNAVAILABLE";

/// Which executable acts as the supervisor, and the arguments that select supervisor mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupervisorProgram {
    /// The executable.
    pub program: PathBuf,
    /// Arguments before the policy (`__supervise` for dsh itself).
    pub args: Vec<OsString>,
}

impl SupervisorProgram {
    /// The running `dsh` binary, re-executed through `/proc/self/exe` (which stays valid even
    /// if the file on disk is replaced while dsh runs) with [`SUPERVISE_ARG`].
    pub fn this_executable() -> Self {
        Self {
            program: PathBuf::from("/proc/self/exe"),
            args: vec![SUPERVISE_ARG.into()],
        }
    }
}

impl SandboxPolicy {
    /// A command that runs `program args…` confined by this policy, for long-lived programs
    /// dsh starts outside the shell (MCP servers, hooks): `supervisor` re-executed with
    /// `--exec` applies the Landlock ruleset to itself, with `no_new_privs`, and execs the
    /// program, so its stdio stays the caller's and every descendant inherits the confinement.
    /// A confining mode that cannot be enforced exits 126 with `SANDBOX_UNAVAILABLE` on stderr
    /// instead of starting the program. Unlike shell commands, its descendants are not swept
    /// when it ends: the caller owns its lifetime. `read-only` gets no private temp dir.
    pub fn confined_command<I, A>(
        &self,
        supervisor: &SupervisorProgram,
        program: impl AsRef<OsStr>,
        args: I,
    ) -> std::process::Command
    where
        I: IntoIterator<Item = A>,
        A: AsRef<OsStr>,
    {
        let mut policy_args = self.supervisor_args(false);
        // `supervisor_args` ends with `--`; `--exec` goes before it.
        policy_args.insert(policy_args.len() - 1, "--exec".into());
        let mut command = std::process::Command::new(&supervisor.program);
        command
            .args(&supervisor.args)
            .args(policy_args)
            .arg(program)
            .args(args);
        command
    }
}

/// Starts each command under [`SupervisorProgram`] with `policy` (narrowed per session by
/// [`SessionPolicies`] when given them); refuses every confined command with
/// `SANDBOX_UNAVAILABLE` when the probe says Landlock cannot be used.
#[derive(Debug, Clone)]
pub struct GuardSupervision {
    policy: SandboxPolicy,
    program: SupervisorProgram,
    probe: Arc<dyn LandlockProbe>,
    policies: Option<Arc<SessionPolicies>>,
}

impl GuardSupervision {
    /// Supervision under `policy`, probing the running kernel.
    pub fn new(policy: SandboxPolicy, program: SupervisorProgram) -> Self {
        Self::with_probe(policy, program, Arc::new(KernelProbe::default()))
    }

    /// Supervision with a chosen probe (tests simulate a kernel without Landlock with it).
    pub fn with_probe(
        policy: SandboxPolicy,
        program: SupervisorProgram,
        probe: Arc<dyn LandlockProbe>,
    ) -> Self {
        Self {
            policy,
            program,
            probe,
            policies: None,
        }
    }

    /// The same supervision, confining each session's commands with the narrowing `policies`
    /// hold for it (plan mode's read-only), which from now on say that they reach commands.
    #[must_use]
    pub fn with_session_policies(mut self, policies: Arc<SessionPolicies>) -> Self {
        policies.mark_commands_narrowed();
        self.policies = Some(policies);
        self
    }

    /// The policy every command runs under (before any session's narrowing).
    pub fn policy(&self) -> &SandboxPolicy {
        &self.policy
    }
}

impl Supervision for GuardSupervision {
    fn supervisor(&self, request: &SuperviseRequest<'_>) -> Result<SupervisorLaunch, ShellError> {
        let mut policy = self.policy.for_workspace(request.workspace);
        let narrowed = request
            .session
            .zip(self.policies.as_ref())
            .and_then(|(session, policies)| policies.sandbox(&SessionId::new(session)));
        if let Some(mode) = narrowed {
            policy.mode = policy.mode.narrowed_to(mode);
        }
        // A narrowed session's command is never run unconfined, escalation or not: the
        // narrowing is what the person asked for (plan mode), and it fails closed.
        let unconfined = request.unconfined && narrowed.is_none();
        if policy.mode.confines() && !unconfined {
            self.probe.probe().map_err(|e| ShellError::Refused {
                code: SANDBOX_UNAVAILABLE,
                message: format!(
                    "{SANDBOX_UNAVAILABLE}: the sandbox mode `{}` cannot be enforced here ({}), \
                     so the command was not run. Rerun dsh with `--sandbox danger-full-access` \
                     to run commands without the sandbox, or enable Landlock (kernel 5.13+, \
                     `lsm=...,landlock`).",
                    policy.mode, e.cause
                ),
            })?;
        }
        let mut args = self.program.args.clone();
        args.extend(policy.supervisor_args(unconfined));
        Ok(SupervisorLaunch {
            program: self.program.program.clone(),
            args,
        })
    }
}
