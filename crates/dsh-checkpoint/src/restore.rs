//! Writing a checkpoint back: the journal and the file operations.
//!
//! A restore is made crash-safe in three moves. First the journal (which paths go back to
//! which tree, and the workspace's state just before) is written and synced beside the store.
//! Then the rewind's session events are appended and flushed: that is the commit point. Only
//! then are files written, each to a temporary file in its own directory and renamed over the
//! old one, so no file is ever half-written. A crash before the commit point leaves the old
//! state and a journal that recovery drops; a crash after it leaves a journal that recovery
//! (run before anything else touches the store) completes.
//!
//! Every operation, first run or recovery, changes a path only while it is still in the state
//! the journal recorded before the rewind (or already done): a file someone changed since is
//! left alone and named. Nothing outside the workspace is touched: every path is checked to be
//! plain, and none is written through a parent that is a symbolic link.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use gix::objs::tree::EntryKind;
use serde::{Deserialize, Serialize};

use crate::error::CheckpointError;
use crate::path::{RelPath, absolute, display, from_hex, is_safe, is_within, parent, to_hex};
use crate::store::{Flat, HASH, Leaf, ShadowStore, empty_tree};

/// The journal's file name in the store directory.
pub const JOURNAL_FILE: &str = "dsh-rewind.journal";

/// A fault seam: called with the number of file operations done so far, before the next one;
/// an error stops the restore right there, as a crash would. Tests use it; dsh never sets it.
pub type Fault = std::sync::Arc<dyn Fn(usize) -> std::io::Result<()> + Send + Sync>;

/// What a rewind is about to do, durable before it does it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Journal {
    /// The rewind's id (also in its `checkpoint/restored` event).
    pub id: String,
    /// The session whose log holds the commit.
    pub session: String,
    /// The workspace state before the rewind.
    pub before: String,
    /// The tree the paths go back to.
    pub target: String,
    /// The paths to put back (hex bytes).
    pub paths: Vec<String>,
}

impl Journal {
    /// The paths, decoded; malformed or unsafe ones are dropped.
    pub fn paths(&self) -> Vec<RelPath> {
        self.paths
            .iter()
            .filter_map(|p| from_hex(p))
            .filter(|p| is_safe(p))
            .collect()
    }

    /// A journal for `paths`.
    pub fn new(
        id: String,
        session: String,
        before: String,
        target: String,
        paths: &BTreeSet<RelPath>,
    ) -> Self {
        Self {
            id,
            session,
            before,
            target,
            paths: paths.iter().map(|p| to_hex(p)).collect(),
        }
    }

    /// Writes the journal durably into `dir`.
    pub fn save(&self, dir: &Path) -> Result<(), CheckpointError> {
        let path = dir.join(JOURNAL_FILE);
        let tmp = dir.join(format!("{JOURNAL_FILE}.tmp"));
        let bytes = serde_json::to_vec(self).map_err(|e| CheckpointError::store(dir, e))?;
        let ctx = |e| CheckpointError::io(format!("writing {}", path.display()), e);
        let mut file = File::create(&tmp).map_err(ctx)?;
        file.write_all(&bytes).map_err(ctx)?;
        file.sync_all().map_err(ctx)?;
        std::fs::rename(&tmp, &path).map_err(ctx)?;
        sync_dir(dir).map_err(ctx)
    }

    /// The journal in `dir`, if one is pending.
    pub fn load(dir: &Path) -> Result<Option<Self>, CheckpointError> {
        let path = dir.join(JOURNAL_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                CheckpointError::store(dir, format!("journal {}: {e}", path.display()))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(CheckpointError::io(
                format!("reading {}", path.display()),
                e,
            )),
        }
    }

    /// Removes the journal from `dir`: the rewind is complete (or was never committed).
    pub fn remove(dir: &Path) -> Result<(), CheckpointError> {
        let path = dir.join(JOURNAL_FILE);
        match std::fs::remove_file(&path) {
            Ok(()) => sync_dir(dir)
                .map_err(|e| CheckpointError::io(format!("removing {}", path.display()), e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(CheckpointError::io(
                format!("removing {}", path.display()),
                e,
            )),
        }
    }
}

/// What a restore did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// Paths written, created or removed.
    pub changed: Vec<RelPath>,
    /// Paths left alone, with why.
    pub left: Vec<(RelPath, String)>,
}

/// A path's state on disk, comparable with a tree leaf.
#[derive(Clone, Debug, PartialEq, Eq)]
enum OnDisk {
    Absent,
    Leaf(Leaf),
    /// A directory with contents, or something a tree cannot hold.
    Other,
}

fn on_disk(abs: &Path) -> OnDisk {
    let Ok(meta) = std::fs::symlink_metadata(abs) else {
        return OnDisk::Absent;
    };
    let ft = meta.file_type();
    let hashed = |kind: EntryKind, bytes: std::io::Result<Vec<u8>>| match bytes {
        Ok(bytes) => gix::objs::compute_hash(HASH, gix::objs::Kind::Blob, &bytes)
            .map(|oid| OnDisk::Leaf(Leaf { kind, oid }))
            .unwrap_or(OnDisk::Other),
        Err(_) => OnDisk::Other,
    };
    if ft.is_symlink() {
        hashed(
            EntryKind::Link,
            std::fs::read_link(abs).map(|t| t.as_os_str().as_bytes().to_vec()),
        )
    } else if ft.is_dir() {
        match std::fs::read_dir(abs).map(|mut d| d.next().is_none()) {
            Ok(true) => OnDisk::Leaf(Leaf {
                kind: EntryKind::Tree,
                oid: empty_tree(),
            }),
            _ => OnDisk::Other,
        }
    } else if ft.is_file() {
        let kind = if meta.permissions().mode() & 0o100 != 0 {
            EntryKind::BlobExecutable
        } else {
            EntryKind::Blob
        };
        hashed(kind, std::fs::read(abs))
    } else {
        OnDisk::Other
    }
}

fn as_disk(leaf: Option<&Leaf>) -> OnDisk {
    leaf.map_or(OnDisk::Absent, |l| OnDisk::Leaf(*l))
}

/// Puts `paths` of the workspace at `root` back to `target`, each only while it is still as
/// `before` recorded it (or already as `target` wants it). Removals run first, deepest first,
/// then writes in path order; directories the target does not have and that were emptied are
/// removed. `fault` is the crash seam.
pub fn apply(
    store: &ShadowStore,
    root: &Path,
    paths: &[RelPath],
    target: &Flat,
    before: &Flat,
    fault: Option<&Fault>,
) -> Result<Applied, CheckpointError> {
    let mut applied = Applied::default();
    let mut done = 0usize;
    let mut step = |applied: &mut Applied| -> Result<(), CheckpointError> {
        if let Some(fault) = fault {
            fault(done).map_err(|_| CheckpointError::Fault(done))?;
        }
        done += 1;
        let _ = applied;
        Ok(())
    };
    let (removals, writes): (Vec<&RelPath>, Vec<&RelPath>) =
        paths.iter().partition(|p| !target.contains_key(*p));
    let mut touched_dirs: BTreeSet<PathBuf> = BTreeSet::new();
    for rel in removals.iter().rev() {
        let abs = absolute(root, rel);
        let now = on_disk(&abs);
        if now == OnDisk::Absent {
            continue;
        }
        if let Some(why) = unsafe_parent(root, rel) {
            applied.left.push(((*rel).clone(), why));
            continue;
        }
        if now != as_disk(before.get(*rel)) {
            applied
                .left
                .push(((*rel).clone(), "changed since the rewind began".into()));
            continue;
        }
        step(&mut applied)?;
        let result = match now {
            OnDisk::Leaf(Leaf {
                kind: EntryKind::Tree,
                ..
            }) => std::fs::remove_dir(&abs),
            _ => std::fs::remove_file(&abs),
        };
        result.map_err(|e| CheckpointError::io(format!("removing {}", abs.display()), e))?;
        applied.changed.push((*rel).clone());
        touched_dirs.insert(absolute(root, parent(rel)));
        remove_emptied_parents(root, rel, target, &mut touched_dirs);
    }
    for rel in writes {
        let Some(want) = target.get(rel) else {
            continue;
        };
        let abs = absolute(root, rel);
        let now = on_disk(&abs);
        if now == OnDisk::Leaf(*want) {
            continue;
        }
        if let Some(why) = unsafe_parent(root, rel) {
            applied.left.push((rel.clone(), why));
            continue;
        }
        if now != as_disk(before.get(rel)) {
            applied
                .left
                .push((rel.clone(), "changed since the rewind began".into()));
            continue;
        }
        step(&mut applied)?;
        write_leaf(store, &abs, want, &now)?;
        applied.changed.push(rel.clone());
        touched_dirs.insert(absolute(root, parent(rel)));
    }
    // Renames and removals are durable once their directories are.
    for dir in touched_dirs {
        let _ = sync_dir(&dir);
    }
    Ok(applied)
}

/// Why a path must not be written: a parent inside the workspace is a symbolic link or not a
/// directory (writing there could land outside the workspace).
fn unsafe_parent(root: &Path, rel: &[u8]) -> Option<String> {
    let mut dir = parent(rel);
    while !dir.is_empty() {
        if let Ok(meta) = std::fs::symlink_metadata(absolute(root, dir)) {
            if meta.file_type().is_symlink() {
                return Some(format!("its parent {} is a symbolic link", display(dir)));
            }
            if !meta.is_dir() {
                return Some(format!("its parent {} is not a directory", display(dir)));
            }
        }
        dir = parent(dir);
    }
    None
}

/// After `rel` was removed: its parents that the target has nothing in, and that are empty
/// now, go too (a directory the rewound turn created).
fn remove_emptied_parents(root: &Path, rel: &[u8], target: &Flat, touched: &mut BTreeSet<PathBuf>) {
    let mut dir = parent(rel);
    while !dir.is_empty() {
        let wanted = target
            .range(dir.to_vec()..)
            .next()
            .is_some_and(|(p, _)| is_within(p, dir));
        if wanted || std::fs::remove_dir(absolute(root, dir)).is_err() {
            return;
        }
        touched.insert(absolute(root, parent(dir)));
        dir = parent(dir);
    }
}

fn write_leaf(
    store: &ShadowStore,
    abs: &Path,
    want: &Leaf,
    now: &OnDisk,
) -> Result<(), CheckpointError> {
    let ctx = |e| CheckpointError::io(format!("restoring {}", abs.display()), e);
    // Something of another kind in the way: an empty directory where a file goes, a file
    // where a directory goes.
    match now {
        OnDisk::Leaf(Leaf {
            kind: EntryKind::Tree,
            ..
        }) if want.kind != EntryKind::Tree => {
            std::fs::remove_dir(abs).map_err(ctx)?;
        }
        OnDisk::Leaf(_) if want.kind == EntryKind::Tree => {
            std::fs::remove_file(abs).map_err(ctx)?
        }
        _ => {}
    }
    if let Some(dir) = abs.parent() {
        std::fs::create_dir_all(dir).map_err(ctx)?;
    }
    if want.kind == EntryKind::Tree {
        return std::fs::create_dir_all(abs).map_err(ctx);
    }
    let bytes = store.read_blob(want.oid)?;
    let name = abs
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = abs.with_file_name(format!(".{name}.dsh-rewind"));
    let _ = std::fs::remove_file(&tmp);
    if want.kind == EntryKind::Link {
        std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(&bytes), &tmp).map_err(ctx)?;
    } else {
        let mode = if want.kind == EntryKind::BlobExecutable {
            0o755
        } else {
            0o644
        };
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)
            .map_err(ctx)?;
        file.write_all(&bytes).map_err(ctx)?;
        // The umask may have cleared bits the checkpoint had.
        file.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(ctx)?;
        file.sync_all().map_err(ctx)?;
    }
    std::fs::rename(&tmp, abs).map_err(ctx)
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}
