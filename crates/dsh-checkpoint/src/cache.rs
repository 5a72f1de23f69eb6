//! The stat cache: what each file looked like when it was last hashed, so a checkpoint reads
//! only files that changed (git's index does the same for `git status`).
//!
//! A file is taken as unchanged when its modification and change times, size, inode and mode
//! all match its entry, and the entry is *trusted*: it was recorded at least
//! [`RACY_WINDOW`] after the file last changed. A file written twice within one timestamp tick
//! keeps its stat but not its content, so an entry recorded that soon after a change is
//! rehashed next time instead (git calls such entries racily clean).
//!
//! The cache lives beside the store (`dsh-index`), written whole to a temporary file and
//! renamed; it is only a cache, so a damaged or missing one means every file is hashed once.
//! An entry on disk that is older than the one in memory is still true (that stat had that
//! blob), so the file is rewritten only once the entries changed since it was written are
//! worth it ([`StatCache::worth_saving`]): a new process rehashes those few files instead.

use std::collections::HashMap;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gix::ObjectId;
use gix::objs::tree::EntryKind;

use crate::path::RelPath;

/// How long after a file's last change its stat is trusted to stand for its content.
pub const RACY_WINDOW: Duration = Duration::from_secs(2);

/// The file holding the cache.
pub const CACHE_FILE: &str = "dsh-index";

const MAGIC: &[u8; 8] = b"DSHIDX01";

/// What a file looked like when it was hashed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Stat {
    mtime: (i64, i64),
    ctime: (i64, i64),
    size: u64,
    ino: u64,
    mode: u32,
}

impl Stat {
    /// The stat of `meta`.
    pub fn of(meta: &Metadata) -> Self {
        Self {
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
            size: meta.size(),
            ino: meta.ino(),
            mode: meta.mode(),
        }
    }

    /// The stat of a raw `stat` result (`fstatat` relative to a directory's descriptor),
    /// field for field as [`Stat::of`].
    pub fn from_raw(st: &nix::sys::stat::FileStat) -> Self {
        Self {
            mtime: (st.st_mtime, st.st_mtime_nsec),
            ctime: (st.st_ctime, st.st_ctime_nsec),
            size: st.st_size as u64,
            ino: st.st_ino,
            mode: st.st_mode,
        }
    }

    /// Whether a change at this stat is old enough, at `now`, for the stat to be trusted.
    pub fn settled(&self, now: SystemTime) -> bool {
        let latest = self.mtime.max(self.ctime);
        let changed = UNIX_EPOCH
            + Duration::from_secs(latest.0.max(0) as u64)
            + Duration::from_nanos(latest.1.max(0) as u64);
        changed + RACY_WINDOW <= now
    }
}

/// One cached file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cached {
    stat: Stat,
    trusted: bool,
    /// The tree kind it was recorded as.
    pub kind: EntryKind,
    /// Its blob.
    pub oid: ObjectId,
}

/// The stat cache of one workspace.
#[derive(Clone, Debug, Default)]
pub struct StatCache {
    entries: HashMap<RelPath, Cached>,
    /// Entries changed or removed since loaded or saved.
    unsaved: usize,
    /// Whether the entries came from, or went to, the file.
    on_disk: bool,
}

/// The cache file is rewritten once one entry in this many changed: a new process then
/// rehashes at most that share of the files, and a checkpoint that changed a few files does
/// not write the whole cache (a megabyte for 10,000 files).
const SAVE_EVERY: usize = 64;

impl Cached {
    /// Whether a file now at `stat`, of `kind`, still has this entry's blob.
    pub fn still(&self, stat: &Stat, kind: EntryKind) -> bool {
        self.trusted && self.stat == *stat && self.kind == kind
    }
}

impl StatCache {
    /// The blob `path` still has, when its stat matches a trusted entry.
    pub fn fresh(&self, path: &[u8], stat: &Stat) -> Option<&Cached> {
        self.entries
            .get(path)
            .filter(|c| c.trusted && c.stat == *stat)
    }

    /// Records that `path`, at `stat`, hashed to `oid`, as seen at `now`; returns the entry.
    pub fn record(
        &mut self,
        path: RelPath,
        stat: Stat,
        kind: EntryKind,
        oid: ObjectId,
        now: SystemTime,
    ) -> Cached {
        let cached = Cached {
            trusted: stat.settled(now),
            stat,
            kind,
            oid,
        };
        if self.entries.get(&path) != Some(&cached) {
            self.entries.insert(path, cached);
            self.unsaved += 1;
        }
        cached
    }

    /// Keeps only the paths `keep` says are still there.
    pub fn retain(&mut self, keep: impl Fn(&[u8]) -> bool) {
        let before = self.entries.len();
        self.entries.retain(|p, _| keep(p));
        self.unsaved += before - self.entries.len();
    }

    /// How many files are cached.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the file should be rewritten: it was never written, or enough entries
    /// changed since (see [`SAVE_EVERY`]).
    pub fn worth_saving(&self) -> bool {
        self.unsaved > 0 && (!self.on_disk || self.unsaved * SAVE_EVERY >= self.entries.len())
    }

    /// Loads the cache in `dir`; empty when missing or unreadable.
    pub fn load(dir: &Path) -> Self {
        std::fs::read(dir.join(CACHE_FILE))
            .ok()
            .and_then(|bytes| decode(&bytes))
            .map(|entries| Self {
                entries,
                unsaved: 0,
                on_disk: true,
            })
            .unwrap_or_default()
    }

    /// Writes the cache to `dir` (temporary file, then rename).
    pub fn save(&mut self, dir: &Path) -> std::io::Result<()> {
        let tmp = dir.join(format!("{CACHE_FILE}.tmp"));
        std::fs::write(&tmp, encode(&self.entries))?;
        std::fs::rename(&tmp, dir.join(CACHE_FILE))?;
        self.unsaved = 0;
        self.on_disk = true;
        Ok(())
    }
}

fn kind_code(kind: EntryKind) -> u8 {
    match kind {
        EntryKind::Blob => 0,
        EntryKind::BlobExecutable => 1,
        EntryKind::Link => 2,
        EntryKind::Tree => 3,
        EntryKind::Commit => 4,
    }
}

fn code_kind(code: u8) -> Option<EntryKind> {
    Some(match code {
        0 => EntryKind::Blob,
        1 => EntryKind::BlobExecutable,
        2 => EntryKind::Link,
        3 => EntryKind::Tree,
        4 => EntryKind::Commit,
        _ => return None,
    })
}

fn encode(entries: &HashMap<RelPath, Cached>) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + entries.len() * 96);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    for (path, c) in entries {
        out.extend_from_slice(&(path.len() as u32).to_le_bytes());
        out.extend_from_slice(path);
        for v in [
            c.stat.mtime.0,
            c.stat.mtime.1,
            c.stat.ctime.0,
            c.stat.ctime.1,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&c.stat.size.to_le_bytes());
        out.extend_from_slice(&c.stat.ino.to_le_bytes());
        out.extend_from_slice(&c.stat.mode.to_le_bytes());
        out.push(u8::from(c.trusted));
        out.push(kind_code(c.kind));
        out.extend_from_slice(c.oid.as_bytes());
    }
    out
}

/// Reads bytes in order; `None` once they run out.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
}

fn decode(bytes: &[u8]) -> Option<HashMap<RelPath, Cached>> {
    let mut r = Reader(bytes);
    if r.take(8)? != MAGIC {
        return None;
    }
    let n = r.u64()?;
    let mut entries = HashMap::with_capacity(n.min(1 << 20) as usize);
    for _ in 0..n {
        let len = r.u32()? as usize;
        let path = r.take(len)?.to_vec();
        let stat = Stat {
            mtime: (r.i64()?, r.i64()?),
            ctime: (r.i64()?, r.i64()?),
            size: r.u64()?,
            ino: r.u64()?,
            mode: r.u32()?,
        };
        let trusted = r.take(1)?[0] == 1;
        let kind = code_kind(r.take(1)?[0])?;
        let oid = ObjectId::try_from(r.take(20)?).ok()?;
        entries.insert(
            path,
            Cached {
                stat,
                trusted,
                kind,
                oid,
            },
        );
    }
    r.0.is_empty().then_some(entries)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_cache_round_trips_and_a_damaged_one_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let stat = Stat::of(&std::fs::symlink_metadata(&file).unwrap());
        let mut cache = StatCache::default();
        let later = SystemTime::now() + Duration::from_secs(60);
        cache.record(
            b"f".to_vec(),
            stat,
            EntryKind::Blob,
            crate::store::empty_tree(),
            later,
        );
        cache.save(dir.path()).unwrap();
        let loaded = StatCache::load(dir.path());
        assert!(loaded.fresh(b"f", &stat).is_some());
        let mut bytes = std::fs::read(dir.path().join(CACHE_FILE)).unwrap();
        bytes.pop();
        std::fs::write(dir.path().join(CACHE_FILE), bytes).unwrap();
        assert!(StatCache::load(dir.path()).fresh(b"f", &stat).is_none());
    }

    #[test]
    fn the_file_is_rewritten_once_enough_entries_changed() {
        let stat = Stat::of(&std::fs::symlink_metadata(".").unwrap());
        let later = SystemTime::now() + Duration::from_secs(60);
        let mut cache = StatCache::default();
        let oid = crate::store::empty_tree();
        for i in 0..SAVE_EVERY * 2 {
            cache.record(
                i.to_string().into_bytes(),
                stat,
                EntryKind::Blob,
                oid,
                later,
            );
        }
        assert!(cache.worth_saving(), "never written");
        let dir = tempfile::tempdir().unwrap();
        cache.save(dir.path()).unwrap();
        assert!(!cache.worth_saving());
        cache.record(b"0".to_vec(), stat, EntryKind::BlobExecutable, oid, later);
        assert!(!cache.worth_saving(), "one change in 128 waits");
        cache.retain(|p| p != b"1");
        assert!(cache.worth_saving(), "two in 127 do not");
        let mut loaded = StatCache::load(dir.path());
        loaded.retain(|p| p != b"1" && p != b"2");
        assert!(loaded.worth_saving());
    }

    #[test]
    fn a_stat_recorded_right_after_a_change_is_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let stat = Stat::of(&std::fs::symlink_metadata(&file).unwrap());
        let mut cache = StatCache::default();
        cache.record(
            b"f".to_vec(),
            stat,
            EntryKind::Blob,
            crate::store::empty_tree(),
            SystemTime::now(),
        );
        assert!(cache.fresh(b"f", &stat).is_none());
    }
}
