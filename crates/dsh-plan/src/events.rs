//! The durable events of plan mode: entering and leaving it, each plan proposed, and what the
//! person decided. They are plugin events (ignorable by a reader that does not know them)
//! and never model input: the model learns of a change from a notice in its context or from
//! `exit_plan_mode`'s result.

use std::sync::Arc;

use dsh_session::{EventKind, SessionEvent};
use serde::{Deserialize, Serialize};

/// `plan/mode`: plan mode turned on or off.
pub const MODE_EVENT: &str = "plan/mode";

/// `plan/proposed`: the model submitted a plan with `exit_plan_mode`.
pub const PROPOSED_EVENT: &str = "plan/proposed";

/// `plan/decided`: what became of a proposed plan.
pub const DECIDED_EVENT: &str = "plan/decided";

/// Who turned plan mode on or off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    /// The session was started in plan mode (`--plan`).
    Start,
    /// The person switched it (`/plan`, an editor's mode).
    User,
    /// The person approved the plan.
    Approval,
}

/// The data of a [`MODE_EVENT`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModeChange {
    /// Whether plan mode is on from here.
    pub active: bool,
    /// Who switched it.
    pub by: Trigger,
}

/// The data of a [`PROPOSED_EVENT`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Proposed {
    /// The `exit_plan_mode` call.
    pub call_id: String,
    /// The plan, in Markdown.
    pub plan: String,
}

/// What became of a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Approved: the session left plan mode to carry it out.
    Approved,
    /// Not approved: the model revises it.
    Rejected,
    /// Nobody could review it (a headless run): it is the run's answer.
    Unreviewed,
}

/// The data of a [`DECIDED_EVENT`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Decided {
    /// The `exit_plan_mode` call.
    pub call_id: String,
    /// The decision.
    pub decision: Decision,
    /// What the person said to change, when they said anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<String>,
}

impl ModeChange {
    /// The change `event` records, when it is a well-formed [`MODE_EVENT`].
    pub fn of(event: &SessionEvent) -> Option<ModeChange> {
        data_of(event, MODE_EVENT)
    }
}

impl Proposed {
    /// The plan `event` records, when it is a well-formed [`PROPOSED_EVENT`].
    pub fn of(event: &SessionEvent) -> Option<Proposed> {
        data_of(event, PROPOSED_EVENT)
    }
}

impl Decided {
    /// The decision `event` records, when it is a well-formed [`DECIDED_EVENT`].
    pub fn of(event: &SessionEvent) -> Option<Decided> {
        data_of(event, DECIDED_EVENT)
    }
}

fn data_of<T: for<'de> Deserialize<'de>>(event: &SessionEvent, name: &str) -> Option<T> {
    match &event.kind {
        EventKind::Other { type_name, data } if type_name == name => {
            serde_json::from_value(data.clone()).ok()
        }
        _ => None,
    }
}

/// Whether plan mode is on at the end of `events`: the last [`MODE_EVENT`] says, and a log
/// without one is not in plan mode. The state is a fold of the log, so resume and fork
/// recover it with nothing else kept.
pub fn active_in(events: &[Arc<SessionEvent>]) -> bool {
    events
        .iter()
        .rev()
        .find_map(|e| ModeChange::of(e))
        .is_some_and(|change| change.active)
}

/// The last plan proposed in `events`, when there is one.
pub fn last_plan(events: &[Arc<SessionEvent>]) -> Option<String> {
    events
        .iter()
        .rev()
        .find_map(|e| Proposed::of(e))
        .map(|p| p.plan)
}
