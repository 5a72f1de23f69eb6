//! How a turn ended and how a tool call went, in words a person reads. Front ends print these
//! (the line chat, `dsh run`, the full-screen UI), so they live beside the events they describe;
//! nothing here is logged.

use crate::event::{CancelCause, ToolResult, TurnEndReason};
use crate::message::{ContentBlock, clip_chars};

impl TurnEndReason {
    /// A short phrase for the end (`cancelled`, `failed: CODE: message`), shared by every
    /// front end so the line chat, `dsh run` and the full-screen UI say the same thing.
    pub fn describe(&self) -> String {
        match self {
            TurnEndReason::Completed => "completed".to_owned(),
            TurnEndReason::Aborted { reason } => match reason {
                CancelCause::User => "cancelled".to_owned(),
                CancelCause::Parent => "cancelled by its parent".to_owned(),
                CancelCause::Hook { reason } => format!("stopped: {reason}"),
                CancelCause::Disposed => "stopped: shutting down".to_owned(),
                CancelCause::Legacy => "aborted".to_owned(),
            },
            TurnEndReason::Blocked => "blocked".to_owned(),
            TurnEndReason::Error { error } => format!("failed: {}: {}", error.code, error.message),
            TurnEndReason::MaxTokens => "stopped at the output-token limit".to_owned(),
            TurnEndReason::Interrupted => "interrupted (the process ended mid-turn)".to_owned(),
        }
    }
}

impl ToolResult {
    /// The result's text (what the model reads) and whether it is an error. Text blocks are
    /// joined on line boundaries: a note a plugin appended (the guard's `[sandbox] …`) starts
    /// its own line even when the output before it did not end with one.
    pub fn text_and_error(&self) -> (String, bool) {
        let (text, is_error) = self
            .message
            .content
            .iter()
            .find_map(|b| match b {
                ContentBlock::ToolResult {
                    content, is_error, ..
                } => {
                    let mut text = String::new();
                    for block in content.iter().filter_map(ContentBlock::as_text) {
                        if !text.is_empty() && !text.ends_with('\n') {
                            text.push('\n');
                        }
                        text.push_str(block);
                    }
                    Some((text, *is_error))
                }
                _ => None,
            })
            .unwrap_or_default();
        (text, is_error || self.error.is_some())
    }

    /// How the call went in a few words: `error CODE`, `error: first line`, `exit N`,
    /// `killed by SIG`, `timed out` or `ok`.
    pub fn outcome(&self) -> String {
        if let Some(e) = &self.error {
            return format!("error {}", e.code);
        }
        let (text, is_error) = self.text_and_error();
        // The run's own marker ends its output; notes appended after it (`[sandbox] …`) are
        // not the outcome.
        let last = text
            .trim_end()
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| !l.starts_with("[sandbox]"))
            .unwrap_or("");
        if is_error {
            let first = text.lines().next().unwrap_or("").trim();
            // Error results read `Error: …` for the model; the phrase says `error:` once.
            let first = first.strip_prefix("Error: ").unwrap_or(first);
            return format!("error: {}", clip_chars(first, 80));
        }
        if let Some(code) = last
            .strip_prefix("[exit code: ")
            .and_then(|s| s.strip_suffix(']'))
        {
            return format!("exit {code}");
        }
        if let Some(sig) = last
            .strip_prefix("[killed by signal: ")
            .and_then(|s| s.strip_suffix(']'))
        {
            return format!("killed by {sig}");
        }
        if last.starts_with("[timed out") {
            return "timed out".to_owned();
        }
        "ok".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::ids::CallId;
    use crate::message::Message;

    fn result(blocks: &[&str], is_error: bool) -> ToolResult {
        ToolResult {
            turn: 1,
            step: 1,
            message: Arc::new(Message::tool_result(
                CallId::new("c"),
                blocks.iter().map(|b| ContentBlock::text(*b)).collect(),
                is_error,
            )),
            error: None,
            meta: None,
        }
    }

    #[test]
    fn an_appended_note_starts_its_own_line_and_is_not_the_outcome() {
        let r = result(
            &[
                "bash: /etc/x: Permission denied\n[exit code: 1]",
                "[sandbox] write to /etc/x blocked",
            ],
            false,
        );
        assert_eq!(
            r.text_and_error().0,
            "bash: /etc/x: Permission denied\n[exit code: 1]\n[sandbox] write to /etc/x blocked"
        );
        assert_eq!(r.outcome(), "exit 1");
    }

    #[test]
    fn an_error_outcome_says_error_once() {
        let r = result(&["Error: the user rejected tool `bash`"], true);
        assert_eq!(r.outcome(), "error: the user rejected tool `bash`");
    }
}
