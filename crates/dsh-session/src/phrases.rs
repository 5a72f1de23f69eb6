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
    /// The result's text (what the model reads) and whether it is an error.
    pub fn text_and_error(&self) -> (String, bool) {
        let (text, is_error) = self
            .message
            .content
            .iter()
            .find_map(|b| match b {
                ContentBlock::ToolResult {
                    content, is_error, ..
                } => Some((
                    content
                        .iter()
                        .filter_map(ContentBlock::as_text)
                        .collect::<String>(),
                    *is_error,
                )),
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
        let last = text.trim_end().lines().last().unwrap_or("").trim();
        if is_error {
            let first = text.lines().next().unwrap_or("").trim();
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
