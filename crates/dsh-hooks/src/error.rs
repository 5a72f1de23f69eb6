//! Errors of loading hook configuration.

use std::path::PathBuf;

/// Why the hook configuration could not be used. Every variant names the file, because a hook
/// that silently fails to load is a policy that silently stops applying.
#[derive(Debug, thiserror::Error)]
pub enum HooksError {
    /// The file exists but could not be read.
    #[error("cannot read hooks file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O failure.
        source: std::io::Error,
    },
    /// The file is not valid JSON.
    #[error("invalid hooks file {}:{line}:{column}: {message}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// serde_json's description.
        message: String,
    },
    /// The JSON is well formed but not a valid hooks configuration.
    #[error("invalid hooks file {}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the JSON path of the offending value.
        message: String,
    },
}
