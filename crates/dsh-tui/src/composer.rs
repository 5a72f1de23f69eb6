//! The composer: a multi-line draft with a caret, history and folded pastes.
//!
//! Large pastes are kept out of the draft's text: the draft holds a placeholder
//! (`[Pasted 4,210 chars · 96 lines]`) that is deleted as a whole and expanded on submit, so the
//! composer stays a few rows high and a paste is never sent in pieces.

/// A paste longer than this many characters (or [`PASTE_LINES`] lines) is folded.
pub const PASTE_CHARS: usize = 1000;
/// A paste with more lines than this is folded.
pub const PASTE_LINES: usize = 20;

/// The draft being typed.
#[derive(Debug, Default, Clone)]
pub struct Composer {
    text: String,
    /// Caret as a byte offset into `text` (always on a char boundary).
    caret: usize,
    pastes: Vec<(String, String)>,
    history: Vec<String>,
    /// Position while browsing history (`history.len()` = the draft itself).
    browsing: Option<usize>,
    stashed: String,
}

impl Composer {
    /// An empty composer with `history` (oldest first).
    pub fn with_history(history: Vec<String>) -> Self {
        Self {
            history,
            ..Self::default()
        }
    }

    /// The draft as shown (placeholders folded).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The caret's byte offset.
    pub fn caret(&self) -> usize {
        self.caret
    }

    /// Moves the caret to byte offset `at` (clamped, on a character boundary).
    pub fn set_caret(&mut self, at: usize) {
        let mut at = at.min(self.text.len());
        while !self.text.is_char_boundary(at) {
            at -= 1;
        }
        self.caret = at;
    }

    /// Whether the draft is empty.
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// Replaces the draft (caret at the end).
    pub fn set_text(&mut self, text: &str) {
        self.text = text.to_owned();
        self.caret = self.text.len();
        self.browsing = None;
    }

    /// Inserts typed text at the caret.
    pub fn insert(&mut self, s: &str) {
        self.text.insert_str(self.caret, s);
        self.caret += s.len();
        self.browsing = None;
    }

    /// Inserts a newline at the caret.
    pub fn newline(&mut self) {
        self.insert("\n");
    }

    /// Inserts pasted text: normalized (CRLF, controls), folded when large.
    pub fn paste(&mut self, raw: &str) {
        let text: String = raw
            .replace("\r\n", "\n")
            .replace('\r', "\n")
            .chars()
            .filter(|c| !c.is_control() || *c == '\n' || *c == '\t')
            .collect();
        let lines = text.lines().count();
        let chars = text.chars().count();
        if chars > PASTE_CHARS || lines > PASTE_LINES {
            let placeholder = format!(
                "[Pasted {} chars · {lines} lines]",
                crate::status::group_thousands(chars as u64)
            );
            self.fold(placeholder, text);
        } else {
            self.insert(&text);
        }
    }

    /// Inserts `label` (`[Clipboard image]`) standing for `expansion`: deleted as a whole,
    /// expanded on submit, like a large paste.
    pub fn fold(&mut self, label: String, expansion: String) {
        let placeholder = self.unique(label);
        self.insert(&placeholder);
        self.pastes.push((placeholder, expansion));
    }

    /// A placeholder not already in the draft (two equal-sized pastes stay apart).
    fn unique(&self, base: String) -> String {
        let mut name = base.clone();
        let mut n = 2;
        while self.pastes.iter().any(|(p, _)| *p == name) {
            name = format!("{} #{n}]", base.trim_end_matches(']'));
            n += 1;
        }
        name
    }

    /// Deletes the character (or whole paste placeholder) before the caret.
    pub fn backspace(&mut self) {
        if let Some((start, i)) = self.placeholder_ending_at(self.caret) {
            self.text.replace_range(start..self.caret, "");
            self.caret = start;
            self.pastes.remove(i);
            return;
        }
        if let Some(c) = self.text[..self.caret].chars().next_back() {
            self.caret -= c.len_utf8();
            self.text.remove(self.caret);
        }
    }

    /// Deletes the character after the caret.
    pub fn delete(&mut self) {
        if self.caret < self.text.len() {
            self.text.remove(self.caret);
        }
    }

    fn placeholder_ending_at(&self, at: usize) -> Option<(usize, usize)> {
        self.pastes.iter().enumerate().find_map(|(i, (p, _))| {
            let start = at.checked_sub(p.len())?;
            (self.text.get(start..at) == Some(p.as_str())).then_some((start, i))
        })
    }

    /// Moves the caret one character left.
    pub fn left(&mut self) {
        if let Some(c) = self.text[..self.caret].chars().next_back() {
            self.caret -= c.len_utf8();
        }
    }

    /// Moves the caret one character right.
    pub fn right(&mut self) {
        if let Some(c) = self.text[self.caret..].chars().next() {
            self.caret += c.len_utf8();
        }
    }

    /// Caret to the start of its line.
    pub fn home(&mut self) {
        self.caret = self.text[..self.caret].rfind('\n').map_or(0, |i| i + 1);
    }

    /// Caret to the end of its line.
    pub fn end(&mut self) {
        self.caret = self.text[self.caret..]
            .find('\n')
            .map_or(self.text.len(), |i| self.caret + i);
    }

    /// Whether the caret is on the draft's first line.
    pub fn on_first_line(&self) -> bool {
        !self.text[..self.caret].contains('\n')
    }

    /// Whether the caret is on the draft's last line.
    pub fn on_last_line(&self) -> bool {
        !self.text[self.caret..].contains('\n')
    }

    /// Up: the previous line of the draft, or the previous history entry on the first line.
    pub fn up(&mut self) {
        if !self.on_first_line() {
            self.vertical(-1);
            return;
        }
        let at = self.browsing.unwrap_or(self.history.len());
        if at == 0 {
            return;
        }
        if self.browsing.is_none() {
            self.stashed = self.text.clone();
        }
        self.text = self.history[at - 1].clone();
        self.caret = self.text.len();
        self.browsing = Some(at - 1);
    }

    /// Down: the next line, or the next history entry (back to the draft) on the last line.
    pub fn down(&mut self) {
        if !self.on_last_line() {
            self.vertical(1);
            return;
        }
        let Some(at) = self.browsing else {
            return;
        };
        if at + 1 >= self.history.len() {
            self.text = std::mem::take(&mut self.stashed);
            self.browsing = None;
        } else {
            self.text = self.history[at + 1].clone();
            self.browsing = Some(at + 1);
        }
        self.caret = self.text.len();
    }

    fn vertical(&mut self, dir: i32) {
        let line_start = self.text[..self.caret].rfind('\n').map_or(0, |i| i + 1);
        let col = self.text[line_start..self.caret].chars().count();
        let target_start = if dir < 0 {
            let prev_end = line_start - 1;
            self.text[..prev_end].rfind('\n').map_or(0, |i| i + 1)
        } else {
            match self.text[self.caret..].find('\n') {
                Some(i) => self.caret + i + 1,
                None => return,
            }
        };
        let line_end = self.text[target_start..]
            .find('\n')
            .map_or(self.text.len(), |i| target_start + i);
        let offset: usize = self.text[target_start..line_end]
            .chars()
            .take(col)
            .map(char::len_utf8)
            .sum();
        self.caret = target_start + offset;
    }

    /// Takes the draft for sending: placeholders expanded, the draft recorded in history and
    /// cleared. `None` when there is nothing to send.
    pub fn take(&mut self) -> Option<String> {
        if self.text.trim().is_empty() {
            return None;
        }
        let shown = std::mem::take(&mut self.text);
        let mut full = shown.clone();
        for (placeholder, text) in self.pastes.drain(..) {
            full = full.replacen(&placeholder, &text, 1);
        }
        self.caret = 0;
        self.browsing = None;
        self.remember(&full);
        Some(full)
    }

    /// Records `entry` in history (not twice in a row).
    pub fn remember(&mut self, entry: &str) {
        if self.history.last().map(String::as_str) != Some(entry) {
            self.history.push(entry.to_owned());
        }
    }

    /// History, oldest first.
    pub fn history(&self) -> &[String] {
        &self.history
    }

    /// Clears the draft into history (a cleared draft is never lost).
    pub fn clear_to_history(&mut self) {
        let _ = self.take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_paste_is_one_placeholder_deleted_whole_and_sent_whole() {
        let mut c = Composer::default();
        c.insert("look: ");
        let big = "x".repeat(5000);
        c.paste(&big);
        assert_eq!(c.text(), "look: [Pasted 5,000 chars · 1 lines]");
        c.backspace();
        assert_eq!(c.text(), "look: ");
        c.paste(&big);
        c.insert(" thanks");
        assert_eq!(c.take().unwrap(), format!("look: {big} thanks"));
        assert!(c.is_empty());
    }

    #[test]
    fn history_browses_on_the_first_line_and_returns_to_the_draft() {
        let mut c = Composer::with_history(vec!["one".into(), "two".into()]);
        c.insert("draft");
        c.up();
        assert_eq!(c.text(), "two");
        c.up();
        assert_eq!(c.text(), "one");
        c.down();
        c.down();
        assert_eq!(c.text(), "draft");
    }

    #[test]
    fn up_and_down_move_between_lines_of_a_multi_line_draft() {
        let mut c = Composer::with_history(vec!["old".into()]);
        c.insert("abc");
        c.newline();
        c.insert("de");
        c.up();
        assert_eq!(c.caret(), 2);
        c.down();
        assert_eq!(c.caret(), 6);
        c.paste("a\r\nb");
        assert_eq!(c.text(), "abc\ndea\nb");
    }
}
