//! Executors under the guard's supervisor for the integration tests: as root (the CI user) or,
//! through `setpriv`, as `nobody`, with and without namespaces, and the directories the tests
//! write to.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_guard::{GuardSupervision, SandboxMode, SandboxPolicy, SupervisorProgram};
use dsh_shell::{LocalShellExecutor, ShellExecRequest, ShellExecutor, ShellRunResult};
use tempfile::TempDir;

use crate::common::{PATIENCE, config};

/// The supervisor binary of this crate (dsh runs the same code as `dsh __supervise`).
pub const SUPERVISOR: &str = env!("CARGO_BIN_EXE_dsh-guard-supervisor");

/// Who the supervisor (and so every command) runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum User {
    /// The test's own user: root in CI.
    Me,
    /// `nobody`, through `setpriv` (the test must run as root to switch).
    Nobody,
}

impl User {
    /// Root can test both; anyone else only themselves.
    pub fn all() -> Vec<User> {
        if nix::unistd::geteuid().is_root() {
            vec![User::Me, User::Nobody]
        } else {
            vec![User::Me]
        }
    }
}

/// The supervisor program, run as `user`.
pub fn program(user: User) -> SupervisorProgram {
    match user {
        User::Me => SupervisorProgram {
            program: PathBuf::from(SUPERVISOR),
            args: Vec::new(),
        },
        User::Nobody => SupervisorProgram {
            program: PathBuf::from("/usr/bin/setpriv"),
            args: [
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--",
                SUPERVISOR,
            ]
            .map(Into::into)
            .to_vec(),
        },
    }
}

/// A workspace under /tmp and a directory outside every writable root (under the target dir,
/// as a folder under `$HOME` would be), both writable by `nobody` too, so that only the
/// sandbox stands between a command and the outside directory.
pub struct Dirs {
    pub workspace: TempDir,
    pub outside: TempDir,
}

impl Dirs {
    pub fn new() -> Self {
        let dirs = Self {
            workspace: tempfile::tempdir().unwrap(),
            outside: dsh_testkit::outside_writable_roots(env!("CARGO_TARGET_TMPDIR")),
        };
        for dir in [dirs.workspace.path(), dirs.outside.path()] {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        dirs
    }

    pub fn policy(&self, mode: SandboxMode) -> SandboxPolicy {
        SandboxPolicy::new(mode, self.workspace.path())
    }

    pub fn ws(&self, name: &str) -> PathBuf {
        self.workspace.path().join(name)
    }

    pub fn out(&self, name: &str) -> PathBuf {
        self.outside.path().join(name)
    }
}

/// An executor whose commands run in `policy`'s workspace as `user`.
pub fn guarded_as(policy: SandboxPolicy, user: User) -> LocalShellExecutor {
    let mut config = config();
    config.default_workdir = Some(policy.workspace.clone());
    let supervision = GuardSupervision::new(policy, program(user));
    LocalShellExecutor::new(config)
        .unwrap()
        .with_supervision(Arc::new(supervision))
}

/// An executor whose commands run in `policy`'s workspace as the test's user.
pub fn guarded(policy: SandboxPolicy) -> LocalShellExecutor {
    guarded_as(policy, User::Me)
}

pub async fn run(exec: &LocalShellExecutor, command: &str) -> ShellRunResult {
    let spec = exec.resolve(ShellExecRequest::new(command)).unwrap();
    tokio::time::timeout(PATIENCE, exec.run(spec))
        .await
        .expect("the command never finished")
        .unwrap()
}

pub fn q(path: &Path) -> String {
    format!("'{}'", path.display())
}

/// A write refused by the sandbox: Landlock's EACCES, or the read-only mount's EROFS where
/// the command has a namespace.
pub fn denied(text: &str) -> bool {
    text.contains("Permission denied") || text.contains("Read-only file system")
}
