//! `read`, `write` and `edit` through a routed [`FileAccess`] (an editor's buffers).
//!
//! The text travels through the route; everything else stays the tools' own: the paths are
//! the ones the local tools would use, and the read-before-write record is kept against the
//! file on this machine, exactly as for local calls. So a write still needs a read first and
//! still refuses a file that changed on disk since; what the route adds is that the model sees
//! the editor's unsaved text and the editor sees (and tracks) every change.

use std::fs;
use std::io::{self, Cursor};
use std::path::Path;

use dsh_session::SessionId;
use dsh_tools::{FileAccess, FileAccessError, ToolError};
use tokio_util::sync::CancellationToken;

use crate::edit::{EditArgs, apply};
use crate::excerpt::{Window, excerpt};
use crate::observe::{FileObservations, FileVersion};
use crate::place::fs_error;
use crate::read::rendered;

fn routed_error(verb: &str, shown: &str, e: &FileAccessError) -> ToolError {
    ToolError::new(format!("cannot {verb} {shown}: {e}"))
}

/// The version of `path` on this machine now, `None` when there is no file.
fn local_version(path: &Path) -> Option<FileVersion> {
    fs::metadata(path).ok().map(|m| FileVersion::of(&m))
}

/// `read` through `access`: the route's text, windowed and rendered as a local read would be.
pub(crate) async fn read(
    access: &dyn FileAccess,
    observations: &FileObservations,
    session: Option<&SessionId>,
    path: &Path,
    shown: &str,
    window: Window,
    cancel: &CancellationToken,
) -> Result<String, ToolError> {
    // Observed before the text is fetched: a change on disk racing the read makes a later
    // write stale rather than silently accepted.
    let version = local_version(path);
    let text = tokio::select! {
        text = access.read_text(path) => text.map_err(|e| routed_error("read", shown, &e))?,
        () = cancel.cancelled() => return Err(ToolError::aborted()),
    };
    let outcome = rendered(
        excerpt(Cursor::new(text.into_bytes()), window, &|| {
            cancel.is_cancelled()
        }),
        shown,
        window,
    )?;
    observations.record(session, path, version);
    outcome
}

/// Refuses what the local tools refuse about the file on disk (a directory, a special file,
/// a file this session has not read or that changed since). `Ok(true)` when there is no file
/// yet (a creation).
fn check_target(
    observations: &FileObservations,
    session: Option<&SessionId>,
    path: &Path,
    shown: &str,
) -> Result<bool, ToolError> {
    match fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Err(ToolError::new(format!("{shown} is a directory"))),
        Ok(meta) if !meta.is_file() => {
            Err(ToolError::new(format!("{shown} is not a regular file")))
        }
        Ok(meta) => observations
            .check(session, path, FileVersion::of(&meta))
            .map(|()| false)
            .map_err(|v| v.into_error(shown)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(true),
        Err(e) => Err(fs_error(shown, &e)),
    }
}

/// `write` through `access`.
pub(crate) async fn write(
    access: &dyn FileAccess,
    observations: &FileObservations,
    session: Option<&SessionId>,
    path: &Path,
    shown: &str,
    content: &str,
) -> Result<String, ToolError> {
    let created = check_target(observations, session, path, shown)?;
    access
        .write_text(path, content)
        .await
        .map_err(|e| routed_error("write", shown, &e))?;
    // The session wrote this version, so it may go on editing it without another read.
    observations.record(session, path, local_version(path));
    let verb = if created { "Created" } else { "Updated" };
    Ok(format!("{verb} file {shown} ({} bytes)", content.len()))
}

/// `edit` through `access`: the replacement is made in the route's text (an unsaved buffer
/// included) and written back through it.
pub(crate) async fn edit(
    access: &dyn FileAccess,
    observations: &FileObservations,
    session: Option<&SessionId>,
    path: &Path,
    shown: &str,
    args: &EditArgs,
) -> Result<String, ToolError> {
    if check_target(observations, session, path, shown)? {
        return Err(ToolError::new(format!(
            "file not found: {shown} (use write to create a file)"
        )));
    }
    let text = access
        .read_text(path)
        .await
        .map_err(|e| routed_error("read", shown, &e))?;
    let (updated, count) = apply(text.as_bytes(), args, shown)?;
    // Both inputs are UTF-8 and the replacement splices whole matches, so this cannot fail;
    // lossy keeps it total anyway.
    let updated = String::from_utf8_lossy(&updated);
    access
        .write_text(path, &updated)
        .await
        .map_err(|e| routed_error("write", shown, &e))?;
    observations.record(session, path, local_version(path));
    let plural = if count == 1 { "" } else { "s" };
    Ok(format!(
        "Edited file {shown}: replaced {count} occurrence{plural}"
    ))
}
