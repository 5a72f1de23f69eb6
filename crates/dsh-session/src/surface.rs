//! The model-visible surface and its incremental projections.
//!
//! The surface is the ordered list of surface events (`user/message`, `assistant/message`,
//! `tool/result`) after replacements. Derived history, the folded request header and the
//! latest request context are kept up to date on every append, so reading them costs the same
//! at step 1000 as at step 1.
//!
//! A `session/rewind` sets the surface back to what it was at a turn's `turn/start`. Appends
//! only ever push nodes, so that surface is a prefix of the node list of its generation: each
//! turn's mark remembers its generation and prefix length, and every replacement keeps the
//! node list it ends, so a rewind costs one copy of the nodes, never a replay of the log.

use std::sync::Arc;

use crate::event::{EventKind, RequestContext, RequestHeader, SessionEvent, SurfaceOp};
use crate::message::Message;

/// Incrementally maintained views over one log.
#[derive(Default)]
pub(crate) struct Surface {
    /// Seqs of the current surface nodes, in order.
    pub(crate) nodes: Vec<u64>,
    /// Bumped by every replacement.
    pub(crate) generation: u64,
    /// The derived messages of `nodes` (empty assistant messages skipped).
    pub(crate) derived: Vec<Arc<Message>>,
    /// Latest `request/header` snapshot.
    pub(crate) header: Option<Arc<RequestHeader>>,
    /// Latest `request/context`.
    pub(crate) context: Option<RequestContext>,
    /// The turns of the current history, in order, with where the surface stood when each
    /// started.
    pub(crate) timeline: Vec<TurnMark>,
    /// The node list each earlier generation ended with (index = generation).
    pub(crate) ended: Vec<Vec<u64>>,
}

/// Where the surface stood when a turn started.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TurnMark {
    /// The turn.
    pub(crate) turn: u64,
    /// The surface generation then.
    pub(crate) generation: u64,
    /// How many nodes the surface had then.
    pub(crate) len: usize,
}

/// The message a surface event projects to, if any.
pub(crate) fn project(kind: &EventKind) -> Option<&Arc<Message>> {
    kind.surface_message()
}

impl Surface {
    /// Folds one committed event into the views. `events` is the whole log including it.
    pub(crate) fn apply(&mut self, event: &SessionEvent, events: &[Arc<SessionEvent>]) {
        match &event.kind {
            EventKind::RequestHeader(h) => self.header = Some(Arc::new(h.header.clone())),
            EventKind::RequestContext(c) => self.context = Some(c.clone()),
            EventKind::TurnStart(t) => self.timeline.push(TurnMark {
                turn: t.turn,
                generation: self.generation,
                len: self.nodes.len(),
            }),
            EventKind::Rewind(r) => {
                // Validation proved the turn is in the timeline.
                let Some(i) = self.mark_of(r.to_turn) else {
                    return;
                };
                let mark = self.timeline[i];
                let nodes = match self.ended.get(mark.generation as usize) {
                    Some(ended) => ended[..mark.len].to_vec(),
                    None => self.nodes[..mark.len].to_vec(),
                };
                self.timeline.truncate(i);
                self.ended.push(std::mem::replace(&mut self.nodes, nodes));
                self.generation += 1;
                self.reproject(events);
            }
            _ => {}
        }
        match event.surface_op {
            None => {}
            Some(SurfaceOp::Append) => {
                self.nodes.push(event.seq);
                if let Some(m) = project(&event.kind) {
                    self.derived.push(m.clone());
                }
            }
            Some(SurfaceOp::Replace { start, end }) => {
                // Validation already proved both ends are current nodes in order.
                let (Some(i), Some(j)) = (self.index_of(start), self.index_of(end)) else {
                    return;
                };
                self.ended.push(self.nodes.clone());
                self.nodes.splice(i..=j, [event.seq]);
                self.generation += 1;
                self.reproject(events);
            }
        }
    }

    /// Derives the messages of the current nodes again.
    fn reproject(&mut self, events: &[Arc<SessionEvent>]) {
        self.derived = self
            .nodes
            .iter()
            .filter_map(|seq| events.get(*seq as usize))
            .filter_map(|e| project(&e.kind).cloned())
            .collect();
    }

    /// Position of `turn` in the current history.
    pub(crate) fn mark_of(&self, turn: u64) -> Option<usize> {
        self.timeline.iter().rposition(|m| m.turn == turn)
    }

    /// Position of surface node `seq`.
    pub(crate) fn index_of(&self, seq: u64) -> Option<usize> {
        // Nodes are strictly increasing only until the first replacement; search linearly from
        // the end, where recent nodes (the common case) live.
        self.nodes.iter().rposition(|s| *s == seq)
    }
}
