//! The file-access seam of the text file tools (`read`, `write`, `edit`).
//!
//! By default those tools work on the local file system. When someone else holds the truth
//! about a file's text — an editor with unsaved buffers, which also wants to see and track
//! every change — it provides a [`FileAccess`] for its agent through [`crate::Routes`], and the
//! tools read and write the text through it instead. Policy stays in the tools: paths are
//! resolved, the read-before-write record is kept and checked, and errors are worded the same
//! way whichever route carried the bytes.

use std::path::Path;

use async_trait::async_trait;

/// Why a routed read or write failed, in words the model can act on.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct FileAccessError {
    /// What went wrong (the client's own message, for an editor route).
    pub message: String,
}

impl FileAccessError {
    /// An error with `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

/// Text files as someone other than the local file system sees them. Paths are absolute.
#[async_trait]
pub trait FileAccess: Send + Sync {
    /// The current text of `path` (an editor's unsaved buffer wins over the disk).
    async fn read_text(&self, path: &Path) -> Result<String, FileAccessError>;

    /// Replaces the whole text of `path`, creating the file if needed.
    async fn write_text(&self, path: &Path, text: &str) -> Result<(), FileAccessError>;
}
