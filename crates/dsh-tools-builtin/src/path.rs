//! Where a path argument points, and how a path is shown back to the model.
//!
//! Relative paths hang off the calling agent's session working directory, so two sessions
//! with different working directories see different files for `src/main.rs`. Paths are
//! normalized lexically (no symlink resolution) so that `a/../b` and `b` name one file for
//! the observation record and for display.

use std::path::{Component, Path, PathBuf};

use dsh_tools::{ToolCallContext, ToolError};

/// The directory relative paths resolve against for this call: the calling agent's session
/// cwd, else the process's current directory (agentless calls, embedders without a cwd).
pub(crate) fn working_dir(call: &ToolCallContext) -> Result<PathBuf, ToolError> {
    let process_cwd = || {
        std::env::current_dir().map_err(|e| {
            ToolError::new(format!(
                "no working directory: the session has none and the process's is unreadable ({e})"
            ))
        })
    };
    match call.caller().and_then(|c| c.cwd.clone()) {
        Some(cwd) if cwd.is_absolute() => Ok(normalize(&cwd)),
        Some(cwd) => Ok(normalize(&process_cwd()?.join(cwd))),
        None => process_cwd(),
    }
}

/// `input` resolved against `base` (an absolute input wins), normalized lexically.
pub(crate) fn resolve(base: &Path, input: &str) -> PathBuf {
    normalize(&base.join(input))
}

/// Removes `.` and folds `..` without touching the file system. `..` never climbs above the
/// root, as the kernel would not either.
pub(crate) fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                // `pop` refuses to remove the root, which is the behaviour we want.
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// How `path` is shown to the model: relative to the working directory when it lies inside
/// it (shorter, and what the model typed), absolute otherwise so an outside path is never
/// mistaken for a project file.
pub(crate) fn display(base: &Path, path: &Path) -> String {
    match path.strip_prefix(base) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
        Ok(rel) => rel.display().to_string(),
        Err(_) => path.display().to_string(),
    }
}

/// Rejects an empty or blank string argument with the house message.
pub(crate) fn non_empty<'a>(name: &str, value: &'a str) -> Result<&'a str, ToolError> {
    if value.trim().is_empty() {
        Err(ToolError::new(format!(
            "invalid {name}: expected a non-empty string"
        )))
    } else {
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_hang_off_the_base_and_absolute_ones_win() {
        let base = Path::new("/work/project");
        assert_eq!(
            resolve(base, "src/main.rs"),
            Path::new("/work/project/src/main.rs")
        );
        assert_eq!(resolve(base, "/etc/hosts"), Path::new("/etc/hosts"));
        assert_eq!(resolve(base, "./a/../b"), Path::new("/work/project/b"));
        assert_eq!(resolve(base, "../../../.."), Path::new("/"));
    }

    #[test]
    fn inside_paths_are_shown_relative_and_outside_paths_absolute() {
        let base = Path::new("/work/project");
        assert_eq!(
            display(base, Path::new("/work/project/src/a.rs")),
            "src/a.rs"
        );
        assert_eq!(display(base, Path::new("/work/project")), ".");
        assert_eq!(
            display(base, Path::new("/work/projectx/a")),
            "/work/projectx/a"
        );
        assert_eq!(display(base, Path::new("/tmp/a")), "/tmp/a");
    }

    #[test]
    fn blank_strings_are_invalid() {
        assert_eq!(
            non_empty("command", "  ").unwrap_err().message,
            "invalid command: expected a non-empty string"
        );
        assert_eq!(non_empty("command", "ls").unwrap(), "ls");
    }
}
