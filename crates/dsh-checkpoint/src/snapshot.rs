//! Recording a workspace: walk it, hash what changed, write the trees.
//!
//! Regular files are stored with their executable bit, symlinks as their target (never
//! followed), directories with nothing recorded in them as empty trees. Left out, and named
//! in the snapshot's [`Skipped`] list: what git would ignore, files over the size cap, files
//! that cannot be read, and special files (sockets, FIFOs, devices).

use std::fs::Metadata;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use gix::ObjectId;
use gix::objs::tree::EntryKind;

use crate::cache::{Stat, StatCache};
use crate::error::CheckpointError;
use crate::path::{RelPath, join};
use crate::rules::Rules;
use crate::store::{Flat, Leaf, ShadowStore, empty_tree};

/// Why a path is not in a checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SkipReason {
    /// Ignored by `.gitignore` (or the other git exclude files).
    Ignored,
    /// Larger than the size cap (its size in bytes).
    Large(u64),
    /// A socket, FIFO or device.
    Special,
    /// It could not be read.
    Unreadable,
}

/// A path a checkpoint left out. Directories end with `/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// The path (an ignored directory ends with `/`).
    pub path: RelPath,
    /// Why.
    pub reason: SkipReason,
}

impl Skipped {
    /// Whether this skip covers `rel` (the path itself, or a path inside a skipped directory).
    pub fn covers(&self, rel: &[u8]) -> bool {
        match self.path.strip_suffix(b"/") {
            Some(dir) => crate::path::is_within(rel, dir),
            None => self.path == rel,
        }
    }

    /// One line: `reason<TAB>hex path<TAB>readable path`.
    fn line(&self) -> String {
        let reason = match self.reason {
            SkipReason::Ignored => "ignored".to_owned(),
            SkipReason::Large(n) => format!("large:{n}"),
            SkipReason::Special => "special".to_owned(),
            SkipReason::Unreadable => "unreadable".to_owned(),
        };
        format!(
            "{reason}\t{}\t{}\n",
            crate::path::to_hex(&self.path),
            crate::path::display(&self.path).replace(['\n', '\t'], " ")
        )
    }

    fn parse(line: &str) -> Option<Self> {
        let mut parts = line.split('\t');
        let reason = match parts.next()? {
            "ignored" => SkipReason::Ignored,
            "special" => SkipReason::Special,
            "unreadable" => SkipReason::Unreadable,
            other => SkipReason::Large(other.strip_prefix("large:")?.parse().ok()?),
        };
        let path = crate::path::from_hex(parts.next()?)?;
        Some(Self { path, reason })
    }

    /// What a person reads: `path (reason)`.
    pub fn describe(&self) -> String {
        let why = match self.reason {
            SkipReason::Ignored => "ignored".to_owned(),
            SkipReason::Large(n) => format!("{n} bytes, over the size cap"),
            SkipReason::Special => "not a regular file".to_owned(),
            SkipReason::Unreadable => "unreadable".to_owned(),
        };
        format!("{} ({why})", crate::path::display(&self.path))
    }
}

/// Encodes a skip list as the content of a blob.
pub fn encode_skipped(skipped: &[Skipped]) -> Vec<u8> {
    skipped
        .iter()
        .map(Skipped::line)
        .collect::<String>()
        .into_bytes()
}

/// Decodes a skip list blob (lines it cannot read are left out).
pub fn decode_skipped(bytes: &[u8]) -> Vec<Skipped> {
    String::from_utf8_lossy(bytes)
        .lines()
        .filter_map(Skipped::parse)
        .collect()
}

/// A recorded workspace state.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// The root tree.
    pub tree: ObjectId,
    /// Every leaf by path.
    pub flat: Arc<Flat>,
    /// What was left out.
    pub skipped: Arc<Vec<Skipped>>,
}

/// Limits of a snapshot.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Files larger than this are not checkpointed.
    pub max_file_bytes: u64,
}

/// The walk's state: where objects go, what is cached, what was found.
struct Walk<'a> {
    store: &'a ShadowStore,
    cache: &'a mut StatCache,
    limits: Limits,
    now: SystemTime,
    flat: Flat,
    skipped: Vec<Skipped>,
}

/// Records `workspace` into `store`, reusing `cache` for files whose stat did not change.
/// `previous` is the last snapshot of the same workspace: when nothing changed its trees are
/// reused without being written again.
pub fn record(
    store: &ShadowStore,
    cache: &mut StatCache,
    workspace: &Path,
    limits: Limits,
    previous: Option<&Snapshot>,
) -> Result<Snapshot, CheckpointError> {
    let mut walk = Walk {
        store,
        cache,
        limits,
        now: SystemTime::now(),
        flat: Flat::new(),
        skipped: Vec::new(),
    };
    let rules = Rules::root(workspace);
    walk.dir(workspace, &[], &rules)?;
    let Walk {
        flat,
        skipped,
        cache,
        ..
    } = walk;
    cache.retain(|p| flat.contains_key(p));
    if let Some(prev) = previous.filter(|p| *p.flat == flat) {
        return Ok(Snapshot {
            tree: prev.tree,
            flat: prev.flat.clone(),
            skipped: Arc::new(skipped),
        });
    }
    let tree = store.build(&flat)?;
    Ok(Snapshot {
        tree,
        flat: Arc::new(flat),
        skipped: Arc::new(skipped),
    })
}

impl Walk<'_> {
    fn dir(&mut self, abs: &Path, rel: &[u8], rules: &Rules) -> Result<(), CheckpointError> {
        let read = match std::fs::read_dir(abs) {
            Ok(read) => read,
            Err(e) if rel.is_empty() => {
                return Err(CheckpointError::io(format!("reading {}", abs.display()), e));
            }
            Err(_) => {
                self.skip(rel.to_vec(), SkipReason::Unreadable);
                return Ok(());
            }
        };
        let mut entries: Vec<(Vec<u8>, std::fs::DirEntry)> = read
            .filter_map(Result::ok)
            .map(|e| (e.file_name().as_bytes().to_vec(), e))
            .collect();
        let has_gitignore = entries.iter().any(|(n, _)| n == b".gitignore");
        let rules = rules.enter(abs, has_gitignore);
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let before = self.flat.len();
        for (name, entry) in entries {
            if name == b".git" {
                continue;
            }
            let child_rel = join(rel, &name);
            let child_abs = abs.join(entry.file_name());
            let Ok(file_type) = entry.file_type() else {
                self.skip(child_rel, SkipReason::Unreadable);
                continue;
            };
            let is_dir = file_type.is_dir();
            if rules.ignored(&child_abs, is_dir) {
                let mut path = child_rel;
                if is_dir {
                    path.push(b'/');
                }
                self.skip(path, SkipReason::Ignored);
                continue;
            }
            if is_dir {
                self.dir(&child_abs, &child_rel, &rules)?;
                continue;
            }
            if file_type.is_fifo()
                || file_type.is_socket()
                || file_type.is_block_device()
                || file_type.is_char_device()
            {
                self.skip(child_rel, SkipReason::Special);
                continue;
            }
            match entry.metadata() {
                Ok(meta) => self.leaf(&child_abs, child_rel, &meta)?,
                Err(_) => self.skip(child_rel, SkipReason::Unreadable),
            }
        }
        // A directory with nothing recorded inside is kept as an empty directory.
        if self.flat.len() == before && !rel.is_empty() {
            self.flat.insert(
                rel.to_vec(),
                Leaf {
                    kind: EntryKind::Tree,
                    oid: empty_tree(),
                },
            );
        }
        Ok(())
    }

    fn leaf(&mut self, abs: &Path, rel: RelPath, meta: &Metadata) -> Result<(), CheckpointError> {
        let stat = Stat::of(meta);
        let kind = if meta.file_type().is_symlink() {
            EntryKind::Link
        } else if meta.permissions().mode() & 0o100 != 0 {
            EntryKind::BlobExecutable
        } else {
            EntryKind::Blob
        };
        if let Some(cached) = self.cache.fresh(&rel, &stat).filter(|c| c.kind == kind) {
            let oid = cached.oid;
            self.flat.insert(rel, Leaf { kind, oid });
            return Ok(());
        }
        if kind != EntryKind::Link && meta.len() > self.limits.max_file_bytes {
            self.skip(rel, SkipReason::Large(meta.len()));
            return Ok(());
        }
        let bytes = if kind == EntryKind::Link {
            std::fs::read_link(abs).map(|t| t.as_os_str().as_bytes().to_vec())
        } else {
            std::fs::read(abs)
        };
        let Ok(bytes) = bytes else {
            self.skip(rel, SkipReason::Unreadable);
            return Ok(());
        };
        let oid = self.store.write_blob(&bytes)?;
        self.cache.record(rel.clone(), stat, kind, oid, self.now);
        self.flat.insert(rel, Leaf { kind, oid });
        Ok(())
    }

    fn skip(&mut self, path: RelPath, reason: SkipReason) {
        self.skipped.push(Skipped { path, reason });
    }
}
