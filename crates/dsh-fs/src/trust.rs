//! The user's record of trusted files: which files from a workspace (hooks, project MCP
//! servers) may run code outside the sandbox, by the exact content the user saw.
//!
//! A workspace is untrusted input: a freshly cloned repository, or one a sandboxed command
//! wrote to, can hold a `.dsh/hooks.json` that runs anything. Such a file runs unconfined only
//! after the user trusted it (DESIGN R15), and trust names the file *and its content*: the
//! record keeps the SHA-256 of the bytes the user trusted, so any change to the file (by a
//! command, a `git pull`) needs trust again. The record lives in `$DSH_HOME`, which no
//! sandboxed command may write, as one JSON document replaced atomically.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{Oversize, Place, read_placed};

/// The record's file name in `$DSH_HOME`.
pub const TRUST_FILE: &str = "trusted.json";

/// The largest record read (a record holds a line per trusted file).
const RECORD_LIMIT: u64 = 4 << 20;

/// What the record says about a file's current content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trust {
    /// The user trusted exactly this content.
    Trusted,
    /// The user trusted this file, but its content has changed since.
    Changed,
    /// The user never trusted this file.
    Unknown,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Document {
    /// Canonical path → SHA-256 of the trusted content, in hex.
    files: BTreeMap<PathBuf, String>,
}

/// The trust record of one `$DSH_HOME`.
#[derive(Clone, Debug)]
pub struct TrustRecord {
    path: PathBuf,
}

impl TrustRecord {
    /// The record in `dsh_home` (read on each question, so a trust recorded by another dsh,
    /// such as `dsh hooks trust` in another terminal, counts at once).
    pub fn new(dsh_home: &Path) -> Self {
        Self {
            path: dsh_home.join(TRUST_FILE),
        }
    }

    /// Where the record lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether `file`, holding `content` now, is trusted.
    pub fn check(&self, file: &Path, content: &[u8]) -> io::Result<Trust> {
        let document = self.read()?;
        Ok(match document.files.get(&key(file)) {
            Some(hash) if *hash == content_hash(content) => Trust::Trusted,
            Some(_) => Trust::Changed,
            None => Trust::Unknown,
        })
    }

    /// Records that the user trusts `file` with exactly `content`.
    pub fn trust(&self, file: &Path, content: &[u8]) -> io::Result<()> {
        let mut document = self.read()?;
        document.files.insert(key(file), content_hash(content));
        let text = serde_json::to_vec_pretty(&document).map_err(io::Error::other)?;
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        Place::anywhere(&self.path)?.replace(&text, None)?;
        Ok(())
    }

    /// Every trusted file and the hash of its trusted content.
    pub fn entries(&self) -> io::Result<Vec<(PathBuf, String)>> {
        Ok(self.read()?.files.into_iter().collect())
    }

    fn read(&self) -> io::Result<Document> {
        match read_placed(&self.path, RECORD_LIMIT, Oversize::Refuse) {
            Ok(None) => Ok(Document::default()),
            Ok(Some(file)) => serde_json::from_slice(&file.bytes).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} is not a trust record: {e}", self.path.display()),
                )
            }),
            Err(e) => Err(io::Error::other(e.to_string())),
        }
    }
}

/// A file's record key: its canonical path where it exists.
fn key(file: &Path) -> PathBuf {
    file.canonicalize().unwrap_or_else(|_| file.to_path_buf())
}

/// The SHA-256 of `content`, in lower-case hex.
pub fn content_hash(content: &[u8]) -> String {
    Sha256::digest(content)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_names_the_exact_content_and_a_change_needs_trust_again() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let file = ws.path().join("hooks.json");
        std::fs::write(&file, "{}").unwrap();
        let record = TrustRecord::new(home.path());
        assert_eq!(record.check(&file, b"{}").unwrap(), Trust::Unknown);
        record.trust(&file, b"{}").unwrap();
        assert_eq!(record.check(&file, b"{}").unwrap(), Trust::Trusted);
        assert_eq!(record.check(&file, b"{ }").unwrap(), Trust::Changed);
        assert_eq!(record.entries().unwrap().len(), 1);
        assert_eq!(
            content_hash(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn a_broken_record_is_an_error_not_an_empty_one() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join(TRUST_FILE), "not json").unwrap();
        let record = TrustRecord::new(home.path());
        assert!(record.check(Path::new("/x"), b"").is_err());
    }
}
