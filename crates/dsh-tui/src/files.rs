//! `@path` completion: the workspace's files, listed once in the background, matched as the
//! person types after `@`.
//!
//! The listing honours `.gitignore` (the `ignore` crate, as `glob` and `grep` do) and stops at
//! [`MAX_FILES`], so a huge tree costs a bounded walk and never blocks typing.

use std::path::Path;

use crate::commands::subsequence;

/// Files listed at most.
pub const MAX_FILES: usize = 20_000;
/// Completions offered at most.
pub const MAX_MATCHES: usize = 8;

/// The files under `root` (relative, `/`-separated), ignored ones and VCS directories left out.
pub fn list(root: &Path) -> Vec<String> {
    let walk = ignore::WalkBuilder::new(root)
        .hidden(false)
        .require_git(false)
        .filter_entry(|e| e.file_name() != ".git")
        .sort_by_file_name(|a, b| a.cmp(b))
        .build();
    walk.filter_map(Result::ok)
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .filter_map(|e| {
            let rel = e.path().strip_prefix(root).ok()?;
            Some(rel.to_string_lossy().replace('\\', "/"))
        })
        .take(MAX_FILES)
        .collect()
}

/// The `@` word the caret is at the end of: its byte start and the text after `@`.
pub fn token(draft: &str, caret: usize) -> Option<(usize, &str)> {
    let before = draft.get(..caret)?;
    let start = before.rfind(char::is_whitespace).map_or(0, |i| i + 1);
    let word = &before[start..];
    let query = word.strip_prefix('@')?;
    Some((start, query))
}

/// Files matching `query`: those containing it first (shortest first), then subsequence matches.
pub fn matches<'a>(files: &'a [String], query: &str) -> Vec<&'a str> {
    let lower = query.to_lowercase();
    let mut contains: Vec<&str> = files
        .iter()
        .filter(|f| f.to_lowercase().contains(&lower))
        .map(String::as_str)
        .collect();
    contains.sort_by_key(|f| f.len());
    let mut out: Vec<&str> = contains.into_iter().take(MAX_MATCHES).collect();
    if out.len() < MAX_MATCHES {
        let more = files
            .iter()
            .filter(|f| !f.to_lowercase().contains(&lower) && subsequence(query, f))
            .map(String::as_str)
            .take(MAX_MATCHES - out.len());
        out.extend(more);
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_at_word_before_the_caret_is_the_query() {
        assert_eq!(token("look at @src/ma", 15), Some((8, "src/ma")));
        assert_eq!(token("@", 1), Some((0, "")));
        assert_eq!(token("no at here", 10), None);
        assert_eq!(token("mail@example.com", 16), None);
    }

    #[test]
    fn listing_honours_gitignore_and_matching_prefers_substrings() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::create_dir_all(dir.path().join("target")).unwrap();
        std::fs::write(dir.path().join(".gitignore"), "target/\n").unwrap();
        std::fs::write(dir.path().join("src/main.rs"), "").unwrap();
        std::fs::write(dir.path().join("src/mod_a.rs"), "").unwrap();
        std::fs::write(dir.path().join("target/main.o"), "").unwrap();
        let files = list(dir.path());
        assert_eq!(files, [".gitignore", "src/main.rs", "src/mod_a.rs"]);
        assert_eq!(matches(&files, "main"), ["src/main.rs"]);
        assert_eq!(matches(&files, "sma"), ["src/main.rs", "src/mod_a.rs"]);
    }
}
