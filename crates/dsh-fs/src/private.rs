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
