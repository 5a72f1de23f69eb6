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
    events.iter().filter_map(|e| mark_of(e)).collect()
}

/// The last checkpoint or restore of a log. Read from the end: every checkpoint asks for it,
/// and reading all of a long session's marks each time would cost in proportion to its length.
pub fn last_mark(events: &[Arc<SessionEvent>]) -> Option<Mark> {
    events.iter().rev().find_map(|e| mark_of(e))
}

/// The mark `e` records, if it is a checkpoint or a restore.
fn mark_of(e: &SessionEvent) -> Option<Mark> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_session::SessionEvent;
    use serde_json::json;

    fn event(seq: u64, type_name: &str, data: serde_json::Value) -> Arc<SessionEvent> {
        Arc::new(SessionEvent {
            seq,
            time: 0,
            kind: EventKind::Other {
                type_name: type_name.to_owned(),
                data,
            },
            ignorable: false,
            source_event_seqs: None,
            surface_op: None,
        })
    }

    #[test]
    fn the_last_mark_read_from_the_end_is_the_last_of_all_marks() {
        let tree = |n: u8| format!("{n:040x}");
        let created = |seq, turn, n| {
            event(
                seq,
                CREATED,
                json!({"turn": turn, "step": 0, "at": "turn", "tree": tree(n)}),
            )
        };
        let restored = event(
            3,
            RESTORED,
            json!({"id": "r", "toTurn": 1, "before": tree(2), "tree": tree(1), "count": 1}),
        );
        let other = event(4, "something/else", json!({}));
        let log = vec![created(0, 1, 1), created(1, 2, 2), restored, other];
        assert_eq!(last_mark(&log), marks(&log).last().cloned());
        assert!(matches!(
            last_mark(&log).unwrap().kind,
            MarkKind::Restore { .. }
        ));
        assert_eq!(last_mark(&log[..2]).unwrap().seq, 1);
        assert_eq!(last_mark(&log[3..]), None);
    }
}
