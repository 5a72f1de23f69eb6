//! Finding a session's file by id alone.
//!
//! The project directory depends on the session's cwd, which a caller resuming by id does not
//! know, so lookup checks every project directory for the id's file name. That costs one
//! directory read plus one `stat` per project, and needs no index that could go stale.

use std::io;
use std::path::{Path, PathBuf};

use dsh_session::{PersistenceError, SessionId};

use crate::layout::session_file_name;

fn io_error(context: String) -> impl FnOnce(io::Error) -> PersistenceError {
    move |source| PersistenceError::Io { context, source }
}

/// Every file under `root` that stores `id`, sorted.
pub(crate) fn find_all(root: &Path, id: &SessionId) -> Result<Vec<PathBuf>, PersistenceError> {
    let name = session_file_name(id)?;
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error(format!("reading {}", root.display()))(e)),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io_error(format!("reading {}", root.display())))?;
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let candidate = entry.path().join(&name);
        if std::fs::symlink_metadata(&candidate).is_ok_and(|m| m.is_file()) {
            found.push(candidate);
        }
    }
    found.sort();
    Ok(found)
}

/// The one file that stores `id`: [`PersistenceError::NotFound`] when there is none,
/// [`PersistenceError::Ambiguous`] when several project directories hold the id.
pub(crate) fn find(root: &Path, id: &SessionId) -> Result<PathBuf, PersistenceError> {
    let mut found = find_all(root, id)?;
    match found.len() {
        0 => Err(PersistenceError::NotFound { id: id.clone() }),
        1 => Ok(found.remove(0)),
        _ => Err(PersistenceError::Ambiguous {
            id: id.clone(),
            paths: found,
        }),
    }
}
