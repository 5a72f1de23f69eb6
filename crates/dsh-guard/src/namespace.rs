//! A command's own view of the system, where the kernel allows one: a mount namespace in
//! which everything is read-only except the writable roots (and, inside them, `.git`, `.dsh`
//! and `$DSH_HOME` stay read-only), and a PID namespace whose `/proc` shows the command's
//! processes only.
//!
//! What the mount namespace adds to Landlock: Landlock decides which files may be *opened*
//! for writing or created, but not `chmod`, `chown`, `setxattr`, `utimes` or `truncate` (before
//! ABI 3) of files that already exist; a read-only mount refuses them all (`EROFS`). And
//! Landlock only adds rights, so it cannot carve a read-only hole (`.git`) out of a writable
//! tree; a read-only bind mount can. The PID namespace hides other processes' `/proc` files
//! (their `environ`, which Landlock leaves readable), makes other processes unreachable for
//! signals and `prlimit`, and kills everything in it when its init, the supervisor, exits.
//!
//! As root the namespaces are created directly; as another user inside a user namespace that
//! maps only that user onto itself (so files keep their owners; others' files show as
//! `nobody`). Which of the two works is probed once per zygote ([`probe`]): containers often
//! forbid both (Docker's default seccomp profile refuses `unshare`), and dsh then runs with
//! Landlock alone and says so.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use nix::mount::{MsFlags, mount};
use nix::sched::CloneFlags;

/// Which namespaces a job gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Namespaces {
    /// None: Landlock and seccomp alone.
    None,
    /// Mount and PID namespaces, created with this process's own privileges (root).
    Plain,
    /// The same inside a new user namespace (any user, where the kernel allows it).
    User,
}

impl Namespaces {
    /// The spelling on the supervisor's command line and in its hello.
    pub fn as_str(self) -> &'static str {
        match self {
            Namespaces::None => "none",
            Namespaces::Plain => "plain",
            Namespaces::User => "user",
        }
    }
}

impl FromStr for Namespaces {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(Namespaces::None),
            "plain" => Ok(Namespaces::Plain),
            "user" => Ok(Namespaces::User),
            other => Err(format!("unknown namespaces {other:?}")),
        }
    }
}

/// Enters a new PID namespace (and a user namespace for [`Namespaces::User`]); the caller's
/// next child is the PID namespace's init, which enters its mount namespace with
/// [`enter_mount`]. The caller stays in the original mount namespace, where it can remove
/// what it made for the command (a read-only command's private temp dir).
pub(crate) fn enter_pid(kind: Namespaces) -> io::Result<()> {
    let uid = nix::unistd::getuid();
    let gid = nix::unistd::getgid();
    let mut flags = CloneFlags::CLONE_NEWPID;
    match kind {
        Namespaces::None => return Ok(()),
        Namespaces::Plain => {}
        Namespaces::User => flags |= CloneFlags::CLONE_NEWUSER,
    }
    nix::sched::unshare(flags).map_err(io::Error::from)?;
    if kind == Namespaces::User {
        // Only this user, mapped onto itself: files keep their owners, nobody gains anything.
        std::fs::write("/proc/self/setgroups", "deny")?;
        std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
        std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    }
    Ok(())
}

/// Enters a new mount namespace (in the PID namespace's init), for [`build`].
pub(crate) fn enter_mount() -> io::Result<()> {
    nix::sched::unshare(CloneFlags::CLONE_NEWNS).map_err(io::Error::from)
}

/// The view one command gets.
#[derive(Debug, Clone, Default)]
pub(crate) struct View<'a> {
    /// Directories that stay writable (everything else becomes read-only).
    pub writes: &'a [PathBuf],
    /// Paths inside `writes` that stay read-only.
    pub protect: &'a [PathBuf],
    /// A fresh `/dev/shm` (the read-only mode's semaphores).
    pub private_shm: bool,
    /// Mount a `/proc` of the new PID namespace (the caller is its init).
    pub proc: bool,
}

/// Builds `view` in the mount namespace entered by [`enter_mount`]. Returns what it could not
/// protect (a protected path that is a symbolic link: binding it would protect its target,
/// not the name a command can replace).
pub(crate) fn build(view: &View<'_>) -> io::Result<Vec<PathBuf>> {
    let none = None::<&str>;
    mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none).map_err(io::Error::from)?;
    let read_only_before = read_only_mounts()?;
    let writes: Vec<(&PathBuf, bool)> = view
        .writes
        .iter()
        .filter(|w| w.is_dir())
        .map(|w| (w, is_read_only(w)))
        .collect();
    for (w, _) in &writes {
        bind(w)?;
    }
    set_read_only(Path::new("/"), true, true)?;
    for (w, was_read_only) in &writes {
        if *was_read_only {
            continue;
        }
        set_read_only(w, false, true)?;
        // Mounts below a root that were read-only stay so.
        for mount_point in read_only_before.iter().filter(|m| m.starts_with(w)) {
            let _ = set_read_only(mount_point, true, false);
        }
    }
    let mut unprotected = Vec::new();
    let mut protected = Vec::new();
    for path in protected_paths(view.protect) {
        if !writes.iter().any(|(w, _)| path.starts_with(w)) {
            // Outside every writable root it is read-only already.
            continue;
        }
        match std::fs::symlink_metadata(&path) {
            Err(_) => continue,
            Ok(meta) if meta.file_type().is_symlink() => unprotected.push(path),
            Ok(_) => {
                bind(&path)?;
                set_read_only(&path, true, true)?;
                protected.push(path);
            }
        }
    }
    // A protected directory that holds a writable root (a workspace inside `$DSH_HOME`) was
    // bound over that root's own mount: bind the root again on top, writable, and protect
    // what lies inside it once more. Deeper mounts win, so the order is the rule.
    for (w, was_read_only) in &writes {
        if *was_read_only || !protected.iter().any(|p| w.starts_with(p) && *w != p) {
            continue;
        }
        bind(w)?;
        set_read_only(w, false, true)?;
        for p in protected.iter().filter(|p| p.starts_with(w) && *w != *p) {
            bind(p)?;
            set_read_only(p, true, true)?;
        }
    }
    if view.private_shm && Path::new("/dev/shm").is_dir() {
        mount(
            Some("tmpfs"),
            "/dev/shm",
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some("mode=1777"),
        )
        .map_err(|e| io::Error::other(format!("cannot mount a private /dev/shm: {e}")))?;
    }
    if view.proc {
        mount(
            Some("proc"),
            "/proc",
            Some("proc"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            none,
        )
        .map_err(|e| io::Error::other(format!("cannot mount /proc: {e}")))?;
    }
    Ok(unprotected)
}

/// The protected paths and, for a `.git` file (a worktree or a submodule), the git directory
/// and common directory it names.
fn protected_paths(protect: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for path in protect {
        out.push(path.clone());
        if path.file_name().is_some_and(|n| n == ".git") && path.is_file() {
            let Some(gitdir) = std::fs::read_to_string(path).ok().and_then(|text| {
                let line = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?;
                Some(path.parent()?.join(line.trim()))
            }) else {
                continue;
            };
            if let Ok(common) = std::fs::read_to_string(gitdir.join("commondir")) {
                out.push(gitdir.join(common.trim()));
            }
            out.push(gitdir);
        }
    }
    out.into_iter()
        .map(|p| p.canonicalize().unwrap_or(p))
        .collect()
}

fn bind(path: &Path) -> io::Result<()> {
    mount(
        Some(path),
        path,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(|e| io::Error::other(format!("cannot bind {}: {e}", path.display())))
}

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `MOUNT_ATTR_RDONLY`.
const MOUNT_ATTR_RDONLY: u64 = 0x1;

/// Makes the mount at `path` (and, `recursive`, every mount below it) read-only or not.
#[allow(unsafe_code)]
fn set_read_only(path: &Path, read_only: bool, recursive: bool) -> io::Result<()> {
    let c_path = CString::new(path.as_os_str().as_bytes())?;
    let attr = MountAttr {
        attr_set: if read_only { MOUNT_ATTR_RDONLY } else { 0 },
        attr_clr: if read_only { 0 } else { MOUNT_ATTR_RDONLY },
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { libc::AT_RECURSIVE } else { 0 };
    // SAFETY: a NUL-terminated path and a `mount_attr` of the size passed, both alive for
    // the call.
    let done = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c_path.as_ptr(),
            flags as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if done == 0 {
        Ok(())
    } else {
        let error = io::Error::last_os_error();
        Err(io::Error::other(format!(
            "cannot make {} {}: {error}",
            path.display(),
            if read_only { "read-only" } else { "writable" }
        )))
    }
}

fn is_read_only(path: &Path) -> bool {
    nix::sys::statvfs::statvfs(path)
        .is_ok_and(|s| s.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY))
}

/// Mount points whose own options say `ro` (`/proc/self/mountinfo`, field 6).
fn read_only_mounts() -> io::Result<Vec<PathBuf>> {
    let text = std::fs::read_to_string("/proc/self/mountinfo")?;
    Ok(text
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let (point, options) = (fields.get(4)?, fields.get(5)?);
            options
                .split(',')
                .any(|o| o == "ro")
                .then(|| PathBuf::from(unescape(point)))
        })
        .collect())
}

/// mountinfo escapes space, tab, newline and backslash as octal (`\040`).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && let Some(digits) = bytes.get(i + 1..i + 4)
            && let Ok(code) = u8::from_str_radix(&String::from_utf8_lossy(digits), 8)
        {
            out.push(code);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Which namespaces work here: tried in a throwaway child (and grandchild, the PID
/// namespace's init, which builds a minimal view with its own `/proc`), root first without a
/// user namespace. The zygote runs this once, single-threaded, and reports it in its hello.
#[allow(unsafe_code)]
pub(crate) fn probe() -> (Namespaces, String) {
    let mut reasons = Vec::new();
    let kinds: &[Namespaces] = if nix::unistd::geteuid().is_root() {
        &[Namespaces::Plain, Namespaces::User]
    } else {
        &[Namespaces::User]
    };
    for &kind in kinds {
        match try_in_child(kind) {
            Ok(()) => return (kind, String::new()),
            Err(reason) => reasons.push(format!("{}: {reason}", kind.as_str())),
        }
    }
    (Namespaces::None, reasons.join("; "))
}

/// Forks, enters `kind` in the child, forks the namespace's init there and builds a view;
/// the child's exit code carries the outcome, its stderr (a pipe) the reason.
#[allow(unsafe_code)]
fn try_in_child(kind: Namespaces) -> Result<(), String> {
    use nix::sys::wait::{WaitStatus, waitpid};
    use nix::unistd::{ForkResult, fork};
    use std::io::{Read, Write};
    let (mut reader, writer) = io::pipe().map_err(|e| e.to_string())?;
    // SAFETY: the zygote is single-threaded when it probes; the child only makes system calls,
    // allocates and exits.
    match unsafe { fork() }.map_err(|e| e.to_string())? {
        ForkResult::Child => {
            drop(reader);
            let mut writer = writer;
            let outcome = enter_pid(kind).and_then(|()| {
                // SAFETY: as above; this child is single-threaded too.
                match unsafe { fork() }.map_err(io::Error::from)? {
                    ForkResult::Child => {
                        let view = View {
                            proc: true,
                            ..View::default()
                        };
                        let code = i32::from(enter_mount().and_then(|()| build(&view)).is_err());
                        std::process::exit(code);
                    }
                    ForkResult::Parent { child } => match waitpid(child, None) {
                        Ok(WaitStatus::Exited(_, 0)) => Ok(()),
                        other => Err(io::Error::other(format!(
                            "the namespace could not be set up ({other:?})"
                        ))),
                    },
                }
            });
            let code = match outcome {
                Ok(()) => 0,
                Err(e) => {
                    let _ = write!(writer, "{e}");
                    1
                }
            };
            std::process::exit(code);
        }
        ForkResult::Parent { child } => {
            drop(writer);
            let mut reason = String::new();
            let _ = reader.read_to_string(&mut reason);
            match waitpid(child, None) {
                Ok(WaitStatus::Exited(_, 0)) => Ok(()),
                _ if !reason.is_empty() => Err(reason),
                other => Err(format!("{other:?}")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape(r"/a\040b"), "/a b");
        assert_eq!(unescape(r"/plain"), "/plain");
        assert_eq!(unescape(r"/end\"), r"/end\");
    }

    #[test]
    fn namespaces_parse_their_own_spelling() {
        for kind in [Namespaces::None, Namespaces::Plain, Namespaces::User] {
            assert_eq!(kind.as_str().parse::<Namespaces>(), Ok(kind));
        }
    }
}
