//! `AGENTS.md` instruction files: found from the session's working directory upwards, bounded,
//! and rendered as one system-prompt section.
//!
//! Projects write their conventions in `AGENTS.md`; a nested directory may refine its parent's.
//! The search stops at the filesystem root or at the first directory holding `.git` (the
//! repository boundary: instructions of an enclosing checkout or of `$HOME` are not this
//! project's). Files are rendered outermost first so the nearer, more specific file comes last.

use std::path::{Path, PathBuf};

/// The file name looked for in each directory.
pub const FILE_NAME: &str = "AGENTS.md";

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

/// The `AGENTS.md` files that apply to `cwd`, outermost first, within [`BUDGET_BYTES`].
///
/// The budget is spent nearest first, so when the files are too large it is the outer, more
/// general instructions that are cut.
pub fn discover(cwd: &Path) -> Vec<Instruction> {
    discover_with_budget(cwd, BUDGET_BYTES)
}

fn discover_with_budget(cwd: &Path, budget: usize) -> Vec<Instruction> {
    let mut found = Vec::new();
    let mut left = budget;
    for dir in cwd.ancestors() {
        let path = dir.join(FILE_NAME);
        if left > 0
            && let Some(text) = read_bounded(&path, left)
            && !text.trim().is_empty()
        {
            let (text, truncated) = truncate(text, left);
            left -= text.len();
            found.push(Instruction {
                path,
                text,
                truncated,
            });
        }
        if dir.join(".git").exists() {
            break;
        }
    }
    found.reverse();
    found
}

/// Reads at most a little over `max` bytes of `path` (enough for [`truncate`] to see that it
/// was cut), as text: bytes that are not UTF-8 are replaced rather than losing the whole file.
/// `None` when there is no such file; a file that cannot be read is reported and skipped.
fn read_bounded(path: &Path, max: usize) -> Option<String> {
    use std::io::Read as _;
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot read an AGENTS.md; skipped");
            return None;
        }
    };
    let mut bytes = Vec::new();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(4);
    if let Err(e) = file.take(limit).read_to_end(&mut bytes) {
        tracing::warn!(path = %path.display(), error = %e, "cannot read an AGENTS.md; skipped");
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
         disagree, the nearer directory's file wins):",
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
        let found = discover(&sub.join("deeper"));
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
        let found = discover(dir.path());
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].text, "use caf\u{fffd} style\n");
    }

    #[test]
    fn a_huge_file_is_read_only_up_to_the_budget() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join(FILE_NAME), "é".repeat(100)).unwrap();
        let found = discover_with_budget(dir.path(), 11);
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
        let found = discover_with_budget(&inner, 10);
        assert_eq!(found.len(), 1);
        assert!(found[0].truncated);
        assert_eq!(found[0].text.len(), 10);
        assert!(render(&found).unwrap().contains("[truncated"));
    }

    #[test]
    fn no_files_no_section() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        assert_eq!(render(&discover(dir.path())), None);
    }
}
