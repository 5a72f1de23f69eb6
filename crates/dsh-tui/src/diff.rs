//! `edit` and `write` calls as coloured unified diffs (`similar`).
//!
//! The diff is computed from the call's arguments (the replaced text and its replacement, or the
//! whole new file), so a card shows what the model asked for even while it runs or when it was
//! denied, and a replayed session shows the same diff it showed live.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;
use similar::{ChangeTag, TextDiff};

/// Lines of context around each change.
const CONTEXT: usize = 3;
/// Below this many columns, line numbers are dropped.
const NUMBERS_FROM: usize = 70;

/// One row of a unified diff.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DiffLine {
    /// `@@ -a,b +c,d @@`
    Hunk(String),
    /// An unchanged line (old and new line numbers).
    Context(usize, usize, String),
    /// A removed line (old line number).
    Removed(usize, String),
    /// An added line (new line number).
    Added(usize, String),
}

/// The diff a file tool call proposes, from its arguments; `None` for other tools.
pub fn for_call(tool: &str, args: &Value) -> Option<Vec<DiffLine>> {
    let text = |k: &str| args.get(k).and_then(Value::as_str);
    match tool {
        "edit" => Some(unified(text("old_string")?, text("new_string")?)),
        "write" => Some(unified("", text("content")?)),
        _ => None,
    }
}

/// The unified diff of `old` → `new`.
pub fn unified(old: &str, new: &str) -> Vec<DiffLine> {
    let diff = TextDiff::from_lines(old, new);
    let mut out = Vec::new();
    for group in diff.grouped_ops(CONTEXT) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let old_range = first.old_range().start..last.old_range().end;
        let new_range = first.new_range().start..last.new_range().end;
        out.push(DiffLine::Hunk(format!(
            "@@ -{},{} +{},{} @@",
            old_range.start + 1,
            old_range.len(),
            new_range.start + 1,
            new_range.len()
        )));
        for op in &group {
            for change in diff.iter_changes(op) {
                let text = change.value().trim_end_matches('\n').to_owned();
                let old_no = change.old_index().map_or(0, |i| i + 1);
                let new_no = change.new_index().map_or(0, |i| i + 1);
                out.push(match change.tag() {
                    ChangeTag::Equal => DiffLine::Context(old_no, new_no, text),
                    ChangeTag::Delete => DiffLine::Removed(old_no, text),
                    ChangeTag::Insert => DiffLine::Added(new_no, text),
                });
            }
        }
    }
    out
}

/// `+added −removed` counts for a card header.
pub fn stats(lines: &[DiffLine]) -> (usize, usize) {
    lines.iter().fold((0, 0), |(a, r), l| match l {
        DiffLine::Added(..) => (a + 1, r),
        DiffLine::Removed(..) => (a, r + 1),
        _ => (a, r),
    })
}

/// Styled rows of `lines` for a card `width` columns wide (line numbers when it is wide
/// enough).
pub fn render(lines: &[DiffLine], width: usize) -> Vec<Line<'static>> {
    let numbers = width >= NUMBERS_FROM;
    let dim = Style::new().fg(Color::DarkGray);
    let added = Style::new().fg(Color::Green);
    let removed = Style::new().fg(Color::Red);
    lines
        .iter()
        .map(|l| {
            let (no, sign, text, style) = match l {
                DiffLine::Hunk(h) => {
                    return Line::styled(h.clone(), Style::new().fg(Color::Cyan));
                }
                DiffLine::Context(_, n, t) => (*n, ' ', t, Style::new()),
                DiffLine::Removed(n, t) => (*n, '-', t, removed),
                DiffLine::Added(n, t) => (*n, '+', t, added),
            };
            let mut spans = Vec::with_capacity(3);
            if numbers {
                spans.push(Span::styled(format!("{no:>5} "), dim));
            }
            let sign_style = if sign == ' ' {
                style
            } else {
                style.add_modifier(Modifier::BOLD)
            };
            spans.push(Span::styled(sign.to_string(), sign_style));
            spans.push(Span::styled(format!(" {text}"), style));
            Line::from(spans)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_diff_has_a_hunk_header_and_signed_lines() {
        let lines = unified("a\nb\nc\n", "a\nB\nc\n");
        assert_eq!(
            lines,
            [
                DiffLine::Hunk("@@ -1,3 +1,3 @@".into()),
                DiffLine::Context(1, 1, "a".into()),
                DiffLine::Removed(2, "b".into()),
                DiffLine::Added(2, "B".into()),
                DiffLine::Context(3, 3, "c".into()),
            ]
        );
        assert_eq!(stats(&lines), (1, 1));
    }

    #[test]
    fn narrow_cards_drop_line_numbers() {
        let lines = unified("x\n", "y\n");
        let wide: String = render(&lines, 100)[1]
            .spans
            .iter()
            .map(|s| s.content.as_ref())
            .collect();
        let narrow: String = render(&lines, 60)[1]
            .spans
            .iter()
            .map(|s| s.content.as_ref())
            .collect();
        assert_eq!(wide, "    1 - x");
        assert_eq!(narrow, "- x");
    }
}
