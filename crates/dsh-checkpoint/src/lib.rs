//! Checkpoints and rewind for dsh: undo a turn's changes to the workspace, whatever made them,
//! and the conversation with it (DESIGN R17).
//!
//! - [`CheckpointPlugin`]: records the workspace before each turn, before each step whose
//!   calls may change files, and when a turn ends, as durable `checkpoint/created` events.
//! - The shadow store ([`store`]): a bare git repository per workspace under
//!   `$DSH_HOME/checkpoints/`, written with `gix`; never the user's `.git`, index or refs, and
//!   the workspace need not be a git repository. Tracked and untracked files are recorded;
//!   what `.gitignore` ignores and files over the size cap are not, and are named.
//! - Incremental: a stat cache ([`cache`]) means only changed files are read and hashed.
//! - [`Checkpoints::rewind`]: puts back what the session changed since a turn started (and
//!   only that), refusing when someone else changed files since, crash-safe through a journal
//!   and the session log as commit point ([`restore`]); the conversation goes back with a
//!   `session/rewind` event.
//! - [`Checkpoints::diff`], [`Checkpoints::turns`] and [`prune`] for the front ends.

mod cache;
mod describe;
mod diff;
mod error;
pub mod events;
#[cfg(test)]
mod incremental_tests;
mod listing;
pub mod path;
mod plugin;
pub mod prune;
pub mod restore;
mod rules;
mod service;
mod snapshot;
pub mod store;
pub mod timeline;

pub use error::CheckpointError;
pub use events::At;
pub use plugin::CheckpointPlugin;
pub use prune::{PruneReport, prune, referenced};
pub use restore::Fault;
pub use service::{
    CheckpointConfig, Checkpoints, DEFAULT_MAX_FILE_BYTES, FileDiff, RewindMode, RewindReport,
    RewindRequest, TurnSummary, workspace_of,
};
pub use snapshot::{SkipReason, Skipped, Snapshot};
