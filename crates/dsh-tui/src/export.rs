//! `/export`: the transcript as Markdown, from the cells' sources (never from drawn rows, so
//! nothing is wrapped, truncated or decorated with the UI's glyphs).

use crate::cell::{CellKind, ToolCard, ToolState};
use crate::diff::DiffLine;
use crate::transcript::Transcript;

impl Transcript {
    /// The whole transcript as a Markdown document: prompts as headed sections, answers as
    /// they are, tool calls as fenced blocks with their outcome, notices in italics.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        for cell in self.cells() {
            match &cell.kind {
                CellKind::User(text) => {
                    out.push_str("## You\n\n");
                    out.push_str(text.trim_end());
                    out.push_str("\n\n");
                }
                CellKind::Context(text) => {
                    out.push_str(&quote(text));
                }
                CellKind::Assistant(text) => {
                    out.push_str(text.trim_end());
                    out.push_str("\n\n");
                }
                CellKind::Reasoning { text, .. } => {
                    out.push_str("<details><summary>Thinking</summary>\n\n");
                    out.push_str(text.trim_end());
                    out.push_str("\n\n</details>\n\n");
                }
                CellKind::Tool(card) => tool(card, &mut out),
                CellKind::Notice(text) => {
                    for line in text.lines().filter(|l| !l.trim().is_empty()) {
                        out.push_str(&format!("*{}*\n", line.trim()));
                    }
                    out.push('\n');
                }
                CellKind::Error(text) => {
                    out.push_str(&format!("**Error:** {}\n\n", text.trim_end()));
                }
            }
        }
        out.trim_end().to_owned() + "\n"
    }
}

fn quote(text: &str) -> String {
    let mut out: String = text.lines().map(|l| format!("> {l}\n")).collect();
    out.push('\n');
    out
}

/// A fence longer than any backtick run inside `text`, so the block cannot end early.
fn fence(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

fn tool(card: &ToolCard, out: &mut String) {
    let outcome = match &card.state {
        ToolState::Running => "running".to_owned(),
        ToolState::Done { outcome, .. } => outcome.clone(),
        ToolState::Denied { by } => format!("denied by {by}"),
    };
    out.push_str(&format!(
        "**{}** `{}` · {outcome}\n\n",
        card.name,
        card.summary.replace('`', "'")
    ));
    let body = match &card.diff {
        Some(lines) if !matches!(card.state, ToolState::Denied { .. }) => {
            let text: String = lines
                .iter()
                .map(|l| match l {
                    DiffLine::Hunk(h) => format!("{h}\n"),
                    DiffLine::Context(_, _, t) => format!(" {t}\n"),
                    DiffLine::Removed(_, t) => format!("-{t}\n"),
                    DiffLine::Added(_, t) => format!("+{t}\n"),
                })
                .collect();
            Some(("diff", text))
        }
        _ if !card.output.trim().is_empty() => Some(("text", card.output.clone())),
        _ => None,
    };
    if let Some((lang, text)) = body {
        let fence = fence(&text);
        out.push_str(&format!("{fence}{lang}\n{}\n{fence}\n\n", text.trim_end()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_outgrows_the_backticks_inside() {
        assert_eq!(fence("plain"), "```");
        assert_eq!(fence("has ``` inside"), "````");
    }
}
