//! Spill files: the complete text of a stream that outgrew its in-memory tail.
//!
//! Files live in one private scratch directory per executor (`dsh_fs::PrivateDir`: mode 0700,
//! created lazily under [`ShellConfig::scratch_dir`](crate::ShellConfig::scratch_dir),
//! `$DSH_HOME/scratch` in dsh, which sandboxed commands cannot write; files created
//! exclusively through the directory's descriptor, mode 0600, unpredictable names). Command
//! output can hold anything the command printed, secrets included, so nobody else may read it
//! or pre-create it. The directory and its files are removed when the executor is dropped.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use dsh_fs::PrivateDir;
use tokio::io::AsyncWriteExt;

use crate::capture::StreamTail;

/// The executor's private spill directory, created on first use (`dsh_fs::PrivateDir`).
#[derive(Debug)]
pub(crate) struct SpillDir(PrivateDir);

impl SpillDir {
    /// A spill directory made under `base` when first needed.
    pub(crate) fn new(base: Option<PathBuf>) -> Self {
        Self(PrivateDir::new(base, "dsh-shell"))
    }

    /// Creates a new spill file for a stream called `label` (`stdout` / `stderr`).
    fn create(&self, label: &str) -> io::Result<(std::fs::File, PathBuf)> {
        self.0.create(&format!("{label}.log"))
    }
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
