//! Durable, atomic file replacement for `write` and `edit`.
//!
//! The new content goes to a fresh file in the target's directory, is flushed to disk, and is
//! renamed over the target; then the directory is flushed so the rename itself survives a
//! crash. Readers see the old file or the new one, never a torn mix, and a failure at any
//! point leaves the old file as it was.

use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);

/// Removes the temporary file unless the rename consumed it.
struct TempGuard(Option<PathBuf>);

impl Drop for TempGuard {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = fs::remove_file(path);
        }
    }
}

/// Longest part of the target's name kept in the temporary name, in bytes: with the dot, the
/// `.dsh-<pid>-<n>-<nanos>.tmp` suffix (at most 50 bytes) stays within NAME_MAX (255 bytes).
const TEMP_STEM_BYTES: usize = 100;

/// The start of `name` that fits [`TEMP_STEM_BYTES`], cut on a character boundary. Counted in
/// bytes, not characters: NAME_MAX is in bytes, and a name of 100 CJK characters is 300.
fn temp_stem(name: &str) -> &str {
    let mut end = name.len().min(TEMP_STEM_BYTES);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// Creates the temporary sibling exclusively (never following or reusing an existing path),
/// mode 0666 minus the umask, as a plain create would.
fn create_temp(dir: &Path, name: &str) -> io::Result<(File, PathBuf)> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut attempt = 0;
    loop {
        let n = NEXT_TEMP.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!(
            ".{name}.dsh-{}-{n}-{nanos:x}.tmp",
            std::process::id()
        ));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o666)
            .open(&path)
        {
            Ok(file) => return Ok((file, path)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 16 => attempt += 1,
            Err(e) => return Err(e),
        }
    }
}

/// Replaces (or creates) `target` with `bytes`. `permissions` are applied to the new file
/// (pass the old file's, so replacing keeps its mode).
pub(crate) fn write_atomic(
    target: &Path,
    bytes: &[u8],
    permissions: Option<Permissions>,
) -> io::Result<()> {
    let dir = target
        .parent()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no parent"))?;
    let name = target
        .file_name()
        .map(|n| temp_stem(&n.to_string_lossy()).to_owned())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let (mut file, temp) = create_temp(dir, &name)?;
    let mut guard = TempGuard(Some(temp.clone()));
    file.write_all(bytes)?;
    if let Some(permissions) = permissions {
        file.set_permissions(permissions)?;
    }
    file.sync_all()?;
    drop(file);
    fs::rename(&temp, target)?;
    guard.0 = None;
    // The new content is durable and in place; flushing the directory makes the rename
    // durable too. Some file systems refuse to fsync a directory: that must not turn a
    // completed replacement into a reported failure.
    if let Err(error) = File::open(dir).and_then(|d| d.sync_all()) {
        tracing::warn!(dir = %dir.display(), %error, "could not flush the directory after a write");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_stem_is_cut_in_bytes_on_a_character_boundary() {
        assert_eq!(temp_stem("short.rs"), "short.rs");
        let wide = "文".repeat(84);
        let stem = temp_stem(&wide);
        assert_eq!(stem.len(), 99, "33 whole characters");
        assert!(wide.starts_with(stem));
    }
}
