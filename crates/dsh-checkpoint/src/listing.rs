//! Reading one directory of the workspace for a checkpoint, reusing what the last checkpoint
//! learnt about it.
//!
//! A directory's entries change only together with its own stat (creating, removing or
//! renaming an entry updates the directory's modification and change times), so each
//! directory's listing is remembered with its stat and the fingerprint of the ignore rules in
//! force (git's untracked cache does the same). When both match and the listing was settled
//! when taken, the directory is not read again and its entries are not matched against the
//! ignore rules again. Its files are still statted, every one, since writing a file's content
//! does not touch its directory: relative to the directory's descriptor (one path component
//! to resolve), and compared with the stat each file had, remembered beside its name.

use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use gix::objs::tree::EntryKind;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{Mode, SFlag};

use crate::cache::{Cached, Stat, StatCache};
use crate::path::{RelPath, join};
use crate::rules::{IgnoreFile, Rules};

/// Every directory's listing from one walk, by path (the root is the empty path).
pub type Listings = std::collections::HashMap<RelPath, Arc<Listing>>;

/// What a directory held when last read.
#[derive(Clone, Debug)]
pub struct Listing {
    /// The directory's stat before it was read.
    stat: Stat,
    /// Whether the directory and every rule file had settled when read (see
    /// [`crate::cache::RACY_WINDOW`]); only a trusted listing is reused.
    trusted: bool,
    /// The fingerprint of the rules it was classified under.
    rules: u64,
    /// Its own `.gitignore`, when it has one.
    gitignore: Option<IgnoreFile>,
    /// Its entries, `.git` left out, in the order read.
    pub children: Vec<Child>,
}

/// One entry of a directory.
#[derive(Clone, Debug)]
pub struct Child {
    /// Its name in the directory.
    pub name: Vec<u8>,
    /// Its workspace-relative path.
    pub rel: RelPath,
    /// What it is.
    pub what: What,
}

/// What an entry is, for a checkpoint.
#[derive(Clone, Copy, Debug)]
pub enum What {
    /// A directory to walk.
    Dir,
    /// Ignored (a directory when `true`).
    Ignored(bool),
    /// A socket, FIFO or device.
    Special,
    /// Its type or stat could not be read.
    Unreadable,
    /// A regular file or symlink, with what it was last seen as.
    File(Seen),
}

/// What a file was last seen as.
#[derive(Clone, Copy, Debug)]
pub enum Seen {
    /// Not yet hashed (or it could not be read).
    Unknown,
    /// Recorded: its stat and blob.
    Leaf(Cached),
    /// Over the size cap at this stat.
    Large(Stat, u64),
}

/// A directory to read next: its absolute path, its path in the workspace, the rules there.
pub type Subdir = (PathBuf, RelPath, Rules);

/// A file of a directory to read and hash.
pub struct Pending {
    /// The entry's index in its directory's listing.
    pub index: usize,
    /// Its stat before it is read.
    pub stat: Stat,
    /// What it is.
    pub kind: EntryKind,
}

/// The result of reading one directory.
pub struct Visit {
    /// The directory's path.
    pub rel: RelPath,
    /// Its listing, with every file's state as of now except `pending`.
    pub listing: Arc<Listing>,
    /// Whether `listing` is the last walk's, untouched: nothing in this directory changed.
    pub unchanged: bool,
    /// Files whose stat changed, to hash.
    pub pending: Vec<Pending>,
}

/// What the walk needs to read one directory.
pub struct Context<'a> {
    /// The stat cache (for files the last listing does not know, as in a new process).
    pub cache: &'a StatCache,
    /// The last walk's listings.
    pub previous: Option<&'a Listings>,
    /// Directories never recorded.
    pub exclude: &'a [PathBuf],
    /// Files larger than this are left out.
    pub max_file_bytes: u64,
    /// When the walk started.
    pub now: SystemTime,
}

/// Reads the directory `abs` (`rel` in the workspace) under `rules`. Returns `None` when it
/// cannot be opened or read; otherwise its visit and its subdirectories with their rules.
pub fn visit(
    abs: &Path,
    rel: &[u8],
    rules: &Rules,
    cx: &Context<'_>,
) -> Option<(Visit, Vec<Subdir>)> {
    // The workspace root may be reached through a symlink; below it, a directory that became
    // a symlink since it was listed must not be followed.
    let mut flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    if !rel.is_empty() {
        flags |= OFlag::O_NOFOLLOW;
    }
    let fd = nix::fcntl::open(abs, flags, Mode::empty()).ok()?;
    // The directory's stat is taken before its entries are read: an entry added after this
    // changes the stat the next walk compares.
    let stat = Stat::from_raw(&nix::sys::stat::fstat(&fd).ok()?);
    let previous = cx.previous.and_then(|p| p.get(rel));
    let same = previous.filter(|p| p.trusted && p.stat == stat);
    // Whether it holds a `.gitignore`: as before when the directory did not change.
    let mut read = match same {
        Some(_) => None,
        None => Some(read_names(abs)?),
    };
    let has_gitignore = match (&read, same) {
        (Some(names), _) => names.iter().any(|(n, _)| n == b".gitignore"),
        (None, Some(p)) => p.gitignore.is_some(),
        (None, None) => false,
    };
    let (rules, gitignore) = rules.enter(
        &fd,
        abs,
        has_gitignore,
        previous.and_then(|p| p.gitignore.as_ref()),
        cx.now,
    );
    let reused = same.filter(|p| p.rules == rules.fingerprint);
    if reused.is_none() && read.is_none() {
        read = Some(read_names(abs)?);
    }
    let mut changed = reused.is_none();
    // A reused listing is copied only if one of its entries changed.
    let mut children: std::borrow::Cow<'_, [Child]> = match (reused, read) {
        (Some(p), _) => std::borrow::Cow::Borrowed(&p.children),
        (None, Some(names)) => classify(abs, rel, names, &rules, cx.exclude).into(),
        (None, None) => return None,
    };
    let mut pending = Vec::new();
    let mut subdirs = Vec::new();
    for index in 0..children.len() {
        let child = &children[index];
        let seen = match child.what {
            What::Dir => {
                let name = std::ffi::OsStr::from_bytes(&child.name);
                subdirs.push((abs.join(name), child.rel.clone(), rules.clone()));
                continue;
            }
            What::File(seen) => seen,
            What::Ignored(_) | What::Special | What::Unreadable => continue,
        };
        let (now, stat, kind) = file_state(&fd, child, seen, cx);
        if let (Some(stat), Seen::Unknown) = (stat, now) {
            pending.push(Pending { index, stat, kind });
        }
        let what = match stat {
            Some(_) => What::File(now),
            // Gone or become something else since the directory was read: left out now,
            // and the directory's stat has changed for the next walk.
            None => What::Unreadable,
        };
        if !same_what(&child.what, &what) {
            changed = true;
            children.to_mut()[index].what = what;
        }
    }
    let listing = match (reused, changed) {
        (Some(p), false) => p.clone(),
        _ => Arc::new(Listing {
            stat,
            trusted: stat.settled(cx.now) && rules.settled,
            rules: rules.fingerprint,
            gitignore,
            children: children.into_owned(),
        }),
    };
    let visit = Visit {
        rel: rel.to_vec(),
        listing,
        unchanged: !changed,
        pending,
    };
    Some((visit, subdirs))
}

/// Whether an entry's state is the same as before (a file's stat and blob included).
fn same_what(a: &What, b: &What) -> bool {
    match (a, b) {
        (What::Dir, What::Dir) | (What::Special, What::Special) => true,
        (What::Unreadable, What::Unreadable) => true,
        (What::Ignored(x), What::Ignored(y)) => x == y,
        (What::File(Seen::Leaf(x)), What::File(Seen::Leaf(y))) => x == y,
        (What::File(Seen::Large(x, _)), What::File(Seen::Large(y, _))) => x == y,
        // A file not known yet is to be hashed: that is a change.
        _ => false,
    }
}

/// Stats a file relative to its directory: what it is now (`Unknown` when it must be
/// hashed), its stat (`None` when it is gone or no longer a file) and its kind.
fn file_state(
    fd: &OwnedFd,
    child: &Child,
    seen: Seen,
    cx: &Context<'_>,
) -> (Seen, Option<Stat>, EntryKind) {
    let Ok(raw) = nix::sys::stat::fstatat(fd, child.name.as_slice(), AtFlags::AT_SYMLINK_NOFOLLOW)
    else {
        return (Seen::Unknown, None, EntryKind::Blob);
    };
    let stat = Stat::from_raw(&raw);
    let format = SFlag::from_bits_truncate(raw.st_mode & SFlag::S_IFMT.bits());
    let kind = if format == SFlag::S_IFLNK {
        EntryKind::Link
    } else if format != SFlag::S_IFREG {
        return (Seen::Unknown, None, EntryKind::Blob);
    } else if raw.st_mode & 0o100 != 0 {
        EntryKind::BlobExecutable
    } else {
        EntryKind::Blob
    };
    let now = match seen {
        Seen::Leaf(c) if c.still(&stat, kind) => seen,
        Seen::Large(s, _) if s == stat => seen,
        _ if kind != EntryKind::Link && stat_len(&raw) > cx.max_file_bytes => {
            Seen::Large(stat, stat_len(&raw))
        }
        _ => match cx.cache.fresh(&child.rel, &stat).filter(|c| c.kind == kind) {
            Some(c) => Seen::Leaf(*c),
            None => Seen::Unknown,
        },
    };
    (now, Some(stat), kind)
}

fn stat_len(raw: &nix::sys::stat::FileStat) -> u64 {
    raw.st_size.max(0) as u64
}

/// The names in `abs` with their types (`None` when the type could not be read).
fn read_names(abs: &Path) -> Option<Vec<(Vec<u8>, Option<std::fs::FileType>)>> {
    let read = std::fs::read_dir(abs).ok()?;
    Some(
        read.filter_map(Result::ok)
            .map(|e| (e.file_name().as_bytes().to_vec(), e.file_type().ok()))
            .collect(),
    )
}

/// Sorts a directory's entries into what to walk, record and leave out.
fn classify(
    abs: &Path,
    rel: &[u8],
    names: Vec<(Vec<u8>, Option<std::fs::FileType>)>,
    rules: &Rules,
    exclude: &[PathBuf],
) -> Vec<Child> {
    let mut children = Vec::with_capacity(names.len());
    for (name, file_type) in names {
        if name == b".git" {
            continue;
        }
        let child_rel = join(rel, &name);
        let what = match file_type {
            None => What::Unreadable,
            Some(t) => {
                let is_dir = t.is_dir();
                let child_abs = abs.join(std::ffi::OsStr::from_bytes(&name));
                if rules.ignored(&child_abs, is_dir) || (is_dir && exclude.contains(&child_abs)) {
                    What::Ignored(is_dir)
                } else if is_dir {
                    What::Dir
                } else if t.is_fifo() || t.is_socket() || t.is_block_device() || t.is_char_device()
                {
                    What::Special
                } else {
                    What::File(Seen::Unknown)
                }
            }
        };
        children.push(Child {
            name,
            rel: child_rel,
            what,
        });
    }
    children
}
