//! The working directory of a session, as every front end resolves it.

use std::path::{Path, PathBuf};

use crate::error::HarnessError;

/// The canonical working directory of a new session: `dir`, or the current directory.
pub fn workspace_dir(dir: Option<PathBuf>) -> Result<PathBuf, HarnessError> {
    let dir = match dir {
        Some(dir) => dir,
        None => std::env::current_dir().map_err(|e| {
            HarnessError::Workspace(format!("cannot read the current directory: {e}"))
        })?,
    };
    let canonical = dir.canonicalize().map_err(|e| {
        HarnessError::Workspace(format!(
            "cannot use working directory {}: {e}",
            dir.display()
        ))
    })?;
    if !canonical.is_dir() {
        return Err(HarnessError::Workspace(format!(
            "working directory {} is not a directory",
            dir.display()
        )));
    }
    Ok(canonical)
}

/// Whether two paths name one directory, symlinks resolved.
pub fn same_dir(a: &Path, b: &Path) -> bool {
    a == b
        || matches!(
            (a.canonicalize(), b.canonicalize()),
            (Ok(a), Ok(b)) if a == b
        )
}
