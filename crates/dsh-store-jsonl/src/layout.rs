//! Where session files live under the sessions root.
//!
//! ```text
//! <root>/--<projectKey(cwd)>--/<encodeSegment(id)>.jsonl
//! <root>/_no-cwd/<encodeSegment(id)>.jsonl
//! ```
//!
//! Sessions are grouped by the directory they ran in so a person can find them; the grouping is
//! lossy by design (two cwds may share a project directory). The file name is an injective
//! escape of the session id, so no id can traverse out of its directory or collide with another.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use dsh_session::{PersistenceError, SessionHeader, SessionId};

/// Name of the project directory for sessions without a working directory.
pub const NO_CWD_DIR: &str = "_no-cwd";

/// Suffix of every session file.
pub const SESSION_FILE_SUFFIX: &str = ".jsonl";

/// Longest project key kept (before the `--` wrapping), so the directory name fits in the
/// 255-byte limit of common file systems.
const MAX_PROJECT_KEY: usize = 251;

fn keep(unit: u16) -> bool {
    matches!(unit, 0x30..=0x39 | 0x41..=0x5A | 0x61..=0x7A | 0x2E | 0x5F | 0x2D)
}

fn escape(out: &mut String, unit: u16) {
    use std::fmt::Write as _;
    // Writing to a String cannot fail.
    let _ = write!(out, "~{unit:04X}");
}

/// The project directory name for a working directory: separator runs (`/`, `\`, `:`) become a
/// single `-`, `[A-Za-z0-9._-]` is kept, every other UTF-16 code unit (and `~`) is escaped as
/// `~XXXX`; leading `-` are stripped; empty becomes `root`; truncated to 251 characters and
/// wrapped in `--…--`.
pub fn project_key(cwd: &Path) -> String {
    let text = cwd.to_string_lossy();
    let mut key = String::with_capacity(text.len() + 4);
    let mut in_separator = false;
    for unit in text.encode_utf16() {
        if matches!(unit, 0x2F | 0x5C | 0x3A) {
            if !in_separator {
                key.push('-');
            }
            in_separator = true;
            continue;
        }
        in_separator = false;
        if keep(unit) {
            key.push(char::from(unit as u8));
        } else {
            escape(&mut key, unit);
        }
    }
    let mut key = key.trim_start_matches('-').to_owned();
    if key.is_empty() {
        key.push_str("root");
    }
    // Every character is ASCII, so a byte index is a character index.
    key.truncate(MAX_PROJECT_KEY);
    format!("--{key}--")
}

/// The file-name-safe, injective encoding of a session id: `[A-Za-z0-9._-]` kept, every other
/// UTF-16 code unit (including `/`, `\` and `~`) escaped as `~XXXX`, and the special names `.`
/// and `..` escaped too. An empty id cannot name a file and is rejected.
pub fn encode_segment(id: &str) -> Result<String, String> {
    if id.is_empty() {
        return Err("an empty id cannot name a session file".into());
    }
    let mut out = String::with_capacity(id.len());
    for unit in id.encode_utf16() {
        if keep(unit) {
            out.push(char::from(unit as u8));
        } else {
            escape(&mut out, unit);
        }
    }
    Ok(match out.as_str() {
        "." => "~002E".to_owned(),
        ".." => "~002E~002E".to_owned(),
        _ => out,
    })
}

/// The directory name a session with this working directory is stored under.
pub fn project_dir_name(cwd: Option<&Path>) -> String {
    cwd.map_or_else(|| NO_CWD_DIR.to_owned(), project_key)
}

/// The file name of a session: `<encodeSegment(id)>.jsonl`.
pub fn session_file_name(id: &SessionId) -> Result<String, PersistenceError> {
    encode_segment(id.as_str())
        .map(|s| format!("{s}{SESSION_FILE_SUFFIX}"))
        .map_err(|reason| PersistenceError::InvalidId {
            id: id.clone(),
            reason,
        })
}

/// The path a session with this header is stored at under `root`.
pub fn session_path(root: &Path, header: &SessionHeader) -> Result<PathBuf, PersistenceError> {
    Ok(root
        .join(project_dir_name(header.cwd.as_deref()))
        .join(session_file_name(&header.id)?))
}

/// The sessions root from the values of `DSH_HOME` and `HOME`: `$DSH_HOME/sessions`, else
/// `$HOME/.dsh/sessions`. Empty values count as unset. `None` when neither is usable.
pub fn sessions_root(dsh_home: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    let usable = |v: Option<OsString>| v.filter(|v| !v.is_empty()).map(PathBuf::from);
    usable(dsh_home)
        .or_else(|| usable(home).map(|h| h.join(".dsh")))
        .map(|base| base.join("sessions"))
}

/// The sessions root from this process's environment (see [`sessions_root`]), for the CLI.
pub fn sessions_root_from_env() -> Option<PathBuf> {
    sessions_root(std::env::var_os("DSH_HOME"), std::env::var_os("HOME"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn project_key_folds_separator_runs_and_escapes_the_rest() {
        assert_eq!(project_key(Path::new("/home/ann/src")), "--home-ann-src--");
        assert_eq!(project_key(Path::new("C:\\Users\\x")), "--C-Users-x--");
        assert_eq!(project_key(Path::new("//a::b")), "--a-b--");
        assert_eq!(project_key(Path::new("/a b~é")), "--a~0020b~007E~00E9--");
        assert_eq!(project_key(Path::new("/")), "--root--");
        assert_eq!(project_key(Path::new("/x/😀")), "--x-~D83D~DE00--");
        let long = format!("/{}", "a".repeat(400));
        assert_eq!(project_key(Path::new(&long)).len(), MAX_PROJECT_KEY + 4);
    }

    #[test]
    fn encoded_segments_cannot_traverse_and_stay_injective() {
        assert_eq!(encode_segment("session-1").unwrap(), "session-1");
        assert_eq!(encode_segment("../etc").unwrap(), "..~002Fetc");
        assert_eq!(encode_segment(".").unwrap(), "~002E");
        assert_eq!(encode_segment("..").unwrap(), "~002E~002E");
        assert_eq!(encode_segment("a/b").unwrap(), "a~002Fb");
        assert_eq!(encode_segment("a\\b").unwrap(), "a~005Cb");
        // `~` is always escaped, so an id that looks like an escape cannot collide with one.
        assert_ne!(
            encode_segment("a~002Fb").unwrap(),
            encode_segment("a/b").unwrap()
        );
        assert!(encode_segment("").is_err());
        for id in ["x/../y", "../../..", "a\0b", "/abs"] {
            let e = encode_segment(id).unwrap();
            assert!(
                !e.contains('/') && !e.contains('\\') && !e.contains('\0'),
                "{e}"
            );
        }
    }

    #[test]
    fn sessions_root_prefers_dsh_home_then_home() {
        assert_eq!(
            sessions_root(Some("/d".into()), Some("/h".into())),
            Some(PathBuf::from("/d/sessions"))
        );
        assert_eq!(
            sessions_root(Some("".into()), Some("/h".into())),
            Some(PathBuf::from("/h/.dsh/sessions"))
        );
        assert_eq!(sessions_root(None, None), None);
    }
}
