//! Render intents a tool may offer front ends.

use serde::{Deserialize, Serialize};

/// What kind of work a call does, so a front end can pick an icon or a permission prompt
/// (mirrors the Agent Client Protocol's tool kinds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolKind {
    /// Reads files or data.
    Read,
    /// Modifies files.
    Edit,
    /// Deletes files.
    Delete,
    /// Moves or renames files.
    Move,
    /// Searches.
    Search,
    /// Runs commands.
    Execute,
    /// Internal reasoning or planning.
    Think,
    /// Fetches remote data.
    Fetch,
    /// Anything else.
    Other,
}

/// How a front end should show a call or its result. Pure data derived from the arguments
/// (and the result), so the same card renders live and when replaying a session log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "card", rename_all = "kebab-case")]
pub enum ToolPresentation {
    /// A titled call of some kind.
    Generic {
        /// Short human title (e.g. `Read src/main.rs`).
        title: String,
        /// What kind of work it is.
        kind: ToolKind,
    },
    /// A file change.
    #[serde(rename_all = "camelCase")]
    Diff {
        /// The file changed.
        path: String,
        /// Previous text; `None` for a new file.
        old_text: Option<String>,
        /// New text.
        new_text: String,
    },
    /// A shell command.
    Terminal {
        /// The command line.
        command: String,
        /// Output so far or in full, when known.
        output: Option<String>,
        /// Exit status, once finished.
        exit: Option<i32>,
    },
}
