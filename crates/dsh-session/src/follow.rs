//! Watching a session another process writes.
//!
//! One writer per session (the JSONL store's file lock, PostgreSQL's lease) keeps a log from
//! forking, so a second front end that wants to show a session running in another dsh cannot
//! load it. It can still read what is committed and follow what is committed next, taking
//! nothing from the writer: that is this seam. The stores implement it; front ends that show
//! sessions (the editor bridge, so the web UI too) use it when a load finds the session held
//! elsewhere.

use async_trait::async_trait;
use futures::stream::BoxStream;

use crate::event::SessionEvent;
use crate::ids::SessionId;
use crate::persistence::{PersistenceError, StoredSession};

/// The committed events of a followed session, in order, each once; ends when the follower is
/// dropped, or with an error when the store cannot go on (a lost connection, a file removed).
pub type FollowedEvents = BoxStream<'static, Result<SessionEvent, PersistenceError>>;

/// Reads and follows stored sessions without taking their writer's place.
#[async_trait]
pub trait SessionFollow: Send + Sync + 'static {
    /// The session as committed now: no repair, no lease; an open last turn stays open.
    async fn read(&self, id: &SessionId) -> Result<StoredSession, PersistenceError>;

    /// The session's committed events from `from_seq` on, as they are committed (by any
    /// process), until the stream is dropped.
    async fn follow(
        &self,
        id: &SessionId,
        from_seq: u64,
    ) -> Result<FollowedEvents, PersistenceError>;
}

impl PersistenceError {
    /// Whether the failure says another writer holds the session (another dsh process has it
    /// open): the case where following it, read-only, is what a front end can still offer.
    pub fn is_held_elsewhere(&self) -> bool {
        matches!(
            self,
            PersistenceError::Io { source, .. } if source.kind() == std::io::ErrorKind::WouldBlock
        )
    }
}
