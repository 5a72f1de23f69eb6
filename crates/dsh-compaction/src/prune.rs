//! The model-free pass: oversized old tool results keep their head and tail.
//!
//! A build log or a file dump is mostly noise once the model has acted on it; keeping its first
//! and last characters with a marker frees most of its space without a model call. Each pruned
//! result is a `tool/result` surface replacement of exactly that result (content only), so the
//! log still says what the model saw.

use std::sync::Arc;

use dsh_session::{
    ContentBlock, EventDraft, EventKind, Message, Session, SessionError, ToolResult,
};

use crate::config::CompactionConfig;
use crate::estimate::message_tokens;

/// The pruned text of `text` when it is over the limit.
pub fn prune_text(text: &str, config: &CompactionConfig) -> Option<String> {
    let chars = text.chars().count();
    if chars <= config.prune_over_chars {
        return None;
    }
    let head: String = text.chars().take(config.prune_head_chars).collect();
    let tail: String = text
        .chars()
        .skip(chars.saturating_sub(config.prune_tail_chars))
        .collect();
    let removed = chars - config.prune_head_chars - config.prune_tail_chars.min(chars);
    Some(format!(
        "{head}\n\n[... {removed} characters of this old tool result were pruned to save \
         context ...]\n\n{tail}"
    ))
}

/// Prunes every oversized tool result among the surface nodes `seqs`; returns how many were
/// pruned and the heuristic tokens saved.
pub fn prune_results(
    session: &Session,
    seqs: &[u64],
    config: &CompactionConfig,
) -> Result<(u64, u64), SessionError> {
    let mut pruned = 0;
    let mut saved = 0;
    for seq in seqs {
        let Some(event) = session.event(*seq) else {
            continue;
        };
        let EventKind::ToolResult(result) = &event.kind else {
            continue;
        };
        let Some(message) = pruned_message(&result.message, config) else {
            continue;
        };
        saved += message_tokens(&result.message).saturating_sub(message_tokens(&message));
        let replacement = ToolResult {
            message: Arc::new(message),
            ..result.clone()
        };
        session.append_draft(
            EventDraft::new(EventKind::ToolResult(replacement))
                .with_sources(vec![*seq])
                .replacing(*seq, *seq),
        )?;
        pruned += 1;
    }
    Ok((pruned, saved))
}

fn pruned_message(m: &Message, config: &CompactionConfig) -> Option<Message> {
    let mut changed = false;
    let content = m
        .content
        .iter()
        .map(|b| match b {
            ContentBlock::ToolResult {
                tool_call_id,
                content,
                is_error,
            } => {
                let text: String = content.iter().filter_map(ContentBlock::as_text).collect();
                match prune_text(&text, config) {
                    Some(short) => {
                        changed = true;
                        ContentBlock::ToolResult {
                            tool_call_id: tool_call_id.clone(),
                            content: vec![ContentBlock::text(short)],
                            is_error: *is_error,
                        }
                    }
                    None => b.clone(),
                }
            }
            other => other.clone(),
        })
        .collect();
    changed.then(|| Message {
        content,
        ..m.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pruned_result_keeps_its_head_and_tail_with_a_marker() {
        let config = CompactionConfig::default();
        let text = format!(
            "{}{}{}",
            "h".repeat(5000),
            "m".repeat(5000),
            "t".repeat(1024)
        );
        let short = prune_text(&text, &config).unwrap_or_default();
        assert!(short.starts_with(&"h".repeat(4096)));
        assert!(short.ends_with(&"t".repeat(1024)));
        assert!(short.contains("5904 characters"), "{short}");
        assert!(prune_text(&"x".repeat(8192), &config).is_none());
    }
}
