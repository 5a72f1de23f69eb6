//! Cleaning up: the checkpoints no stored session refers to.
//!
//! Checkpoint objects are shared between the sessions of one workspace (a file unchanged for
//! a week is one blob), so they cannot be deleted with a session. `prune` keeps every object
//! reachable from a checkpoint some stored session still names and deletes the rest, and
//! deletes a workspace's whole store when no session names any of it. Objects written in the
//! last hour are kept (a session may be about to name them), and a store another process is
//! using at that moment is skipped. The stat caches are dropped, since they may name deleted
//! blobs: each workspace's next checkpoint reads its files once.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use dsh_session::SessionEvent;
use gix::ObjectId;
use gix::objs::tree::EntryKind;

use crate::cache::CACHE_FILE;
use crate::error::CheckpointError;
use crate::service::GENERATION_FILE;
use crate::store::{ShadowStore, lock_dir};
use crate::timeline::{MarkKind, marks};

/// How old an unreferenced object must be before prune deletes it.
pub const GRACE: Duration = Duration::from_secs(3600);

/// What a prune did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PruneReport {
    /// Stores deleted whole (no session refers to them).
    pub removed_stores: Vec<PathBuf>,
    /// Objects deleted from stores that are kept.
    pub removed_objects: usize,
    /// Bytes freed.
    pub freed_bytes: u64,
    /// Stores in use by another process at the time, left as they are.
    pub busy: Vec<PathBuf>,
}

/// The objects a session's log refers to: every checkpoint's tree and skip list, every
/// restore's before and after.
pub fn referenced(events: &[Arc<SessionEvent>]) -> Vec<ObjectId> {
    let mut out = Vec::new();
    for m in marks(events) {
        out.push(m.tree);
        out.extend(m.skipped);
        if let MarkKind::Restore { before, .. } = m.kind {
            out.push(before);
        }
    }
    out
}

/// Prunes every store under `root`. `referenced` maps each store directory
/// ([`crate::store::store_dir`]) to the objects the stored sessions of its workspace refer to.
pub fn prune(
    root: &Path,
    referenced: &HashMap<PathBuf, Vec<ObjectId>>,
    grace: Duration,
) -> Result<PruneReport, CheckpointError> {
    let mut report = PruneReport::default();
    let Ok(entries) = std::fs::read_dir(root) else {
        return Ok(report);
    };
    let cutoff = SystemTime::now()
        .checked_sub(grace)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    for entry in entries.filter_map(Result::ok) {
        let dir = entry.path();
        if !dir.join("HEAD").exists() {
            continue;
        }
        let Some(_lock) = lock_dir(&dir, true)? else {
            report.busy.push(dir);
            continue;
        };
        let roots = referenced.get(&dir).cloned().unwrap_or_default();
        if roots.is_empty()
            && !dir.join(crate::restore::JOURNAL_FILE).exists()
            && newest(&dir) < cutoff
        {
            report.freed_bytes += size_of(&dir);
            std::fs::remove_dir_all(&dir)
                .map_err(|e| CheckpointError::io(format!("removing {}", dir.display()), e))?;
            report.removed_stores.push(dir);
            continue;
        }
        let store = ShadowStore::open_dir(&dir)?;
        let keep = reachable(&store, &roots)?;
        let (removed, bytes) = remove_loose(&dir, &keep, cutoff)?;
        if removed > 0 {
            // Processes drop their caches (they may name deleted blobs) and read files afresh.
            let _ = std::fs::remove_file(dir.join(CACHE_FILE));
            let stamp = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            std::fs::write(dir.join(GENERATION_FILE), stamp.to_string())
                .map_err(|e| CheckpointError::io(format!("writing {}", dir.display()), e))?;
        }
        report.removed_objects += removed;
        report.freed_bytes += bytes;
    }
    Ok(report)
}

/// Every object reachable from `roots` (missing ones are skipped).
fn reachable(
    store: &ShadowStore,
    roots: &[ObjectId],
) -> Result<HashSet<ObjectId>, CheckpointError> {
    let mut keep = HashSet::new();
    let mut stack: Vec<(ObjectId, bool)> = roots.iter().map(|r| (*r, true)).collect();
    while let Some((oid, maybe_tree)) = stack.pop() {
        if !keep.insert(oid) || !maybe_tree {
            continue;
        }
        // A root may be a skip-list blob; only trees have entries.
        let Ok(entries) = store.read_tree(oid) else {
            continue;
        };
        for (_, leaf) in entries {
            stack.push((leaf.oid, leaf.kind == EntryKind::Tree));
        }
    }
    Ok(keep)
}

/// Deletes loose objects not in `keep` and older than `cutoff`.
fn remove_loose(
    dir: &Path,
    keep: &HashSet<ObjectId>,
    cutoff: SystemTime,
) -> Result<(usize, u64), CheckpointError> {
    let objects = dir.join("objects");
    let (mut removed, mut bytes) = (0, 0);
    let Ok(fans) = std::fs::read_dir(&objects) else {
        return Ok((0, 0));
    };
    for fan in fans.filter_map(Result::ok) {
        let prefix = fan.file_name().to_string_lossy().into_owned();
        if prefix.len() != 2 {
            continue;
        }
        let Ok(files) = std::fs::read_dir(fan.path()) else {
            continue;
        };
        for file in files.filter_map(Result::ok) {
            let hex = format!("{prefix}{}", file.file_name().to_string_lossy());
            let Ok(oid) = ObjectId::from_hex(hex.as_bytes()) else {
                continue;
            };
            if keep.contains(&oid) {
                continue;
            }
            let Ok(meta) = file.metadata() else { continue };
            if meta.modified().map_or(true, |m| m >= cutoff) {
                continue;
            }
            if std::fs::remove_file(file.path()).is_ok() {
                removed += 1;
                bytes += meta.len();
            }
        }
    }
    Ok((removed, bytes))
}

fn walk_files(dir: &Path, f: &mut dyn FnMut(&std::fs::Metadata)) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.filter_map(Result::ok) {
        let Ok(meta) = e.metadata() else { continue };
        if meta.is_dir() {
            walk_files(&e.path(), f);
        } else {
            f(&meta);
        }
    }
}

fn newest(dir: &Path) -> SystemTime {
    let mut newest = SystemTime::UNIX_EPOCH;
    walk_files(dir, &mut |m| {
        if let Ok(t) = m.modified() {
            newest = newest.max(t);
        }
    });
    newest
}

fn size_of(dir: &Path) -> u64 {
    let mut total = 0;
    walk_files(dir, &mut |m| total += m.len());
    total
}
