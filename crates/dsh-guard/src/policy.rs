//! The sandbox policy of a session: its mode, network switch and writable roots, and how it is
//! handed to the supervisor of each command.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use crate::mode::SandboxMode;
use crate::namespace::Namespaces;

/// Device files every confining mode may write: sinks and sources that tools rely on
/// (`/dev/null`), terminals for programs that open a pty, and `/dev/shm` for POSIX semaphores
/// (Python's `ProcessPoolExecutor`). Not `/dev/tty`: commands have no controlling terminal,
/// and the one dsh runs in is not theirs to write.
pub const DEVICE_ROOTS: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/ptmx",
    "/dev/pts",
    "/dev/shm",
];

/// Whether commands may run when `.git`, `.dsh` and `$DSH_HOME` cannot be kept read-only
/// (no mount namespace here).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Protect {
    /// Run, and say once what is not protected (a `$DSH_HOME` inside a writable root is
    /// refused even so).
    #[default]
    BestEffort,
    /// Refuse confined commands (`SANDBOX_UNAVAILABLE`).
    Require,
}

/// Everything that decides what a command may write and reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxPolicy {
    /// The mode.
    pub mode: SandboxMode,
    /// Whether commands may open TCP connections and listen (false denies both, loopback
    /// included, and every socket that is not a unix socket).
    pub network: bool,
    /// With the network by allow-list, the loopback port of dsh's proxy: the one TCP port a
    /// confined command may connect to (set per command by [`crate::GuardSupervision`], which
    /// starts the proxy).
    pub proxy_port: Option<u16>,
    /// With the network by allow-list, the lists themselves: tools that reach hosts on their
    /// own (`web_fetch`) may not reach what the proxy refuses commands.
    pub hosts: Option<crate::proxy::Hosts>,
    /// The session's working directory: writable in `workspace-write`.
    pub workspace: PathBuf,
    /// Extra writable directories (`[sandbox] writable_roots`).
    pub writable_roots: Vec<PathBuf>,
    /// The system temp dirs (`/tmp` and `$TMPDIR`), writable in `workspace-write`.
    pub temp_dirs: Vec<PathBuf>,
    /// dsh's own directory (config, sessions, trust records): never writable by commands,
    /// even inside a writable root.
    pub dsh_home: Option<PathBuf>,
    /// What to do where `.git`, `.dsh` and `$DSH_HOME` cannot be kept read-only.
    pub protect: Protect,
    /// Refuse confined commands on a kernel whose Landlock ABI is older (`[sandbox] min_abi`).
    pub min_abi: Option<u32>,
    /// Use mount and PID namespaces where the kernel allows them; `false` runs with Landlock
    /// and seccomp alone, as on a kernel without namespaces.
    pub namespaces: bool,
}

impl SandboxPolicy {
    /// A policy for `workspace` in `mode` with the network on, no extra roots, the temp dirs
    /// of this process (`/tmp`, `$TMPDIR`), namespaces where available and best-effort
    /// protection.
    pub fn new(mode: SandboxMode, workspace: impl Into<PathBuf>) -> Self {
        let mut temp_dirs = vec![PathBuf::from("/tmp")];
        if let Some(dir) = std::env::var_os("TMPDIR").filter(|d| !d.is_empty()) {
            temp_dirs.push(PathBuf::from(dir));
        }
        Self {
            mode,
            network: true,
            proxy_port: None,
            hosts: None,
            workspace: workspace.into(),
            writable_roots: Vec::new(),
            temp_dirs,
            dsh_home: None,
            protect: Protect::BestEffort,
            min_abi: None,
            namespaces: true,
        }
    }

    /// This policy for a session whose workspace is `workspace` (when known): the writable
    /// workspace is the session's, not dsh's starting directory.
    pub fn for_workspace(&self, workspace: Option<&Path>) -> SandboxPolicy {
        let mut policy = self.clone();
        if let Some(workspace) = workspace {
            policy.workspace = workspace.to_path_buf();
        }
        policy
    }

    /// The directories a confined command may write (devices aside), canonicalized where
    /// they exist so a symlinked root still matches: none in `read-only` (the supervisor adds
    /// the command's private temp space), the workspace, temp dirs and extra roots otherwise.
    pub fn write_roots(&self) -> Vec<PathBuf> {
        self.named_write_roots()
            .into_iter()
            .map(|(root, _)| root)
            .collect()
    }

    /// [`write_roots`](Self::write_roots) with the name each was configured by: (canonical,
    /// as configured). The file tools map a model's path onto a root by either name.
    pub fn named_write_roots(&self) -> Vec<(PathBuf, PathBuf)> {
        match self.mode {
            SandboxMode::ReadOnly => Vec::new(),
            SandboxMode::WorkspaceWrite | SandboxMode::DangerFullAccess => {
                std::iter::once(&self.workspace)
                    .chain(&self.temp_dirs)
                    .chain(&self.writable_roots)
                    .map(|root| (canonical(root), lexical(root)))
                    .collect()
            }
        }
    }

    /// The paths that stay read-only inside the writable roots: each root's `.git` and
    /// `.dsh` (hooks, project config and repository config run code later, outside the
    /// sandbox) and `$DSH_HOME` (dsh's own config).
    pub fn protected_paths(&self) -> Vec<PathBuf> {
        let roots = std::iter::once(&self.workspace).chain(&self.writable_roots);
        let mut paths: Vec<PathBuf> = roots
            .flat_map(|root| {
                let root = canonical(root);
                [root.join(".git"), root.join(".dsh")]
            })
            .collect();
        paths.extend(self.dsh_home.as_deref().map(canonical));
        paths
    }

    /// Whether `path` is, or is inside, a protected path.
    pub fn is_protected(&self, path: &Path) -> bool {
        let path = resolve_existing(path);
        self.protected_paths().iter().any(|p| path.starts_with(p))
    }

    /// `$DSH_HOME` when it lies inside a writable root (commands could rewrite dsh's config
    /// there unless a namespace keeps it read-only).
    pub fn dsh_home_in_roots(&self) -> Option<PathBuf> {
        let home = canonical(self.dsh_home.as_deref()?);
        self.write_roots()
            .iter()
            .any(|root| home.starts_with(root))
            .then_some(home)
    }

    /// Whether the file tools may write `path` without asking: anywhere in
    /// `danger-full-access`, nowhere in `read-only`, under a write root and outside the
    /// protected paths otherwise. The path is resolved as far as it exists, so a symlink out
    /// of the workspace does not count as in it.
    pub fn allows_write(&self, path: &Path) -> bool {
        match self.mode {
            SandboxMode::DangerFullAccess => true,
            SandboxMode::ReadOnly => false,
            SandboxMode::WorkspaceWrite => {
                let path = resolve_existing(path);
                self.write_roots().iter().any(|root| path.starts_with(root))
                    && !self.protected_paths().iter().any(|p| path.starts_with(p))
            }
        }
    }

    /// The supervisor's arguments for one job up to and including `--` (the command
    /// follows): `unconfined` for an approved escalation, `namespaces` as the zygote found
    /// them, `program` for a program exec'd directly.
    pub fn supervisor_args(
        &self,
        unconfined: bool,
        namespaces: Namespaces,
        program: bool,
    ) -> Vec<OsString> {
        let mode = if unconfined {
            SandboxMode::DangerFullAccess
        } else {
            self.mode
        };
        let mut args: Vec<OsString> = vec![
            "--mode".into(),
            mode.as_str().into(),
            "--network".into(),
            if self.network { "on" } else { "off" }.into(),
        ];
        if mode.confines() {
            if let Some(port) = self.proxy_port.filter(|_| self.network) {
                args.push("--proxy-port".into());
                args.push(port.to_string().into());
            }
            for root in self.write_roots() {
                args.push("--write".into());
                args.push(root.into_os_string());
            }
            for path in self.protected_paths() {
                args.push("--protect".into());
                args.push(path.into_os_string());
            }
            args.push("--ns".into());
            args.push(namespaces.as_str().into());
        }
        if program {
            args.push("--program".into());
        }
        args.push("--".into());
        args
    }
}

/// `path` canonicalized where it exists, else folded lexically.
fn canonical(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| lexical(path))
}

/// `path` with `.` and `..` folded away, without touching the file system.
pub(crate) fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The canonical form of the longest existing ancestor of `path`, with the rest appended: a
/// file that does not exist yet is judged by the real directory it would land in.
pub(crate) fn resolve_existing(path: &Path) -> PathBuf {
    let path = lexical(path);
    let mut existing = path.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            out.extend(rest.iter().rev());
            return out;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return path,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_write_allows_the_workspace_and_temp_but_not_home() {
        let ws = tempfile::tempdir().unwrap();
        let policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, ws.path());
        assert!(policy.allows_write(&ws.path().join("new/file.txt")));
        assert!(policy.allows_write(Path::new("/tmp/x")));
        assert!(!policy.allows_write(Path::new("/etc/passwd")));
        assert!(!policy.allows_write(&ws.path().join("../../outside.txt")));
    }

    #[test]
    fn read_only_allows_no_file_writes_and_danger_allows_all() {
        let ws = tempfile::tempdir().unwrap();
        let ro = SandboxPolicy::new(SandboxMode::ReadOnly, ws.path());
        assert!(!ro.allows_write(&ws.path().join("f")));
        let danger = SandboxPolicy::new(SandboxMode::DangerFullAccess, ws.path());
        assert!(danger.allows_write(Path::new("/etc/x")));
    }

    #[test]
    fn a_symlink_out_of_the_workspace_is_outside() {
        let ws = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), ws.path().join("link")).unwrap();
        let mut policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, ws.path());
        policy.temp_dirs.clear();
        assert!(!policy.allows_write(&ws.path().join("link/f")));
    }

    #[test]
    fn protected_paths_are_not_writable_by_the_file_tools() {
        let ws = tempfile::tempdir().unwrap();
        let home = ws.path().join("home");
        let mut policy = SandboxPolicy::new(SandboxMode::WorkspaceWrite, ws.path());
        policy.dsh_home = Some(home.clone());
        assert!(!policy.allows_write(&ws.path().join(".git/hooks/pre-commit")));
        assert!(!policy.allows_write(&ws.path().join(".dsh/hooks.json")));
        assert!(!policy.allows_write(&home.join("config.toml")));
        assert!(policy.allows_write(&ws.path().join(".github/x")));
        assert_eq!(
            policy.dsh_home_in_roots(),
            Some(ws.path().canonicalize().unwrap().join("home"))
        );
    }

    #[test]
    fn an_escalation_runs_unconfined() {
        let policy = SandboxPolicy::new(SandboxMode::ReadOnly, "/ws");
        let args = policy.supervisor_args(true, Namespaces::User, false);
        assert_eq!(args[1], "danger-full-access");
        assert!(!args.contains(&"--write".into()));
    }
}
