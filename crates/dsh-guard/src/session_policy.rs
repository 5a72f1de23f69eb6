//! Per-session approval policies over the configured one.
//!
//! A person can change how much a session asks while it runs: an editor's "auto" mode means
//! "stop asking me" for that thread only. The front end records that choice here; the guard
//! reads it for every call of that session (and only that session: a subagent has its own
//! id, so it keeps the configured policy). It replaces the configured policy only where that
//! policy would ask: a deny rule still denies, and an `ask` rule the user wrote still asks
//! (unlike `approval = "auto"` in config, which the user wrote in the same file as the rule).

use std::collections::HashMap;

use dsh_session::SessionId;
use parking_lot::Mutex;

use crate::approval::ApprovalPolicy;

/// The overrides in force, by session. Provided on the context by [`crate::install`]; a
/// front end finds it with `ctx.get::<SessionPolicies>()`.
#[derive(Debug, Default)]
pub struct SessionPolicies {
    by_session: Mutex<HashMap<SessionId, ApprovalPolicy>>,
}

impl SessionPolicies {
    /// Sets (`Some`) or clears (`None`) `session`'s policy. A front end clears it when the
    /// session closes, so the map holds live sessions only.
    pub fn set(&self, session: &SessionId, policy: Option<ApprovalPolicy>) {
        let mut map = self.by_session.lock();
        match policy {
            Some(p) => {
                map.insert(session.clone(), p);
            }
            None => {
                map.remove(session);
            }
        }
    }

    /// `session`'s policy, when a front end set one.
    pub fn get(&self, session: &SessionId) -> Option<ApprovalPolicy> {
        self.by_session.lock().get(session).copied()
    }
}
