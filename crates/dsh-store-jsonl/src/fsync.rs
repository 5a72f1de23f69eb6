//! Durable file primitives: append with truncate-back, and no-clobber publication.
//!
//! Every byte that reaches a session file goes through [`FileOps`], the one seam where a test can
//! inject a full disk or count writes. The primitives here guarantee that a failure never leaves
//! a partial line behind: a failed append truncates the file back to its previous length, and a
//! new file becomes visible only after it is complete and synced.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The two operations whose failure a session file must survive. The default,
/// [`OsFileOps`], calls the operating system; tests substitute a double to simulate a full disk
/// or a failing device, or to count how many writes a batching window coalesced.
pub trait FileOps: Send + Sync + 'static {
    /// Writes all of `bytes` at the end of `file` (opened for append). May fail after writing
    /// part of them; the caller truncates back.
    fn write_all(&self, file: &mut File, bytes: &[u8]) -> io::Result<()>;

    /// Makes the written data durable (`fdatasync`).
    fn sync_data(&self, file: &File) -> io::Result<()>;
}

/// The real file operations: `write(2)` and `fdatasync(2)`.
#[derive(Clone, Copy, Debug, Default)]
pub struct OsFileOps;

impl FileOps for OsFileOps {
    fn write_all(&self, file: &mut File, bytes: &[u8]) -> io::Result<()> {
        file.write_all(bytes)
    }

    fn sync_data(&self, file: &File) -> io::Result<()> {
        file.sync_data()
    }
}

/// Makes a directory's entries (a new file name, a removed temp) durable.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Creates `dir` and any missing ancestors, syncing the parent of each directory created so the
/// new entries survive a crash too.
pub(crate) fn create_dirs_durably(dir: &Path) -> io::Result<()> {
    let missing: Vec<&Path> = dir.ancestors().take_while(|a| !a.exists()).collect();
    if missing.is_empty() {
        return Ok(());
    }
    std::fs::create_dir_all(dir)?;
    for created in missing.iter().rev() {
        if let Some(parent) = created.parent().filter(|p| !p.as_os_str().is_empty()) {
            sync_dir(parent)?;
        }
    }
    Ok(())
}

/// Appends `bytes` durably to `file`, whose committed length is `*len`. On any failure the file
/// is truncated back to `*len` so it never ends in a partial line; if even that fails, the
/// error says so and `*dirty` is set so the next append truncates before writing.
pub(crate) fn append_durably(
    io: &dyn FileOps,
    file: &mut File,
    len: &mut u64,
    dirty: &mut bool,
    bytes: &[u8],
) -> io::Result<()> {
    if *dirty {
        file.set_len(*len)?;
        file.sync_data()?;
        *dirty = false;
    }
    let result = io.write_all(file, bytes).and_then(|()| io.sync_data(file));
    match result {
        Ok(()) => {
            *len += bytes.len() as u64;
            Ok(())
        }
        Err(e) => {
            // A sync failure may have dropped the dirty pages; either way the bytes past `len`
            // are not known to be durable, so they go and the whole batch is retried later.
            if file.set_len(*len).is_err() {
                *dirty = true;
            }
            Err(e)
        }
    }
}

/// Why publishing a new session file failed.
#[derive(Debug)]
pub(crate) enum PublishError {
    /// A file with the final name exists already; it was not touched.
    Exists,
    /// An I/O failure; nothing is visible under the final name.
    Io(io::Error),
    /// The file is linked under its final name and complete, but the directory sync failed,
    /// so its name may not survive a crash. The caller keeps the file and retries the sync.
    DirSync(File, io::Error),
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

fn temp_path(final_path: &Path) -> PathBuf {
    let name = final_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    final_path.with_file_name(format!(".{name}.{}-{n}.tmp", std::process::id()))
}

/// Publishes a new file with `bytes` as its whole content, never overwriting an existing one:
/// the bytes go to a temp file in the same directory, which is synced and then hard-linked to
/// `final_path` (the link fails if that name exists), the temp name is removed and the directory
/// synced. The returned handle is open for append at the end of the file and holds the file's
/// writer lock.
pub(crate) fn publish_new(
    io: &dyn FileOps,
    final_path: &Path,
    bytes: &[u8],
) -> Result<File, PublishError> {
    let dir = final_path
        .parent()
        .ok_or_else(|| PublishError::Io(io::Error::other("session path has no directory")))?;
    create_dirs_durably(dir).map_err(PublishError::Io)?;
    let temp = temp_path(final_path);
    let mut file = OpenOptions::new()
        .create_new(true)
        .read(true)
        .append(true)
        .open(&temp)
        .map_err(PublishError::Io)?;
    // Nobody else can hold the lock of a file just created. The lock follows the inode to the
    // final name, so the writer holds it from the moment the file is visible; where locks are
    // unsupported only the detection of a second writer is lost (see `crate::lock`).
    let _ = file.try_lock();
    let staged = io
        .write_all(&mut file, bytes)
        .and_then(|()| io.sync_data(&file));
    if let Err(e) = staged {
        let _ = std::fs::remove_file(&temp);
        return Err(PublishError::Io(e));
    }
    let linked = std::fs::hard_link(&temp, final_path);
    // The temp name goes whatever happened; the data lives on under the final name if linked.
    let _ = std::fs::remove_file(&temp);
    match linked {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Err(PublishError::Exists),
        Err(e) => return Err(PublishError::Io(e)),
    }
    match sync_dir(dir) {
        Ok(()) => Ok(file),
        Err(e) => Err(PublishError::DirSync(file, e)),
    }
}
