//! Transcript cells: one block of the conversation, holding its source and a cache of its
//! wrapped rows.
//!
//! A cell keeps what it was built from (Markdown text, tool output, diff hunks), never rendered
//! rows alone, so a resize rewraps from source. Its rows are cached per (width, version,
//! expanded); changing a cell bumps its version.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;

use crate::diff::{self, DiffLine};
use crate::markdown;
use crate::sanitize::sanitize;
use crate::wrap::{str_width, truncate, wrap_line};

/// Output rows a collapsed tool card shows (its tail).
pub const TOOL_TAIL: usize = 5;
/// Output rows an expanded tool card shows at most.
pub const TOOL_EXPANDED: usize = 500;
/// Diff rows a collapsed card shows.
pub const DIFF_COLLAPSED: usize = 20;
/// Reasoning rows shown while it streams.
const REASONING_LIVE: usize = 3;

/// Output a running card keeps (the tail of what the command printed so far).
pub const LIVE_KEEP: usize = 64 * 1024;

/// Where a tool call stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolState {
    /// Logged, not answered yet.
    Running,
    /// Answered: the outcome phrase (`exit 0`, `exit 3`, `ok`, `failed`) and whether it
    /// failed (an error result, a non-zero exit, a signal, a timeout).
    Done {
        /// The outcome phrase.
        outcome: String,
        /// Whether it failed.
        failed: bool,
    },
    /// Refused before it ran (by the sandbox mode, a rule, the approval policy or you); the
    /// card's output holds the reason.
    Denied {
        /// Who refused it (`the sandbox`, `you`, `a rule`, `the approval policy`).
        by: String,
    },
}

/// A tool call card.
#[derive(Clone, Debug)]
pub struct ToolCard {
    /// The tool's name.
    pub name: String,
    /// The argument a person recognizes (command, path, pattern).
    pub summary: String,
    /// Output text (sanitized), once known.
    pub output: String,
    /// What the call printed so far while it runs (raw; sanitized when drawn), at most
    /// [`LIVE_KEEP`] bytes of its tail. The result replaces it.
    pub live: String,
    /// The latest progress report while it runs (`3/10 indexing`).
    pub progress: Option<String>,
    /// A write the sandbox blocked (the path), when the result says so.
    pub blocked: Option<String>,
    /// The proposed diff, for `edit` and `write`.
    pub diff: Option<Vec<DiffLine>>,
    /// The language of the edited file (its extension), to highlight the diff.
    pub lang: Option<String>,
    /// Where it stands.
    pub state: ToolState,
    /// One line per action of a subagent this call runs.
    pub children: Vec<String>,
    /// What the subagent's running command printed last (its latest line).
    pub child_live: Option<String>,
}

impl ToolCard {
    /// A running card for a call of `name`.
    pub fn new(name: impl Into<String>, summary: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            summary: summary.into(),
            output: String::new(),
            live: String::new(),
            progress: None,
            blocked: None,
            diff: None,
            lang: None,
            state: ToolState::Running,
            children: Vec::new(),
            child_live: None,
        }
    }

    /// Appends live output, keeping the tail (cut at a line start when one is near).
    pub fn push_live(&mut self, text: &str) {
        self.live.push_str(text);
        if self.live.len() > LIVE_KEEP {
            let mut cut = self.live.len() - LIVE_KEEP;
            while !self.live.is_char_boundary(cut) {
                cut += 1;
            }
            let cut = self.live[cut..].find('\n').map_or(cut, |i| cut + i + 1);
            self.live.drain(..cut);
        }
    }

    /// Whether the card shows a failure (red).
    pub fn failed(&self) -> bool {
        matches!(
            self.state,
            ToolState::Done { failed: true, .. } | ToolState::Denied { .. }
        ) || self.blocked.is_some()
    }
}

/// What a cell shows.
#[derive(Clone, Debug)]
pub enum CellKind {
    /// A user prompt.
    User(String),
    /// Context a plugin injected (dim).
    Context(String),
    /// Assistant Markdown (streamed, then authoritative).
    Assistant(String),
    /// Reasoning (dim, collapsible); `done` once its message is complete.
    Reasoning {
        /// The reasoning text.
        text: String,
        /// Whether the block is complete.
        done: bool,
    },
    /// A tool call.
    Tool(Box<ToolCard>),
    /// A one-line notice (resume, cancel, retry, compaction).
    Notice(String),
    /// An error block (red).
    Error(String),
}

/// One transcript cell.
#[derive(Clone, Debug)]
pub struct Cell {
    /// What it shows.
    pub kind: CellKind,
    /// Expanded (tool output, reasoning, diff) or collapsed.
    pub expanded: bool,
    version: u64,
    /// Rows built for (width, version, expanded, highlighting generation).
    cache: Option<(usize, u64, bool, u64, Vec<Line<'static>>)>,
}

impl Cell {
    /// A new cell.
    pub fn new(kind: CellKind) -> Self {
        Self {
            kind,
            expanded: false,
            version: 0,
            cache: None,
        }
    }

    /// Marks the source changed (the next layout rewraps it).
    pub fn touch(&mut self) {
        self.version += 1;
    }

    /// Rows at `width`, cached.
    pub fn rows(&mut self, width: usize) -> &[Line<'static>] {
        // Highlighting becoming ready re-colours every cell once.
        let generation = crate::highlight::generation();
        let fresh = matches!(&self.cache, Some((w, v, e, g, _))
            if *w == width && *v == self.version && *e == self.expanded && *g == generation);
        if !fresh {
            let rows = self.build(width);
            self.cache = Some((width, self.version, self.expanded, generation, rows));
        }
        match &self.cache {
            Some((_, _, _, _, rows)) => rows,
            None => &[],
        }
    }

    /// Rows at `width` (height of the cell, one blank separator row included).
    pub fn height(&mut self, width: usize) -> usize {
        self.rows(width).len()
    }

    fn build(&self, width: usize) -> Vec<Line<'static>> {
        let mut out = Vec::new();
        let dim = Style::new().fg(Color::DarkGray);
        match &self.kind {
            CellKind::User(text) => {
                let style = Style::new().add_modifier(Modifier::BOLD);
                for (i, line) in text.lines().enumerate() {
                    let lead = if i == 0 { "› " } else { "  " };
                    let line = Line::from(vec![
                        Span::styled(lead, Style::new().fg(Color::Cyan)),
                        Span::styled(line.to_owned(), style),
                    ]);
                    out.extend(wrap_line(&line, width, 2));
                }
            }
            CellKind::Context(text) => {
                let first = text.lines().next().unwrap_or("");
                let line = Line::styled(
                    format!("· {}", truncate(first, width.saturating_sub(2))),
                    dim,
                );
                out.push(line);
            }
            CellKind::Assistant(text) => {
                for (line, hang) in markdown::render(text) {
                    out.extend(wrap_line(&line, width, hang));
                }
            }
            CellKind::Reasoning { text, done } => {
                let lines: Vec<&str> = text.trim_end().lines().collect();
                let style = dim.add_modifier(Modifier::ITALIC);
                if *done && !self.expanded {
                    out.push(Line::styled(
                        format!("▸ Thought ({} lines) · ctrl+o", lines.len()),
                        dim,
                    ));
                } else {
                    out.push(Line::styled("▾ Thinking", dim));
                    let shown = if *done {
                        &lines[..]
                    } else {
                        &lines[lines.len().saturating_sub(REASONING_LIVE)..]
                    };
                    for l in shown {
                        out.extend(wrap_line(&Line::styled(format!("  {l}"), style), width, 2));
                    }
                }
            }
            CellKind::Tool(card) => self.build_tool(card, width, &mut out),
            CellKind::Notice(text) => {
                for l in text.lines() {
                    out.extend(wrap_line(&Line::styled(l.to_owned(), dim), width, 2));
                }
            }
            CellKind::Error(text) => {
                let style = Style::new().fg(Color::Red);
                for (i, l) in text.lines().enumerate() {
                    let lead = if i == 0 { "✗ " } else { "  " };
                    out.extend(wrap_line(
                        &Line::styled(format!("{lead}{l}"), style),
                        width,
                        2,
                    ));
                }
            }
        }
        out.push(Line::default());
        out
    }

    fn build_tool(&self, card: &ToolCard, width: usize, out: &mut Vec<Line<'static>>) {
        let dim = Style::new().fg(Color::DarkGray);
        let red = Style::new().fg(Color::Red);
        let (glyph, glyph_style, outcome) = match &card.state {
            ToolState::Running => {
                let mut outcome = "running".to_owned();
                if let Some(p) = &card.progress {
                    outcome = format!("running · {p}");
                }
                ("●", Style::new().fg(Color::Yellow), outcome)
            }
            ToolState::Denied { by } => ("⊘", red, format!("denied by {by}")),
            ToolState::Done { outcome, .. } if card.failed() => ("●", red, outcome.clone()),
            ToolState::Done { outcome, .. } => {
                ("●", Style::new().fg(Color::Green), outcome.clone())
            }
        };
        let (glyph, summary) = match &card.diff {
            Some(d) if !matches!(card.state, ToolState::Denied { .. }) => {
                let (a, r) = diff::stats(d);
                ("±", format!("{}  +{a} −{r}", card.summary))
            }
            _ => (glyph, card.summary.clone()),
        };
        let room = width.saturating_sub(card.name.len() + str_width(&outcome) + 8);
        out.push(Line::from(vec![
            Span::styled(format!("{glyph} "), glyph_style),
            Span::styled(card.name.clone(), Style::new().add_modifier(Modifier::BOLD)),
            Span::raw("  "),
            Span::raw(truncate(&summary, room)),
            Span::styled(
                format!("  {outcome}"),
                if card.failed() { red } else { dim },
            ),
        ]));
        let inner = width.saturating_sub(2);
        if let Some(path) = &card.blocked {
            out.extend(wrap_line(
                &Line::styled(format!("  ⊘ the sandbox blocked a write to {path}"), red),
                width,
                4,
            ));
        }
        for child in &card.children[card.children.len().saturating_sub(3)..] {
            out.push(Line::styled(
                format!("  ↳ {}", truncate(child, inner.saturating_sub(2))),
                dim,
            ));
        }
        if let Some(line) = &card.child_live
            && card.state == ToolState::Running
        {
            out.push(Line::styled(
                format!("    {}", truncate(line, inner.saturating_sub(4))),
                dim,
            ));
        }
        if let Some(d) = &card.diff
            && !matches!(card.state, ToolState::Denied { .. })
        {
            let rows = diff::render(d, inner, card.lang.as_deref());
            let limit = if self.expanded {
                rows.len()
            } else {
                DIFF_COLLAPSED
            };
            for row in rows.iter().take(limit) {
                let mut spans = vec![Span::raw("  ")];
                spans.extend(row.spans.iter().cloned());
                out.extend(wrap_line(&Line::from(spans), width, 4));
            }
            if rows.len() > limit {
                out.push(Line::styled(
                    format!("  … +{} lines · ctrl+o", rows.len() - limit),
                    dim,
                ));
            }
            if card.failed() {
                self.output_rows(card, width, out);
            }
            return;
        }
        self.output_rows(card, width, out);
    }

    fn output_rows(&self, card: &ToolCard, width: usize, out: &mut Vec<Line<'static>>) {
        let dim = Style::new().fg(Color::DarkGray);
        let live;
        let text = if card.state == ToolState::Running {
            live = sanitize(&card.live);
            &live
        } else {
            &card.output
        };
        let lines: Vec<&str> = text
            .trim_end()
            .lines()
            // The sandbox's note is for the model; the card says it in its own words above.
            .filter(|l| card.blocked.is_none() || !l.starts_with("[sandbox]"))
            .collect();
        if lines.is_empty() {
            return;
        }
        let limit = if self.expanded {
            TOOL_EXPANDED
        } else {
            TOOL_TAIL
        };
        let start = lines.len().saturating_sub(limit);
        if start > 0 {
            out.push(Line::styled(
                format!("  … {start} earlier lines · ctrl+o"),
                dim,
            ));
        }
        let style = match card.state {
            ToolState::Denied { .. } => Style::new().fg(Color::Red),
            ToolState::Done { .. } if card.failed() && card.name != "bash" => {
                Style::new().fg(Color::Red)
            }
            _ => Style::new(),
        };
        for l in &lines[start..] {
            out.extend(wrap_line(&Line::styled(format!("  {l}"), style), width, 2));
        }
    }
}

/// A one-line summary of a call's arguments: the field a person recognizes, else the raw JSON.
pub fn summarize(args: &Value, raw: &str) -> String {
    let field = [
        "command",
        "file_path",
        "path",
        "pattern",
        "prompt",
        "description",
        "id",
        "task_id",
    ]
    .iter()
    .find_map(|k| args.get(*k).and_then(Value::as_str));
    field
        .unwrap_or(raw)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}
