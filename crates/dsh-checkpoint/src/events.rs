//! The durable events of checkpoints: `checkpoint/created` and `checkpoint/restored`.
//!
//! A checkpoint is a session event, so a resumed or forked session knows its checkpoints and
//! a rewind can tell what the session changed from what someone else changed: between a
//! turn's first checkpoint and its last, changes are the session's; between one turn's last
//! and the next one's first, they are not.

use gix::ObjectId;
use serde::{Deserialize, Serialize};

/// `checkpoint/created`.
pub const CREATED: &str = "checkpoint/created";
/// `checkpoint/restored`.
pub const RESTORED: &str = "checkpoint/restored";

/// Where in a turn a checkpoint was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum At {
    /// Before the turn's first step: what a rewind to this turn restores.
    Turn,
    /// Before the calls of a step that may change files.
    Step,
    /// When the turn ended, whatever way it ended.
    End,
}

/// The payload of `checkpoint/created`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Created {
    /// The turn.
    pub turn: u64,
    /// The step (0 before the first).
    pub step: u64,
    /// Where in the turn.
    pub at: At,
    /// The workspace's root tree in the shadow store.
    pub tree: String,
    /// The blob listing what was not checkpointed, when anything was left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// How many paths were left out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub skipped_count: u64,
}

/// The payload of `checkpoint/restored`: a rewind wrote the workspace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Restored {
    /// Names the rewind (and its journal).
    pub id: String,
    /// The turn whose start the files went back to.
    pub to_turn: u64,
    /// The workspace just before the rewind wrote anything.
    pub before: String,
    /// The workspace once the rewind is complete.
    pub tree: String,
    /// The blob listing what was not checkpointed before the rewind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// How many paths the rewind writes or removes.
    pub count: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Parses a hex object id from an event.
pub fn oid(hex: &str) -> Option<ObjectId> {
    ObjectId::from_hex(hex.as_bytes()).ok()
}
