//! Cold load: read a session file, repair it, and make the repair durable.
//!
//! Every load repairs, whether it is for resume or for inspection, so a crashed session is
//! closed properly the first time anyone opens it and every later reader sees the same log.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::path::Path;
use std::sync::Arc;

use dsh_session::{PersistenceError, SessionId, StoredSession, interrupted_turn_closers};

use crate::fsync::{FileOps, append_durably};
use crate::layout::{project_dir_name, session_file_name};
use crate::lock::lock_for_writing;
use crate::repair::{Scanned, scan};
use crate::writer::encode_events;

fn io_error(path: &Path, what: &str) -> impl FnOnce(io::Error) -> PersistenceError {
    let context = format!("{what} {}", path.display());
    move |source| PersistenceError::Io { context, source }
}

/// Checks that the header belongs at `path`: it names `id`, and its cwd derives the project
/// directory the file is in (a file moved or copied by hand must not pass as another session).
pub(crate) fn check_location(
    path: &Path,
    scanned: &Scanned,
    id: &SessionId,
) -> Result<(), PersistenceError> {
    let header = &scanned.header;
    let corrupt = |reason: String| PersistenceError::Corrupt {
        path: path.to_owned(),
        line: 1,
        reason,
    };
    if &header.id != id {
        return Err(corrupt(format!(
            "the header names session \"{}\", not \"{id}\"",
            header.id
        )));
    }
    let expected_dir = project_dir_name(header.cwd.as_deref());
    let actual_dir = path
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if actual_dir != expected_dir {
        return Err(corrupt(format!(
            "the header's cwd belongs in project directory {expected_dir}, not {actual_dir}"
        )));
    }
    let expected_name = session_file_name(id)?;
    if path.file_name().is_none_or(|n| n != expected_name.as_str()) {
        return Err(corrupt(format!("the file should be named {expected_name}")));
    }
    Ok(())
}

/// Reads the session stored at `path` as it stands, for display: no repair, no writer lock, so
/// it works while a live writer (in this process or another) is appending. A torn tail (an
/// append in progress, or a crash nobody has repaired yet) is left out; an open last turn is
/// returned open.
pub(crate) fn read_file(path: &Path, id: &SessionId) -> Result<StoredSession, PersistenceError> {
    let bytes = std::fs::read(path).map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            PersistenceError::NotFound { id: id.clone() }
        } else {
            io_error(path, "reading")(e)
        }
    })?;
    let scanned = scan(path, &bytes)?;
    drop(bytes);
    check_location(path, &scanned, id)?;
    Ok(StoredSession {
        header: scanned.header,
        events: scanned.events,
    })
}

/// Opens, locks (as a writer would, see [`crate::lock`]) and scans the file at `path`. The lock
/// is held as long as the returned file is.
fn read_locked(path: &Path, id: &SessionId) -> Result<(File, Scanned), PersistenceError> {
    // Read-only is enough for the lock, and keeps stored sessions readable without write access
    // when they need no repair.
    let mut locked = File::open(path).map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            PersistenceError::NotFound { id: id.clone() }
        } else {
            io_error(path, "opening")(e)
        }
    })?;
    lock_for_writing(&locked, path)?;
    let mut bytes = Vec::new();
    locked
        .read_to_end(&mut bytes)
        .map_err(io_error(path, "reading"))?;
    let scanned = scan(path, &bytes)?;
    drop(bytes);
    check_location(path, &scanned, id)?;
    Ok((locked, scanned))
}

/// The session stored at `path` as a repairing load would return it (torn tail left out, an
/// interrupted last turn closed), without writing anything: for readers that must not change
/// the file, such as a fork of it. Like a load, it refuses a file another writer holds.
pub(crate) fn read_repaired(
    path: &Path,
    id: &SessionId,
) -> Result<StoredSession, PersistenceError> {
    let (locked, scanned) = read_locked(path, id)?;
    drop(locked);
    let Scanned {
        header, mut events, ..
    } = scanned;
    let closers = interrupted_turn_closers(&events);
    events.extend(closers);
    Ok(StoredSession { header, events })
}

/// Loads the session stored at `path`, repairing it durably: a damaged tail after the last
/// committed `turn/end` is truncated away, then an open tail turn is closed with
/// [`interrupted_turn_closers`], appended with one write and `fdatasync`. Returns the session
/// and the file's length afterwards. The caller holds the session's in-process lock; the file's
/// writer lock is held here while reading and repairing (a file whose live writer is in
/// another process or store is refused, see [`crate::lock`]), and released on return.
pub(crate) fn load_file(
    io: &dyn FileOps,
    path: &Path,
    id: &SessionId,
) -> Result<(StoredSession, u64), PersistenceError> {
    let (locked, scanned) = read_locked(path, id)?;
    let Scanned {
        header,
        mut events,
        intact_len,
        damage,
    } = scanned;
    let closers = interrupted_turn_closers(&events);
    if damage.is_none() && closers.is_empty() {
        return Ok((StoredSession { header, events }, intact_len));
    }

    let mut file = OpenOptions::new()
        .append(true)
        .open(path)
        .map_err(io_error(path, "opening for repair"))?;
    let mut len = intact_len;
    if let Some(damage) = &damage {
        tracing::warn!(
            path = %path.display(),
            line = damage.line,
            dropped_bytes = damage.bytes,
            reason = %damage.reason,
            "dropping the damaged tail of a session file"
        );
        file.set_len(len)
            .map_err(io_error(path, "truncating the damaged tail of"))?;
        io.sync_data(&file)
            .map_err(io_error(path, "syncing the truncated"))?;
    }
    if !closers.is_empty() {
        tracing::warn!(
            path = %path.display(),
            closers = closers.len(),
            "closing the interrupted turn of a session file"
        );
        let closers: Vec<_> = closers.into_iter().map(Arc::new).collect();
        let mut bytes = Vec::new();
        encode_events(&closers, &mut bytes).map_err(|e| PersistenceError::Io {
            context: format!("encoding repair events for {}", path.display()),
            source: io::Error::other(e),
        })?;
        let mut dirty = false;
        append_durably(io, &mut file, &mut len, &mut dirty, &bytes)
            .map_err(io_error(path, "appending repair events to"))?;
        events.extend(closers.into_iter().map(Arc::unwrap_or_clone));
    }
    drop(locked);
    Ok((StoredSession { header, events }, len))
}
