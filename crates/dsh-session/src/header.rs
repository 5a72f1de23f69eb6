//! The immutable session header: metadata that is not conversation state.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::ids::SessionId;

/// Why a session exists, when it is not a top-level conversation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionOrigin {
    /// Created by a parent agent delegating a task.
    Subagent,
}

/// Metadata a creator supplies for a new session.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionMeta {
    /// Absolute working directory of the session.
    pub cwd: Option<PathBuf>,
    /// The session this one was forked or delegated from.
    pub parent_session: Option<SessionId>,
    /// Number of seeded events (a fork's prefix length).
    pub seed_length: Option<u64>,
    /// Why the session exists.
    pub origin: Option<SessionOrigin>,
    /// How many delegations deep this session is (0 for top level).
    pub delegation_depth: u32,
    /// Name of an agent preset, when one was used.
    pub agent_preset: Option<String>,
}

/// The first line of a session file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionHeader {
    /// Always `"session"`.
    #[serde(rename = "type")]
    pub kind: HeaderKind,
    /// Format version; 0 (no migrations exist yet).
    pub version: u32,
    /// The session id.
    pub id: SessionId,
    /// Epoch milliseconds of creation.
    pub created_at: u64,
    /// Absolute working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// The session this one was forked or delegated from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<SessionId>,
    /// Number of seeded events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_length: Option<u64>,
    /// Why the session exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<SessionOrigin>,
    /// Delegation depth (0 for top level); always written.
    #[serde(default)]
    pub delegation_depth: u32,
    /// Agent preset name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_preset: Option<String>,
}

/// The header's `type` tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HeaderKind {
    /// A session header.
    Session,
}

/// The only header format version this implementation reads and writes.
pub const HEADER_VERSION: u32 = 0;

impl SessionHeader {
    /// A header for a new session.
    pub fn new(id: SessionId, created_at: u64, meta: SessionMeta) -> Self {
        Self {
            kind: HeaderKind::Session,
            version: HEADER_VERSION,
            id,
            created_at,
            cwd: meta.cwd,
            parent_session: meta.parent_session,
            seed_length: meta.seed_length,
            origin: meta.origin,
            delegation_depth: meta.delegation_depth,
            agent_preset: meta.agent_preset,
        }
    }

    /// The metadata part of the header.
    pub fn meta(&self) -> SessionMeta {
        SessionMeta {
            cwd: self.cwd.clone(),
            parent_session: self.parent_session.clone(),
            seed_length: self.seed_length,
            origin: self.origin,
            delegation_depth: self.delegation_depth,
            agent_preset: self.agent_preset.clone(),
        }
    }
}

/// Epoch milliseconds now.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
