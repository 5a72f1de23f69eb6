//! Progress lines for the plugin events a person wants to see while a turn runs: the model's
//! checklist (`todo/write`) and each retry of a failed model request (`llm/retry`), so an
//! unreachable server is not fifteen seconds of silence.

use dsh_session::{TodoWrite, clip_chars};
use serde_json::Value;

/// The checklist as a block of lines: a heading with the count done, then one box per item.
pub fn todo_lines(write: &TodoWrite) -> String {
    if write.todos.is_empty() {
        return "plan: (cleared)\n".to_owned();
    }
    let done = write
        .todos
        .iter()
        .filter(|t| t.status == dsh_session::TodoStatus::Completed)
        .count();
    let mut out = format!("plan ({done}/{} done):\n", write.todos.len());
    for t in &write.todos {
        out.push_str(&format!(
            "  {} {}\n",
            t.status.checkbox(),
            clip_chars(&t.content, 120)
        ));
    }
    out
}

/// `retrying 2/5 in 1 s: <failure>` for an `llm/retry` record (its fields as the retry plugin
/// writes them; a missing field degrades the line instead of hiding it).
pub fn retry_line(data: &Value) -> String {
    let n = data.get("retry").and_then(Value::as_u64).unwrap_or(1);
    let of = data
        .get("maxRetries")
        .and_then(Value::as_u64)
        .map_or_else(String::new, |m| format!("/{m}"));
    let delay_ms = data.get("delayMs").and_then(Value::as_u64).unwrap_or(0);
    let why = data
        .pointer("/failure/message")
        .and_then(Value::as_str)
        .unwrap_or("the request failed");
    format!(
        "retrying {n}{of} in {}: {}",
        seconds(delay_ms),
        clip_chars(why.trim(), 200)
    )
}

/// `1 s`, `0.5 s`, `12 s`: whole seconds where exact, one decimal otherwise.
fn seconds(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_session::{TodoItem, TodoStatus};
    use serde_json::json;

    #[test]
    fn a_retry_reads_as_number_budget_delay_and_cause() {
        let data = json!({"retry": 2, "maxRetries": 5, "delayMs": 1000,
                          "failure": {"code": "TRANSPORT", "message": "connection refused"}});
        assert_eq!(retry_line(&data), "retrying 2/5 in 1 s: connection refused");
        let data = json!({"retry": 7, "delayMs": 1500, "failure": {"message": "busy"}});
        assert_eq!(retry_line(&data), "retrying 7 in 1.5 s: busy");
    }

    #[test]
    fn the_checklist_shows_a_box_per_item_and_the_count_done() {
        let write = TodoWrite {
            todos: vec![
                TodoItem {
                    content: "read".into(),
                    status: TodoStatus::Completed,
                },
                TodoItem {
                    content: "fix".into(),
                    status: TodoStatus::Pending,
                },
            ],
        };
        assert_eq!(
            todo_lines(&write),
            "plan (1/2 done):\n  [x] read\n  [ ] fix\n"
        );
    }
}
