//! One session's file, as its writer sees it: where it is, how far it got, and how to add to it.
//!
//! The file is created lazily: nothing touches the disk until the first batch, which is
//! published together with the header so that a session file always holds a header and at least
//! one complete event. Later batches are appended with one write and one `fdatasync` each.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_session::{PersistenceError, SessionEvent, SessionHeader};

use crate::fsync::{FileOps, PublishError, append_durably, publish_new, sync_dir};
use crate::locate::find_all;
use crate::lock::lock_for_writing;

/// Serializes events as JSONL lines, exactly as dsh-session's serde writes them.
pub(crate) fn encode_events(
    events: &[Arc<SessionEvent>],
    out: &mut Vec<u8>,
) -> Result<(), serde_json::Error> {
    for event in events {
        serde_json::to_writer(&mut *out, &**event)?;
        out.push(b'\n');
    }
    Ok(())
}

/// Serializes the header line.
pub(crate) fn encode_header(
    header: &SessionHeader,
    out: &mut Vec<u8>,
) -> Result<(), serde_json::Error> {
    serde_json::to_writer(&mut *out, header)?;
    out.push(b'\n');
    Ok(())
}

fn encoding_error(path: &Path, e: serde_json::Error) -> PersistenceError {
    PersistenceError::Io {
        context: format!("encoding events for {}", path.display()),
        source: std::io::Error::other(e),
    }
}

enum FileState {
    /// Nothing on disk yet: the first batch publishes the file.
    Unpublished,
    /// A seeded session this store did not load: its file may already hold exactly the seed
    /// (it was resumed through another store instance). Decided at the first write.
    Adopt,
    /// On disk (a resumed session, or a writer's file it closed) but not open: it held `len`
    /// bytes when this process last had it. A different length at the next open means another
    /// writer appended in between, and appending would interleave two histories.
    Existing { len: u64 },
    /// Open for append at committed length `len`, holding the file's writer lock.
    Open {
        file: File,
        len: u64,
        /// A failed truncate-back left bytes past `len`; they go before the next write.
        dirty: bool,
        /// The directory entry is known durable (false after a failed directory sync).
        dir_synced: bool,
    },
}

/// A session file and the next seq it expects.
pub(crate) struct SessionFile {
    path: PathBuf,
    header: SessionHeader,
    next_seq: u64,
    state: FileState,
}

impl SessionFile {
    /// A session with no file yet.
    pub(crate) fn unpublished(path: PathBuf, header: SessionHeader) -> Self {
        Self {
            path,
            header,
            next_seq: 0,
            state: FileState::Unpublished,
        }
    }

    /// A seeded session of `seed_len` events that this store did not load: at the first write,
    /// a file at `path` whose header equals `header` and which holds exactly `seed_len` complete
    /// event lines is continued; otherwise the session is published as new (which refuses to
    /// overwrite any other file).
    pub(crate) fn adopting(path: PathBuf, header: SessionHeader, seed_len: u64) -> Self {
        Self {
            path,
            header,
            next_seq: seed_len,
            state: FileState::Adopt,
        }
    }

    /// A session whose file exists and durably holds `next_seq` events in `len` bytes.
    pub(crate) fn existing(path: PathBuf, header: SessionHeader, next_seq: u64, len: u64) -> Self {
        Self {
            path,
            header,
            next_seq,
            state: FileState::Existing { len },
        }
    }

    /// The seq of the next event to persist: everything before it is in the file.
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// How many events are known to be in the file: [`next_seq`](Self::next_seq), except for
    /// a file not yet adopted, where nothing is known until the first write looks.
    pub(crate) fn known_durable(&self) -> u64 {
        match self.state {
            FileState::Adopt => 0,
            _ => self.next_seq,
        }
    }

    /// Closes the open handle (keeping the position) when nothing is left to repair, so a
    /// writer that stopped holds neither a descriptor nor the file's writer lock.
    pub(crate) fn release_handle(&mut self) {
        if let FileState::Open {
            len,
            dirty: false,
            dir_synced: true,
            ..
        } = self.state
        {
            self.state = FileState::Existing { len };
        }
    }

    /// Makes `events` (which must continue at [`next_seq`](Self::next_seq)) durable: publishes
    /// the file with the header on the first call, appends afterwards. On failure the file holds
    /// exactly what it held before (or, after a failed directory sync, the complete batch whose
    /// name is retried) and the same events can be persisted again.
    pub(crate) fn persist(
        &mut self,
        io: &dyn FileOps,
        events: &[Arc<SessionEvent>],
    ) -> Result<(), PersistenceError> {
        if let Some((i, e)) = events
            .iter()
            .enumerate()
            .find(|(i, e)| e.seq != self.next_seq + *i as u64)
        {
            return Err(PersistenceError::Io {
                context: format!(
                    "refusing to write {}: event {i} has seq {}, expected {}",
                    self.path.display(),
                    e.seq,
                    self.next_seq + i as u64
                ),
                source: std::io::Error::other("events out of order"),
            });
        }
        let (file, len, dirty, dir_synced) = match &mut self.state {
            FileState::Adopt => {
                self.adopt()?;
                return self.persist(io, events);
            }
            FileState::Unpublished | FileState::Existing { .. } if events.is_empty() => {
                return Ok(());
            }
            FileState::Unpublished => return self.publish(io, events),
            FileState::Existing { len } => {
                let len = *len;
                self.open_existing(len)?;
                return self.persist(io, events);
            }
            FileState::Open {
                file,
                len,
                dirty,
                dir_synced,
            } => (file, len, dirty, dir_synced),
        };
        if !*dir_synced {
            if let Some(dir) = self.path.parent() {
                sync_dir(dir).map_err(|source| PersistenceError::Io {
                    context: format!("syncing the directory of {}", self.path.display()),
                    source,
                })?;
            }
            *dir_synced = true;
        }
        if events.is_empty() {
            return Ok(());
        }
        let mut bytes = Vec::with_capacity(events.len() * 256);
        encode_events(events, &mut bytes).map_err(|e| encoding_error(&self.path, e))?;
        append_durably(io, file, len, dirty, &bytes).map_err(|source| PersistenceError::Io {
            context: format!("appending to session file {}", self.path.display()),
            source,
        })?;
        self.next_seq += events.len() as u64;
        Ok(())
    }

    /// Settles where the file stands (decides a pending adoption) so that
    /// [`next_seq`](Self::next_seq) is authoritative before the caller picks events to write.
    pub(crate) fn resolve(&mut self) -> Result<(), PersistenceError> {
        if matches!(self.state, FileState::Adopt) {
            self.adopt()?;
        }
        Ok(())
    }

    fn io_error(&self, what: &str) -> impl FnOnce(io::Error) -> PersistenceError {
        let context = format!("{what} {}", self.path.display());
        move |source| PersistenceError::Io { context, source }
    }

    /// Decides an [`FileState::Adopt`]: continue the file if it holds exactly this session's
    /// seed, else start from nothing (and let publication refuse an existing file). The file is
    /// locked before it is read, so no other writer can change it between the check and the
    /// appends.
    fn adopt(&mut self) -> Result<(), PersistenceError> {
        let opened = OpenOptions::new().read(true).append(true).open(&self.path);
        let mut file = match opened {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.state = FileState::Unpublished;
                self.next_seq = 0;
                return Ok(());
            }
            Err(e) => return Err(self.io_error("opening")(e)),
        };
        lock_for_writing(&file, &self.path)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(self.io_error("reading"))?;
        let holds_seed = memchr::memchr(b'\n', &bytes).is_some_and(|end| {
            let header_matches = serde_json::from_slice::<SessionHeader>(&bytes[..end])
                .is_ok_and(|h| h == self.header);
            let body = &bytes[end + 1..];
            header_matches
                && body.last().is_none_or(|b| *b == b'\n')
                && memchr::memchr_iter(b'\n', body).count() as u64 == self.next_seq
        });
        if holds_seed {
            self.state = FileState::Open {
                file,
                len: bytes.len() as u64,
                dirty: false,
                dir_synced: true,
            };
        } else {
            self.state = FileState::Unpublished;
            self.next_seq = 0;
        }
        Ok(())
    }

    /// Reopens a file this process knew at `expected` bytes, under its writer lock.
    fn open_existing(&mut self, expected: u64) -> Result<(), PersistenceError> {
        let file = OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(self.io_error("opening"))?;
        lock_for_writing(&file, &self.path)?;
        let len = file
            .metadata()
            .map_err(self.io_error("reading the length of"))?
            .len();
        if len != expected {
            return Err(PersistenceError::Io {
                context: format!(
                    "session file {} changed since this process loaded it ({len} bytes, not \
                     {expected}): another writer appended to it; load the session again",
                    self.path.display()
                ),
                source: io::Error::other("the session file changed under its writer"),
            });
        }
        self.state = FileState::Open {
            file,
            len,
            dirty: false,
            dir_synced: true,
        };
        Ok(())
    }

    fn publish(
        &mut self,
        io: &dyn FileOps,
        events: &[Arc<SessionEvent>],
    ) -> Result<(), PersistenceError> {
        // The hard link refuses a same-name file in this project directory; a same-id file in
        // another project directory would make the id ambiguous, so it is refused as well.
        if let Some(root) = self.path.parent().and_then(Path::parent)
            && !find_all(root, &self.header.id)?.is_empty()
        {
            return Err(PersistenceError::AlreadyExists {
                id: self.header.id.clone(),
            });
        }
        let mut bytes = Vec::with_capacity(256 + events.len() * 256);
        encode_header(&self.header, &mut bytes).map_err(|e| encoding_error(&self.path, e))?;
        encode_events(events, &mut bytes).map_err(|e| encoding_error(&self.path, e))?;
        let len = bytes.len() as u64;
        match publish_new(io, &self.path, &bytes) {
            Ok(file) => {
                self.state = FileState::Open {
                    file,
                    len,
                    dirty: false,
                    dir_synced: true,
                };
                self.next_seq += events.len() as u64;
                Ok(())
            }
            Err(PublishError::Exists) => Err(PersistenceError::AlreadyExists {
                id: self.header.id.clone(),
            }),
            Err(PublishError::Io(source)) => Err(PersistenceError::Io {
                context: format!("publishing session file {}", self.path.display()),
                source,
            }),
            Err(PublishError::DirSync(file, source)) => {
                // The complete batch is in the file under its final name; only the name's
                // durability is unknown. Keep it, and retry the directory sync before the next
                // success is reported.
                self.state = FileState::Open {
                    file,
                    len,
                    dirty: false,
                    dir_synced: false,
                };
                self.next_seq += events.len() as u64;
                Err(PersistenceError::Io {
                    context: format!("syncing the directory of {}", self.path.display()),
                    source,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use dsh_session::{EventKind, SessionId, SessionMeta};

    use super::*;
    use crate::fsync::OsFileOps;

    fn event(seq: u64) -> Arc<SessionEvent> {
        Arc::new(SessionEvent {
            seq,
            time: 1,
            kind: EventKind::other("session/title", serde_json::json!({ "n": seq })),
            ignorable: false,
            source_event_seqs: None,
            surface_op: None,
        })
    }

    #[test]
    fn events_that_do_not_continue_the_file_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p").join("s.jsonl");
        let header = SessionHeader::new(SessionId::new("s"), 1, SessionMeta::default());
        let mut file = SessionFile::unpublished(path.clone(), header);
        file.persist(&OsFileOps, &[event(0), event(1)]).unwrap();
        let before = std::fs::read(&path).unwrap();
        for bad in [vec![event(1)], vec![event(3)], vec![event(2), event(4)]] {
            assert!(file.persist(&OsFileOps, &bad).is_err());
            assert_eq!(std::fs::read(&path).unwrap(), before, "nothing rewritten");
        }
        file.persist(&OsFileOps, &[event(2)]).unwrap();
        assert_eq!(file.next_seq(), 3);
    }
}
