//! The inbox: an agent's pending input, as a projection of durable `agent/inbox/spliced` events.
//!
//! Two FIFO lists: `next-turn` (queued prompts, each the sole ordinary prompt of its own turn)
//! and `next-step` (steering and injected context, claimed at the next step boundary). Every
//! mutation is first appended to the session log and only then applied to the lists, so a
//! resumed agent rebuilds exactly the inbox it had, and a mutation the log refuses changes
//! nothing.

use std::collections::HashSet;
use std::sync::{Arc, OnceLock, Weak};

use dsh_session::{
    EventKind, InboxSplice, InboxTarget, Message, MessageId, Session, SpliceOutcome,
};
use parking_lot::{Mutex, ReentrantMutex};

use crate::agent::Agent;
use crate::error::AgentError;
use crate::events::{ClaimNotice, InboxClaimed, InboxDiscarded, InboxInserted, InboxNotice};

#[derive(Default, Clone)]
struct Lists {
    next_turn: Vec<Arc<Message>>,
    next_step: Vec<Arc<Message>>,
}

impl Lists {
    fn list(&self, target: InboxTarget) -> &Vec<Arc<Message>> {
        match target {
            InboxTarget::NextTurn => &self.next_turn,
            InboxTarget::NextStep => &self.next_step,
        }
    }

    fn list_mut(&mut self, target: InboxTarget) -> &mut Vec<Arc<Message>> {
        match target {
            InboxTarget::NextTurn => &mut self.next_turn,
            InboxTarget::NextStep => &mut self.next_step,
        }
    }
}

/// Whether a splice is a public mutation (cancellation semantics) or a claim.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Public,
    Claim,
}

/// An agent's durable inbox. See the module docs.
pub struct Inbox {
    session: Arc<Session>,
    lists: Mutex<Lists>,
    /// Serializes splices (log append + list mutation) while letting a reentrant call from a
    /// `session/event` listener reach the session, which refuses it cleanly.
    splice_lock: ReentrantMutex<()>,
    agent: OnceLock<Weak<dyn Agent>>,
}

impl Inbox {
    /// Rebuilds the inbox of `session` by replaying its splices. Splices inherited through a
    /// fork seed (before `seedLength`) are ignored: a child does not inherit its parent's
    /// pending work, while a resumed session restores its own.
    pub fn restore(session: Arc<Session>) -> Result<Inbox, AgentError> {
        let from = session.header().seed_length.unwrap_or(0);
        let mut lists = Lists::default();
        session.with_events(|events| -> Result<(), AgentError> {
            for event in events.iter().skip(from as usize) {
                let EventKind::InboxSpliced(s) = &event.kind else {
                    continue;
                };
                let list = lists.list_mut(s.target);
                let start = usize::try_from(s.start).unwrap_or(usize::MAX);
                let removed = usize::try_from(s.removed_count.unwrap_or(0)).unwrap_or(usize::MAX);
                if start
                    .checked_add(removed)
                    .is_none_or(|end| end > list.len())
                {
                    return Err(AgentError::InvalidPersistedSplice {
                        seq: event.seq,
                        reason: format!(
                            "removes {removed} at {start} from a list of {}",
                            list.len()
                        ),
                    });
                }
                list.splice(start..start + removed, s.inserted.iter().cloned());
            }
            Ok(())
        })?;
        Ok(Inbox {
            session,
            lists: Mutex::new(lists),
            splice_lock: ReentrantMutex::new(()),
            agent: OnceLock::new(),
        })
    }

    /// Binds the owning agent, so live notifications can name it. Called once by the driver.
    pub fn bind(&self, agent: Weak<dyn Agent>) {
        let _ = self.agent.set(agent);
    }

    /// Pending prompts, oldest first.
    pub fn next_turn(&self) -> Vec<Arc<Message>> {
        self.lists.lock().next_turn.clone()
    }

    /// Pending steering and context, oldest first.
    pub fn next_step(&self) -> Vec<Arc<Message>> {
        self.lists.lock().next_step.clone()
    }

    /// Whether either list holds anything.
    pub fn has_pending(&self) -> bool {
        let lists = self.lists.lock();
        !lists.next_turn.is_empty() || !lists.next_step.is_empty()
    }

    /// Whether the next-step list holds anything.
    pub fn has_next_step(&self) -> bool {
        !self.lists.lock().next_step.is_empty()
    }

    /// `Array.prototype.splice` on one list: negative `start` counts from the end, both
    /// coordinates are clamped. Removed messages are durably cancelled. Returns them.
    pub fn splice(
        &self,
        target: InboxTarget,
        start: isize,
        delete_count: usize,
        inserted: Vec<Message>,
    ) -> Result<Vec<Arc<Message>>, AgentError> {
        let inserted = inserted.into_iter().map(Arc::new).collect();
        self.splice_raw(target, start, delete_count, inserted, Kind::Public)
    }

    /// Appends to the end of a list.
    pub fn append(&self, target: InboxTarget, message: Message) -> Result<(), AgentError> {
        self.splice(target, isize::MAX, 0, vec![message]).map(drop)
    }

    /// Inserts at the front of a list.
    pub fn prepend(&self, target: InboxTarget, message: Message) -> Result<(), AgentError> {
        self.splice(target, 0, 0, vec![message]).map(drop)
    }

    /// Replaces the pending message `id` (searched in next-turn, then next-step). The old
    /// message is discarded and the new one inserted; identity may change. `false` if absent.
    pub fn replace(&self, id: &MessageId, message: Message) -> Result<bool, AgentError> {
        let _g = self.splice_lock.lock();
        let Some((target, pos)) = self.locate(id) else {
            return Ok(false);
        };
        self.splice(target, pos as isize, 1, vec![message])?;
        Ok(true)
    }

    /// Durably cancels the pending message `id`. `false` if absent.
    pub fn remove(&self, id: &MessageId) -> Result<bool, AgentError> {
        let _g = self.splice_lock.lock();
        let Some((target, pos)) = self.locate(id) else {
            return Ok(false);
        };
        self.splice(target, pos as isize, 1, Vec::new())?;
        Ok(true)
    }

    /// Durably cancels everything pending: next-step first, then next-turn.
    pub fn clear(&self) -> Result<(), AgentError> {
        let _g = self.splice_lock.lock();
        for target in [InboxTarget::NextStep, InboxTarget::NextTurn] {
            let len = self.lists.lock().list(target).len();
            if len > 0 {
                self.splice(target, 0, len, Vec::new())?;
            }
        }
        Ok(())
    }

    /// Claims the next batch for `turn` (driver use): every pending next-step message, then —
    /// when `target` is next-turn — the first queued prompt. Claims are pure deletions (no
    /// cancellation outcome, no discard notice) followed by one `agent/inbox/claimed` per
    /// message in batch order. Claimed messages never return to the inbox.
    pub fn claim(&self, target: InboxTarget, turn: u64) -> Result<Vec<Arc<Message>>, AgentError> {
        let _g = self.splice_lock.lock();
        let mut batch = Vec::new();
        let steps = self.lists.lock().next_step.len();
        if steps > 0 {
            batch.extend(self.splice_raw(
                InboxTarget::NextStep,
                0,
                steps,
                Vec::new(),
                Kind::Claim,
            )?);
        }
        if target == InboxTarget::NextTurn && !self.lists.lock().next_turn.is_empty() {
            batch.extend(self.splice_raw(InboxTarget::NextTurn, 0, 1, Vec::new(), Kind::Claim)?);
        }
        if let Some(agent) = self.agent() {
            for message in &batch {
                agent.ctx().emit::<InboxClaimed>(&ClaimNotice {
                    agent: agent.clone(),
                    message: message.clone(),
                    turn,
                });
            }
        }
        Ok(batch)
    }

    fn agent(&self) -> Option<Arc<dyn Agent>> {
        self.agent.get().and_then(Weak::upgrade)
    }

    fn locate(&self, id: &MessageId) -> Option<(InboxTarget, usize)> {
        let lists = self.lists.lock();
        [InboxTarget::NextTurn, InboxTarget::NextStep]
            .into_iter()
            .find_map(|t| {
                lists
                    .list(t)
                    .iter()
                    .position(|m| &m.id == id)
                    .map(|p| (t, p))
            })
    }

    fn splice_raw(
        &self,
        target: InboxTarget,
        start: isize,
        delete_count: usize,
        inserted: Vec<Arc<Message>>,
        kind: Kind,
    ) -> Result<Vec<Arc<Message>>, AgentError> {
        let _g = self.splice_lock.lock();
        let (start, removed_count) = {
            let lists = self.lists.lock();
            let list = lists.list(target);
            let len = list.len();
            let start = if start < 0 {
                len.saturating_sub(start.unsigned_abs())
            } else {
                (start as usize).min(len)
            };
            let removed_count = delete_count.min(len - start);
            if removed_count == 0 && inserted.is_empty() {
                return Ok(Vec::new());
            }
            // Ids must stay unique across both lists after the splice.
            let mut after = lists.clone();
            after
                .list_mut(target)
                .splice(start..start + removed_count, inserted.iter().cloned());
            let mut seen = HashSet::new();
            for m in after.next_turn.iter().chain(&after.next_step) {
                if !seen.insert(&m.id) {
                    return Err(AgentError::DuplicatePending { id: m.id.clone() });
                }
            }
            (start, removed_count)
        };
        let public_removal = kind == Kind::Public && removed_count > 0;
        self.session.append(EventKind::InboxSpliced(InboxSplice {
            target,
            start: start as u64,
            removed_count: (removed_count > 0).then_some(removed_count as u64),
            inserted: inserted.clone(),
            outcome: public_removal.then_some(SpliceOutcome::Canceled),
        }))?;
        // The log holds the splice; apply it only now, so synchronous `session/event`
        // observers saw the pre-splice lists.
        let removed: Vec<Arc<Message>> = self
            .lists
            .lock()
            .list_mut(target)
            .splice(start..start + removed_count, inserted.iter().cloned())
            .collect();
        if kind == Kind::Public
            && let Some(agent) = self.agent()
        {
            for message in &removed {
                agent.ctx().emit::<InboxDiscarded>(&InboxNotice {
                    agent: agent.clone(),
                    message: message.clone(),
                });
            }
            for message in &inserted {
                agent.ctx().emit::<InboxInserted>(&InboxNotice {
                    agent: agent.clone(),
                    message: message.clone(),
                });
            }
        }
        Ok(removed)
    }
}
