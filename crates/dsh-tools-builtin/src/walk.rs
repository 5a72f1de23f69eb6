//! The file walk shared by `glob` and `grep`: ripgrep's walker, honouring `.gitignore` (also
//! outside a git repository), `.ignore` and `.rgignore`, including hidden files, skipping VCS
//! directories, in a deterministic order.

use std::fs::Metadata;
use std::path::{Path, PathBuf};

use dsh_tools::{ToolCallContext, ToolError};
use globset::{GlobBuilder, GlobMatcher};
use ignore::{DirEntry, Walk, WalkBuilder};

use crate::path::{display, resolve, working_dir};

/// Directories of version-control systems: never search results, often huge.
const VCS_DIRS: [&str; 4] = [".git", ".hg", ".svn", ".jj"];

/// Appended to a line cut at [`crate::excerpt::MAX_LINE_CHARS`].
pub(crate) const LINE_CUT: &str = "... (line truncated)";

/// Where a search starts, and the directory its output paths are shown relative to.
pub(crate) struct SearchRoot {
    /// The calling session's working directory.
    pub base: PathBuf,
    /// The resolved `path` argument (default: the working directory).
    pub root: PathBuf,
    /// `root` as shown to the model.
    pub shown: String,
}

impl SearchRoot {
    /// Resolves the optional `path` argument of a search call.
    pub(crate) fn of(call: &ToolCallContext, path: Option<&str>) -> Result<Self, ToolError> {
        let base = working_dir(call)?;
        let root = match path.map(str::trim).filter(|p| !p.is_empty()) {
            Some(path) => resolve(&base, path),
            None => base.clone(),
        };
        let shown = display(&base, &root);
        Ok(Self { base, root, shown })
    }

    /// The root's metadata, or the error result saying it does not exist.
    pub(crate) fn metadata(&self) -> Result<Metadata, ToolError> {
        std::fs::metadata(&self.root).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                ToolError::new(format!("path not found: {}", self.shown))
            }
            _ => ToolError::new(format!("cannot search {}: {e}", self.shown)),
        })
    }
}

/// A glob as ripgrep's `--glob` reads it: without a `/` it matches file names at any depth
/// (`*.rs`); with one it matches the path relative to the search root (`src/**/*.rs`).
/// `*` never crosses a `/`.
#[derive(Debug, Clone)]
pub(crate) struct NamePattern {
    matcher: GlobMatcher,
    by_path: bool,
}

impl NamePattern {
    /// Compiles `pattern`; the error text explains what is wrong with it.
    pub(crate) fn new(pattern: &str) -> Result<Self, globset::Error> {
        let pattern = pattern.trim();
        let pattern = pattern.strip_prefix("./").unwrap_or(pattern);
        let by_path = pattern.contains('/');
        let pattern = pattern.strip_prefix('/').unwrap_or(pattern);
        let matcher = GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()?
            .compile_matcher();
        Ok(Self { matcher, by_path })
    }

    /// Whether the file at `relative` (to the search root) matches.
    pub(crate) fn is_match(&self, relative: &Path) -> bool {
        if self.by_path {
            self.matcher.is_match(relative)
        } else {
            relative
                .file_name()
                .is_some_and(|name| self.matcher.is_match(name))
        }
    }
}

/// The walk over `root`, in path order (children sorted by name, depth first), so capped
/// results are always the same first ones.
pub(crate) fn walk(root: &Path) -> Walk {
    WalkBuilder::new(root)
        .hidden(false)
        .require_git(false)
        .follow_links(false)
        .filter_entry(|entry| !VCS_DIRS.iter().any(|vcs| entry.file_name() == *vcs))
        .sort_by_file_name(|a, b| a.cmp(b))
        .build()
}

/// Whether the entry is a file (or a symlink to one) rather than a directory.
pub(crate) fn is_file(entry: &DirEntry) -> bool {
    match entry.file_type() {
        Some(t) if t.is_file() => true,
        Some(t) if t.is_symlink() => entry.path().is_file(),
        _ => false,
    }
}

/// `entry`'s path relative to `root`; a root that is itself a file is matched by name.
pub(crate) fn relative<'a>(root: &Path, path: &'a Path) -> &'a Path {
    match path.strip_prefix(root) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel,
        _ => path.file_name().map_or(path, Path::new),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_without_a_slash_match_names_at_any_depth() {
        let p = NamePattern::new("*.rs").unwrap();
        assert!(p.is_match(Path::new("a.rs")));
        assert!(p.is_match(Path::new("src/deep/a.rs")));
        assert!(!p.is_match(Path::new("src/a.rsx")));
    }

    #[test]
    fn patterns_with_a_slash_match_relative_paths() {
        let p = NamePattern::new("src/*.rs").unwrap();
        assert!(p.is_match(Path::new("src/a.rs")));
        assert!(!p.is_match(Path::new("src/deep/a.rs")));
        let p = NamePattern::new("src/**/*.rs").unwrap();
        assert!(p.is_match(Path::new("src/deep/a.rs")));
        assert!(p.is_match(Path::new("src/a.rs")));
        let p = NamePattern::new("**/*.{ts,tsx}").unwrap();
        assert!(p.is_match(Path::new("web/app.tsx")));
        assert!(p.is_match(Path::new("app.ts")));
    }

    #[test]
    fn invalid_globs_are_errors() {
        assert!(NamePattern::new("a[").is_err());
    }
}
