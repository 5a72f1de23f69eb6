//! A directory the sandbox tests try to write to and must not be able to.
//!
//! In `workspace-write`, commands may write the workspace, `/tmp` and `$TMPDIR`. A test that
//! checks "nothing outside the workspace was written" needs a place outside all three; the
//! test crate's own `target/tmp` is one, unless the checkout itself lives under a temporary
//! directory. Then the test's premise is false, and it should say so instead of failing on
//! an assertion that looks like a sandbox hole.

use std::path::{Path, PathBuf};

/// A fresh directory under `base` (the test crate's `env!("CARGO_TARGET_TMPDIR")`), which
/// is outside every writable root of `workspace-write`.
///
/// # Panics
///
/// When `base` is under `/tmp` or `$TMPDIR` (a checkout in a temporary directory), naming
/// that cause; or when the directory cannot be created.
pub fn outside_writable_roots(base: &str) -> tempfile::TempDir {
    let base = Path::new(base);
    let here = base.canonicalize().unwrap_or_else(|_| base.to_path_buf());
    let temporary = [
        Some(PathBuf::from("/tmp")),
        std::env::var_os("TMPDIR").map(PathBuf::from),
    ];
    for root in temporary.iter().flatten() {
        let root = root.canonicalize().unwrap_or_else(|_| root.clone());
        assert!(
            !here.starts_with(&root),
            "the sandbox tests need a directory outside the writable roots, but this \
             checkout's target dir ({}) is under {}, which workspace-write may write: run \
             the tests from a checkout outside temporary directories",
            here.display(),
            root.display()
        );
    }
    match tempfile::tempdir_in(base) {
        Ok(dir) => dir,
        Err(e) => panic!("cannot create a directory under {}: {e}", base.display()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    #[should_panic(expected = "the sandbox tests need a directory outside the writable roots")]
    fn a_base_in_a_temporary_directory_is_named_as_the_cause() {
        let tmp = tempfile::tempdir_in("/tmp").unwrap();
        let _ = outside_writable_roots(&tmp.path().to_string_lossy());
    }
}
