//! A directory's whole state as comparable data, for tests that check a workspace went back
//! exactly to an earlier state (checkpoints and rewinds).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Everything under `root` except `.git`, sorted by path: each entry's relative path and what
/// it is: `dir`, `link TARGET`, or `file MODE CONTENT` (MODE is the octal executable bits,
/// CONTENT the text, empty when not UTF-8). Panics on I/O errors: for tests.
pub fn workspace_tree(root: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let p = entry
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .path();
            let rel = p.strip_prefix(root).unwrap_or(&p).display().to_string();
            if rel == ".git" {
                continue;
            }
            let meta = std::fs::symlink_metadata(&p).unwrap_or_else(|e| panic!("{rel}: {e}"));
            let what = if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&p).unwrap_or_else(|e| panic!("{rel}: {e}"));
                format!("link {}", target.display())
            } else if meta.is_dir() {
                stack.push(p.clone());
                "dir".to_owned()
            } else {
                format!(
                    "file {:o} {}",
                    meta.permissions().mode() & 0o111,
                    std::fs::read_to_string(&p).unwrap_or_default()
                )
            };
            out.push((rel, what));
        }
    }
    out.sort();
    out
}
