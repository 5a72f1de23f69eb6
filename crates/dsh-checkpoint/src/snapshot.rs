//! Recording a workspace: walk it, hash what changed, write the trees.
//!
//! Regular files are stored with their executable bit, symlinks as their target (never
//! followed), directories with nothing recorded in them as empty trees. Left out, and named
//! in the snapshot's [`Skipped`] list: what git would ignore, files over the size cap, files
//! that cannot be read, and special files (sockets, FIFOs, devices).

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
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
#[derive(Clone, Debug)]
pub struct Limits {
    /// Files larger than this are not checkpointed.
    pub max_file_bytes: u64,
    /// A workspace with more files than this is not checkpointed at all (dsh started in a
    /// home directory must not copy it into the store).
    pub max_files: usize,
    /// Directories never recorded (dsh's own home, which changes under every turn).
    pub exclude: Vec<PathBuf>,
}

/// What reading one directory found.
#[derive(Default)]
struct Found {
    /// Leaves whose stat matched the cache.
    leaves: Vec<(RelPath, Leaf)>,
    /// Files to read and hash: path, absolute path, stat, kind, size.
    pending: Vec<(RelPath, PathBuf, Stat, EntryKind, u64)>,
    /// What was left out.
    skipped: Vec<Skipped>,
    /// Directories below, to read next, with the rules in force there.
    subdirs: Vec<(PathBuf, RelPath, Rules)>,
    /// Directories read (for the empty-directory check).
    dirs: Vec<RelPath>,
}

/// How many threads stat files: statting is most of a checkpoint, and the kernel serves it
/// in parallel.
fn walkers() -> usize {
    std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(2, 8)
}

/// Records `workspace` into `store`, reusing `cache` for files whose stat did not change.
/// `previous` is the last snapshot of the same workspace: when nothing changed its trees are
/// reused without being written again.
///
/// The walk goes level by level, each level's directories read by several threads; only
/// files whose stat changed are then read and hashed (on this thread: the store is not
/// shared between threads).
pub fn record(
    store: &ShadowStore,
    cache: &mut StatCache,
    workspace: &Path,
    limits: Limits,
    previous: Option<&Snapshot>,
) -> Result<Snapshot, CheckpointError> {
    let now = SystemTime::now();
    std::fs::read_dir(workspace)
        .map_err(|e| CheckpointError::io(format!("reading {}", workspace.display()), e))?;
    let mut level = vec![(
        workspace.to_path_buf(),
        RelPath::new(),
        Rules::root(workspace),
    )];
    let mut found = Found::default();
    let shared: &StatCache = cache;
    while !level.is_empty() {
        let next = std::sync::atomic::AtomicUsize::new(0);
        let threads = walkers().min(level.len());
        let results: Vec<Found> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    scope.spawn(|| {
                        let mut out = Found::default();
                        loop {
                            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let Some((abs, rel, rules)) = level.get(i) else {
                                break;
                            };
                            read_dir(abs, rel, rules, shared, &limits.exclude, &mut out);
                        }
                        out
                    })
                })
                .collect();
            handles.into_iter().filter_map(|h| h.join().ok()).collect()
        });
        level = Vec::new();
        for mut r in results {
            found.leaves.append(&mut r.leaves);
            found.pending.append(&mut r.pending);
            found.skipped.append(&mut r.skipped);
            found.dirs.append(&mut r.dirs);
            level.append(&mut r.subdirs);
        }
        let files = found.leaves.len() + found.pending.len();
        if files > limits.max_files {
            return Err(CheckpointError::TooLarge {
                files,
                limit: limits.max_files,
            });
        }
    }
    let hits = found.leaves.len();
    let mut flat: Flat = found.leaves.into_iter().collect();
    let mut skipped = found.skipped;
    for (rel, abs, stat, kind, len) in found.pending {
        if kind != EntryKind::Link && len > limits.max_file_bytes {
            skipped.push(Skipped {
                path: rel,
                reason: SkipReason::Large(len),
            });
            continue;
        }
        let bytes = if kind == EntryKind::Link {
            std::fs::read_link(&abs).map(|t| t.as_os_str().as_bytes().to_vec())
        } else {
            std::fs::read(&abs)
        };
        let Ok(bytes) = bytes else {
            skipped.push(Skipped {
                path: rel,
                reason: SkipReason::Unreadable,
            });
            continue;
        };
        let oid = store.write_blob(&bytes)?;
        cache.record(rel.clone(), stat, kind, oid, now);
        flat.insert(rel, Leaf { kind, oid });
    }
    // A directory with nothing recorded inside is kept as an empty directory.
    for dir in found.dirs {
        let has = flat
            .range(dir.clone()..)
            .next()
            .is_some_and(|(p, _)| crate::path::is_within(p, &dir));
        if !has {
            flat.insert(
                dir,
                Leaf {
                    kind: EntryKind::Tree,
                    oid: empty_tree(),
                },
            );
        }
    }
    // Every cached path was seen unless some were hashed anew or left: only then prune.
    if hits != cache.len() {
        cache.retain(|p| flat.contains_key(p));
    }
    skipped.sort_by(|a, b| a.path.cmp(&b.path));
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

/// Reads one directory: classifies its entries, stats its files against the cache.
fn read_dir(
    abs: &Path,
    rel: &[u8],
    rules: &Rules,
    cache: &StatCache,
    exclude: &[PathBuf],
    out: &mut Found,
) {
    let Ok(read) = std::fs::read_dir(abs) else {
        out.skipped.push(Skipped {
            path: rel.to_vec(),
            reason: SkipReason::Unreadable,
        });
        return;
    };
    if !rel.is_empty() {
        out.dirs.push(rel.to_vec());
    }
    let entries: Vec<std::fs::DirEntry> = read.filter_map(Result::ok).collect();
    let has_gitignore = entries.iter().any(|e| e.file_name() == ".gitignore");
    let rules = rules.enter(abs, has_gitignore);
    for entry in entries {
        let name = entry.file_name();
        if name == ".git" {
            continue;
        }
        let child_rel = join(rel, name.as_bytes());
        let Ok(file_type) = entry.file_type() else {
            out.skipped.push(Skipped {
                path: child_rel,
                reason: SkipReason::Unreadable,
            });
            continue;
        };
        let is_dir = file_type.is_dir();
        let child_abs = abs.join(&name);
        if rules.ignored(&child_abs, is_dir) || (is_dir && exclude.contains(&child_abs)) {
            let mut path = child_rel;
            if is_dir {
                path.push(b'/');
            }
            out.skipped.push(Skipped {
                path,
                reason: SkipReason::Ignored,
            });
            continue;
        }
        if is_dir {
            out.subdirs.push((child_abs, child_rel, rules.clone()));
            continue;
        }
        if file_type.is_fifo()
            || file_type.is_socket()
            || file_type.is_block_device()
            || file_type.is_char_device()
        {
            out.skipped.push(Skipped {
                path: child_rel,
                reason: SkipReason::Special,
            });
            continue;
        }
        let Ok(meta) = entry.metadata() else {
            out.skipped.push(Skipped {
                path: child_rel,
                reason: SkipReason::Unreadable,
            });
            continue;
        };
        let stat = Stat::of(&meta);
        let kind = if meta.file_type().is_symlink() {
            EntryKind::Link
        } else if meta.permissions().mode() & 0o100 != 0 {
            EntryKind::BlobExecutable
        } else {
            EntryKind::Blob
        };
        match cache.fresh(&child_rel, &stat).filter(|c| c.kind == kind) {
            Some(cached) => {
                let oid = cached.oid;
                out.leaves.push((child_rel, Leaf { kind, oid }));
            }
            None => out
                .pending
                .push((child_rel, child_abs, stat, kind, meta.len())),
        }
    }
}
