//! Spill files: the complete text of a stream that outgrew its in-memory tail.
//!
//! Files live in one private scratch directory per executor (mode 0700, created lazily under
//! [`ShellConfig::scratch_dir`](crate::ShellConfig::scratch_dir): `$DSH_HOME/scratch` in dsh,
//! which sandboxed commands cannot write) and are created exclusively through the directory's
//! descriptor (`openat` with `O_CREAT | O_EXCL | O_NOFOLLOW`, so an existing name or a planted
//! symlink makes creation fail, and a directory renamed away with a symlink put in its place
//! redirects nothing) with mode 0600 and an unpredictable name. Command output can hold
//! anything the command printed, secrets included, so nobody else may read it or pre-create
//! it. The directory and its files are removed when the executor is dropped.

use std::fs::Permissions;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use parking_lot::Mutex;
use tempfile::TempDir;
use tokio::io::AsyncWriteExt;

use crate::capture::StreamTail;

/// The executor's private spill directory, created on first use.
#[derive(Debug, Default)]
pub(crate) struct SpillDir {
    /// Where the private directory is made (`None`: `$XDG_RUNTIME_DIR`, else the temp dir).
    base: Option<PathBuf>,
    dir: Mutex<Option<Scratch>>,
    next: AtomicU64,
}

/// The private directory: removed (with its files) when dropped; files are created through
/// its descriptor.
#[derive(Debug)]
struct Scratch {
    dir: TempDir,
    fd: OwnedFd,
}

impl SpillDir {
    /// A spill directory made under `base` when first needed.
    pub(crate) fn new(base: Option<PathBuf>) -> Self {
        Self {
            base,
            ..Self::default()
        }
    }

    fn open_scratch(&self) -> io::Result<Scratch> {
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
            .prefix(&format!("dsh-shell-{}-", std::process::id()))
            .rand_bytes(12)
            .permissions(Permissions::from_mode(0o700))
            .tempdir_in(&base)?;
        let fd = nix::fcntl::open(
            dir.path(),
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Scratch { dir, fd })
    }

    /// Creates a new spill file for a stream called `label` (`stdout` / `stderr`).
    fn create(&self, label: &str) -> io::Result<(std::fs::File, PathBuf)> {
        let pid = std::process::id();
        let mut dir = self.dir.lock();
        let scratch = match &mut *dir {
            Some(scratch) => scratch,
            empty => empty.insert(self.open_scratch()?),
        };
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let mut attempt = 0;
        loop {
            let name = format!("dsh-subprocess-{pid}-{n}-{:016x}-{label}.log", random_u64());
            match nix::fcntl::openat(
                &scratch.fd,
                name.as_str(),
                OFlag::O_WRONLY
                    | OFlag::O_CREAT
                    | OFlag::O_EXCL
                    | OFlag::O_NOFOLLOW
                    | OFlag::O_CLOEXEC,
                Mode::from_bits_truncate(0o600),
            ) {
                Ok(fd) => return Ok((std::fs::File::from(fd), scratch.dir.path().join(name))),
                Err(nix::errno::Errno::EEXIST) if attempt < 16 => attempt += 1,
                Err(e) => return Err(e.into()),
            }
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

/// The spill side of one stream's pump.
#[derive(Debug)]
pub(crate) struct Spill {
    dir: Arc<SpillDir>,
    label: &'static str,
    cap: u64,
    state: SpillState,
}

#[derive(Debug)]
enum SpillState {
    /// The stream still fits its tail.
    Waiting,
    Writing {
        file: tokio::fs::File,
        path: PathBuf,
        written: u64,
    },
    /// Over the cap, or the file could not be written: no spill for this stream, ever.
    Off,
}

impl Spill {
    pub(crate) fn new(dir: Arc<SpillDir>, label: &'static str, cap: u64) -> Self {
        Self {
            dir,
            label,
            cap,
            state: SpillState::Waiting,
        }
    }

    /// Handles the next `chunk`, before it is pushed into `tail`.
    ///
    /// On the first chunk that overflows the tail, the file is opened and receives the whole
    /// stream so far (still entirely in the tail) before the chunk.
    pub(crate) async fn accept(&mut self, tail: &StreamTail, chunk: &[u8]) {
        if matches!(self.state, SpillState::Waiting) && tail.would_overflow(chunk.len()) {
            self.open(tail).await;
        }
        self.write(tail, chunk).await;
    }

    async fn open(&mut self, tail: &StreamTail) {
        // Only this pump pushes into `tail`, and it has not overflowed yet, so the whole stream
        // is still there.
        let Some(head) = tail.whole_stream() else {
            self.state = SpillState::Off;
            return;
        };
        let (file, path) = match self.dir.create(self.label) {
            Ok(created) => created,
            Err(err) => {
                tracing::warn!(%err, "creating a spill file failed; output beyond the tail is lost");
                self.state = SpillState::Off;
                return;
            }
        };
        tail.set_spill(Some(path.clone()));
        self.state = SpillState::Writing {
            file: file.into(),
            path,
            written: 0,
        };
        self.write(tail, &head).await;
    }

    /// Appends `bytes` to an open spill, dropping the spill when it would pass the cap.
    async fn write(&mut self, tail: &StreamTail, bytes: &[u8]) {
        let SpillState::Writing {
            file,
            path,
            written,
        } = &mut self.state
        else {
            return;
        };
        if *written + bytes.len() as u64 > self.cap {
            tracing::debug!(path = %path.display(), cap = self.cap, "stream outgrew the spill cap; dropping its spill file");
            self.abandon(tail).await;
            return;
        }
        if let Err(err) = file.write_all(bytes).await {
            tracing::warn!(%err, path = %path.display(), "writing a spill file failed; dropping it");
            self.abandon(tail).await;
            return;
        }
        *written += bytes.len() as u64;
    }

    async fn abandon(&mut self, tail: &StreamTail) {
        if let SpillState::Writing { path, .. } =
            std::mem::replace(&mut self.state, SpillState::Off)
        {
            tail.set_spill(None);
            if let Err(err) = tokio::fs::remove_file(&path).await {
                tracing::warn!(%err, path = %path.display(), "removing a dropped spill file failed");
            }
        }
    }

    /// Flushes the file so that a reader who got the result sees the complete stream.
    pub(crate) async fn finish(&mut self, tail: &StreamTail) {
        if let SpillState::Writing { file, path, .. } = &mut self.state
            && let Err(err) = file.flush().await
        {
            tracing::warn!(%err, path = %path.display(), "flushing a spill file failed; dropping it");
            self.abandon(tail).await;
        }
    }
}
