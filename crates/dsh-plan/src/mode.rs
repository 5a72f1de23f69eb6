//! Plan mode's state: which sessions are planning, kept in step with the log and the guard.
//!
//! A session in plan mode explores without changing anything: the guard confines its
//! commands read-only (a per-session narrowing in [`SessionPolicies`], which its subagents
//! inherit) and [`crate::refusal`] refuses every call that is not read-only. The state is a
//! fold of the session's `plan/mode` events ([`crate::events::active_in`]), restored when a
//! session is opened, so resuming a planning session keeps planning.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use dsh_agent::AgentRef;
use dsh_guard::{SandboxMode, SessionPolicies};
use dsh_session::{Message, SessionHeader, SessionId, SessionOrigin};
use parking_lot::Mutex;

use crate::events::{MODE_EVENT, ModeChange, Trigger};

/// The plugin name messages and notices carry.
pub const PLAN_PLUGIN: &str = "plan";

/// What the model is told when plan mode starts.
pub const ENTERED: &str = "<system-reminder>Plan mode is on. Explore and plan; change nothing \
yet. Calls that could change files or the system are refused, and `bash` runs read-only (it can \
read, search and run checks, not write). If a choice is the user's, ask with \
`ask_user_question`. When the plan is ready, call `exit_plan_mode` with the whole plan in \
Markdown: the user approves it (then you carry it out) or says what to change.</system-reminder>";

/// What the model is told when the person ends plan mode.
pub const LEFT: &str = "<system-reminder>Plan mode is off: you may change files and run \
commands again, under the session's usual sandbox and approvals.</system-reminder>";

/// Why plan mode could not change.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The change could not be recorded in the session (nothing changed).
    #[error("cannot record the plan mode change: {0}")]
    Log(#[from] dsh_session::SessionError),
}

/// Plan mode of every live session. Provided on the context by [`crate::PlanPlugin`].
#[derive(Debug)]
pub struct PlanMode {
    active: Mutex<HashSet<SessionId>>,
    /// Subagent → the session that delegated to it, learned from headers as calls arrive.
    parents: Mutex<HashMap<SessionId, SessionId>>,
    /// Serializes switches, so the log, the set and the guard agree.
    switching: Mutex<()>,
    policies: Option<Arc<SessionPolicies>>,
}

impl PlanMode {
    /// Plan mode narrowing sessions through `policies` (the guard's; `None` where no guard
    /// is mounted, and then commands are refused while planning).
    pub fn new(policies: Option<Arc<SessionPolicies>>) -> Self {
        Self {
            active: Mutex::default(),
            parents: Mutex::default(),
            switching: Mutex::new(()),
            policies,
        }
    }

    /// Whether `session` itself is planning.
    pub fn is_active(&self, session: &SessionId) -> bool {
        self.active.lock().contains(session)
    }

    /// Whether the session of `header` plans: itself, or (a subagent) the session that
    /// delegated to it, however far up.
    pub fn governs(&self, header: &SessionHeader) -> bool {
        if let (Some(SessionOrigin::Subagent), Some(parent)) =
            (header.origin, &header.parent_session)
        {
            self.parents
                .lock()
                .insert(header.id.clone(), parent.clone());
        }
        let active = self.active.lock();
        let parents = self.parents.lock();
        let mut at = Some(&header.id);
        // Bounded by the number of known links, so a corrupt cycle cannot spin.
        for _ in 0..=parents.len() {
            let Some(id) = at else {
                return false;
            };
            if active.contains(id) {
                return true;
            }
            at = parents.get(id);
        }
        false
    }

    /// Whether a planning session's commands really run read-only (the guard's supervision
    /// confines them); without that they are refused.
    pub fn confines_commands(&self) -> bool {
        self.policies.as_ref().is_some_and(|p| p.narrows_commands())
    }

    /// Turns plan mode of `agent`'s session on or off; `false` when it already was. The
    /// change is in force before it is logged (a front end reacting to the `plan/mode` event
    /// sees it), and undone if it cannot be logged. Unless the tool result says it already
    /// (an approval), the model is told at its next step.
    pub fn set(&self, agent: &AgentRef, active: bool, by: Trigger) -> Result<bool, PlanError> {
        let _switching = self.switching.lock();
        let id = agent.id().clone();
        if self.is_active(&id) == active {
            return Ok(false);
        }
        self.apply(&id, active);
        let change = ModeChange { active, by };
        if let Err(e) = agent.session().append_plugin(MODE_EVENT, &change) {
            self.apply(&id, !active);
            return Err(e.into());
        }
        if by != Trigger::Approval {
            let (text, summary) = if active {
                (ENTERED, "plan mode on")
            } else {
                (LEFT, "plan mode off")
            };
            if let Err(e) = agent.inject(Message::notice(PLAN_PLUGIN, text, summary)) {
                tracing::warn!(session = %id, error = %e, "cannot tell the model about plan mode");
            }
        }
        Ok(true)
    }

    /// Takes up the state `agent`'s log ends in (a resumed or forked session).
    pub fn restore(&self, agent: &AgentRef) {
        if crate::events::active_in(&agent.session().events()) {
            self.apply(agent.id(), true);
        }
    }

    /// Forgets `session` (its agent is gone).
    pub fn forget(&self, session: &SessionId) {
        self.apply(session, false);
        self.parents.lock().remove(session);
    }

    fn apply(&self, session: &SessionId, active: bool) {
        if active {
            self.active.lock().insert(session.clone());
        } else {
            self.active.lock().remove(session);
        }
        if let Some(policies) = &self.policies {
            policies.narrow(session, active.then_some(SandboxMode::ReadOnly));
        }
    }
}
