//! Where the history may be cut: never between a tool call and its result.
//!
//! The summarized range is a head of the surface ending at a *balanced* index, one where no
//! tool call before it waits for a result after it. A provider refuses a history with an
//! unanswered call, so a cut anywhere else would break every later request.

use std::collections::HashSet;
use std::sync::Arc;

use dsh_session::{CallId, ContentBlock, Message, Role};

/// Indices `i` in `0..=len` where cutting before node `i` separates no call from its result.
pub fn balanced_cuts(messages: &[Option<Arc<Message>>]) -> Vec<usize> {
    let mut open: HashSet<CallId> = HashSet::new();
    let mut cuts = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        if open.is_empty() {
            cuts.push(i);
        }
        for block in m.iter().flat_map(|m| m.content.iter()) {
            match block {
                ContentBlock::ToolCall { id, .. } => {
                    open.insert(id.clone());
                }
                ContentBlock::ToolResult { tool_call_id, .. } => {
                    open.remove(tool_call_id);
                }
                _ => {}
            }
        }
    }
    if open.is_empty() {
        cuts.push(messages.len());
    }
    cuts
}

/// The end (exclusive) of the head to summarize: the smallest balanced index whose tail fits
/// in `retain` tokens, so the most recent whole units stay verbatim. `None` when the head holds
/// no model output: prompts alone (or a lone earlier checkpoint) have nothing a summary could
/// shorten, and replaying them would fail the same way.
pub fn choose_cut(messages: &[Option<Arc<Message>>], tokens: &[u64], retain: u64) -> Option<usize> {
    let cuts = balanced_cuts(messages);
    let tail = |c: usize| -> u64 { tokens[c..].iter().sum() };
    let c = cuts
        .iter()
        .copied()
        .filter(|c| *c >= 1)
        .find(|c| tail(*c) <= retain)?;
    let worthwhile = messages[..c]
        .iter()
        .flatten()
        .any(|m| m.role == Role::Assistant);
    worthwhile.then_some(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_session::MessageSource;

    fn user(t: &str) -> Option<Arc<Message>> {
        Some(Arc::new(Message::user_text(t)))
    }
    fn call(id: &str) -> Option<Arc<Message>> {
        Some(Arc::new(Message::assistant(
            vec![ContentBlock::ToolCall {
                id: CallId::new(id),
                name: "t".into(),
                arguments: "{}".into(),
            }],
            "p",
            "m",
        )))
    }
    fn result(id: &str) -> Option<Arc<Message>> {
        Some(Arc::new(Message::tool_result(
            CallId::new(id),
            vec![ContentBlock::text("r")],
            false,
        )))
    }

    #[test]
    fn a_cut_never_separates_a_call_from_its_result() {
        let ms = vec![user("go"), call("a"), result("a"), call("b"), result("b")];
        assert_eq!(balanced_cuts(&ms), vec![0, 1, 3, 5]);
        // Two parallel calls answered in order: no cut between the results.
        let par = vec![
            user("go"),
            Some(Arc::new(Message::assistant(
                vec![
                    ContentBlock::ToolCall {
                        id: CallId::new("x"),
                        name: "t".into(),
                        arguments: "{}".into(),
                    },
                    ContentBlock::ToolCall {
                        id: CallId::new("y"),
                        name: "t".into(),
                        arguments: "{}".into(),
                    },
                ],
                "p",
                "m",
            ))),
            result("x"),
            result("y"),
        ];
        assert_eq!(balanced_cuts(&par), vec![0, 1, 4]);
    }

    #[test]
    fn the_cut_keeps_the_newest_units_that_fit_the_retained_tail() {
        let ms = vec![user("go"), call("a"), result("a"), call("b"), result("b")];
        let tokens = [10, 10, 100, 10, 100];
        assert_eq!(choose_cut(&ms, &tokens, 150), Some(3));
        assert_eq!(choose_cut(&ms, &tokens, 50), Some(5));
        let prompts = vec![
            Some(Arc::new(Message::user(
                vec![ContentBlock::text("earlier summary")],
                MessageSource::plugin("x"),
            ))),
            user("go"),
        ];
        assert_eq!(choose_cut(&prompts, &[10, 10], 0), None);
    }
}
