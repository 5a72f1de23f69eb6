//! Per-session approval policies over the configured one.
//!
//! A person can change how much a session asks while it runs: an editor's "auto" mode means
//! "stop asking me" for that thread. The front end records that choice here; the guard reads it
//! for every call of that session and of the subagents it delegates to (a subagent cannot ask
//! anyone, so under the configured `ask` it would be refused what its parent may do). It
//! replaces the configured policy only where that policy would ask: a deny rule still denies,
//! and an `ask` rule the user wrote still asks (unlike `approval = "auto"` in config, which the
//! user wrote in the same file as the rule).

use std::collections::HashMap;

use dsh_session::{SessionHeader, SessionId, SessionOrigin};
use parking_lot::Mutex;

use crate::approval::ApprovalPolicy;

/// The overrides in force, by session. Provided on the context by [`crate::install`]; a
/// front end finds it with `ctx.get::<SessionPolicies>()`.
#[derive(Debug, Default)]
pub struct SessionPolicies {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    by_session: HashMap<SessionId, ApprovalPolicy>,
    /// Subagent → the session that delegated to it, learned from the subagents' headers as
    /// their calls arrive, so a grandchild finds the person's choice two hops up.
    parents: HashMap<SessionId, SessionId>,
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
    /// of the nearest delegating ancestor that has one. A fork is not a subagent: it is a
    /// conversation of its own and does not inherit.
    pub fn for_session(&self, header: &SessionHeader) -> Option<ApprovalPolicy> {
        let mut inner = self.inner.lock();
        if let (Some(SessionOrigin::Subagent), Some(parent)) =
            (header.origin, &header.parent_session)
        {
            inner.parents.insert(header.id.clone(), parent.clone());
        }
        let mut at = Some(&header.id);
        // Bounded by the number of known links, so a corrupt cycle cannot spin.
        for _ in 0..=inner.parents.len() {
            let id = at?;
            if let Some(p) = inner.by_session.get(id) {
                return Some(*p);
            }
            at = inner.parents.get(id);
        }
        None
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
}
