//! A private scratch directory: where dsh keeps what commands and tools produced that is too
//! large to hand the model whole (spilled command output, oversized tool results).
//!
//! Such files can hold anything a command printed or a server returned, secrets included, so
//! nobody else may read them or choose where they land. The directory is made lazily under a
//! base (`$DSH_HOME/scratch` in dsh, which sandboxed commands cannot write), mode 0700, with an
//! unpredictable name; files are created exclusively through its descriptor (`openat` with
//! `O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0600), so an existing name or a planted symlink makes
//! creation fail, and a directory renamed away with a symlink put in its place redirects
//! nothing. The directory and its files are removed when the [`PrivateDir`] is dropped.

use std::fs::Permissions;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use tempfile::TempDir;

/// A private directory made on first use (see the module docs).
#[derive(Debug)]
pub struct PrivateDir {
    /// Where the directory is made (`None`: `$XDG_RUNTIME_DIR/dsh`, else the temp dir).
    base: Option<PathBuf>,
    /// The directory name's prefix, saying whose it is (`dsh-shell`, `dsh-results`).
    prefix: String,
    dir: Mutex<Option<Made>>,
    next: AtomicU64,
}

/// The directory once made: removed (with its files) when dropped.
#[derive(Debug)]
struct Made {
    dir: TempDir,
    fd: OwnedFd,
}

impl PrivateDir {
    /// A directory named `PREFIX-PID-…` made under `base` when first needed.
    pub fn new(base: Option<PathBuf>, prefix: &str) -> Self {
        Self {
            base,
            prefix: prefix.to_owned(),
            dir: Mutex::new(None),
            next: AtomicU64::new(0),
        }
    }

    fn make(&self) -> io::Result<Made> {
        let base = self
            .base
            .clone()
            .or_else(|| {
                std::env::var_os("XDG_RUNTIME_DIR")
                    .filter(|d| !d.is_empty())
                    .map(|d| PathBuf::from(d).join("dsh"))
            })
            .unwrap_or_else(std::env::temp_dir);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&base)?;
        let dir = tempfile::Builder::new()
            .prefix(&format!("{}-{}-", self.prefix, std::process::id()))
            .rand_bytes(12)
            .permissions(Permissions::from_mode(0o700))
            .tempdir_in(&base)?;
        let fd = nix::fcntl::open(
            dir.path(),
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Made { dir, fd })
    }

    /// Creates a new file, readable and writable by this user only, whose name ends with
    /// `suffix` (`stdout.log`, `result.txt`); returns it open for writing, and its path.
    pub fn create(&self, suffix: &str) -> io::Result<(std::fs::File, PathBuf)> {
        let pid = std::process::id();
        let mut dir = self
            .dir
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let made = match &mut *dir {
            Some(made) => made,
            empty => empty.insert(self.make()?),
        };
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let mut attempt = 0;
        loop {
            let name = format!("{}-{pid}-{n}-{:016x}-{suffix}", self.prefix, random_u64());
            match nix::fcntl::openat(
                &made.fd,
                name.as_str(),
                OFlag::O_WRONLY
                    | OFlag::O_CREAT
                    | OFlag::O_EXCL
                    | OFlag::O_NOFOLLOW
                    | OFlag::O_CLOEXEC,
                Mode::from_bits_truncate(0o600),
            ) {
                Ok(fd) => return Ok((std::fs::File::from(fd), made.dir.path().join(name))),
                Err(nix::errno::Errno::EEXIST) if attempt < 16 => attempt += 1,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

impl PrivateDir {
    /// Removes the directory and its files now (a process that ends through `exit` runs no
    /// destructors); the next [`create`](Self::create) makes a new one.
    pub fn remove(&self) {
        let made = self
            .dir
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(made) = made {
            // A failure leaves a private directory of output behind; nothing more to do.
            let _ = made.dir.close();
        }
    }
}

/// Removes the private directories under `base` whose names say they belong to a process
/// (`PREFIX-PID-…`) that no longer runs: a dsh that was killed runs no destructor, and its
/// spills would otherwise stay forever. A directory of a live process, or one whose pid was
/// reused, is kept; so is anything not named like ours. Returns how many were removed.
pub fn sweep_dead(base: &std::path::Path, prefixes: &[&str]) -> usize {
    let Ok(entries) = std::fs::read_dir(base) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let pid = prefixes.iter().find_map(|prefix| {
            let rest = name.strip_prefix(prefix)?.strip_prefix('-')?;
            rest.split('-').next()?.parse::<i32>().ok()
        });
        let Some(pid) = pid.filter(|p| *p > 0) else {
            continue;
        };
        let alive = !matches!(
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
            Err(nix::errno::Errno::ESRCH)
        );
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if !alive && is_dir && std::fs::remove_dir_all(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// An unpredictable number for a file name (from the kernel's random source).
fn random_u64() -> u64 {
    use std::io::Read as _;
    let mut bytes = [0u8; 8];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if read.is_err() {
        // Unpredictability is a bonus: exclusive creation already refuses any planted name.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        return nanos as u64;
    }
    u64::from_le_bytes(bytes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn sweeping_removes_only_directories_of_processes_that_are_gone() {
        let base = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        let mine = std::process::id();
        for name in [
            format!("dsh-results-{gone}-abc"),
            format!("dsh-shell-{gone}-def"),
            format!("dsh-results-{mine}-ghi"),
            format!("other-{gone}-x"),
        ] {
            std::fs::create_dir(base.path().join(&name)).unwrap();
            std::fs::write(base.path().join(name).join("f.txt"), "x").unwrap();
        }
        assert_eq!(sweep_dead(base.path(), &["dsh-results", "dsh-shell"]), 2);
        let mut left: Vec<String> = std::fs::read_dir(base.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [format!("dsh-results-{mine}-ghi"), format!("other-{gone}-x")]
        );
    }
}
