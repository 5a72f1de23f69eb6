//! The history a request carries alternates roles, as strict chat templates require.
//!
//! The log records exactly what happened, which can leave two user-role messages in a row: a
//! turn that ended without an assistant message (an error, a cancel before the first token, a
//! partial tool call dropped on cancel) is followed by the next prompt, and a runtime-context
//! snapshot travels beside the prompt it arrived with. ChatML servers accept that; strict
//! templates (Gemma, Mistral; llama.cpp's server answers `Conversation roles must alternate`,
//! HTTP 400) do not. The request therefore merges each run of consecutive user messages into
//! one (tool results stay their own messages: they answer the assistant's calls) and leaves
//! out empty assistant messages (completion anchors, never model input). The log is untouched,
//! and [`crate::rebuild_requests`] applies the same projection, so rebuilt requests still equal
//! what was sent.

use std::sync::Arc;

use dsh_session::{ContentBlock, Message, Role};

fn has_tool_results(m: &Message) -> bool {
    m.content
        .iter()
        .any(|b| matches!(b, ContentBlock::ToolResult { .. }))
}

/// Whether `m` may be merged with an adjacent user message.
fn is_plain_user(m: &Message) -> bool {
    m.role == Role::User && !has_tool_results(m)
}

/// The role-alternating projection of a derived history (see the module docs).
pub(crate) fn alternate_roles(history: Vec<Arc<Message>>) -> Vec<Arc<Message>> {
    let mut out: Vec<Arc<Message>> = Vec::with_capacity(history.len());
    for message in history {
        if message.role == Role::Assistant && message.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some(prev) if is_plain_user(prev) && is_plain_user(&message) => {
                // The first message's identity and provenance stand for the merged one.
                let merged = Arc::make_mut(prev);
                merged.content.extend(message.content.iter().cloned());
            }
            _ => out.push(message),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_session::CallId;

    fn roles(h: &[Arc<Message>]) -> Vec<Role> {
        h.iter().map(|m| m.role).collect()
    }

    #[test]
    fn consecutive_user_messages_merge_into_one_in_order() {
        let h = alternate_roles(vec![
            Arc::new(Message::user_text("first")),
            Arc::new(Message::user_text("second")),
        ]);
        assert_eq!(roles(&h), [Role::User]);
        assert_eq!(
            h[0].content,
            [ContentBlock::text("first"), ContentBlock::text("second")]
        );
    }

    #[test]
    fn tool_results_are_never_merged_with_prompts() {
        let call = Message::assistant(
            vec![ContentBlock::ToolCall {
                id: CallId::new("c1"),
                name: "x".into(),
                arguments: "{}".into(),
            }],
            "p",
            "m",
        );
        let h = alternate_roles(vec![
            Arc::new(Message::user_text("go")),
            Arc::new(call),
            Arc::new(Message::tool_result(CallId::new("c1"), vec![], false)),
            Arc::new(Message::user_text("steer")),
        ]);
        assert_eq!(h.len(), 4);
    }

    #[test]
    fn an_empty_assistant_anchor_does_not_separate_two_prompts() {
        let h = alternate_roles(vec![
            Arc::new(Message::user_text("a")),
            Arc::new(Message::assistant(vec![], "p", "m")),
            Arc::new(Message::user_text("b")),
        ]);
        assert_eq!(roles(&h), [Role::User]);
    }
}
