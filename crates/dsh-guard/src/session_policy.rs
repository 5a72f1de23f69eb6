//! Per-session policies over the configured ones: approval and sandbox.
//!
//! A person can change how much a session asks while it runs: an editor's "auto" mode means
//! "stop asking me" for that thread. The front end records that choice here; the guard reads it
//! for every call of that session and of the subagents it delegates to (a subagent cannot ask
//! anyone, so under the configured `ask` it would be refused what its parent may do). It
//! replaces the configured policy only where that policy would ask: a deny rule still denies,
//! and an `ask` rule the user wrote still asks (unlike `approval = "auto"` in config, which the
//! user wrote in the same file as the rule).
//!
//! A session can also be *narrowed* to a stricter sandbox mode than the configured one (plan
//! mode runs its commands read-only): the guard decides that session's calls under the
//! narrower mode, and [`crate::GuardSupervision`] confines its commands with it. A narrowing
//! never widens: `danger-full-access` over a configured `read-only` changes nothing. It
//! reaches the session's subagents the same way the approval override does.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use dsh_session::{SessionHeader, SessionId, SessionOrigin};
use parking_lot::Mutex;

use crate::approval::ApprovalPolicy;
use crate::mode::SandboxMode;

/// The overrides in force, by session. Provided on the context by [`crate::install`]; a
/// front end finds it with `ctx.get::<SessionPolicies>()`.
#[derive(Debug, Default)]
pub struct SessionPolicies {
    inner: Mutex<Inner>,
    /// Whether a supervision confines commands with the narrowings (see
    /// [`narrows_commands`](Self::narrows_commands)).
    commands_narrowed: AtomicBool,
}

#[derive(Debug, Default)]
struct Inner {
    by_session: HashMap<SessionId, ApprovalPolicy>,
    sandbox: HashMap<SessionId, SandboxMode>,
    /// Subagent → the session that delegated to it, learned from the subagents' headers as
    /// their calls arrive, so a grandchild finds the person's choice two hops up.
    parents: HashMap<SessionId, SessionId>,
}

impl Inner {
    /// Learns `header`'s delegating parent, if it is a subagent. A fork is not a subagent: it
    /// is a conversation of its own and does not inherit.
    fn learn(&mut self, header: &SessionHeader) {
        if let (Some(SessionOrigin::Subagent), Some(parent)) =
            (header.origin, &header.parent_session)
        {
            self.parents.insert(header.id.clone(), parent.clone());
        }
    }

    /// The nearest value of `map` from `session` up its delegating ancestors.
    fn nearest<T: Copy>(&self, map: &HashMap<SessionId, T>, session: &SessionId) -> Option<T> {
        let mut at = Some(session);
        // Bounded by the number of known links, so a corrupt cycle cannot spin.
        for _ in 0..=self.parents.len() {
            let id = at?;
            if let Some(value) = map.get(id) {
                return Some(*value);
            }
            at = self.parents.get(id);
        }
        None
    }
}

impl SessionPolicies {
    /// Sets (`Some`) or clears (`None`) `session`'s policy. A front end clears it when the
    /// session closes, so the map holds live sessions only.
    pub fn set(&self, session: &SessionId, policy: Option<ApprovalPolicy>) {
        let mut inner = self.inner.lock();
        match policy {
            Some(p) => {
                inner.by_session.insert(session.clone(), p);
            }
            None => {
                inner.by_session.remove(session);
            }
        }
    }

    /// `session`'s own policy, when a front end set one.
    pub fn get(&self, session: &SessionId) -> Option<ApprovalPolicy> {
        self.inner.lock().by_session.get(session).copied()
    }

    /// The policy the session of `header` runs under: its own, else, for a subagent, the one
    /// of the nearest delegating ancestor that has one.
    pub fn for_session(&self, header: &SessionHeader) -> Option<ApprovalPolicy> {
        let mut inner = self.inner.lock();
        inner.learn(header);
        inner.nearest(&inner.by_session, &header.id)
    }

    /// Narrows (`Some`) `session`'s sandbox to `mode`, or lifts its narrowing (`None`). The
    /// owner of the narrowing (plan mode) lifts it when it ends or the session closes.
    pub fn narrow(&self, session: &SessionId, mode: Option<SandboxMode>) {
        let mut inner = self.inner.lock();
        match mode {
            Some(m) => {
                inner.sandbox.insert(session.clone(), m);
            }
            None => {
                inner.sandbox.remove(session);
            }
        }
    }

    /// The narrowing in force for `session` (its own, else its nearest delegating
    /// ancestor's, as far as their headers were seen by [`for_session`](Self::for_session) or
    /// [`sandbox_for`](Self::sandbox_for)).
    pub fn sandbox(&self, session: &SessionId) -> Option<SandboxMode> {
        let inner = self.inner.lock();
        inner.nearest(&inner.sandbox, session)
    }

    /// The narrowing for the session of `header`, learning its delegating parent first.
    pub fn sandbox_for(&self, header: &SessionHeader) -> Option<SandboxMode> {
        let mut inner = self.inner.lock();
        inner.learn(header);
        inner.nearest(&inner.sandbox, &header.id)
    }

    /// Whether narrowings reach the commands themselves: true once a
    /// [`crate::GuardSupervision`] reads these policies. Without that, a narrowed session's
    /// commands would run under the configured mode, so whoever narrows must refuse them.
    pub fn narrows_commands(&self) -> bool {
        self.commands_narrowed.load(Ordering::Acquire)
    }

    /// Records that a supervision confines commands with the narrowings.
    pub(crate) fn mark_commands_narrowed(&self) {
        self.commands_narrowed.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use dsh_session::SessionMeta;

    use super::*;

    fn header(id: &str, parent: Option<&str>, origin: Option<SessionOrigin>) -> SessionHeader {
        SessionHeader::new(
            SessionId::new(id),
            0,
            SessionMeta {
                parent_session: parent.map(SessionId::new),
                origin,
                ..SessionMeta::default()
            },
        )
    }

    #[test]
    fn subagents_run_under_their_delegating_ancestors_policy_and_forks_do_not() {
        let policies = SessionPolicies::default();
        let sub = Some(SessionOrigin::Subagent);
        let parent = header("p", None, None);
        let child = header("c", Some("p"), sub);
        let grandchild = header("g", Some("c"), sub);
        let fork = header("f", Some("p"), None);
        assert_eq!(policies.for_session(&child), None);

        policies.set(&SessionId::new("p"), Some(ApprovalPolicy::Auto));
        assert_eq!(policies.for_session(&parent), Some(ApprovalPolicy::Auto));
        assert_eq!(policies.for_session(&child), Some(ApprovalPolicy::Auto));
        assert_eq!(
            policies.for_session(&grandchild),
            Some(ApprovalPolicy::Auto)
        );
        assert_eq!(
            policies.for_session(&fork),
            None,
            "a fork is its own session"
        );

        // The person's later choice reaches the whole delegation at once.
        policies.set(&SessionId::new("p"), None);
        assert_eq!(policies.for_session(&grandchild), None);
        // A subagent's own override is nearer than its parent's.
        policies.set(&SessionId::new("p"), Some(ApprovalPolicy::Auto));
        policies.set(&SessionId::new("c"), Some(ApprovalPolicy::Never));
        assert_eq!(
            policies.for_session(&grandchild),
            Some(ApprovalPolicy::Never)
        );
    }

    #[test]
    fn a_narrowing_reaches_subagents_and_is_lifted_with_none() {
        let policies = SessionPolicies::default();
        let sub = Some(SessionOrigin::Subagent);
        let child = header("c", Some("p"), sub);
        let fork = header("f", Some("p"), None);
        policies.narrow(&SessionId::new("p"), Some(SandboxMode::ReadOnly));
        assert_eq!(policies.sandbox_for(&child), Some(SandboxMode::ReadOnly));
        // Learned from the header: the supervision only knows the id.
        assert_eq!(
            policies.sandbox(&SessionId::new("c")),
            Some(SandboxMode::ReadOnly)
        );
        assert_eq!(
            policies.sandbox_for(&fork),
            None,
            "a fork is its own session"
        );
        policies.narrow(&SessionId::new("p"), None);
        assert_eq!(policies.sandbox(&SessionId::new("c")), None);
    }
}
