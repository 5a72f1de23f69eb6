//! The remembered listings must never hide a change: each test changes the workspace in a way
//! that leaves some directory's stat, or some listing, as it was, and checks the next
//! checkpoint sees the change. Walks run "a minute later" (`record_at`), past the racy window,
//! so every listing is trusted and reused wherever the rules allow it.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use gix::ObjectId;

use crate::cache::StatCache;
use crate::snapshot::{Limits, SkipReason, Snapshot, record_at};
use crate::store::{HASH, ShadowStore};

struct Fixture {
    work: tempfile::TempDir,
    _home: tempfile::TempDir,
    store: ShadowStore,
    cache: StatCache,
    last: Option<Snapshot>,
}

impl Fixture {
    fn new(files: &[(&str, &str)]) -> Self {
        let work = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        for (path, body) in files {
            write(&work.path().join(path), body);
        }
        let store = ShadowStore::open(home.path(), work.path()).unwrap();
        Self {
            work,
            _home: home,
            store,
            cache: StatCache::default(),
            last: None,
        }
    }

    fn path(&self, rel: &str) -> std::path::PathBuf {
        self.work.path().join(rel)
    }

    /// A checkpoint taken at `now`.
    fn record_at(&mut self, now: SystemTime) -> Snapshot {
        let limits = Limits {
            max_file_bytes: 64,
            max_files: 1000,
            exclude: Vec::new(),
        };
        let snap = record_at(
            &self.store,
            &mut self.cache,
            self.work.path(),
            limits,
            self.last.as_ref(),
            now,
        )
        .unwrap();
        // The trees reused from the last walk are exactly what writing every tree gives.
        assert_eq!(snap.tree, self.store.build(&snap.flat).unwrap());
        self.last = Some(snap.clone());
        snap
    }

    /// A checkpoint taken once every change so far has settled.
    fn record(&mut self) -> Snapshot {
        self.record_at(SystemTime::now() + Duration::from_secs(60))
    }

    /// Two checkpoints: after the second, every listing is one the walk reused.
    fn settle(&mut self) -> Snapshot {
        self.record();
        self.record()
    }
}

fn write(path: &Path, body: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
}

fn blob(body: &str) -> ObjectId {
    gix::objs::compute_hash(HASH, gix::objs::Kind::Blob, body.as_bytes()).unwrap()
}

fn oid(snap: &Snapshot, rel: &str) -> Option<ObjectId> {
    snap.flat.get(rel.as_bytes()).map(|l| l.oid)
}

fn reused_whole(a: &Snapshot, b: &Snapshot) -> bool {
    Arc::ptr_eq(&a.walk, &b.walk)
}

/// The directory's modification and change times.
fn dir_times(path: &Path) -> (SystemTime, i64, i64) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).unwrap();
    (m.modified().unwrap(), m.ctime(), m.ctime_nsec())
}

#[test]
fn nothing_changed_returns_the_last_checkpoint_without_rebuilding_it() {
    let big = "x".repeat(100);
    let mut fx = Fixture::new(&[
        ("src/a.rs", "a"),
        ("big.bin", &big),
        ("out.log", "log"),
        (".gitignore", "*.log\n"),
    ]);
    std::fs::create_dir(fx.path("empty")).unwrap();
    let first = fx.settle();
    let again = fx.record();
    assert!(reused_whole(&first, &again));
    assert_eq!(first.tree, again.tree);
    assert_eq!(oid(&again, "src/a.rs"), Some(blob("a")));
    assert!(again.flat.contains_key(&b"empty"[..]));
    let reasons: Vec<_> = again.skipped.iter().map(|s| s.reason).collect();
    assert_eq!(reasons, [SkipReason::Large(100), SkipReason::Ignored]);
}

#[test]
fn a_file_rewritten_in_place_is_seen_though_its_directory_did_not_change() {
    let mut fx = Fixture::new(&[("src/a.rs", "one"), ("src/b.rs", "b")]);
    let before = fx.settle();
    let dir = dir_times(&fx.path("src"));
    std::fs::write(fx.path("src/a.rs"), "second").unwrap();
    assert_eq!(
        dir_times(&fx.path("src")),
        dir,
        "the directory's stat stayed"
    );
    let after = fx.record();
    assert_eq!(oid(&after, "src/a.rs"), Some(blob("second")));
    assert_eq!(oid(&after, "src/b.rs"), Some(blob("b")));
    assert_ne!(before.tree, after.tree);
}

#[test]
fn an_entry_added_and_one_removed_are_seen_even_with_the_directory_mtime_put_back() {
    let mut fx = Fixture::new(&[("src/old.rs", "old"), ("src/keep.rs", "keep")]);
    fx.settle();
    let modified = std::fs::metadata(fx.path("src"))
        .unwrap()
        .modified()
        .unwrap();
    write(&fx.path("src/new.rs"), "new");
    std::fs::remove_file(fx.path("src/old.rs")).unwrap();
    let dir = std::fs::File::open(fx.path("src")).unwrap();
    dir.set_times(std::fs::FileTimes::new().set_modified(modified))
        .unwrap();
    assert_eq!(
        std::fs::metadata(fx.path("src"))
            .unwrap()
            .modified()
            .unwrap(),
        modified
    );
    let after = fx.record();
    assert_eq!(oid(&after, "src/new.rs"), Some(blob("new")));
    assert_eq!(oid(&after, "src/old.rs"), None);
    assert_eq!(oid(&after, "src/keep.rs"), Some(blob("keep")));
}

#[test]
fn renamed_and_swapped_directories_are_seen() {
    let mut fx = Fixture::new(&[("a/x.rs", "x"), ("b/y.rs", "y"), ("deep/one/z.rs", "z")]);
    fx.settle();
    // Swap a and b: each name now holds the other directory, with the other's files.
    std::fs::rename(fx.path("a"), fx.path("tmp")).unwrap();
    std::fs::rename(fx.path("b"), fx.path("a")).unwrap();
    std::fs::rename(fx.path("tmp"), fx.path("b")).unwrap();
    // And move a directory to another parent.
    std::fs::rename(fx.path("deep/one"), fx.path("a/one")).unwrap();
    let after = fx.record();
    let paths: Vec<String> = after
        .flat
        .keys()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    assert_eq!(paths, ["a/one/z.rs", "a/y.rs", "b/x.rs", "deep"]);
}

#[test]
fn a_directory_replaced_by_a_new_one_of_the_same_name_is_read_again() {
    let mut fx = Fixture::new(&[("d/x.rs", "x")]);
    fx.settle();
    std::fs::remove_dir_all(fx.path("d")).unwrap();
    write(&fx.path("d/y.rs"), "y");
    let after = fx.record();
    assert_eq!(oid(&after, "d/x.rs"), None);
    assert_eq!(oid(&after, "d/y.rs"), Some(blob("y")));
}

#[test]
fn editing_an_ignore_file_reclassifies_directories_that_did_not_change() {
    let mut fx = Fixture::new(&[
        (".gitignore", "*.log\n"),
        ("sub/x.log", "x"),
        ("sub/deeper/.gitignore", "# nothing yet\n"),
        ("sub/deeper/y.rs", "y"),
    ]);
    let before = fx.settle();
    assert_eq!(oid(&before, "sub/x.log"), None);
    assert_eq!(oid(&before, "sub/deeper/y.rs"), Some(blob("y")));
    let sub = dir_times(&fx.path("sub"));
    // Rewritten in place: only the ignore files' own stats change.
    std::fs::write(fx.path(".gitignore"), "# no rules\n").unwrap();
    std::fs::write(fx.path("sub/deeper/.gitignore"), "y.rs\n").unwrap();
    assert_eq!(dir_times(&fx.path("sub")), sub);
    let after = fx.record();
    assert_eq!(oid(&after, "sub/x.log"), Some(blob("x")));
    assert_eq!(oid(&after, "sub/deeper/y.rs"), None);
}

#[test]
fn editing_the_repositorys_exclude_file_reclassifies_the_workspace() {
    let mut fx = Fixture::new(&[(".git/info/exclude", "*.tmp\n"), ("sub/z.tmp", "z")]);
    let before = fx.settle();
    assert_eq!(oid(&before, "sub/z.tmp"), None);
    std::fs::write(fx.path(".git/info/exclude"), "\n").unwrap();
    let after = fx.record();
    assert_eq!(oid(&after, "sub/z.tmp"), Some(blob("z")));
}

#[test]
fn a_listing_taken_soon_after_its_directory_changed_is_not_reused() {
    let mut fx = Fixture::new(&[("src/a.rs", "a")]);
    // At `at` the file settled long ago but `src` changed a second before: an entry added in
    // the same timestamp tick could have left its stat as it was, so it is read again.
    let at = SystemTime::now() + Duration::from_secs(60);
    let dir = std::fs::File::open(fx.path("src")).unwrap();
    dir.set_times(std::fs::FileTimes::new().set_modified(at - Duration::from_secs(1)))
        .unwrap();
    let first = fx.record_at(at);
    let second = fx.record_at(at);
    assert!(!reused_whole(&first, &second));
    // Once it has settled, the same listing is trusted.
    let at = at + Duration::from_secs(60);
    let settled = fx.record_at(at);
    assert!(reused_whole(&settled, &fx.record_at(at)));
}

#[test]
fn a_change_deep_down_rewrites_every_tree_above_it_and_only_those() {
    let mut fx = Fixture::new(&[("a/b/c/x.rs", "x"), ("a/b/y.rs", "y"), ("side/z.rs", "z")]);
    let before = fx.settle();
    std::fs::write(fx.path("a/b/c/x.rs"), "changed").unwrap();
    let after = fx.record();
    assert_ne!(before.tree, after.tree);
    assert_eq!(oid(&after, "a/b/c/x.rs"), Some(blob("changed")));
    let tree = |s: &Snapshot, rel: &str| s.walk.trees.get(rel.as_bytes()).copied();
    for changed in ["a", "a/b", "a/b/c"] {
        assert_ne!(tree(&before, changed), tree(&after, changed), "{changed}");
    }
    assert_eq!(tree(&before, "side"), tree(&after, "side"));
    // Put back as it was: the same trees as at first.
    std::fs::write(fx.path("a/b/c/x.rs"), "x").unwrap();
    assert_eq!(fx.record().tree, before.tree);
}
