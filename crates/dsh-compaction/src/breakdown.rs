//! What fills the context: the next request split into its system prompt, tool schemas and
//! conversation, and the largest single messages (`/context` in the terminal UI).
//!
//! Parts are the heuristic of [`crate::estimate`] scaled by the calibration of
//! [`context_use`](crate::context_use), so they add up to about its measured total.

use std::collections::HashMap;
use std::sync::Arc;

use dsh_session::{ContentBlock, Message, MessageSource, Role, Session, clip_chars};
use serde_json::Value;

use crate::estimate::{message_tokens, tokens_of_chars};

/// The next request, part by part.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ContextBreakdown {
    /// The system prompt.
    pub system: u64,
    /// The tool schemas.
    pub tools: u64,
    /// How many tools they describe.
    pub tool_count: usize,
    /// The conversation (every message the next request replays).
    pub history: u64,
    /// The largest messages of the conversation, largest first: a label a person recognizes
    /// and its tokens.
    pub largest: Vec<(String, u64)>,
}

/// `session`'s next request split into parts, each scaled by `calibration`; the `top`
/// largest messages are named.
pub fn context_breakdown(session: &Session, calibration: f64, top: usize) -> ContextBreakdown {
    let scale = |raw: u64| (raw as f64 * calibration).ceil() as u64;
    let header = session.request_header();
    let system = header
        .as_ref()
        .and_then(|h| h.system.as_deref())
        .map_or(0, |s| tokens_of_chars(s.chars().count()));
    let tools: Vec<&Value> = header
        .as_ref()
        .and_then(|h| h.tools.as_ref())
        .map(|t| t.iter().collect())
        .unwrap_or_default();
    let tool_tokens = tools
        .iter()
        .map(|t| tokens_of_chars(t.to_string().chars().count()))
        .sum();
    let messages = session.derive_messages();
    // Which tool a result answers, from the calls before it.
    let mut names: HashMap<String, String> = HashMap::new();
    let mut sized: Vec<(String, u64)> = Vec::new();
    let mut history = 0;
    for m in &messages {
        for (id, name, _) in m.tool_calls() {
            names.insert(id.as_str().to_owned(), name.to_owned());
        }
        let tokens = message_tokens(m);
        history += tokens;
        sized.push((label(m, &names), tokens));
    }
    sized.sort_by_key(|s| std::cmp::Reverse(s.1));
    sized.truncate(top);
    ContextBreakdown {
        system: scale(system),
        tools: scale(tool_tokens),
        tool_count: tools.len(),
        history: scale(history),
        largest: sized.into_iter().map(|(l, t)| (l, scale(t))).collect(),
    }
}

/// `you: fix the …`, `answer: I looked …`, `bash result: test kill …`.
fn label(m: &Arc<Message>, names: &HashMap<String, String>) -> String {
    let first_line = |text: &str| clip_chars(text.trim().lines().next().unwrap_or(""), 50);
    for block in &m.content {
        if let ContentBlock::ToolResult {
            tool_call_id,
            content,
            ..
        } = block
        {
            let name = names
                .get(tool_call_id.as_str())
                .map_or("tool", String::as_str);
            let text: String = content.iter().filter_map(ContentBlock::as_text).collect();
            return format!("{name} result: {}", first_line(&text));
        }
    }
    let who = match (&m.role, &m.source) {
        (Role::Assistant, _) => "answer",
        (_, MessageSource::Plugin { plugin, .. }) => plugin.as_str(),
        _ => "you",
    };
    let text = m.text();
    if text.trim().is_empty() {
        let calls: Vec<&str> = m.tool_calls().map(|(_, name, _)| name).collect();
        return format!("{who}: calls {}", calls.join(", "));
    }
    format!("{who}: {}", first_line(&text))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use dsh_session::{
        AssistantMessage, CallId, EventKind, SessionHeader, SessionMeta, ToolCall, ToolResult,
    };

    #[test]
    fn the_largest_items_are_named_by_what_they_are() {
        let session = Session::new(
            SessionHeader::new("s".into(), 0, SessionMeta::default()),
            None,
        )
        .unwrap();
        session
            .append(EventKind::UserMessage(Arc::new(Message::user_text(
                "run the tests",
            ))))
            .unwrap();
        let call = Message::assistant(
            vec![ContentBlock::ToolCall {
                id: CallId::new("c1"),
                name: "bash".into(),
                arguments: "{\"command\":\"cargo test\"}".into(),
            }],
            "deepseek",
            "deepseek-v4-flash",
        );
        session
            .append(EventKind::AssistantMessage(AssistantMessage {
                turn: 1,
                step: 1,
                message: Arc::new(call),
                usage: None,
                interrupted: false,
            }))
            .unwrap();
        session
            .append(EventKind::ToolCall(ToolCall {
                turn: 1,
                step: 1,
                call_id: CallId::new("c1"),
                name: "bash".into(),
                arguments: "{}".into(),
            }))
            .unwrap();
        let long = "test ok\n".repeat(500);
        session
            .append(EventKind::ToolResult(ToolResult {
                turn: 1,
                step: 1,
                message: Arc::new(Message::tool_result(
                    CallId::new("c1"),
                    vec![ContentBlock::text(long)],
                    false,
                )),
                error: None,
                meta: None,
            }))
            .unwrap();
        let b = context_breakdown(&session, 1.0, 2);
        assert_eq!(b.largest.len(), 2);
        assert_eq!(b.largest[0].0, "bash result: test ok");
        assert!(b.largest[0].1 > 900, "{b:?}");
        assert!(b.history >= b.largest[0].1 + b.largest[1].1);
        let doubled = context_breakdown(&session, 2.0, 1);
        assert!(doubled.history >= 2 * b.history - 1);
    }
}
