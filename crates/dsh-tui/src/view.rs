//! Drawing one frame from the app state.
//!
//! Layout, top to bottom: the transcript (only its visible rows are laid out), the approval
//! card or the pending strip, the running indicator, the command popup, the composer and the
//! status line. Chrome uses named ANSI colours so it follows the terminal's palette.

use std::time::Instant;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use crate::app::{App, Overlay};
use crate::diff;
use crate::question::QuestionCard;
use crate::sanitize::sanitize;
use crate::status;
use crate::wrap::{str_width, truncate, wrap_line};
use dsh_tools::QuestionIntent;

/// Below this size the UI asks for a bigger terminal.
pub const MIN_WIDTH: u16 = 40;
/// Below this height the UI asks for a bigger terminal.
pub const MIN_HEIGHT: u16 = 10;
/// Where a help row's description starts (wrapped rows continue there).
const HELP_INDENT: usize = 21;
/// Pending rows shown before `+N`.
const PENDING_ROWS: usize = 3;
/// Rows of a plan shown on its review card.
const PLAN_ROWS: usize = 6;

/// Draws the whole UI.
pub fn draw(frame: &mut Frame<'_>, app: &mut App, now: Instant) {
    let area = frame.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        // Wrapped, so the message itself is never cut off.
        let text = format!(
            "terminal too small ({}×{}): need {MIN_WIDTH}×{MIN_HEIGHT}",
            area.width, area.height
        );
        let rows = wrap_line(&Line::raw(text), area.width as usize, 0);
        frame.render_widget(Paragraph::new(rows), area);
        return;
    }
    let width = area.width as usize;
    let composer = composer_rows(app, width);
    let max_composer = (area.height as usize * 2 / 5).clamp(1, 10);
    let composer_height = composer.0.len().clamp(1, max_composer);
    let bottom = bottom_rows(app, width, now);
    let popup = popup_rows(app, width);
    let [
        transcript_area,
        bottom_area,
        popup_area,
        rule_area,
        composer_area,
        status_area,
    ] = Layout::vertical([
        Constraint::Min(1),
        Constraint::Length(bottom.len() as u16),
        Constraint::Length(popup.len() as u16),
        Constraint::Length(1),
        Constraint::Length(composer_height as u16),
        Constraint::Length(1),
    ])
    .areas(area);
    draw_transcript(frame, app, transcript_area);
    frame.render_widget(Paragraph::new(bottom), bottom_area);
    frame.render_widget(Paragraph::new(popup), popup_area);
    frame.render_widget(
        Paragraph::new(Line::styled(
            "─".repeat(width),
            Style::new().fg(Color::DarkGray),
        )),
        rule_area,
    );
    let (rows, caret) = composer;
    let first = (caret.0 + 1).saturating_sub(composer_height);
    let shown: Vec<Line<'static>> = rows.into_iter().skip(first).take(composer_height).collect();
    frame.render_widget(Paragraph::new(shown), composer_area);
    if app.overlay.is_none() && (!app.waiting() || !app.card_focus) {
        frame.set_cursor_position((
            composer_area.x + caret.1 as u16,
            composer_area.y + (caret.0 - first) as u16,
        ));
    }
    frame.render_widget(
        Paragraph::new(Line::styled(
            status::line(&app.info, &app.transcript.usage, app.planning(), width),
            Style::new().fg(Color::DarkGray),
        )),
        status_area,
    );
    if let Some(overlay) = &app.overlay {
        draw_overlay(frame, app, overlay, area);
    }
    if app.no_color {
        strip_colours(frame);
    }
}

/// `NO_COLOR`: every cell back to the terminal's own colours; modifiers stay.
fn strip_colours(frame: &mut Frame<'_>) {
    for cell in &mut frame.buffer_mut().content {
        cell.fg = Color::Reset;
        cell.bg = Color::Reset;
    }
}

fn draw_transcript(frame: &mut Frame<'_>, app: &mut App, area: Rect) {
    let width = area.width as usize;
    let rows = area.height as usize;
    app.page = rows;
    let height = app.transcript.height(width);
    if app.scroll > 0 && height > app.last_height {
        // Scrolled up: keep the anchor where it is and count what arrived below.
        let grown = height - app.last_height;
        app.scroll += grown;
        app.unseen += grown;
    }
    app.last_height = height;
    app.scroll = app.scroll.min(height.saturating_sub(rows));
    if app.scroll == 0 {
        app.unseen = 0;
    }
    let top = height.saturating_sub(rows).saturating_sub(app.scroll);
    let mut lines = app.transcript.visible(width, top, rows);
    if app.transcript.is_empty() {
        lines = welcome(app);
    }
    if app.scroll > 0
        && let Some(last) = lines.last_mut()
    {
        let note = if app.unseen > 0 {
            format!("↓ {} new lines · End", app.unseen)
        } else {
            format!("↓ {} more lines · End", app.scroll)
        };
        *last = Line::styled(note, Style::new().fg(Color::Black).bg(Color::Yellow));
    }
    frame.render_widget(Paragraph::new(lines), area);
}

fn welcome(app: &App) -> Vec<Line<'static>> {
    let dim = Style::new().fg(Color::DarkGray);
    vec![
        Line::from(vec![
            Span::styled("dsh ", Style::new().add_modifier(Modifier::BOLD)),
            Span::raw(format!(
                "{} · {} via {}",
                env_version(),
                app.info.model,
                app.info.provider
            )),
        ]),
        Line::styled(app.info.cwd.display().to_string(), dim),
        Line::styled("/help for keys and commands", dim),
    ]
}

fn env_version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// The approval card, else the pending strip; then the running indicator.
fn bottom_rows(app: &App, width: usize, now: Instant) -> Vec<Line<'static>> {
    let dim = Style::new().fg(Color::DarkGray);
    let mut out = Vec::new();
    if let Some(card) = app.questions.front() {
        question_rows(app, card, width, now, &mut out);
    } else if let Some(card) = app.cards.front() {
        let r = &card.ask.request;
        let title = match (&r.reason, app.cards.len()) {
            (Some(reason), 1) => format!("Allow {}? {reason}", r.tool_name),
            (Some(reason), n) => format!("Allow {}? {reason} (1/{n})", r.tool_name),
            (None, 1) => format!("Allow {}?", r.tool_name),
            (None, n) => format!("Allow {}? (1/{n})", r.tool_name),
        };
        out.push(Line::styled(
            title,
            Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD),
        ));
        let args = r.arguments.as_ref();
        match diff::for_call(&r.tool_name, args) {
            Some(d) => {
                for row in
                    diff::render(&d, width.saturating_sub(2), diff::language(args).as_deref())
                        .into_iter()
                        .take(8)
                {
                    let mut spans = vec![Span::raw("  ")];
                    spans.extend(row.spans);
                    out.push(Line::from(spans));
                }
            }
            None => {
                // What the call declared it does (its command, else its file), else its
                // arguments as they are.
                let subject = r.subject();
                let (lead, shown) = match (r.effects.command(), subject.is_empty()) {
                    (Some(_), _) => ("$ ", subject),
                    (None, false) => ("", subject),
                    (None, true) => ("", args.to_string()),
                };
                for l in shown.lines().take(4) {
                    out.extend(wrap_line(&Line::raw(format!("  {lead}{l}")), width, 4));
                }
            }
        }
        let keys = match &card.reason {
            Some(reason) => {
                format!("  deny · reason for the model: {reason}▏ (enter sends, esc back)")
            }
            // The choices show once they work: keys typed before go to the draft.
            None if app.card_focus && app.card_armed(now) => {
                "  y allow once · a allow this session · n deny · tab to the draft".to_owned()
            }
            None if app.card_focus => "  …".to_owned(),
            None => "  tab back to the card".to_owned(),
        };
        out.push(Line::styled(truncate(&keys, width), dim));
    } else if !app.pending.is_empty() || !app.deferred.is_empty() {
        let mut rows: Vec<String> = app
            .pending
            .iter()
            .map(|p| {
                let (glyph, what) = if p.steer {
                    ("↳", "steer")
                } else {
                    ("⇥", "queued")
                };
                let first = p.text.lines().next().unwrap_or("");
                format!("{glyph} {what}: {first}")
            })
            .collect();
        rows.extend(
            app.deferred
                .iter()
                .map(|c| format!("⇥ after the turn: {}", c.describe())),
        );
        for row in rows.iter().take(PENDING_ROWS) {
            out.push(Line::styled(
                truncate(row, width),
                Style::new().fg(Color::Cyan),
            ));
        }
        if rows.len() > PENDING_ROWS {
            out.push(Line::styled(
                format!("  +{} more", rows.len() - PENDING_ROWS),
                dim,
            ));
        }
    }
    if let Some(search) = &app.search {
        let state = if search.failed { "failing " } else { "" };
        out.push(Line::styled(
            truncate(&format!("{state}history search: {}▏", search.query), width),
            Style::new().fg(Color::Cyan),
        ));
    }
    let hint = app
        .hint
        .as_ref()
        .filter(|(_, until)| now < *until)
        .map(|(t, _)| t.clone());
    if let Some(busy) = &app.busy {
        let mut text = status::busy_indicator(busy, now);
        if let Some(h) = &hint {
            text = format!("{text} · {h}");
        }
        out.push(Line::styled(
            truncate(&text, width),
            Style::new().fg(Color::Magenta),
        ));
    } else if app.running() {
        let mut text = status::indicator(
            &app.transcript.activity,
            app.waiting_for(),
            app.turn_started,
            now,
        );
        if let Some(h) = &hint {
            text = format!("{text} · {h}");
        }
        out.push(Line::styled(
            truncate(&text, width),
            Style::new().fg(Color::Magenta),
        ));
    } else if let Some(h) = hint {
        out.push(Line::styled(truncate(&h, width), dim));
    }
    out
}

/// Rows of the question card: the question (with the plan under review), its options, and
/// the keys once they work.
fn question_rows(
    app: &App,
    card: &QuestionCard,
    width: usize,
    now: Instant,
    out: &mut Vec<Line<'static>>,
) {
    let dim = Style::new().fg(Color::DarkGray);
    let Some(question) = card.current() else {
        return;
    };
    let total = card.ask.request.questions.len();
    let mut title = match &question.header {
        Some(header) => format!("[{header}] {}", question.question),
        None => question.question.clone(),
    };
    if total > 1 {
        title.push_str(&format!(" ({}/{total})", card.replies.len() + 1));
    }
    out.extend(wrap_line(
        &Line::styled(
            sanitize(&title),
            Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD),
        ),
        width,
        2,
    ));
    let review = matches!(question.intent, QuestionIntent::PlanReview { .. });
    if let Some(detail) = &question.detail {
        // The plan itself is in the transcript above; the card shows its head.
        for l in detail.lines().take(PLAN_ROWS) {
            out.push(Line::raw(truncate(&format!("  │ {}", sanitize(l)), width)));
        }
        if detail.lines().count() > PLAN_ROWS {
            out.push(Line::styled("  │ … (the whole plan is above)", dim));
        }
    }
    if !review {
        for (i, o) in question.options.iter().enumerate() {
            let text = match &o.description {
                Some(d) => format!("  {}. {} — {d}", i + 1, o.label),
                None => format!("  {}. {}", i + 1, o.label),
            };
            out.push(Line::raw(truncate(&sanitize(&text), width)));
        }
    }
    let keys = match (&card.text, review) {
        (Some(text), true) => {
            format!("  what should change? {text}▏ (enter sends, empty: just keep planning)")
        }
        (Some(text), false) => format!("  your answer: {text}▏ (enter sends, esc back)"),
        (None, _) if !app.card_focus => "  tab back to the card".to_owned(),
        (None, _) if !app.card_armed(now) => "  …".to_owned(),
        (None, true) => "  y approve and start · n keep planning · esc dismiss".to_owned(),
        (None, false) => {
            "  1-9 pick · or type your own answer · esc dismiss · tab to the draft".to_owned()
        }
    };
    out.push(Line::styled(truncate(&keys, width), dim));
}

fn popup_rows(app: &App, width: usize) -> Vec<Line<'static>> {
    let files = app.file_popup();
    if !files.is_empty() {
        let selected = app.popup_selected.min(files.len() - 1);
        return files
            .iter()
            .enumerate()
            .map(|(i, path)| {
                let style = if i == selected {
                    Style::new().add_modifier(Modifier::REVERSED)
                } else {
                    Style::new()
                };
                Line::styled(truncate(&format!("  @{path}"), width), style)
            })
            .collect();
    }
    let popup = app.popup();
    let selected = app.popup_selected.min(popup.len().saturating_sub(1));
    popup
        .iter()
        .take(8)
        .enumerate()
        .map(|(i, entry)| {
            let style = if i == selected {
                Style::new().add_modifier(Modifier::REVERSED)
            } else {
                Style::new()
            };
            let head = format!("/{} {}", entry.name, entry.args);
            Line::styled(
                truncate(&format!("  {head:<22} {}", entry.what), width),
                style,
            )
        })
        .collect()
}

/// The composer's rows (with the `› ` prompt) and the caret's (row, column).
fn composer_rows(app: &App, width: usize) -> (Vec<Line<'static>>, (usize, usize)) {
    let text = app.composer.text();
    let caret = app.composer.caret();
    let room = width.saturating_sub(2).max(1);
    let mut rows: Vec<Line<'static>> = Vec::new();
    let mut pos = (0, 2);
    let mut offset = 0;
    let placeholder = app.composer.is_empty();
    if placeholder {
        let hint = if app.running() {
            "enter steers · tab queues · esc cancels"
        } else {
            "ask anything · /help"
        };
        rows.push(Line::from(vec![
            Span::styled("› ", Style::new().fg(Color::Cyan)),
            Span::styled(hint, Style::new().fg(Color::DarkGray)),
        ]));
        return (rows, pos);
    }
    for (li, line) in text.split('\n').enumerate() {
        let mut row = String::new();
        let mut col = 0;
        let mut first_row = true;
        let flush = |rows: &mut Vec<Line<'static>>, row: &mut String, first: bool| {
            let lead = if li == 0 && first { "› " } else { "  " };
            rows.push(Line::from(vec![
                Span::styled(lead, Style::new().fg(Color::Cyan)),
                Span::raw(std::mem::take(row)),
            ]));
        };
        for (bi, c) in line.char_indices() {
            let w = str_width(c.encode_utf8(&mut [0u8; 4]));
            if col + w > room {
                flush(&mut rows, &mut row, first_row);
                first_row = false;
                col = 0;
            }
            if offset + bi == caret {
                pos = (rows.len(), 2 + col);
            }
            row.push(c);
            col += w;
        }
        if offset + line.len() == caret {
            if col >= room {
                flush(&mut rows, &mut row, first_row);
                first_row = false;
                col = 0;
            }
            pos = (rows.len(), 2 + col);
        }
        flush(&mut rows, &mut row, first_row);
        offset += line.len() + 1;
    }
    (rows, pos)
}

/// A picker: its title, the filter, then its rows (`None` while loading), the selected one
/// reversed.
fn picker_lines(
    title: &str,
    filter: &str,
    rows: Option<Vec<String>>,
    empty: &str,
    selected: usize,
    area: Rect,
) -> Vec<Line<'static>> {
    let dim = Style::new().fg(Color::DarkGray);
    let width = area.width as usize;
    let mut lines = vec![
        Line::styled(title.to_owned(), Style::new().add_modifier(Modifier::BOLD)),
        Line::raw(format!("filter: {filter}▏")),
    ];
    let Some(rows) = rows else {
        lines.push(Line::styled("loading…", dim));
        return lines;
    };
    if rows.is_empty() {
        lines.push(Line::styled(empty.to_owned(), dim));
    }
    let shown = area.height.saturating_sub(3) as usize;
    for (i, text) in rows.iter().enumerate().take(shown) {
        let style = if i == selected {
            Style::new().add_modifier(Modifier::REVERSED)
        } else {
            Style::new()
        };
        lines.push(Line::styled(truncate(text, width), style));
    }
    lines
}

fn draw_overlay(frame: &mut Frame<'_>, app: &App, overlay: &Overlay, area: Rect) {
    let bold = Style::new().add_modifier(Modifier::BOLD);
    let width = area.width as usize;
    let lines: Vec<Line<'static>> = match overlay {
        Overlay::Help(scroll) => {
            let mut rows = Vec::new();
            for row in app.help_text() {
                rows.extend(wrap_line(&Line::raw(row), width, HELP_INDENT));
            }
            help_window(rows, *scroll, area.height as usize, bold)
        }
        Overlay::Models(p) => {
            let rows = p
                .filtered()
                .iter()
                .map(|m| {
                    let window = m
                        .context_window
                        .map_or("?".to_owned(), |w| format!("{}k", w / 1000));
                    let prices = m.prices.map_or("no prices".to_owned(), |p| {
                        format!(
                            "${} in · ${} cached · ${} out per M",
                            p.input, p.cache_read, p.output
                        )
                    });
                    format!(
                        "{:<28} {:<12} {:>6} window · {prices}",
                        m.id, m.provider, window
                    )
                })
                .collect();
            let title = "Switch model · type to filter · enter switches · esc closes";
            picker_lines(
                title,
                &p.filter,
                Some(rows),
                "no matching models",
                p.selected,
                area,
            )
        }
        Overlay::Rewind(p) => p.lines(width, area.height as usize),
        Overlay::Picker(p) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            let rows = p.entries.as_ref().map(|_| {
                p.filtered()
                    .iter()
                    .map(|e| {
                        let age = age(now.saturating_sub(e.last_activity));
                        let turns = e.turns.map_or("?".to_owned(), |t| t.to_string());
                        let prompt = e.first_prompt.as_deref().unwrap_or("(no prompt)");
                        let prompt = prompt.split_whitespace().collect::<Vec<_>>().join(" ");
                        // Enough of the id to tell sessions apart, and a prefix `/resume`
                        // takes as it is.
                        let id = e.id.as_str();
                        let keep = if id.starts_with("session-") { 16 } else { 8 };
                        let short: String = id.chars().take(keep).collect();
                        format!("{short}  {age:>4} · {turns:>3} turns · {prompt}")
                    })
                    .collect()
            });
            let title = "Resume a session · type to filter · enter opens · esc closes";
            picker_lines(
                title,
                &p.filter,
                rows,
                "no matching sessions",
                p.selected,
                area,
            )
        }
    };
    frame.render_widget(Clear, area);
    frame.render_widget(Paragraph::new(lines), area);
}

/// The help rows that fit `height` from `scroll` on (clamped so the last row can reach the
/// bottom), under a title that says how to scroll when they do not all fit, and above a line
/// counting the rows below.
fn help_window(
    rows: Vec<Line<'static>>,
    scroll: usize,
    height: usize,
    bold: Style,
) -> Vec<Line<'static>> {
    let room = height.saturating_sub(1);
    if rows.len() <= room {
        let mut lines = vec![Line::styled("Help · esc closes", bold)];
        lines.extend(rows);
        return lines;
    }
    // One row is kept for the "more below" line whenever anything is below.
    let body = room.saturating_sub(1).max(1);
    let start = scroll.min(rows.len().saturating_sub(body));
    let end = (start + body).min(rows.len());
    let mut lines = vec![Line::styled(
        format!(
            "Help · ↑↓ PgUp PgDn scroll · esc closes · rows {}–{} of {}",
            start + 1,
            end,
            rows.len()
        ),
        bold,
    )];
    lines.extend(rows[start..end].iter().cloned());
    if end < rows.len() {
        lines.push(Line::styled(
            format!("  … {} more rows (↓)", rows.len() - end),
            Style::new().add_modifier(Modifier::DIM),
        ));
    }
    lines
}

/// `5m`, `3h`, `2d`.
fn age(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}
