//! Assistant Markdown to styled lines (before wrapping).
//!
//! CommonMark through `pulldown-cmark`: headings, emphasis, inline code, lists with hanging
//! indents, block quotes, rules and fenced code. Code blocks keep their text as is, with no
//! borders or gutters, so a copy of the screen is a copy of the code. A closed fenced block
//! with a language is syntax-highlighted (see [`crate::highlight`], cached per block); a block
//! still streaming, or one in an unknown language, is drawn in one colour.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

/// One logical line and the hanging indent its wrapped rows continue at.
pub type Block = (Line<'static>, usize);

/// Renders `source` into logical lines with their continuation indents.
pub fn render(source: &str) -> Vec<Block> {
    let mut r = Renderer::default();
    for (event, range) in Parser::new_ext(source, Options::ENABLE_STRIKETHROUGH).into_offset_iter()
    {
        if let Event::Start(Tag::CodeBlock(_)) = &event {
            r.code_closed = fence_closed(source.get(range).unwrap_or(""));
        }
        r.event(event);
    }
    r.flush();
    // No trailing blank rows: cells space themselves.
    while r.out.last().is_some_and(|(l, _)| l.width() == 0) {
        r.out.pop();
    }
    r.out
}

#[derive(Default)]
struct Renderer {
    out: Vec<Block>,
    spans: Vec<Span<'static>>,
    styles: Vec<Style>,
    /// Open lists: `None` bulleted, `Some(n)` numbered with the next number.
    lists: Vec<Option<u64>>,
    quote: usize,
    in_code: bool,
    /// The code block being read: its language and text, and whether its closing fence was
    /// seen (a block still streaming is not highlighted yet).
    code_lang: String,
    code: String,
    code_closed: bool,
    /// The prefix of the current line's first row (bullet) and the indent after it.
    prefix: Option<String>,
    indent: usize,
}

impl Renderer {
    fn style(&self) -> Style {
        self.styles.last().copied().unwrap_or_default()
    }

    fn push_style(&mut self, f: impl FnOnce(Style) -> Style) {
        let next = f(self.style());
        self.styles.push(next);
    }

    fn text(&mut self, text: &str) {
        let style = self.style();
        self.spans.push(Span::styled(text.to_owned(), style));
    }

    /// Ends the current line (if it has anything), with the list/quote prefix.
    fn flush(&mut self) {
        if self.spans.is_empty() {
            return;
        }
        let mut spans = Vec::with_capacity(self.spans.len() + 2);
        let quote = "│ ".repeat(self.quote);
        let lead = match self.prefix.take() {
            Some(bullet) => bullet,
            None => " ".repeat(self.indent),
        };
        if !quote.is_empty() {
            spans.push(Span::styled(quote, Style::new().fg(Color::DarkGray)));
        }
        if !lead.is_empty() {
            spans.push(Span::raw(lead));
        }
        spans.append(&mut self.spans);
        let hang = self.quote * 2 + self.indent;
        self.out.push((Line::from(spans), hang));
    }

    fn blank(&mut self) {
        self.flush();
        if self.out.last().is_some_and(|(l, _)| l.width() > 0) {
            self.out.push((Line::default(), 0));
        }
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) if self.in_code => self.code.push_str(&text),
            Event::Text(text) => self.text(&text),
            Event::Code(code) => {
                let style = self.style().fg(Color::Cyan);
                self.spans.push(Span::styled(code.into_string(), style));
            }
            Event::SoftBreak => self.text(" "),
            Event::HardBreak => self.flush(),
            Event::Rule => {
                self.blank();
                self.out.push((
                    Line::styled("────────", Style::new().fg(Color::DarkGray)),
                    0,
                ));
                self.out.push((Line::default(), 0));
            }
            Event::Html(html) | Event::InlineHtml(html) => self.text(&html),
            Event::TaskListMarker(done) => self.text(if done { "[x] " } else { "[ ] " }),
            _ => {}
        }
    }

    /// Ends one line of a code block, keeping empty lines.
    fn flush_code(&mut self) {
        if self.spans.is_empty() {
            self.spans.push(Span::raw(""));
        }
        self.flush();
    }

    /// The code block just read, highlighted when it can be, else in one colour.
    fn code_block(&mut self) {
        let code = std::mem::take(&mut self.code);
        let lang = std::mem::take(&mut self.code_lang);
        let body = code.strip_suffix('\n').unwrap_or(&code);
        let highlighted = (self.code_closed && !lang.is_empty())
            .then(|| crate::highlight::highlight(&lang, body))
            .flatten();
        match highlighted {
            Some(lines) => {
                for line in lines.iter() {
                    for (style, text) in line {
                        self.spans.push(Span::styled(text.clone(), *style));
                    }
                    self.flush_code();
                }
            }
            None => {
                let style = Style::new().fg(Color::Yellow);
                for line in body.split('\n') {
                    if !line.is_empty() {
                        self.spans.push(Span::styled(line.to_owned(), style));
                    }
                    self.flush_code();
                }
            }
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => {}
            Tag::Heading { level, .. } => {
                self.blank();
                let marks = match level {
                    HeadingLevel::H1 => "# ",
                    HeadingLevel::H2 => "## ",
                    _ => "### ",
                };
                self.push_style(|s| s.add_modifier(Modifier::BOLD).fg(Color::Magenta));
                self.text(marks);
            }
            Tag::BlockQuote(_) => {
                self.flush();
                self.quote += 1;
            }
            Tag::CodeBlock(kind) => {
                self.blank();
                self.in_code = true;
                if let CodeBlockKind::Fenced(lang) = kind
                    && !lang.is_empty()
                {
                    self.code_lang = lang.to_string();
                    self.out.push((
                        Line::styled(lang.into_string(), Style::new().fg(Color::DarkGray)),
                        0,
                    ));
                }
            }
            Tag::List(start) => {
                self.flush();
                if self.lists.is_empty() {
                    self.blank();
                }
                self.lists.push(start);
            }
            Tag::Item => {
                self.flush();
                let depth = self.lists.len().saturating_sub(1) * 2;
                let marker = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        let m = format!("{n}. ");
                        *n += 1;
                        m
                    }
                    _ => "• ".to_owned(),
                };
                self.indent = depth + marker.chars().count();
                self.prefix = Some(format!("{}{marker}", " ".repeat(depth)));
            }
            Tag::Emphasis => self.push_style(|s| s.add_modifier(Modifier::ITALIC)),
            Tag::Strong => self.push_style(|s| s.add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => self.push_style(|s| s.add_modifier(Modifier::CROSSED_OUT)),
            Tag::Link { .. } => self.push_style(|s| s.add_modifier(Modifier::UNDERLINED)),
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => {
                self.flush();
                if self.lists.is_empty() {
                    self.blank();
                }
            }
            TagEnd::Heading(_) => {
                self.styles.pop();
                self.flush();
                self.out.push((Line::default(), 0));
            }
            TagEnd::BlockQuote(_) => {
                self.flush();
                self.quote = self.quote.saturating_sub(1);
                self.blank();
            }
            TagEnd::CodeBlock => {
                self.code_block();
                self.in_code = false;
                self.out.push((Line::default(), 0));
            }
            TagEnd::List(_) => {
                self.flush();
                self.lists.pop();
                if self.lists.is_empty() {
                    self.indent = 0;
                    self.blank();
                } else {
                    self.indent = self.lists.len().saturating_sub(1) * 2 + 2;
                }
            }
            TagEnd::Item => self.flush(),
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough | TagEnd::Link => {
                self.styles.pop();
            }
            _ => {}
        }
    }
}

/// Whether a fenced block's source ends with its closing fence (a block that is still
/// streaming ends without one; pulldown-cmark closes it at the end of the text).
fn fence_closed(block: &str) -> bool {
    let mut lines = block.trim_end().lines();
    let Some(open) = lines.next() else {
        return false;
    };
    let open = open.trim_start();
    let marker = if open.starts_with("```") {
        '`'
    } else if open.starts_with("~~~") {
        '~'
    } else {
        return false;
    };
    let width = open.chars().take_while(|c| *c == marker).count();
    lines.next_back().is_some_and(|close| {
        let close = close.trim();
        close.chars().take_while(|c| *c == marker).count() >= width
            && close.chars().all(|c| c == marker)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(source: &str) -> Vec<String> {
        render(source)
            .into_iter()
            .map(|(l, _)| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn headings_lists_and_code_blocks_keep_their_structure() {
        let md = "# Title\n\nSome *text* and `code`.\n\n- one\n- two\n  1. inner\n\n```rust\nfn main() {}\n\n}\n```\nafter";
        assert_eq!(
            plain(md),
            [
                "# Title",
                "",
                "Some text and code.",
                "",
                "• one",
                "• two",
                "  1. inner",
                "",
                "rust",
                "fn main() {}",
                "",
                "}",
                "",
                "after",
            ]
        );
    }

    #[test]
    fn only_a_closed_fence_counts_as_closed() {
        assert!(fence_closed("```rust\nfn a() {}\n```\n"));
        assert!(!fence_closed("```rust\nfn a() {}\n"));
        assert!(!fence_closed("```rust\n"));
        assert!(fence_closed("~~~~\nx\n~~~~"));
        assert!(!fence_closed("````\nx\n```"));
    }

    #[test]
    fn a_closed_block_is_highlighted_and_a_streaming_one_is_not() {
        crate::highlight::load_now();
        let _ = render("```rust\nfn main() { let x = 1; }\n```\n");
        crate::highlight::settle();
        let colours = |md: &str| -> std::collections::HashSet<Style> {
            render(md)
                .into_iter()
                .flat_map(|(l, _)| l.spans.into_iter().map(|s| s.style))
                .collect()
        };
        let closed = colours("```rust\nfn main() { let x = 1; }\n```\n");
        let open = colours("```rust\nfn main() { let x = 1; }\n");
        assert!(closed.len() > 2, "{closed:?}");
        assert!(open.len() <= 2, "one colour while streaming: {open:?}");
        assert_eq!(
            plain("```rust\nfn main() {}\n```\n"),
            plain("```rust\nfn main() {}\n"),
            "the same text either way"
        );
    }

    #[test]
    fn list_items_hang_their_continuation_rows_under_the_text() {
        let blocks = render("- a long item");
        assert_eq!(blocks[0].1, 2);
    }
}
