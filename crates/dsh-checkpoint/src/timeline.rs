//! Reading a session's checkpoints in order and telling whose changes are whose.

use std::sync::Arc;

use dsh_session::{EventKind, SessionEvent};
use gix::ObjectId;

use crate::events::{At, CREATED, Created, RESTORED, Restored, oid};

/// One recorded workspace state of the session, in log order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mark {
    /// Seq of the event.
    pub seq: u64,
    /// The turn (for a restore: the turn it went back to).
    pub turn: u64,
    /// The step.
    pub step: u64,
    /// What kind of mark.
    pub kind: MarkKind,
    /// The workspace's tree.
    pub tree: ObjectId,
    /// The skip list blob.
    pub skipped: Option<ObjectId>,
}

/// What a mark records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MarkKind {
    /// A checkpoint.
    Checkpoint(At),
    /// A rewind's restore: the workspace went from `before` to the mark's tree.
    Restore {
        /// The workspace just before.
        before: ObjectId,
        /// The rewind's id.
        id: String,
    },
}

/// Every checkpoint and restore of a log, in order.
pub fn marks(events: &[Arc<SessionEvent>]) -> Vec<Mark> {
    events
        .iter()
        .filter_map(|e| {
            let EventKind::Other { type_name, data } = &e.kind else {
                return None;
            };
            match type_name.as_str() {
                CREATED => {
                    let c: Created = serde_json::from_value(data.clone()).ok()?;
                    Some(Mark {
                        seq: e.seq,
                        turn: c.turn,
                        step: c.step,
                        kind: MarkKind::Checkpoint(c.at),
                        tree: oid(&c.tree)?,
                        skipped: c.skipped.as_deref().and_then(oid),
                    })
                }
                RESTORED => {
                    let r: Restored = serde_json::from_value(data.clone()).ok()?;
                    Some(Mark {
                        seq: e.seq,
                        turn: r.to_turn,
                        step: 0,
                        kind: MarkKind::Restore {
                            before: oid(&r.before)?,
                            id: r.id,
                        },
                        tree: oid(&r.tree)?,
                        skipped: r.skipped.as_deref().and_then(oid),
                    })
                }
                _ => None,
            }
        })
        .collect()
}

/// A stretch of the workspace's history between two recorded states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// The state at its start.
    pub from: ObjectId,
    /// The state at its end.
    pub to: ObjectId,
    /// Whether the session made these changes (inside one of its turns, or a rewind's
    /// restore); otherwise someone else did (between turns).
    pub by_session: bool,
}

/// The spans from mark `from` to the last mark. Inside a turn (from its first checkpoint to
/// its last) changes are the session's. From one turn to the next, and from a turn that never
/// recorded its end (dsh stopped during it) to whatever follows, they are taken as someone
/// else's: nobody can tell, and that answer never overwrites a change silently.
pub fn spans(marks: &[Mark], from: usize) -> Vec<Span> {
    let mut out = Vec::new();
    for pair in marks[from..].windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        match &b.kind {
            MarkKind::Restore { before, .. } => {
                out.push(Span {
                    from: a.tree,
                    to: *before,
                    by_session: false,
                });
                out.push(Span {
                    from: *before,
                    to: b.tree,
                    by_session: true,
                });
            }
            MarkKind::Checkpoint(at) => {
                let inside = *at != At::Turn
                    && a.turn == b.turn
                    && matches!(a.kind, MarkKind::Checkpoint(At::Turn | At::Step));
                out.push(Span {
                    from: a.tree,
                    to: b.tree,
                    by_session: inside,
                });
            }
        }
    }
    out
}

/// The index of the checkpoint taken at the start of `turn`.
pub fn turn_start(marks: &[Mark], turn: u64) -> Option<usize> {
    marks
        .iter()
        .rposition(|m| m.turn == turn && m.kind == MarkKind::Checkpoint(At::Turn))
}

/// The index of the last mark of `turn` (its end, or the last step checkpoint it recorded).
pub fn turn_last(marks: &[Mark], turn: u64) -> Option<usize> {
    marks
        .iter()
        .rposition(|m| m.turn == turn && matches!(m.kind, MarkKind::Checkpoint(_)))
}
