//! The `/rewind` picker: the session's turns with their prompts and how many files each
//! changed; Enter puts files and conversation back to the start of the chosen turn.
//!
//! Opened by `/rewind` or by Esc twice on an empty composer (as in Claude Code). The rewind
//! itself is the host's (the checkpoint service behind the composition root); the picker only
//! chooses.

use crossterm::event::{KeyCode, KeyEvent};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;

/// One turn the picker offers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnEntry {
    /// The turn number.
    pub turn: u64,
    /// What was asked, on one line.
    pub prompt: String,
    /// Files the turn changed (`None`: no checkpoint).
    pub changed_files: Option<usize>,
}

/// What a rewind puts back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RewindScope {
    /// Files and conversation.
    Both,
    /// Only the files.
    Files,
    /// Only the conversation.
    Conversation,
}

/// The picker's state.
#[derive(Clone, Debug, Default)]
pub struct RewindPicker {
    /// The turns, oldest first (`None` while loading).
    pub entries: Option<Vec<TurnEntry>>,
    /// The selected row.
    pub selected: usize,
}

/// What a key in the picker asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PickerAction {
    /// Close the picker.
    Close,
    /// Rewind to the start of this turn.
    Rewind(u64, RewindScope),
}

impl RewindPicker {
    /// The turns arrived: the newest is selected (the usual choice).
    pub fn fill(&mut self, entries: Vec<TurnEntry>) {
        self.selected = entries.len().saturating_sub(1);
        self.entries = Some(entries);
    }

    /// Handles a key.
    pub fn key(&mut self, key: KeyEvent) -> Option<PickerAction> {
        let len = self.entries.as_ref().map_or(0, Vec::len);
        let chosen = |scope| {
            self.entries
                .as_ref()
                .and_then(|e| e.get(self.selected))
                .map(|e| PickerAction::Rewind(e.turn, scope))
        };
        match key.code {
            KeyCode::Esc | KeyCode::Char('q') => Some(PickerAction::Close),
            KeyCode::Up => {
                self.selected = self.selected.saturating_sub(1);
                None
            }
            KeyCode::Down => {
                self.selected = (self.selected + 1).min(len.saturating_sub(1));
                None
            }
            KeyCode::Enter => chosen(RewindScope::Both),
            KeyCode::Char('f') => chosen(RewindScope::Files),
            KeyCode::Char('c') => chosen(RewindScope::Conversation),
            _ => None,
        }
    }

    /// The overlay's lines for a `width`-column area of `height` rows.
    pub fn lines(&self, width: usize, height: usize) -> Vec<Line<'static>> {
        let bold = Style::new().add_modifier(Modifier::BOLD);
        let dim = Style::new().fg(Color::DarkGray);
        let mut lines = vec![
            Line::styled(
                "Rewind to the start of a turn · enter: files and conversation · f: files only · \
                 c: conversation only · esc closes",
                bold,
            ),
            Line::styled(
                "files someone else changed since make the rewind refuse; nothing is overwritten",
                dim,
            ),
        ];
        match &self.entries {
            None => lines.push(Line::styled("loading…", dim)),
            Some(entries) if entries.is_empty() => {
                lines.push(Line::styled("no turns to rewind to", dim));
            }
            Some(entries) => {
                let room = height.saturating_sub(2).max(1);
                let first = self.selected.saturating_sub(room - 1);
                for (i, e) in entries.iter().enumerate().skip(first).take(room) {
                    let files = match e.changed_files {
                        Some(1) => "1 file".to_owned(),
                        Some(n) => format!("{n} files"),
                        None => "no checkpoint".to_owned(),
                    };
                    let text = format!("{:>4} · {files:>13} · {}", e.turn, e.prompt);
                    let text: String = text.chars().take(width).collect();
                    let style = if i == self.selected {
                        Style::new().add_modifier(Modifier::REVERSED)
                    } else {
                        Style::new()
                    };
                    lines.push(Line::styled(text, style));
                }
            }
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crossterm::event::KeyModifiers;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn entry(turn: u64) -> TurnEntry {
        TurnEntry {
            turn,
            prompt: format!("prompt {turn}"),
            changed_files: Some(turn as usize),
        }
    }

    #[test]
    fn the_newest_turn_is_selected_and_keys_choose_what_goes_back() {
        let mut p = RewindPicker::default();
        assert_eq!(p.key(key(KeyCode::Enter)), None, "nothing while loading");
        p.fill(vec![entry(1), entry(2), entry(4)]);
        assert_eq!(
            p.key(key(KeyCode::Enter)),
            Some(PickerAction::Rewind(4, RewindScope::Both))
        );
        p.key(key(KeyCode::Up));
        assert_eq!(
            p.key(key(KeyCode::Char('f'))),
            Some(PickerAction::Rewind(2, RewindScope::Files))
        );
        p.key(key(KeyCode::Up));
        p.key(key(KeyCode::Up));
        assert_eq!(
            p.key(key(KeyCode::Char('c'))),
            Some(PickerAction::Rewind(1, RewindScope::Conversation))
        );
        assert_eq!(p.key(key(KeyCode::Esc)), Some(PickerAction::Close));
        let text: Vec<String> = p.lines(80, 10).iter().map(|l| l.to_string()).collect();
        assert!(
            text.iter().any(|l| l.contains("2 files · prompt 2")),
            "{text:?}"
        );
    }

    #[test]
    fn esc_twice_on_an_empty_composer_opens_the_picker_and_enter_rewinds() {
        use crate::app::{App, Effect, Overlay};
        use crossterm::event::Event;
        use std::time::{Duration, Instant};
        let mut app = App::new(crate::host::HostInfo::default(), Vec::new());
        let now = Instant::now();
        app.open(dsh_session::SessionId::new("s"), &[], now);
        let esc = Event::Key(key(KeyCode::Esc));
        assert!(app.handle(esc.clone(), now).is_empty());
        assert_eq!(
            app.handle(esc, now + Duration::from_millis(200)),
            vec![Effect::ListTurns]
        );
        assert!(matches!(app.overlay, Some(Overlay::Rewind(_))));
        app.turns(vec![entry(1), entry(2)]);
        assert_eq!(
            app.handle(Event::Key(key(KeyCode::Enter)), now),
            vec![Effect::Rewind(2, RewindScope::Both)]
        );
        assert!(app.overlay.is_none());
        // Typed: `/rewind 1` rewinds at once.
        for c in "/rewind 1".chars() {
            app.handle(Event::Key(key(KeyCode::Char(c))), now);
        }
        assert_eq!(
            app.handle(Event::Key(key(KeyCode::Enter)), now),
            vec![Effect::Rewind(1, RewindScope::Both)]
        );
    }
}
