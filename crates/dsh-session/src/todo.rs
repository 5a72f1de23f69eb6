//! The session's checklist: `todo/write` records and the list they leave behind.
//!
//! A model keeps its plan for a long task as a checklist (the `todo_write` tool). Each write
//! replaces the whole list (last write wins) and is recorded as a durable `todo/write` event,
//! so the list survives resume and every front end (line chat, ACP `plan` update, a terminal
//! UI) reads the same thing from the log with [`current_todos`] instead of keeping its own copy.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::event::{EventKind, SessionEvent};

/// Where one checklist item stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on now.
    InProgress,
    /// Done.
    Completed,
}

impl TodoStatus {
    /// The wire name (`pending`, `in_progress`, `completed`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::InProgress => "in_progress",
            Self::Completed => "completed",
        }
    }

    /// A one-character box for line displays: `[ ]`, `[~]`, `[x]`.
    pub fn checkbox(self) -> &'static str {
        match self {
            Self::Pending => "[ ]",
            Self::InProgress => "[~]",
            Self::Completed => "[x]",
        }
    }
}

impl fmt::Display for TodoStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One checklist item.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TodoItem {
    /// What is to be done, as the model wrote it.
    pub content: String,
    /// Where it stands.
    pub status: TodoStatus,
}

/// The payload of `todo/write`: the whole list after the write.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TodoWrite {
    /// Every item, in the model's order.
    pub todos: Vec<TodoItem>,
}

impl TodoWrite {
    /// The session event type name.
    pub const TYPE: &'static str = "todo/write";

    /// The list `event` records, when it is a well-formed `todo/write`.
    pub fn of(event: &SessionEvent) -> Option<Self> {
        match &event.kind {
            EventKind::Other { type_name, data } if type_name == Self::TYPE => {
                serde_json::from_value(data.clone()).ok()
            }
            _ => None,
        }
    }
}

/// The session's current checklist: the last well-formed `todo/write` in `events`, empty when
/// there is none. A malformed record (another implementation's shape) is skipped rather than
/// clearing the list.
pub fn current_todos(events: &[std::sync::Arc<SessionEvent>]) -> Vec<TodoItem> {
    // A list written in a rewound turn is no longer the agent's.
    let rewound = crate::rewind::rewound_ranges(events);
    events
        .iter()
        .rev()
        .filter(|e| !crate::rewind::is_rewound(&rewound, e.seq))
        .find_map(|e| TodoWrite::of(e))
        .map(|w| w.todos)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn ev(seq: u64, type_name: &str, data: serde_json::Value) -> Arc<SessionEvent> {
        Arc::new(SessionEvent {
            seq,
            time: 0,
            kind: EventKind::other(type_name, data),
            ignorable: false,
            source_event_seqs: None,
            surface_op: None,
        })
    }

    #[test]
    fn the_last_well_formed_write_is_the_current_list() {
        let events = [
            ev(
                0,
                "todo/write",
                json!({"todos": [{"content": "a", "status": "pending"}]}),
            ),
            ev(
                1,
                "todo/write",
                json!({"todos": [{"content": "a", "status": "in_progress"},
                                 {"content": "b", "status": "completed"}]}),
            ),
            ev(2, "todo/write", json!({"todos": "not a list"})),
            ev(3, "llm/retry", json!({})),
        ];
        let list = current_todos(&events);
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].status, TodoStatus::InProgress);
        assert_eq!(list[1].status.checkbox(), "[x]");
        assert!(current_todos(&events[3..]).is_empty());
    }
}
