//! What can be wrong with a skill or command file, named so a person can find it.

use std::fmt;
use std::path::{Path, PathBuf};

/// One file that was skipped (or one entry that was not offered), and why. Discovery never
/// fails as a whole: each problem costs its own file only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The file (or folder).
    pub file: PathBuf,
    /// The 1-based line, when the problem is at one.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl Problem {
    /// A problem with `file`, at `line` when known.
    pub fn new(file: &Path, line: Option<usize>, message: impl Into<String>) -> Self {
        Self {
            file: file.to_path_buf(),
            line,
            message: message.into(),
        }
    }
}

impl fmt::Display for Problem {
    /// `path:line: message`, the form editors and terminals turn into a link.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A read error already names the file.
        if self.line.is_none() && self.message.contains(&*self.file.to_string_lossy()) {
            return f.write_str(&self.message);
        }
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.file.display(), self.message),
            None => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

impl std::error::Error for Problem {}
