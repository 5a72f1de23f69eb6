//! The `todo_write` tool: the model's checklist for a multi-step task.
//!
//! Each call replaces the whole list and records it as a durable `todo/write` event in the
//! calling agent's session (see [`dsh_session::todo`]), so the list is in the log, survives
//! resume, and every front end shows the same one. The tool keeps no state of its own.

use async_trait::async_trait;
use dsh_session::{TodoItem, TodoStatus, TodoWrite};
use dsh_tools::{
    ToolCallContext, ToolEffects, ToolError, ToolKind, ToolOutput, ToolPresentation, TypedTool,
};
use schemars::JsonSchema;
use serde::Deserialize;

/// Most items one list may hold: a checklist, not a backlog.
pub(crate) const MAX_TODOS: usize = 100;

const DESCRIPTION: &str = "\
Keeps your checklist for the current task, shown to the user. Use it for work of three or \
more steps: write the whole list each time (it replaces the previous one), with exactly one \
item `in_progress` while you work, and mark items `completed` as soon as they are done. \
Statuses: `pending`, `in_progress`, `completed`.";

/// Where one item stands, as the model writes it.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoArgStatus {
    /// Not started.
    Pending,
    /// Being worked on now.
    InProgress,
    /// Done.
    Completed,
}

impl From<TodoArgStatus> for TodoStatus {
    fn from(s: TodoArgStatus) -> Self {
        match s {
            TodoArgStatus::Pending => Self::Pending,
            TodoArgStatus::InProgress => Self::InProgress,
            TodoArgStatus::Completed => Self::Completed,
        }
    }
}

/// One item of the list.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct TodoArg {
    /// What is to be done, imperative and short ("Run the tests").
    pub content: String,
    /// Where it stands.
    pub status: TodoArgStatus,
}

/// Arguments of `todo_write`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct TodoWriteArgs {
    /// The whole checklist, in order; it replaces the previous one.
    pub todos: Vec<TodoArg>,
}

/// The `todo_write` tool. Exclusive: two writes in one step must apply in the model's order.
#[derive(Debug, Clone, Copy, Default)]
pub struct TodoWriteTool;

#[async_trait]
impl TypedTool for TodoWriteTool {
    type Args = TodoWriteArgs;

    fn name(&self) -> &str {
        "todo_write"
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    /// The list lives in the session.
    fn effects(&self, _args: &TodoWriteArgs) -> ToolEffects {
        ToolEffects::none()
    }

    async fn run(
        &self,
        args: TodoWriteArgs,
        call: &ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        if args.todos.len() > MAX_TODOS {
            return Err(ToolError::new(format!(
                "a checklist holds at most {MAX_TODOS} items; got {}",
                args.todos.len()
            )));
        }
        let todos: Vec<TodoItem> = args
            .todos
            .into_iter()
            .map(|t| TodoItem {
                content: t.content.trim().to_owned(),
                status: t.status.into(),
            })
            .collect();
        if let Some(i) = todos.iter().position(|t| t.content.is_empty()) {
            return Err(ToolError::new(format!("item {} has no content", i + 1)));
        }
        let Some(caller) = call.caller() else {
            return Err(ToolError::new(
                "todo_write needs a calling agent whose session keeps the list",
            ));
        };
        let write = TodoWrite { todos };
        caller
            .session
            .append_plugin(TodoWrite::TYPE, &write)
            .map_err(|e| ToolError::new(format!("the checklist could not be recorded: {e}")))?;
        Ok(ToolOutput::text(summary(&write.todos)))
    }

    fn present_call(&self, _args: &TodoWriteArgs) -> Option<ToolPresentation> {
        Some(ToolPresentation::Generic {
            title: "Update the plan".to_owned(),
            kind: ToolKind::Think,
        })
    }
}

/// What the model reads back: the counts and the list as recorded.
fn summary(todos: &[TodoItem]) -> String {
    if todos.is_empty() {
        return "Checklist cleared.".to_owned();
    }
    let done = todos
        .iter()
        .filter(|t| t.status == TodoStatus::Completed)
        .count();
    let mut text = format!("Checklist updated ({done}/{} completed):", todos.len());
    for t in todos {
        text.push_str(&format!("\n{} {}", t.status.checkbox(), t.content));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_counts_completed_items_and_lists_each_with_its_box() {
        let todos = [
            TodoItem {
                content: "read".into(),
                status: TodoStatus::Completed,
            },
            TodoItem {
                content: "fix".into(),
                status: TodoStatus::InProgress,
            },
        ];
        assert_eq!(
            summary(&todos),
            "Checklist updated (1/2 completed):\n[x] read\n[~] fix"
        );
        assert_eq!(summary(&[]), "Checklist cleared.");
    }
}

#[cfg(test)]
mod run_tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use dsh_session::CallId;
    use tokio_util::sync::CancellationToken;

    fn call() -> ToolCallContext {
        ToolCallContext::new(
            CallId::new("c"),
            "todo_write",
            "{}",
            None,
            CancellationToken::new(),
        )
    }

    fn item(content: &str) -> TodoArg {
        TodoArg {
            content: content.to_owned(),
            status: TodoArgStatus::Pending,
        }
    }

    #[tokio::test]
    async fn blank_items_oversized_lists_and_callers_without_a_session_are_refused() {
        let blank = TodoWriteArgs {
            todos: vec![item("ok"), item("  ")],
        };
        let err = TodoWriteTool.run(blank, &call()).await.unwrap_err();
        assert!(
            err.message.contains("item 2 has no content"),
            "{}",
            err.message
        );
        let huge = TodoWriteArgs {
            todos: (0..=MAX_TODOS).map(|i| item(&i.to_string())).collect(),
        };
        let err = TodoWriteTool.run(huge, &call()).await.unwrap_err();
        assert!(err.message.contains("at most 100"), "{}", err.message);
        let orphan = TodoWriteArgs {
            todos: vec![item("x")],
        };
        let err = TodoWriteTool.run(orphan, &call()).await.unwrap_err();
        assert!(err.message.contains("calling agent"), "{}", err.message);
    }
}
