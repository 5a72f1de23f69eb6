//! `AGENTS.md` instruction files: found from the session's working directory upwards, bounded,
//! and rendered as one system-prompt section.
//!
//! Projects write their conventions in `AGENTS.md`; a nested directory may refine its parent's.
//! A directory without one may hold a `CLAUDE.md` instead (many projects already have one), which
//! is read in its place. The search stops at the filesystem root or at the first directory
//! holding `.git` (the repository boundary: instructions of an enclosing checkout or of `$HOME`
//! are not this project's). A person's own conventions for every project live in
//! `$DSH_HOME/AGENTS.md`; they are the most general, so they come first. Files are rendered
//! outermost first so the nearer, more specific file comes last.

use std::path::{Path, PathBuf};

/// The file name looked for in each directory.
pub const FILE_NAME: &str = "AGENTS.md";

/// Read in a directory that has no [`FILE_NAME`].
pub const FALLBACK_FILE_NAME: &str = "CLAUDE.md";

/// Upper bound on the instruction text put into the prompt (all files together).
pub const BUDGET_BYTES: usize = 64 * 1024;

/// One instruction file as it will be rendered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instruction {
    /// Absolute path of the file.
    pub path: PathBuf,
    /// Its text (possibly truncated to the budget).
    pub text: String,
    /// Whether the text was cut to fit the budget.
    pub truncated: bool,
}

/// The instruction files that apply to `cwd`, outermost first, within [`BUDGET_BYTES`]: one
/// per directory up to the repository boundary (`AGENTS.md`, else `CLAUDE.md`), preceded by
/// the user-wide `AGENTS.md` in `home` (`$DSH_HOME`) when there is one.
///
/// The budget is spent nearest first, so when the files are too large it is the outer, more
/// general instructions (the user-wide file last of all) that are cut.
pub fn discover(cwd: &Path, home: Option<&Path>) -> Vec<Instruction> {
    discover_with_budget(cwd, home, BUDGET_BYTES)
}

fn discover_with_budget(cwd: &Path, home: Option<&Path>, budget: usize) -> Vec<Instruction> {
    let mut found = Vec::new();
    let mut left = budget;
    let mut take = |path: PathBuf, found: &mut Vec<Instruction>| {
        if left == 0 {
            return false;
        }
        let Some(text) = read_bounded(&path, left) else {
            return false;
        };
        if text.trim().is_empty() {
            return true;
        }
        let (text, truncated) = truncate(text, left);
        left -= text.len();
        found.push(Instruction {
            path,
            text,
            truncated,
        });
        true
    };
    let mut seen_home = false;
    for dir in cwd.ancestors() {
        // A file that exists (even empty) is this directory's choice; only a missing
        // AGENTS.md lets CLAUDE.md speak.
        if !take(dir.join(FILE_NAME), &mut found) {
            take(dir.join(FALLBACK_FILE_NAME), &mut found);
        }
        seen_home |= home.is_some_and(|h| crate::workspace::same_dir(h, dir));
        if dir.join(".git").exists() {
            break;
        }
    }
    // `$DSH_HOME` inside the project (or the project itself) was already read above.
    if let Some(home) = home
        && !seen_home
    {
        take(home.join(FILE_NAME), &mut found);
    }
    found.reverse();
    found
}

/// Reads at most a little over `max` bytes of `path` (enough for [`truncate`] to see that it
/// was cut), as text: bytes that are not UTF-8 are replaced rather than losing the whole file.
/// `None` when there is no such file; a file that cannot be read is reported and skipped.
/// A FIFO, directory or device in a file's place is refused at once ([`dsh_fs::read_placed`]),
/// with a warning: the session goes on without it.
fn read_bounded(path: &Path, max: usize) -> Option<String> {
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(4);
    let bytes = match dsh_fs::read_placed(path, limit, dsh_fs::Oversize::Cut) {
        Ok(Some(file)) => file.bytes,
        Ok(None) => return None,
        Err(e) => {
            tracing::warn!("instruction file skipped: {e}");
            return None;
        }
    };
    // A sparse or binary file in an instruction file's place is not instructions.
    if bytes.contains(&0) {
        tracing::warn!(
            "instruction file skipped: {} holds NUL bytes, not text",
            path.display()
        );
        return None;
    }
    match String::from_utf8(bytes) {
        Ok(text) => Some(text),
        Err(e) => {
            // A multibyte character cut by the read limit is not the file's fault.
            let whole = e.utf8_error().error_len().is_some();
            if whole {
                tracing::warn!(path = %path.display(), "AGENTS.md is not valid UTF-8; invalid bytes replaced");
            }
            Some(String::from_utf8_lossy(e.as_bytes()).into_owned())
        }
    }
}

fn truncate(mut text: String, max: usize) -> (String, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    (text, true)
}

/// The section text for `files`, or `None` when there are none.
pub fn render(files: &[Instruction]) -> Option<String> {
    if files.is_empty() {
        return None;
    }
    let mut out = String::from(
        "Instructions from AGENTS.md files for this workspace (outermost first; where they \
         disagree, the nearer directory's file wins; a CLAUDE.md stands in for a directory's \
         AGENTS.md):",
    );
    for f in files {
        out.push_str(&format!("\n\n<agents-md path=\"{}\">\n", f.path.display()));
        out.push_str(f.text.trim_end());
        if f.truncated {
            out.push_str(&format!(
                "\n[truncated: AGENTS.md instructions are limited to {BUDGET_BYTES} bytes in total]"
            ));
        }
        out.push_str("\n</agents-md>");
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn nearer_files_come_last_and_the_git_boundary_stops_the_search() {
        let root = tempfile::tempdir().unwrap();
        let outside = root.path();
        let repo = outside.join("repo");
        let sub = repo.join("sub");
        std::fs::create_dir_all(sub.join("deeper")).unwrap();
        std::fs::create_dir(repo.join(".git")).unwrap();
        std::fs::write(outside.join(FILE_NAME), "outside").unwrap();
        std::fs::write(repo.join(FILE_NAME), "repo").unwrap();
        std::fs::write(sub.join(FILE_NAME), "sub").unwrap();
        let found = discover(&sub.join("deeper"), None);
        let texts: Vec<_> = found.iter().map(|f| f.text.as_str()).collect();
        assert_eq!(texts, ["repo", "sub"]);
        let section = render(&found).unwrap();
        assert!(section.find("repo").unwrap() < section.rfind("sub").unwrap());
    }

    #[test]
    fn a_file_that_is_not_utf8_is_used_with_its_bad_bytes_replaced() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join(FILE_NAME), b"use caf\xe9 style\n").unwrap();
        let found = discover(dir.path(), None);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].text, "use caf\u{fffd} style\n");
    }

    #[test]
    fn a_huge_file_is_read_only_up_to_the_budget() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join(FILE_NAME), "é".repeat(100)).unwrap();
        let found = discover_with_budget(dir.path(), None, 11);
        assert_eq!(found[0].text, "é".repeat(5));
        assert!(found[0].truncated);
    }

    #[test]
    fn the_budget_truncates_outer_files_first_with_a_note() {
        let dir = tempfile::tempdir().unwrap();
        let inner = dir.path().join("inner");
        std::fs::create_dir(&inner).unwrap();
        std::fs::create_dir(inner.join(".git")).unwrap();
        std::fs::write(inner.join(FILE_NAME), "x".repeat(30)).unwrap();
        let found = discover_with_budget(&inner, None, 10);
        assert_eq!(found.len(), 1);
        assert!(found[0].truncated);
        assert_eq!(found[0].text.len(), 10);
        assert!(render(&found).unwrap().contains("[truncated"));
    }

    #[test]
    fn no_files_no_section() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        assert_eq!(render(&discover(dir.path(), None)), None);
    }

    #[test]
    fn claude_md_stands_in_only_where_there_is_no_agents_md() {
        let root = tempfile::tempdir().unwrap();
        let repo = root.path();
        let sub = repo.join("sub");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::create_dir(repo.join(".git")).unwrap();
        std::fs::write(repo.join(FALLBACK_FILE_NAME), "repo claude").unwrap();
        std::fs::write(sub.join(FILE_NAME), "sub agents").unwrap();
        std::fs::write(sub.join(FALLBACK_FILE_NAME), "sub claude").unwrap();
        let texts: Vec<_> = discover(&sub, None).into_iter().map(|f| f.text).collect();
        assert_eq!(texts, ["repo claude", "sub agents"]);
    }

    #[test]
    fn the_user_wide_file_comes_first_and_is_cut_first() {
        let root = tempfile::tempdir().unwrap();
        let (home, repo) = (root.path().join("home"), root.path().join("repo"));
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::write(home.join(FILE_NAME), "mine everywhere").unwrap();
        std::fs::write(repo.join(FILE_NAME), "project").unwrap();
        let found = discover(&repo, Some(&home));
        let texts: Vec<_> = found.iter().map(|f| f.text.as_str()).collect();
        assert_eq!(texts, ["mine everywhere", "project"]);
        let cut = discover_with_budget(&repo, Some(&home), 11);
        assert_eq!(cut[0].text, "mine");
        assert!(cut[0].truncated);
        assert_eq!(cut[1].text, "project");
    }
}
