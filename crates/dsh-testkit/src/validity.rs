//! Provider validity of a conversation history.
//!
//! Real providers reject a request in which a tool call has no result, or a result answers
//! no call. Both test doubles run these checks on every request so such histories fail the
//! test that produced them.

use std::collections::HashMap;
use std::sync::Arc;

use dsh_llm::{ContentBlock, Message, Role};
use serde_json::Value;

/// Violations in a history of [`Message`]s: every assistant tool call must be answered by
/// exactly one tool result later in the history, and every tool result must answer an
/// earlier call.
pub fn check_messages(messages: &[Arc<Message>]) -> Vec<String> {
    let calls = messages.iter().enumerate().flat_map(|(i, m)| {
        let is_assistant = m.role == Role::Assistant;
        m.content.iter().filter_map(move |b| match b {
            ContentBlock::ToolCall { id, .. } if is_assistant => Some((i, id.as_str().to_owned())),
            _ => None,
        })
    });
    let results = messages.iter().enumerate().flat_map(|(i, m)| {
        m.content.iter().filter_map(move |b| match b {
            ContentBlock::ToolResult { tool_call_id, .. } => {
                Some((i, tool_call_id.as_str().to_owned()))
            }
            _ => None,
        })
    });
    check(calls.collect(), results.collect())
}

/// The same check on a wire `messages` array: every assistant `tool_calls[i].id` (OpenAI) or
/// `tool_use` block (Anthropic) is answered by exactly one later `{role: tool, tool_call_id}`
/// message or `tool_result` block, and every result answers an earlier call.
pub fn check_wire_messages(messages: &[Value]) -> Vec<String> {
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        match m.get("role").and_then(Value::as_str) {
            // Anthropic Messages: `tool_use` blocks in assistant turns, `tool_result` blocks
            // in user turns.
            Some(role @ ("assistant" | "user"))
                if m.get("content").is_some_and(Value::is_array) =>
            {
                for block in m["content"].as_array().into_iter().flatten() {
                    match (role, block.get("type").and_then(Value::as_str)) {
                        ("assistant", Some("tool_use")) => {
                            let id = block.get("id").and_then(Value::as_str).unwrap_or_default();
                            calls.push((i, id.to_owned()));
                        }
                        ("user", Some("tool_result")) => {
                            let id = block
                                .get("tool_use_id")
                                .and_then(Value::as_str)
                                .unwrap_or_default();
                            results.push((i, id.to_owned()));
                        }
                        _ => {}
                    }
                }
            }
            Some("assistant") => {
                for call in m
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let id = call.get("id").and_then(Value::as_str).unwrap_or_default();
                    calls.push((i, id.to_owned()));
                }
            }
            Some("tool") => {
                let id = m
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                results.push((i, id.to_owned()));
            }
            _ => {}
        }
    }
    check(calls, results)
}

/// The same check on a Responses API `input` array: every `function_call` is answered by
/// exactly one later `function_call_output` with its `call_id`.
pub fn check_response_items(items: &[Value]) -> Vec<String> {
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let id = item
            .get("call_id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        match item.get("type").and_then(Value::as_str) {
            Some("function_call") => calls.push((i, id)),
            Some("function_call_output") => results.push((i, id)),
            _ => {}
        }
    }
    check(calls, results)
}

fn check(calls: Vec<(usize, String)>, results: Vec<(usize, String)>) -> Vec<String> {
    let mut violations = Vec::new();
    let mut first_call: HashMap<&str, usize> = HashMap::new();
    for (i, id) in &calls {
        first_call.entry(id.as_str()).or_insert(*i);
        let answers = results.iter().filter(|(j, r)| j > i && r == id).count();
        if answers != 1 {
            violations.push(format!(
                "tool call `{id}` (message {i}) has {answers} results after it; expected exactly 1"
            ));
        }
    }
    for (j, id) in &results {
        if first_call.get(id.as_str()).is_none_or(|i| i >= j) {
            violations.push(format!(
                "tool result for `{id}` (message {j}) answers no earlier tool call"
            ));
        }
    }
    violations
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_llm::CallId;
    use serde_json::json;

    fn call(id: &str) -> Arc<Message> {
        Arc::new(Message::assistant(
            vec![ContentBlock::ToolCall {
                id: CallId::new(id),
                name: "t".into(),
                arguments: "{}".into(),
            }],
            "p",
            "m",
        ))
    }

    fn result(id: &str) -> Arc<Message> {
        Arc::new(Message::tool_result(CallId::new(id), vec![], false))
    }

    #[test]
    fn each_call_needs_exactly_one_later_result() {
        assert!(check_messages(&[call("a"), result("a")]).is_empty());
        assert_eq!(check_messages(&[call("a")]).len(), 1);
        assert_eq!(
            check_messages(&[call("a"), result("a"), result("a")]).len(),
            1
        );
        assert_eq!(check_messages(&[result("a"), call("a")]).len(), 2);
        assert_eq!(check_messages(&[result("z")]).len(), 1);
    }

    #[test]
    fn wire_check_pairs_tool_calls_with_tool_messages() {
        let ok = [
            json!({"role": "user", "content": "hi"}),
            json!({"role": "assistant", "content": "", "tool_calls": [{"id": "c1"}, {"id": "c2"}]}),
            json!({"role": "tool", "tool_call_id": "c1", "content": "x"}),
            json!({"role": "tool", "tool_call_id": "c2", "content": "y"}),
        ];
        assert!(check_wire_messages(&ok).is_empty());
        assert_eq!(check_wire_messages(&ok[..3]).len(), 1);
    }
}
