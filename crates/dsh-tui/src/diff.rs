//! `edit` and `write` calls as coloured unified diffs (`similar`).
//!
//! The diff is computed from the call's arguments (the replaced text and its replacement, or the
//! whole new file), so a card shows what the model asked for even while it runs or when it was
//! denied, and a replayed session shows the same diff it showed live.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;
use similar::{ChangeTag, TextDiff};

use std::collections::HashMap;

use crate::highlight::{StyledLine, highlight};

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

/// The language of the file a call edits (its extension), for highlighting its diff.
pub fn language(args: &Value) -> Option<String> {
    let path = args.get("file_path").and_then(Value::as_str)?;
    let ext = std::path::Path::new(path).extension()?.to_str()?;
    Some(ext.to_owned())
}

/// The old and the new side of `lines`, highlighted as whole texts (so a line inside a
/// multi-line string or comment is coloured as such), by line number.
type Sides = (HashMap<usize, StyledLine>, HashMap<usize, StyledLine>);

fn highlighted(lines: &[DiffLine], lang: &str) -> Option<Sides> {
    let mut old = Vec::new();
    let mut new = Vec::new();
    for l in lines {
        match l {
            DiffLine::Hunk(_) => {}
            DiffLine::Context(o, n, t) => {
                old.push((*o, t.as_str()));
                new.push((*n, t.as_str()));
            }
            DiffLine::Removed(o, t) => old.push((*o, t.as_str())),
            DiffLine::Added(n, t) => new.push((*n, t.as_str())),
        }
    }
    let side = |side: &[(usize, &str)]| -> Option<HashMap<usize, StyledLine>> {
        if side.is_empty() {
            return Some(HashMap::new());
        }
        let text: Vec<&str> = side.iter().map(|(_, t)| *t).collect();
        let styled = highlight(lang, &text.join("\n"))?;
        Some(
            side.iter()
                .map(|(n, _)| *n)
                .zip(styled.iter().cloned())
                .collect(),
        )
    };
    Some((side(&old)?, side(&new)?))
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
/// enough). With the file's language (`lang`) the text is syntax-highlighted and the sign
/// column alone says added or removed; without it (or until highlighting is ready) whole
/// lines are green or red.
pub fn render(lines: &[DiffLine], width: usize, lang: Option<&str>) -> Vec<Line<'static>> {
    let numbers = width >= NUMBERS_FROM;
    let dim = Style::new().fg(Color::DarkGray);
    let added = Style::new().fg(Color::Green);
    let removed = Style::new().fg(Color::Red);
    let sides = lang.and_then(|lang| highlighted(lines, lang));
    lines
        .iter()
        .map(|l| {
            let (no, sign, text, style, styled) = match l {
                DiffLine::Hunk(h) => {
                    return Line::styled(h.clone(), Style::new().fg(Color::Cyan));
                }
                DiffLine::Context(_, n, t) => (
                    *n,
                    ' ',
                    t,
                    Style::new(),
                    sides.as_ref().and_then(|s| s.1.get(n)),
                ),
                DiffLine::Removed(n, t) => {
                    (*n, '-', t, removed, sides.as_ref().and_then(|s| s.0.get(n)))
                }
                DiffLine::Added(n, t) => {
                    (*n, '+', t, added, sides.as_ref().and_then(|s| s.1.get(n)))
                }
            };
            let mut spans = Vec::with_capacity(4);
            if numbers {
                spans.push(Span::styled(format!("{no:>5} "), dim));
            }
            let sign_style = if sign == ' ' {
                style
            } else {
                style.add_modifier(Modifier::BOLD)
            };
            spans.push(Span::styled(sign.to_string(), sign_style));
            match styled {
                Some(pieces) => {
                    spans.push(Span::raw(" "));
                    for (s, t) in pieces {
                        spans.push(Span::styled(t.clone(), *s));
                    }
                }
                None => spans.push(Span::styled(format!(" {text}"), style)),
            }
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
        let wide: String = render(&lines, 100, None)[1]
            .spans
            .iter()
            .map(|s| s.content.as_ref())
            .collect();
        let narrow: String = render(&lines, 60, None)[1]
            .spans
            .iter()
            .map(|s| s.content.as_ref())
            .collect();
        assert_eq!(wide, "    1 - x");
        assert_eq!(narrow, "- x");
    }
}
