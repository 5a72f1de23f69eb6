//! Forking: a new session seeded from another's history up to a safe boundary.

use std::sync::Arc;

use crate::error::SessionError;
use crate::event::{EventKind, SessionEvent};

/// The seed of a fork: the source's events up to and including `boundary` (default: the last
/// event). The boundary must name an existing event and must not fall inside an open turn,
/// because a child cannot continue a turn whose remaining events belong to its parent.
pub fn fork_seed(
    events: &[Arc<SessionEvent>],
    boundary: Option<u64>,
) -> Result<Vec<SessionEvent>, SessionError> {
    let len = events.len() as u64;
    let boundary = match boundary {
        Some(b) => b,
        None if len == 0 => return Ok(Vec::new()),
        None => len - 1,
    };
    if boundary >= len {
        return Err(SessionError::InvalidBoundary { boundary, len });
    }
    let prefix = &events[..=boundary as usize];
    let last_turn_edge = prefix.iter().rev().find_map(|e| match &e.kind {
        EventKind::TurnStart(t) => Some(Some(t.turn)),
        EventKind::TurnEnd(_) => Some(None),
        _ => None,
    });
    if let Some(Some(turn)) = last_turn_edge {
        return Err(SessionError::OpenTurn { boundary, turn });
    }
    Ok(prefix.iter().map(|e| (**e).clone()).collect())
}
