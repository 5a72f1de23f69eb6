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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use dsh_session::EventKind;
    use serde_json::json;

    fn event(data: serde_json::Value) -> SessionEvent {
        SessionEvent {
            seq: 3,
            time: 0,
            kind: EventKind::other(TodoWrite::TYPE, data),
            ignorable: false,
            source_event_seqs: None,
            surface_op: None,
        }
    }

    #[test]
    fn a_todo_write_is_the_whole_plan_with_medium_priorities_and_a_malformed_one_is_nothing() {
        let update = plan_update(&event(json!({"todos": [
            {"content": "a", "status": "pending"},
            {"content": "b", "status": "completed"}
        ]})))
        .unwrap();
        assert_eq!(
            serde_json::to_value(&update).unwrap(),
            json!({"sessionUpdate": "plan", "entries": [
                {"content": "a", "priority": "medium", "status": "pending"},
                {"content": "b", "priority": "medium", "status": "completed"}
            ]})
        );
        assert!(plan_update(&event(json!({"todos": 3}))).is_none());
    }
}
