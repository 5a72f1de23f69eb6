//! Recording a workspace: walk it, hash what changed, write the trees.
//!
//! Regular files are stored with their executable bit, symlinks as their target (never
//! followed), directories with nothing recorded in them as empty trees. Left out, and named
//! in the snapshot's [`Skipped`] list: what git would ignore, files over the size cap, files
//! that cannot be read, and special files (sockets, FIFOs, devices).

use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use gix::ObjectId;
use gix::objs::tree::EntryKind;

use crate::cache::StatCache;
use crate::error::CheckpointError;
use crate::listing::{Context, Listings, Seen, Subdir, Visit, What, visit};
use crate::path::RelPath;
use crate::rules::Rules;
use crate::store::{Flat, Leaf, ShadowStore, empty_tree, entry};

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
    /// What the walk that recorded it learnt (empty for a snapshot read back from the
    /// store): the next walk of the same workspace starts from it.
    pub(crate) walk: Arc<Walk>,
}

impl Snapshot {
    /// A snapshot read back from the store (no walk behind it).
    pub fn stored(tree: ObjectId, flat: Flat, skipped: Vec<Skipped>) -> Self {
        Self {
            tree,
            flat: Arc::new(flat),
            skipped: Arc::new(skipped),
            walk: Arc::default(),
        }
    }
}

/// What one walk learnt about a workspace, for the next.
#[derive(Debug, Default)]
pub(crate) struct Walk {
    /// Every directory's listing.
    listings: Listings,
    /// Every directory's tree.
    pub(crate) trees: HashMap<RelPath, ObjectId>,
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

/// What one walker thread found.
#[derive(Default)]
struct Found {
    visits: Vec<Visit>,
    /// Directories that could not be read.
    unreadable: Vec<RelPath>,
    /// Directories below, to read next, with the rules in force there.
    subdirs: Vec<Subdir>,
}

/// How many threads stat files: statting is most of a checkpoint, and the kernel serves it
/// in parallel. Asked once per process: the answer reads the cgroup's CPU quota files, and
/// every mutating step checkpoints.
fn walkers() -> usize {
    static WALKERS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *WALKERS.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(2, |n| n.get())
            .clamp(2, 8)
    })
}

/// Records `workspace` into `store`, reusing `cache` for files whose stat did not change.
/// `previous` is the last snapshot of the same workspace: directories whose stat did not
/// change since its walk are not read again ([`crate::listing`]), and when nothing changed at
/// all it is returned as it is, without a tree being built or compared.
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
    record_at(store, cache, workspace, limits, previous, SystemTime::now())
}

/// [`record`] as if at `now` (tests move the clock past the racy window instead of waiting).
pub(crate) fn record_at(
    store: &ShadowStore,
    cache: &mut StatCache,
    workspace: &Path,
    limits: Limits,
    previous: Option<&Snapshot>,
    now: SystemTime,
) -> Result<Snapshot, CheckpointError> {
    std::fs::read_dir(workspace)
        .map_err(|e| CheckpointError::io(format!("reading {}", workspace.display()), e))?;
    let cx = Context {
        cache,
        previous: previous.map(|p| &p.walk.listings),
        exclude: &limits.exclude,
        max_file_bytes: limits.max_file_bytes,
        now,
    };
    let mut level = vec![(
        workspace.to_path_buf(),
        RelPath::new(),
        Rules::root(workspace, &limits.exclude, now),
    )];
    let mut found = Found::default();
    let mut files = 0;
    while !level.is_empty() {
        let next = std::sync::atomic::AtomicUsize::new(0);
        let walk = || {
            let mut out = Found::default();
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((abs, rel, rules)) = level.get(i) else {
                    break;
                };
                match visit(abs, rel, rules, &cx) {
                    Some((v, mut subdirs)) => {
                        out.visits.push(v);
                        out.subdirs.append(&mut subdirs);
                    }
                    None => out.unreadable.push(rel.clone()),
                }
            }
            out
        };
        let threads = walkers().min(level.len());
        // One directory is read here: a thread would cost more than it could save.
        let results: Vec<Found> = if threads <= 1 {
            vec![walk()]
        } else {
            std::thread::scope(|scope| {
                let handles: Vec<_> = (0..threads).map(|_| scope.spawn(walk)).collect();
                handles.into_iter().filter_map(|h| h.join().ok()).collect()
            })
        };
        level = Vec::new();
        for mut r in results {
            files += r
                .visits
                .iter()
                .flat_map(|v| &v.listing.children)
                .filter(|c| matches!(c.what, What::File(_)))
                .count();
            found.visits.append(&mut r.visits);
            found.unreadable.append(&mut r.unreadable);
            level.append(&mut r.subdirs);
        }
        if files > limits.max_files {
            return Err(CheckpointError::TooLarge {
                files,
                limit: limits.max_files,
            });
        }
    }
    // Every directory as the last walk left it, and the same directories: nothing changed.
    if let Some(prev) = previous
        && found.unreadable.is_empty()
        && found.visits.len() == prev.walk.listings.len()
        && found.visits.iter().all(|v| v.unchanged)
    {
        return Ok(prev.clone());
    }
    let mut listings = Listings::with_capacity(found.visits.len());
    let mut pending = Vec::new();
    for visit in found.visits {
        if !visit.pending.is_empty() {
            pending.push((visit.rel.clone(), visit.pending));
        }
        listings.insert(visit.rel, visit.listing);
    }
    let mut skipped: Vec<Skipped> = found
        .unreadable
        .into_iter()
        .map(|path| Skipped {
            path,
            reason: SkipReason::Unreadable,
        })
        .collect();
    for (dir, files) in pending {
        // The listing was made in this walk (only a changed one has pending files), so this
        // is its only reference and `make_mut` does not copy it.
        let Some(listing) = listings.get_mut(&dir) else {
            continue;
        };
        let listing = Arc::make_mut(listing);
        for p in files {
            let child = &mut listing.children[p.index];
            let abs = crate::path::absolute(workspace, &child.rel);
            let bytes = if p.kind == EntryKind::Link {
                std::fs::read_link(&abs).map(|t| t.as_os_str().as_bytes().to_vec())
            } else {
                std::fs::read(&abs)
            };
            // An unreadable file stays unknown: it is tried again next time.
            let Ok(bytes) = bytes else { continue };
            let oid = store.write_blob(&bytes)?;
            let cached = cache.record(child.rel.clone(), p.stat, p.kind, oid, now);
            child.what = What::File(Seen::Leaf(cached));
        }
    }
    let mut trees = Trees {
        store,
        listings: &listings,
        previous: previous.map(|p| &*p.walk),
        flat: Flat::new(),
        skipped: Vec::new(),
        trees: HashMap::with_capacity(listings.len()),
    };
    let tree = trees.tree(&[])?;
    let Trees {
        flat,
        skipped: mut left,
        trees,
        ..
    } = trees;
    skipped.append(&mut left);
    // Every cached path is recorded unless some file went away: only then prune.
    let recorded = flat.values().filter(|l| l.kind != EntryKind::Tree).count();
    if recorded != cache.len() {
        cache.retain(|p| flat.contains_key(p));
    }
    skipped.sort_by(|a, b| a.path.cmp(&b.path));
    if let Some(prev) = previous.filter(|p| p.tree == tree) {
        return Ok(Snapshot {
            tree,
            flat: prev.flat.clone(),
            skipped: Arc::new(skipped),
            walk: Arc::new(Walk { listings, trees }),
        });
    }
    Ok(Snapshot {
        tree,
        flat: Arc::new(flat),
        skipped: Arc::new(skipped),
        walk: Arc::new(Walk { listings, trees }),
    })
}

/// Writes a walk's trees, bottom up, and collects its leaves and what it left out.
struct Trees<'a> {
    store: &'a ShadowStore,
    listings: &'a Listings,
    previous: Option<&'a Walk>,
    flat: Flat,
    skipped: Vec<Skipped>,
    trees: HashMap<RelPath, ObjectId>,
}

impl Trees<'_> {
    /// The tree of directory `rel`. When its listing is the previous walk's, as it was, and
    /// every subdirectory's tree is the same as then, so is its tree: it is not written again.
    fn tree(&mut self, rel: &[u8]) -> Result<ObjectId, CheckpointError> {
        let listings = self.listings;
        let Some(listing) = listings.get(rel) else {
            return Ok(empty_tree());
        };
        let before = self.previous.and_then(|p| {
            let same = Arc::ptr_eq(p.listings.get(rel)?, listing);
            same.then(|| p.trees.get(rel).copied()).flatten()
        });
        let mut same = before.is_some();
        let mut entries = Vec::with_capacity(listing.children.len());
        for child in &listing.children {
            let reason = match child.what {
                What::Dir => {
                    // An unreadable directory has no listing and is left out (it was named
                    // as skipped by the walk), which changes this tree.
                    if !listings.contains_key(&child.rel) {
                        same = false;
                        continue;
                    }
                    let oid = self.tree(&child.rel)?;
                    same &= self
                        .previous
                        .is_some_and(|p| p.trees.get(&child.rel) == Some(&oid));
                    entries.push(entry(&child.name, EntryKind::Tree, oid));
                    if oid == empty_tree() {
                        // A directory with nothing recorded inside is kept as an empty one.
                        self.flat.insert(
                            child.rel.clone(),
                            Leaf {
                                kind: EntryKind::Tree,
                                oid,
                            },
                        );
                    }
                    continue;
                }
                What::File(Seen::Leaf(c)) => {
                    entries.push(entry(&child.name, c.kind, c.oid));
                    self.flat.insert(
                        child.rel.clone(),
                        Leaf {
                            kind: c.kind,
                            oid: c.oid,
                        },
                    );
                    continue;
                }
                What::File(Seen::Large(_, len)) => SkipReason::Large(len),
                What::File(Seen::Unknown) | What::Unreadable => SkipReason::Unreadable,
                What::Special => SkipReason::Special,
                What::Ignored(_) => SkipReason::Ignored,
            };
            let mut path = child.rel.clone();
            if matches!(child.what, What::Ignored(true)) {
                path.push(b'/');
            }
            self.skipped.push(Skipped { path, reason });
        }
        let oid = match before {
            Some(oid) if same => oid,
            // An empty directory is the empty tree, which needs no object below the root.
            _ if entries.is_empty() && !rel.is_empty() => empty_tree(),
            _ => self.store.write_tree(entries)?,
        };
        self.trees.insert(rel.to_vec(), oid);
        Ok(oid)
    }
}
