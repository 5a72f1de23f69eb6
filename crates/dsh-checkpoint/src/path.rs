//! Workspace-relative paths as bytes, the way a tree names them.
//!
//! Paths are kept as the raw bytes of their file names joined with `/` (Unix file names need
//! not be UTF-8), and every path read back from the store is checked before it touches the
//! disk: no empty, `.` or `..` component and no `.git`, so a restore can only ever name a
//! place inside the workspace.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A path relative to the workspace root, `/`-separated bytes.
pub type RelPath = Vec<u8>;

/// `parent/name` (or `name` at the root).
pub fn join(parent: &[u8], name: &[u8]) -> RelPath {
    if parent.is_empty() {
        return name.to_vec();
    }
    let mut out = Vec::with_capacity(parent.len() + 1 + name.len());
    out.extend_from_slice(parent);
    out.push(b'/');
    out.extend_from_slice(name);
    out
}

/// Whether every component of `rel` is a plain name that stays inside the workspace.
pub fn is_safe(rel: &[u8]) -> bool {
    !rel.is_empty()
        && rel
            .split(|b| *b == b'/')
            .all(|c| !c.is_empty() && c != b"." && c != b".." && c != b".git")
}

/// The absolute path of `rel` under `root`.
pub fn absolute(root: &Path, rel: &[u8]) -> PathBuf {
    root.join(OsStr::from_bytes(rel))
}

/// `rel` for people: lossy UTF-8.
pub fn display(rel: &[u8]) -> String {
    String::from_utf8_lossy(rel).into_owned()
}

/// The parent of `rel` (empty at the root).
pub fn parent(rel: &[u8]) -> &[u8] {
    match rel.iter().rposition(|b| *b == b'/') {
        Some(i) => &rel[..i],
        None => &[],
    }
}

/// Whether `rel` is `dir` or lies under it.
pub fn is_within(rel: &[u8], dir: &[u8]) -> bool {
    rel == dir || (rel.len() > dir.len() && rel.starts_with(dir) && rel[dir.len()] == b'/')
}

/// Lowercase hex of bytes (paths in the journal, which is JSON).
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of lowercase hex, `None` when malformed.
pub fn from_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn only_plain_components_are_safe() {
        assert!(is_safe(b"src/main.rs"));
        for bad in [
            &b""[..],
            b"/etc",
            b"a//b",
            b"../x",
            b"a/../b",
            b"./a",
            b".git/config",
            b"a/.git",
        ] {
            assert!(!is_safe(bad), "{}", display(bad));
        }
    }

    #[test]
    fn within_means_the_dir_or_below_it() {
        assert!(is_within(b"a/b", b"a"));
        assert!(is_within(b"a", b"a"));
        assert!(!is_within(b"ab", b"a"));
        assert_eq!(from_hex(&to_hex(b"\xffa/b")).unwrap(), b"\xffa/b");
    }
}
