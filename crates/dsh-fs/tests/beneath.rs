#![allow(clippy::unwrap_used)]
//! Writes beneath a directory descriptor: nothing resolves out of the root, by either
//! resolver, however the tree is arranged or rearranged while writing.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use dsh_fs::{Place, Resolver, Root};
use dsh_testkit::Flipper;

const RESOLVERS: [Resolver; 2] = [Resolver::Openat2, Resolver::Walk];

fn root(dir: &Path, resolver: Resolver) -> Root {
    Root::open_with(&dir.canonicalize().unwrap(), resolver).unwrap()
}

#[test]
fn a_write_beneath_creates_missing_directories_and_replaces_atomically() {
    for resolver in RESOLVERS {
        let ws = tempfile::tempdir().unwrap();
        let place = Place::beneath(root(ws.path(), resolver), Path::new("a/b/c.txt"));
        place.create_parent_dirs().unwrap();
        place.replace(b"one", None).unwrap();
        place.replace(b"two", None).unwrap();
        assert_eq!(std::fs::read(ws.path().join("a/b/c.txt")).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(ws.path().join("a/b"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["c.txt"], "{resolver:?}: no temporary file is left");
    }
}

#[test]
fn symlinks_that_lead_out_of_the_root_are_refused_and_those_inside_are_followed() {
    for resolver in RESOLVERS {
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(ws.path().join("real")).unwrap();
        symlink(outside.path(), ws.path().join("out")).unwrap();
        symlink("../..", ws.path().join("real/up")).unwrap();
        symlink("real", ws.path().join("in")).unwrap();
        std::fs::write(outside.path().join("target"), "keep").unwrap();
        symlink(outside.path().join("target"), ws.path().join("to-outside")).unwrap();
        std::fs::write(ws.path().join("real/file"), "old").unwrap();
        symlink("real/file", ws.path().join("to-file")).unwrap();
        for escaping in ["out/x", "real/up/x", "../x", "to-outside"] {
            let place = Place::beneath(root(ws.path(), resolver), Path::new(escaping));
            let error = place.replace(b"pwned", None).unwrap_err();
            assert!(
                error.to_string().contains("outside the writable root"),
                "{resolver:?} {escaping}: {error}"
            );
        }
        assert_eq!(
            std::fs::read_to_string(outside.path().join("target")).unwrap(),
            "keep"
        );
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 1);
        Place::beneath(root(ws.path(), resolver), Path::new("in/new"))
            .replace(b"inside", None)
            .unwrap();
        // An absolute symlink back into the root is followed.
        symlink(
            ws.path().canonicalize().unwrap().join("real"),
            ws.path().join("abs"),
        )
        .unwrap();
        Place::beneath(root(ws.path(), resolver), Path::new("abs/new2"))
            .replace(b"absolute", None)
            .unwrap();
        assert_eq!(
            std::fs::read(ws.path().join("real/new2")).unwrap(),
            b"absolute"
        );
        assert_eq!(
            std::fs::read(ws.path().join("real/new")).unwrap(),
            b"inside"
        );
        // Through a final symlink the file it points to is replaced; the link stays.
        Place::beneath(root(ws.path(), resolver), Path::new("to-file"))
            .replace(b"new", None)
            .unwrap();
        assert_eq!(std::fs::read(ws.path().join("real/file")).unwrap(), b"new");
        assert!(
            std::fs::symlink_metadata(ws.path().join("to-file"))
                .unwrap()
                .is_symlink()
        );
    }
}

#[test]
fn a_root_whose_path_holds_a_symlink_is_refused() {
    let base = tempfile::tempdir().unwrap();
    std::fs::create_dir(base.path().join("real")).unwrap();
    symlink(base.path().join("real"), base.path().join("link")).unwrap();
    for resolver in RESOLVERS {
        let canonical = base.path().canonicalize().unwrap();
        assert!(Root::open_with(&canonical.join("link"), resolver).is_err());
        assert!(Root::open_with(&canonical.join("real"), resolver).is_ok());
    }
}

#[test]
fn reading_beneath_refuses_what_is_not_a_regular_file() {
    for resolver in RESOLVERS {
        let ws = tempfile::tempdir().unwrap();
        nix::unistd::mkfifo(
            &ws.path().join("fifo"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        let place = Place::beneath(root(ws.path(), resolver), Path::new("fifo"));
        assert!(place.open_read().is_err(), "{resolver:?}");
    }
}

#[test]
fn two_hundred_writes_racing_a_symlink_flip_never_land_outside() {
    for resolver in RESOLVERS {
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let inside = ws.path().join("inside");
        std::fs::create_dir(&inside).unwrap();
        // Out by an absolute link, back in by a relative one.
        let flipper = Flipper::start(
            &ws.path().join("dir"),
            vec![PathBuf::from("inside"), outside.path().to_path_buf()],
        );
        // At least 200 writes, and on until the race has gone both ways (some writes landed
        // inside, some were refused while the link pointed outside), bounded.
        let (mut landed, mut refused, mut attempts) = (0usize, 0usize, 0usize);
        while attempts < 200 || ((landed == 0 || refused == 0) && attempts < 20_000) {
            let place = Place::beneath(
                root(ws.path(), resolver),
                Path::new(&format!("dir/f{attempts}")),
            );
            match place.replace(b"x", None) {
                Ok(_) => landed += 1,
                Err(_) => refused += 1,
            }
            attempts += 1;
            std::thread::yield_now();
        }
        flipper.stop();
        assert_eq!(
            std::fs::read_dir(outside.path()).unwrap().count(),
            0,
            "{resolver:?}: a write landed outside the root"
        );
        assert!(
            landed > 0 && refused > 0,
            "{resolver:?}: the race never went both ways ({landed} landed, {refused} refused)"
        );
        assert_eq!(
            std::fs::read_dir(&inside)
                .unwrap()
                .filter(|e| e
                    .as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with('f'))
                .count(),
            landed,
            "{resolver:?}: every write that succeeded is inside"
        );
    }
}
