//! Long-lived programs dsh starts outside the shell (MCP servers): confined by the session's
//! sandbox mode like commands, or refused, never started unconfined by a confining mode.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use crate::landlock::{KernelProbe, LandlockProbe};
use crate::mode::SandboxMode;
use crate::policy::SandboxPolicy;
use crate::shell::{SANDBOX_UNAVAILABLE, SupervisorProgram};

/// A program that was not started because its confining mode cannot be enforced here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{SANDBOX_UNAVAILABLE}: the sandbox mode `{mode}` cannot be enforced here ({cause}), so \
     `{program}` was not started. Rerun dsh with `--sandbox danger-full-access` to run it \
     without the sandbox, or enable Landlock (kernel 5.13+, `lsm=...,landlock`)."
)]
pub struct ProgramRefused {
    /// The program that was not started.
    pub program: String,
    /// The mode that could not be enforced.
    pub mode: SandboxMode,
    /// What the kernel said.
    pub cause: String,
}

/// Builds the commands of long-lived programs under a sandbox policy. The probe runs before
/// anything is spawned, so a kernel without Landlock gives a clear refusal instead of a
/// program that dies at exec (which [`SandboxPolicy::confined_command`] still guarantees).
#[derive(Debug, Clone)]
pub struct ProgramConfinement {
    policy: SandboxPolicy,
    supervisor: SupervisorProgram,
    probe: Arc<dyn LandlockProbe>,
}

impl ProgramConfinement {
    /// Confinement under `policy`, probing the running kernel.
    pub fn new(policy: SandboxPolicy, supervisor: SupervisorProgram) -> Self {
        Self::with_probe(policy, supervisor, Arc::new(KernelProbe::default()))
    }

    /// Confinement with a chosen probe (tests simulate a kernel without Landlock with it;
    /// `protect = "require"` refuses with it).
    pub fn with_probe(
        policy: SandboxPolicy,
        supervisor: SupervisorProgram,
        probe: Arc<dyn LandlockProbe>,
    ) -> Self {
        Self {
            policy,
            supervisor,
            probe,
        }
    }

    /// The policy programs run under (its workspace replaced by each caller's).
    pub fn policy(&self) -> &SandboxPolicy {
        &self.policy
    }

    /// The command that runs `program args…` for a session working in `workspace`: confined
    /// by the policy (the workspace writable in `workspace-write`), plain in
    /// `danger-full-access` (nothing to apply, so no supervisor exec either). Its stdio,
    /// working directory, environment and process group are the caller's to set.
    pub fn command<A: AsRef<OsStr>>(
        &self,
        workspace: &Path,
        program: &str,
        args: &[A],
    ) -> Result<Command, ProgramRefused> {
        let policy = self.policy.for_workspace(Some(workspace));
        if !policy.mode.confines() {
            let mut command = Command::new(program);
            command.args(args);
            return Ok(command);
        }
        self.probe.probe().map_err(|e| ProgramRefused {
            program: program.to_owned(),
            mode: policy.mode,
            cause: e.cause,
        })?;
        Ok(policy.confined_command(&self.supervisor, program, args))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::landlock::UnavailableProbe;

    #[derive(Debug)]
    struct Available;

    impl LandlockProbe for Available {
        fn probe(&self) -> Result<(), crate::Unavailable> {
            Ok(())
        }
    }

    fn supervisor() -> SupervisorProgram {
        SupervisorProgram {
            program: "/sup".into(),
            args: vec!["__supervise".into()],
        }
    }

    #[test]
    fn a_confining_mode_that_cannot_be_enforced_refuses_with_the_cause() {
        let policy = SandboxPolicy::new(SandboxMode::ReadOnly, "/ws");
        let confinement = ProgramConfinement::with_probe(
            policy,
            supervisor(),
            Arc::new(UnavailableProbe("no landlock here".into())),
        );
        let refused = confinement
            .command(Path::new("/ws"), "srv", &["--x"])
            .unwrap_err();
        let text = refused.to_string();
        assert!(text.starts_with(SANDBOX_UNAVAILABLE), "{text}");
        assert!(
            text.contains("no landlock here") && text.contains("`srv`"),
            "{text}"
        );
    }

    #[test]
    fn danger_full_access_runs_the_program_itself_and_confining_modes_the_supervisor() {
        let danger = ProgramConfinement::with_probe(
            SandboxPolicy::new(SandboxMode::DangerFullAccess, "/ws"),
            supervisor(),
            Arc::new(UnavailableProbe("unused".into())),
        );
        let plain = danger.command(Path::new("/ws"), "srv", &["a"]).unwrap();
        assert_eq!(plain.get_program(), "srv");
        let confined = ProgramConfinement::with_probe(
            SandboxPolicy::new(SandboxMode::WorkspaceWrite, "/elsewhere"),
            supervisor(),
            Arc::new(Available),
        );
        let command = confined.command(Path::new("/ws"), "srv", &["a"]).unwrap();
        assert_eq!(command.get_program(), "/sup");
        let args: Vec<&OsStr> = command.get_args().collect();
        assert!(args.windows(2).any(|w| w == ["--write", "/ws"]), "{args:?}");
        assert_eq!(args[args.len() - 3..], ["--", "srv", "a"]);
    }
}
