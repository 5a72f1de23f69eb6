//! The shadow object store: one bare git repository per workspace under
//! `$DSH_HOME/checkpoints/`, written through `gix`.
//!
//! Only objects are stored (blobs for file contents and symlink targets, trees for
//! directories); no refs, no index, no worktree. The user's own repository, index and refs are
//! never opened for writing, and a workspace need not be a git repository at all. Beside the
//! objects the directory holds dsh's own files: the stat cache (`dsh-index`), the rewind
//! journal, the workspace's path, and a lock file that serializes processes.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

pub use gix::ObjectId;
use gix::objs::tree::{Entry, EntryKind};

use crate::error::CheckpointError;
use crate::path::{RelPath, join};

/// One leaf of a flattened tree: a file, an executable, a symlink, or an empty directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Leaf {
    /// What it is.
    pub kind: EntryKind,
    /// Its blob (or the empty tree).
    pub oid: ObjectId,
}

/// A tree flattened to its leaves by path.
pub type Flat = BTreeMap<RelPath, Leaf>;

/// The hash kind of every store (SHA-1, as git's default).
pub const HASH: gix::hash::Kind = gix::hash::Kind::Sha1;

/// The id of the empty tree, which stands for an empty directory.
pub fn empty_tree() -> ObjectId {
    ObjectId::empty_tree(HASH)
}

/// The directory holding `workspace`'s store under `root`: the workspace's last component
/// (for people looking) and a hash of its whole path (for uniqueness).
pub fn store_dir(root: &Path, workspace: &Path) -> PathBuf {
    let bytes = workspace.as_os_str().as_bytes();
    let hash = gix::objs::compute_hash(HASH, gix::objs::Kind::Blob, bytes)
        .map(|id| id.to_hex_with_len(16).to_string())
        .unwrap_or_else(|_| "0".repeat(16));
    let name: String = workspace
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    root.join(format!("{name}-{hash}"))
}

/// The name of the file recording which workspace a store belongs to.
pub const WORKSPACE_FILE: &str = "dsh-workspace";
/// The name of the lock file.
pub const LOCK_FILE: &str = "dsh-lock";

/// An open shadow store.
pub struct ShadowStore {
    dir: PathBuf,
    repo: gix::Repository,
}

impl std::fmt::Debug for ShadowStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShadowStore")
            .field("dir", &self.dir)
            .finish()
    }
}

/// Holds the store's inter-process lock until dropped.
pub struct StoreLock(#[allow(dead_code)] nix::fcntl::Flock<File>);

impl ShadowStore {
    /// Opens (creating on first use) the store of `workspace` under `root`.
    pub fn open(root: &Path, workspace: &Path) -> Result<Self, CheckpointError> {
        let dir = store_dir(root, workspace);
        if !dir.join("HEAD").exists() {
            std::fs::create_dir_all(&dir)
                .map_err(|e| CheckpointError::io(format!("creating {}", dir.display()), e))?;
            gix::init_bare(&dir).map_err(|e| CheckpointError::store(&dir, e))?;
            std::fs::write(dir.join(WORKSPACE_FILE), workspace.as_os_str().as_bytes())
                .map_err(|e| CheckpointError::io(format!("writing {}", dir.display()), e))?;
        }
        let repo = gix::open_opts(&dir, gix::open::Options::isolated())
            .map_err(|e| CheckpointError::store(&dir, e))?;
        Ok(Self { dir, repo })
    }

    /// Opens an existing store by its directory.
    pub fn open_dir(dir: &Path) -> Result<Self, CheckpointError> {
        let repo = gix::open_opts(dir, gix::open::Options::isolated())
            .map_err(|e| CheckpointError::store(dir, e))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            repo,
        })
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Takes the inter-process lock (waiting for it): one process at a time writes the cache,
    /// the journal, or restores files of this workspace.
    pub fn lock(&self) -> Result<StoreLock, CheckpointError> {
        lock_dir(&self.dir, false)?
            .ok_or_else(|| CheckpointError::store(&self.dir, "lock unavailable"))
    }

    /// Stores `bytes` as a blob.
    pub fn write_blob(&self, bytes: &[u8]) -> Result<ObjectId, CheckpointError> {
        self.repo
            .write_blob(bytes)
            .map(|id| id.detach())
            .map_err(|e| CheckpointError::store(&self.dir, e))
    }

    /// Stores a tree of `entries` (sorted here in git's order).
    pub fn write_tree(&self, mut entries: Vec<Entry>) -> Result<ObjectId, CheckpointError> {
        entries.sort();
        self.repo
            .write_object(gix::objs::Tree { entries })
            .map(|id| id.detach())
            .map_err(|e| CheckpointError::store(&self.dir, e))
    }

    /// The content of a blob.
    pub fn read_blob(&self, oid: ObjectId) -> Result<Vec<u8>, CheckpointError> {
        let mut object = self
            .repo
            .find_object(oid)
            .map_err(|e| CheckpointError::store(&self.dir, format!("blob {oid}: {e}")))?;
        Ok(std::mem::take(&mut object.data))
    }

    /// The entries of a tree: name, kind, id.
    pub fn read_tree(&self, oid: ObjectId) -> Result<Vec<(Vec<u8>, Leaf)>, CheckpointError> {
        if oid == empty_tree() {
            return Ok(Vec::new());
        }
        let object = self
            .repo
            .find_object(oid)
            .map_err(|e| CheckpointError::store(&self.dir, format!("tree {oid}: {e}")))?;
        let tree = object
            .try_into_tree()
            .map_err(|e| CheckpointError::store(&self.dir, format!("tree {oid}: {e}")))?;
        let decoded = tree
            .decode()
            .map_err(|e| CheckpointError::store(&self.dir, format!("tree {oid}: {e}")))?;
        Ok(decoded
            .entries
            .iter()
            .map(|e| {
                (
                    e.filename.to_vec(),
                    Leaf {
                        kind: e.mode.kind(),
                        oid: e.oid.to_owned(),
                    },
                )
            })
            .collect())
    }

    /// Every leaf of tree `oid`, by path.
    pub fn flatten(&self, oid: ObjectId) -> Result<Flat, CheckpointError> {
        let mut out = Flat::new();
        self.flatten_into(oid, &[], &mut out)?;
        Ok(out)
    }

    fn flatten_into(
        &self,
        oid: ObjectId,
        prefix: &[u8],
        out: &mut Flat,
    ) -> Result<(), CheckpointError> {
        for (name, leaf) in self.read_tree(oid)? {
            let path = join(prefix, &name);
            if leaf.kind == EntryKind::Tree && leaf.oid != empty_tree() {
                self.flatten_into(leaf.oid, &path, out)?;
            } else {
                out.insert(path, leaf);
            }
        }
        Ok(())
    }

    /// The leaf paths that differ between trees `a` and `b` (added, removed, changed content
    /// or kind). Identical subtrees are skipped without being read.
    pub fn changed(&self, a: ObjectId, b: ObjectId) -> Result<BTreeSet<RelPath>, CheckpointError> {
        let mut out = BTreeSet::new();
        self.changed_into(Some(a), Some(b), &[], &mut out)?;
        Ok(out)
    }

    fn changed_into(
        &self,
        a: Option<ObjectId>,
        b: Option<ObjectId>,
        prefix: &[u8],
        out: &mut BTreeSet<RelPath>,
    ) -> Result<(), CheckpointError> {
        if a == b {
            return Ok(());
        }
        let side = |t: Option<ObjectId>| -> Result<BTreeMap<Vec<u8>, Leaf>, CheckpointError> {
            Ok(match t {
                Some(t) => self.read_tree(t)?.into_iter().collect(),
                None => BTreeMap::new(),
            })
        };
        let (ea, eb) = (side(a)?, side(b)?);
        let names: BTreeSet<&Vec<u8>> = ea.keys().chain(eb.keys()).collect();
        for name in names {
            let (la, lb) = (ea.get(name), eb.get(name));
            if la == lb {
                continue;
            }
            let path = join(prefix, name);
            let is_dir = |l: Option<&Leaf>| {
                l.is_some_and(|l| l.kind == EntryKind::Tree && l.oid != empty_tree())
            };
            let (da, db) = (is_dir(la), is_dir(lb));
            if da || db {
                self.changed_into(
                    la.filter(|_| da).map(|l| l.oid),
                    lb.filter(|_| db).map(|l| l.oid),
                    &path,
                    out,
                )?;
            }
            // The non-directory side (a file, a link, an empty directory) is a leaf itself.
            if (la.is_some() && !da) || (lb.is_some() && !db) {
                out.insert(path);
            }
        }
        Ok(())
    }

    /// Writes the trees of `flat` and returns the root's id.
    pub fn build(&self, flat: &Flat) -> Result<ObjectId, CheckpointError> {
        let items: Vec<(&[u8], &Leaf)> = flat.iter().map(|(p, l)| (p.as_slice(), l)).collect();
        self.build_level(&items)
    }

    /// One directory level: `items` are sorted and relative to it. Every path under a
    /// subdirectory `d/` is contiguous in byte order, so each subtree is one run.
    fn build_level(&self, items: &[(&[u8], &Leaf)]) -> Result<ObjectId, CheckpointError> {
        let mut entries: Vec<Entry> = Vec::new();
        let mut i = 0;
        while i < items.len() {
            let (path, leaf) = items[i];
            let Some(k) = path.iter().position(|b| *b == b'/') else {
                entries.push(entry(path, leaf.kind, leaf.oid));
                i += 1;
                continue;
            };
            let dir = &path[..k];
            let mut sub = Vec::new();
            let mut j = i;
            while j < items.len() && crate::path::is_within(items[j].0, dir) && items[j].0 != dir {
                sub.push((&items[j].0[k + 1..], items[j].1));
                j += 1;
            }
            let id = self.build_level(&sub)?;
            // A directory with contents replaces an empty-directory leaf of the same name.
            entries.retain(|e| e.filename.as_slice() != dir);
            entries.push(entry(dir, EntryKind::Tree, id));
            i = j;
        }
        self.write_tree(entries)
    }
}

/// A tree entry.
pub fn entry(name: &[u8], kind: EntryKind, oid: ObjectId) -> Entry {
    Entry {
        mode: kind.into(),
        filename: name.into(),
        oid,
    }
}

/// Locks `dir`'s lock file, waiting, or (`try_only`) returning `None` when another process
/// holds it.
pub fn lock_dir(dir: &Path, try_only: bool) -> Result<Option<StoreLock>, CheckpointError> {
    use nix::fcntl::{Flock, FlockArg};
    let path = dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| CheckpointError::io(format!("opening {}", path.display()), e))?;
    let arg = if try_only {
        FlockArg::LockExclusiveNonblock
    } else {
        FlockArg::LockExclusive
    };
    match Flock::lock(file, arg) {
        Ok(lock) => Ok(Some(StoreLock(lock))),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) if try_only => Ok(None),
        Err((_, errno)) => Err(CheckpointError::io(
            format!("locking {}", path.display()),
            std::io::Error::from(errno),
        )),
    }
}
