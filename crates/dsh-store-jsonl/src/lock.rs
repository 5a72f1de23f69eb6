//! One writer per session file, across processes.
//!
//! Two writers appending to one session file interleave their events with clashing seqs, and a
//! load that repairs a file whose writer is still running truncates that writer's newest
//! events and closes a turn that is still going: either way an acknowledged conversation ends
//! up corrupt. So whoever writes a session file holds an exclusive advisory lock (`flock`) on
//! it for as long as its handle is open: the live writer, and a load while it repairs. A
//! second one fails with [`held_elsewhere`] instead of writing.
//!
//! A holder that just died can leave its lock behind for a moment: a process it was spawning
//! (`fork` before `exec`) shares the open file, and the lock with it, until its `exec` closes
//! it. So a taker waits up to [`LOCK_PATIENCE`] for the lock before failing; a live writer
//! holds it far longer than that, a crashed one's leftovers far shorter. Callers run on the
//! blocking pool, where this wait costs no runtime thread.
//!
//! The lock is advisory and tied to the open file: it goes away when the holder closes the
//! file or dies (`kill -9` included), so a crash never leaves a session locked. On a file
//! system without advisory locks (some network mounts) the lock cannot be taken and writing
//! proceeds unlocked, as it would have without this module.

use std::fs::{File, TryLockError};
use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use dsh_session::PersistenceError;

/// How long a taker waits for a held lock: ample for a dead holder's half-spawned child to
/// reach `exec` on a loaded machine, short enough that a user resuming a session that is
/// really in use hears about it at once.
const LOCK_PATIENCE: Duration = Duration::from_secs(2);

/// How often a waiting taker tries again.
const LOCK_RETRY: Duration = Duration::from_millis(5);

/// Takes the exclusive writer lock of the session file `file` (opened from `path`), held until
/// `file` is closed. Fails with [`held_elsewhere`] when another open handle still holds it
/// after [`LOCK_PATIENCE`]. Blocks the calling thread while it waits.
pub(crate) fn lock_for_writing(file: &File, path: &Path) -> Result<(), PersistenceError> {
    let deadline = Instant::now() + LOCK_PATIENCE;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(LOCK_RETRY);
            }
            Err(TryLockError::WouldBlock) => return Err(held_elsewhere(path)),
            Err(TryLockError::Error(error)) => {
                tracing::debug!(
                    path = %path.display(),
                    %error,
                    "session file locks are unavailable here; a second writer cannot be detected"
                );
                return Ok(());
            }
        }
    }
}

/// The failure for a session file whose writer lock someone else holds.
pub(crate) fn held_elsewhere(path: &Path) -> PersistenceError {
    PersistenceError::Io {
        context: format!(
            "session file {} is in use by another writer (another dsh process, or another \
             store in this one); close the session there first",
            path.display()
        ),
        source: io::Error::new(io::ErrorKind::WouldBlock, "the session file is locked"),
    }
}
