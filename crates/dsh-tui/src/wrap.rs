//! Wrapping styled lines to a width, by display columns.
//!
//! The transcript wraps from source at every width (resizes reflow instead of keeping the old
//! width), so this is on the render path: one pass over the spans, greedy by words, a word
//! wider than the row split by characters. Wide characters never straddle the edge.

use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

/// `line` broken into rows of at most `width` columns. Continuation rows start with
/// `indent` spaces (a list item's hanging indent). Styles are kept per span.
pub fn wrap_line(line: &Line<'static>, width: usize, indent: usize) -> Vec<Line<'static>> {
    let width = width.max(1);
    let indent = indent.min(width.saturating_sub(1));
    let mut rows: Vec<Line<'static>> = Vec::new();
    let mut row = Row::new(line, 0);
    for span in &line.spans {
        let style = span.style;
        for word in words(&span.content) {
            let w = str_width(word);
            if row.col + w > width && row.col > row.indent {
                // The word does not fit: break before it (dropping the spaces it starts with).
                rows.push(row.finish());
                row = Row::new(line, indent);
                let trimmed = word.trim_start_matches(' ');
                push_word(&mut rows, &mut row, line, trimmed, style, width, indent);
            } else {
                push_word(&mut rows, &mut row, line, word, style, width, indent);
            }
        }
    }
    rows.push(row.finish());
    rows
}

/// Display width of `s` (control characters count as zero).
pub fn str_width(s: &str) -> usize {
    s.chars().map(|c| c.width().unwrap_or(0)).sum()
}

/// `s` cut to at most `max` columns, with `…` when cut.
pub fn truncate(s: &str, max: usize) -> String {
    if str_width(s) <= max {
        return s.to_owned();
    }
    let mut out = String::new();
    let mut col = 0;
    for c in s.chars() {
        let w = c.width().unwrap_or(0);
        if col + w + 1 > max {
            break;
        }
        out.push(c);
        col += w;
    }
    out.push('…');
    out
}

struct Row {
    spans: Vec<Span<'static>>,
    col: usize,
    indent: usize,
    style: ratatui::style::Style,
    alignment: Option<ratatui::layout::Alignment>,
}

impl Row {
    fn new(line: &Line<'static>, indent: usize) -> Self {
        let mut spans = Vec::new();
        if indent > 0 {
            spans.push(Span::raw(" ".repeat(indent)));
        }
        Self {
            spans,
            col: indent,
            indent,
            style: line.style,
            alignment: line.alignment,
        }
    }

    fn push(&mut self, text: &str, style: ratatui::style::Style) {
        if text.is_empty() {
            return;
        }
        self.col += str_width(text);
        match self.spans.last_mut() {
            Some(last) if last.style == style => last.content.to_mut().push_str(text),
            _ => self.spans.push(Span::styled(text.to_owned(), style)),
        }
    }

    fn finish(self) -> Line<'static> {
        let mut line = Line::from(self.spans).style(self.style);
        line.alignment = self.alignment;
        line
    }
}

/// Adds `word` to `row`, hard-splitting it over as many rows as it needs.
fn push_word(
    rows: &mut Vec<Line<'static>>,
    row: &mut Row,
    line: &Line<'static>,
    word: &str,
    style: ratatui::style::Style,
    width: usize,
    indent: usize,
) {
    if row.col + str_width(word) <= width {
        row.push(word, style);
        return;
    }
    let mut piece = String::new();
    for c in word.chars() {
        let w = c.width().unwrap_or(0);
        if row.col + str_width(&piece) + w > width && (row.col > row.indent || !piece.is_empty()) {
            row.push(&piece, style);
            piece.clear();
            let full = std::mem::replace(row, Row::new(line, indent));
            rows.push(full.finish());
        }
        piece.push(c);
    }
    row.push(&piece, style);
}

/// Splits text into words that keep their leading spaces (`"a b  c"` → `a`, ` b`, `  c`).
fn words(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let body_start = rest.len() - rest.trim_start_matches(' ').len();
        let end = rest[body_start..]
            .find(' ')
            .map_or(rest.len(), |i| body_start + i);
        let (word, tail) = rest.split_at(end);
        rest = tail;
        Some(word)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(rows: &[Line<'static>]) -> Vec<String> {
        rows.iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn words_wrap_at_spaces_and_long_words_split() {
        let line = Line::from("the quick brown fox jumps");
        assert_eq!(
            texts(&wrap_line(&line, 10, 0)),
            ["the quick", "brown fox", "jumps"]
        );
        let long = Line::from("abcdefghijkl xy");
        assert_eq!(texts(&wrap_line(&long, 5, 0)), ["abcde", "fghij", "kl xy"]);
        assert_eq!(texts(&wrap_line(&Line::from(""), 5, 0)), [""]);
    }

    #[test]
    fn wide_characters_never_straddle_the_edge_and_indent_hangs() {
        let line = Line::from("日本語のテキスト");
        for row in texts(&wrap_line(&line, 5, 0)) {
            assert!(str_width(&row) <= 5, "{row}");
        }
        let item = Line::from("• one two three");
        assert_eq!(texts(&wrap_line(&item, 9, 2)), ["• one two", "  three"]);
    }
}
