//! The live feed: what a session's work shows while it happens, never logged.
//!
//! The durable feed (`session/event`) carries what the model will see and what a resumed
//! session replays. Some things matter only while they happen: the output a command prints
//! before it ends, an MCP server's progress reports. Logging them would multiply the log by
//! every chunk and change nothing a later reader can use (the tool result carries the
//! output that counts), so they travel on `session/live` instead: synchronous, in order per
//! producer, lost when nobody listens. Every front end reads the same [`LiveUpdate`]s (the
//! terminal UI today, the ACP bridge and the web UI later), so the vocabulary names what
//! happened, not how to draw it.

use std::sync::Arc;

use dsh_kernel::Notification;
use serde::{Deserialize, Serialize};

use crate::ids::CallId;
use crate::session::Session;

/// One live update of a session's work.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum LiveUpdate {
    /// More output of a running tool call (a command's stdout and stderr as they were read,
    /// interleaved), to append to what was shown before. The call's result replaces it all.
    #[serde(rename_all = "camelCase")]
    ToolOutput {
        /// The call the output belongs to.
        call_id: CallId,
        /// The new text (whole UTF-8 characters).
        text: String,
        /// Bytes the producer dropped before this text because they came faster than it
        /// publishes (only the tail of a flood is live; the result and the spill file have
        /// all of it).
        skipped: u64,
    },
    /// A progress report of a running tool call (an MCP server's `notifications/progress`).
    #[serde(rename_all = "camelCase")]
    ToolProgress {
        /// The call the report belongs to.
        call_id: CallId,
        /// Work done so far; grows with every report.
        progress: f64,
        /// The total, when the producer knows it.
        total: Option<f64>,
        /// What it is doing now, in the producer's words.
        message: Option<String>,
    },
}

impl LiveUpdate {
    /// The call this update belongs to.
    pub fn call_id(&self) -> &CallId {
        match self {
            LiveUpdate::ToolOutput { call_id, .. } | LiveUpdate::ToolProgress { call_id, .. } => {
                call_id
            }
        }
    }
}

/// A live update and the session whose work it shows (its header tells a subagent's session
/// from the one a person watches).
#[derive(Clone, Debug)]
pub struct LiveNotice {
    /// The session doing the work.
    pub session: Arc<Session>,
    /// What happened.
    pub update: LiveUpdate,
}

/// `session/live`: the non-durable feed of work in progress. Emitted on the context of the
/// agent doing the work, so scoped listeners hear their own agent's updates.
pub struct SessionLiveFired;
impl Notification for SessionLiveFired {
    const NAME: &'static str = "session/live";
    type Payload = LiveNotice;
}
