//! `todo/write` → the ACP `plan` session update: the model's checklist in the editor's plan
//! view. ACP has no priorities in the log's vocabulary, so every entry is `medium` (as the
//! reference bridge does); each update carries the whole list, which the client replaces.

use agent_client_protocol::v1::schema::{
    Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus, SessionUpdate,
};
use dsh_session::{SessionEvent, TodoStatus, TodoWrite};

/// The `plan` update `event` stands for, when it is a well-formed `todo/write`.
pub(crate) fn plan_update(event: &SessionEvent) -> Option<SessionUpdate> {
    let write = TodoWrite::of(event)?;
    let entries = write
        .todos
        .into_iter()
        .map(|t| {
            let status = match t.status {
                TodoStatus::Pending => PlanEntryStatus::Pending,
                TodoStatus::InProgress => PlanEntryStatus::InProgress,
                TodoStatus::Completed => PlanEntryStatus::Completed,
            };
            PlanEntry::new(t.content, PlanEntryPriority::Medium, status)
        })
        .collect();
    Some(SessionUpdate::Plan(Plan::new(entries)))
}
