//! The model-visible surface and its incremental projections.
//!
//! The surface is the ordered list of surface events (`user/message`, `assistant/message`,
//! `tool/result`) after replacements. Derived history, the folded request header and the
//! latest request context are kept up to date on every append, so reading them costs the same
//! at step 1000 as at step 1.

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
                self.nodes.splice(i..=j, [event.seq]);
                self.generation += 1;
                self.derived = self
                    .nodes
                    .iter()
                    .filter_map(|seq| events.get(*seq as usize))
                    .filter_map(|e| project(&e.kind).cloned())
                    .collect();
            }
        }
    }

    /// Position of surface node `seq`.
    pub(crate) fn index_of(&self, seq: u64) -> Option<usize> {
        // Nodes are strictly increasing only until the first replacement; search linearly from
        // the end, where recent nodes (the common case) live.
        self.nodes.iter().rposition(|s| *s == seq)
    }
}
