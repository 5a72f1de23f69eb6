//! All UI state and what keys and events do to it.
//!
//! The app never touches the terminal or an agent: handlers mutate state and return
//! [`Effect`]s that the runner carries out (send, steer, cancel, switch session). That keeps
//! every key's meaning testable without a terminal, and the times it depends on (double
//! presses, card arming) are passed in.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseEventKind};
use dsh_session::{EventKind, MessageId, MessageSource, SessionEvent, SessionId};

use crate::approval::{Answer, Ask, Card};
use crate::commands::{self, Command, Entry, Submitted};
use crate::composer::Composer;
use crate::host::{HostInfo, ModelChoice, SessionEntry};
pub use crate::picker::{ModelPicker, Picker};
use crate::question::{CardKey, QuestionAsk, QuestionCard, Step};
use crate::transcript::Transcript;

/// A second Ctrl+C within this window exits.
pub const DOUBLE_PRESS: Duration = Duration::from_secs(2);
/// A second Esc within this window clears the draft (into history).
pub const ESC_CLEAR: Duration = Duration::from_secs(1);
/// Rows a wheel notch scrolls.
const WHEEL: usize = 3;

/// What the runner should do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Send a message: a new turn when idle, a steer when a turn runs.
    Send(String),
    /// Queue a follow-up for after the running turn.
    Queue(String),
    /// Take a queued message back out of the agent's inbox.
    Withdraw(MessageId),
    /// Cancel the running turn.
    Cancel,
    /// Leave.
    Exit,
    /// Start a new session.
    New,
    /// Resume the stored session an id or a unique prefix names (else open the picker
    /// filtered by it); a failure leaves the open session as it is.
    Resume(String),
    /// List stored sessions for the picker.
    ListSessions,
    /// `/compact [focus]` (the agent is idle).
    Compact(Option<String>),
    /// Stop the command in progress (a compaction).
    CancelBusy,
    /// `/context`: ask the host what fills the window.
    Context,
    /// `/model ID`: switch the session's model (and provider).
    SwitchModel(ModelChoice),
    /// `/mode POLICY`: switch the session's approval policy (`None`: the configured one).
    SetApproval(Option<String>),
    /// `/export [PATH]`: write the transcript as Markdown.
    Export(Option<String>),
    /// Ctrl+Z: give the terminal back and stop until resumed.
    Suspend,
    /// List the session's turns for the rewind picker.
    ListTurns,
    /// Rewind the session to the start of a turn.
    Rewind(u64, crate::rewind::RewindScope),
    /// Ctrl+V: read an image from the system clipboard and attach it to the draft.
    PasteImage,
    /// Redraw everything.
    Redraw,
    /// Expand `/name args` with the session's own command or skill, then send (or queue)
    /// the prompt it stands for.
    Expand {
        /// The line as typed.
        line: String,
        /// Queue it (Tab) instead of sending.
        queue: bool,
    },
    /// Turn plan mode on or off, then send `then` (`/plan TEXT`).
    Plan {
        /// Plan mode from here.
        on: bool,
        /// A prompt to send once switched.
        then: Option<String>,
    },
}

/// A message sent but not yet part of the conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    /// Steer (joins the running turn) or queued (its own turn).
    pub steer: bool,
    /// What was sent.
    pub text: String,
    /// The inbox id, once known.
    pub id: Option<MessageId>,
}

/// Ctrl+R: searching history, newest first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Search {
    /// What was typed.
    pub query: String,
    /// Which match (0 = newest) is in the draft.
    pub nth: usize,
    /// The draft before the search (Esc puts it back).
    pub draft: String,
    /// Whether the query matched nothing.
    pub failed: bool,
}

/// A full-screen overlay.
#[derive(Clone, Debug)]
pub enum Overlay {
    /// Keys and commands, scrolled down this many rows (the list is taller than a small
    /// terminal).
    Help(usize),
    /// The session picker.
    Picker(Picker),
    /// The model picker.
    Models(ModelPicker),
    /// The `/rewind` picker.
    Rewind(crate::rewind::RewindPicker),
}

/// Work of the UI's own in progress (not a turn): `/compact`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Busy {
    /// What it is doing (`Compacting`).
    pub what: String,
    /// Since when.
    pub since: Instant,
    /// Compactions the transcript had seen end when it started.
    pub compactions: u64,
}

/// The whole UI state.
pub struct App {
    /// The conversation.
    pub transcript: Transcript,
    /// The draft.
    pub composer: Composer,
    /// Settings shown in the status line.
    pub info: HostInfo,
    /// The session on screen.
    pub session: Option<SessionId>,
    /// Sent, not yet logged messages (the pending strip).
    pub pending: Vec<Pending>,
    /// Approval cards, first shown.
    pub cards: VecDeque<Card>,
    /// Question cards (`ask_user_question`, a plan to review), first shown. They take keys
    /// before approval cards.
    pub questions: VecDeque<QuestionCard>,
    /// Whether keys go to the card (else to the composer) while one is up.
    pub card_focus: bool,
    /// The session's own commands and skills (`/name`), for the popup, `/help` and parsing.
    pub custom: Vec<Entry>,
    /// An overlay, if open.
    pub overlay: Option<Overlay>,
    /// The selected row of the command popup.
    pub popup_selected: usize,
    /// The popup was dismissed for this draft.
    pub popup_dismissed: bool,
    /// Rows scrolled up from the bottom (0 follows the output).
    pub scroll: usize,
    /// Rows that arrived below while scrolled up.
    pub unseen: usize,
    /// Transcript height at the last frame (to keep the anchor when rows arrive).
    pub last_height: usize,
    /// Rows of the transcript view at the last frame (a page).
    pub page: usize,
    /// When the running turn started.
    pub turn_started: Option<Instant>,
    /// A transient hint in the status indicator, until the instant.
    pub hint: Option<(String, Instant)>,
    /// The instant of the last Ctrl+C (for the double press).
    pub interrupt_at: Option<Instant>,
    esc_at: Option<Instant>,
    last_typed: Option<Instant>,
    /// The app should end.
    pub exit: bool,
    /// Draw without colours (`NO_COLOR`); bold, dim and reverse keep the structure.
    pub no_color: bool,
    /// A history search in progress.
    pub search: Option<Search>,
    /// The workspace's files for `@path` completion, once listed.
    pub files: Option<Vec<String>>,
    /// Commands waiting for the turn to end (shown in the pending strip).
    pub deferred: Vec<Command>,
    /// A command of the UI's own in progress (Esc stops it).
    pub busy: Option<Busy>,
}

impl App {
    /// A fresh app showing `info`, with prompt `history` (oldest first).
    pub fn new(info: HostInfo, history: Vec<String>) -> Self {
        Self {
            transcript: Transcript::default(),
            composer: Composer::with_history(history),
            info,
            session: None,
            pending: Vec::new(),
            cards: VecDeque::new(),
            questions: VecDeque::new(),
            card_focus: true,
            custom: Vec::new(),
            overlay: None,
            popup_selected: 0,
            popup_dismissed: false,
            scroll: 0,
            unseen: 0,
            last_height: 0,
            page: 20,
            turn_started: None,
            hint: None,
            interrupt_at: None,
            esc_at: None,
            last_typed: None,
            exit: false,
            no_color: false,
            search: None,
            files: None,
            deferred: Vec::new(),
            busy: None,
        }
    }

    /// Whether a turn is running.
    pub fn running(&self) -> bool {
        self.transcript.activity.running
    }

    /// Shows session `id` from its log so far (a resume replays it, a new one is empty).
    pub fn open(&mut self, id: SessionId, events: &[std::sync::Arc<SessionEvent>], now: Instant) {
        let expand = self.transcript.expand_all;
        // Turns a rewind took out of the history are not shown.
        let events = dsh_session::history_events(events);
        self.transcript = Transcript::replay(events.iter().map(AsRef::as_ref));
        if expand {
            self.transcript.toggle_expand_all();
        }
        self.turn_started = self.running().then_some(now);
        self.session = Some(id);
        self.pending.clear();
        self.scroll = 0;
        self.unseen = 0;
        self.last_height = 0;
    }

    /// An event of the session on screen (`child`: of one of its subagents).
    pub fn session_event(&mut self, event: &SessionEvent, child: bool, now: Instant) {
        if child {
            self.transcript.apply_child(event);
            return;
        }
        let was_running = self.running();
        self.transcript.apply(event);
        if let EventKind::UserMessage(m) = &event.kind
            && m.source == MessageSource::User
        {
            // The message joined the conversation: it leaves the pending strip.
            let text = m.text();
            if let Some(i) = self
                .pending
                .iter()
                .position(|p| p.id.as_ref() == Some(&m.id) || (p.id.is_none() && p.text == text))
            {
                self.pending.remove(i);
            }
        }
        match (was_running, self.running()) {
            (false, true) => self.turn_started = Some(now),
            (true, false) => self.turn_started = None,
            _ => {}
        }
    }

    /// A question from the approval service.
    pub fn ask(&mut self, ask: Ask, now: Instant) {
        self.cards.push_back(Card::new(ask, now));
        self.card_focus = true;
    }

    /// A question from the question service.
    pub fn question(&mut self, ask: QuestionAsk, now: Instant) {
        self.questions.push_back(QuestionCard::new(ask, now));
        self.card_focus = true;
    }

    /// Whether a card (a question or an approval) is waiting for the person.
    pub fn waiting(&self) -> bool {
        !self.cards.is_empty() || !self.questions.is_empty()
    }

    /// What the running turn waits for, when a card is up (the running indicator says it).
    pub fn waiting_for(&self) -> Option<&'static str> {
        if !self.questions.is_empty() {
            Some("Waiting for your answer")
        } else if !self.cards.is_empty() {
            Some("Waiting for approval")
        } else {
            None
        }
    }

    /// Whether plan mode is on in the session on screen (as its log says).
    pub fn planning(&self) -> bool {
        self.transcript.planning
    }

    /// Whether the front card takes answer keys at `now` (see [`Card::armed`]).
    pub fn card_armed(&self, now: Instant) -> bool {
        match self.questions.front() {
            Some(q) => q.armed(now, self.last_typed),
            None => self
                .cards
                .front()
                .is_some_and(|c| c.armed(now, self.last_typed)),
        }
    }

    /// Drops cards whose turn was cancelled; true when any went.
    pub fn prune_cards(&mut self) -> bool {
        let before = self.cards.len() + self.questions.len();
        self.cards.retain(|c| !c.withdrawn());
        self.questions.retain(|q| !q.withdrawn());
        before != self.cards.len() + self.questions.len()
    }

    /// Sets a transient hint.
    fn hint(&mut self, text: &str, now: Instant) {
        self.hint = Some((text.to_owned(), now + DOUBLE_PRESS));
    }

    /// The command popup's rows for the current draft.
    pub fn popup(&self) -> Vec<Entry> {
        if self.popup_dismissed || self.overlay.is_some() {
            return Vec::new();
        }
        commands::matches(self.composer.text(), &self.custom)
    }

    /// `@path` completions for the word at the caret (empty when there is none to offer).
    pub fn file_popup(&self) -> Vec<&str> {
        if self.popup_dismissed || self.overlay.is_some() {
            return Vec::new();
        }
        let (Some(files), Some((_, query))) = (
            &self.files,
            crate::files::token(self.composer.text(), self.composer.caret()),
        ) else {
            return Vec::new();
        };
        crate::files::matches(files, query)
    }

    /// Replaces the `@` word at the caret with the selected file; false when nothing was offered.
    fn complete_file(&mut self) -> bool {
        let popup = self.file_popup();
        let Some(path) = popup
            .get(self.popup_selected.min(popup.len().saturating_sub(1)))
            .map(|p| (*p).to_owned())
        else {
            return false;
        };
        let caret = self.composer.caret();
        let Some((start, _)) = crate::files::token(self.composer.text(), caret) else {
            return false;
        };
        let text = self.composer.text();
        let completed = format!("{}@{path} {}", &text[..start], &text[caret..]);
        let at = start + path.len() + 2;
        self.composer.set_text(&completed);
        self.composer.set_caret(at);
        self.popup_selected = 0;
        true
    }

    /// Rows of whichever popup is open (commands or files).
    fn popup_len(&self) -> usize {
        self.popup().len().max(self.file_popup().len())
    }

    /// Handles one terminal event at `now`.
    pub fn handle(&mut self, event: Event, now: Instant) -> Vec<Effect> {
        match event {
            Event::Key(key) if key.kind != KeyEventKind::Release => self.key(key, now),
            Event::Paste(text) => {
                match &mut self.overlay {
                    Some(Overlay::Picker(p)) => {
                        p.filter.push_str(&text);
                        p.selected = 0;
                    }
                    Some(Overlay::Models(p)) => {
                        p.filter.push_str(&text);
                        p.selected = 0;
                    }
                    _ => {
                        // A file dropped on the terminal arrives as its path: an image becomes
                        // a mention that attaches it (text keeps the path as typed).
                        match crate::attach::pasted_image(&text, &self.info.cwd)
                            .and_then(|path| crate::attach::mention_for(&path, &self.info.cwd))
                        {
                            Some(mention) => self.composer.insert(&format!("{mention} ")),
                            None => self.composer.paste(&text),
                        }
                        self.popup_dismissed = false;
                    }
                }
                self.last_typed = Some(now);
                Vec::new()
            }
            Event::Mouse(m) => {
                match m.kind {
                    MouseEventKind::ScrollUp => self.scroll_up(WHEEL),
                    MouseEventKind::ScrollDown => self.scroll_down(WHEEL),
                    _ => {}
                }
                Vec::new()
            }
            Event::Resize(..) => vec![Effect::Redraw],
            _ => Vec::new(),
        }
    }

    fn scroll_up(&mut self, rows: usize) {
        self.scroll = self.scroll.saturating_add(rows);
    }

    fn scroll_down(&mut self, rows: usize) {
        self.scroll = self.scroll.saturating_sub(rows);
        if self.scroll == 0 {
            self.unseen = 0;
        }
    }

    fn key(&mut self, key: KeyEvent, now: Instant) -> Vec<Effect> {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        if ctrl && key.code == KeyCode::Char('c') {
            return self.interrupt(now);
        }
        if self.overlay.is_some() {
            return self.overlay_key(key);
        }
        if self.search.is_some() {
            self.search_key(key);
            return Vec::new();
        }
        if self.waiting() {
            if key.code == KeyCode::Tab {
                self.card_focus = !self.card_focus;
                return Vec::new();
            }
            if self.card_focus && !self.questions.is_empty() {
                if self.question_key(key, now) {
                    return Vec::new();
                }
            } else if self.card_focus
                && let Some(effects) = self.card_key(key, now)
            {
                return effects;
            }
        }
        match key.code {
            KeyCode::Char('d') if ctrl => {
                if self.composer.is_empty() {
                    self.exit = true;
                    return vec![Effect::Exit];
                }
                self.composer.delete();
            }
            KeyCode::Char('o') if ctrl => self.transcript.toggle_expand_all(),
            KeyCode::Char('v') if ctrl => return vec![Effect::PasteImage],
            KeyCode::Char('r') if ctrl => {
                self.search = Some(Search {
                    draft: self.composer.text().to_owned(),
                    ..Search::default()
                });
            }
            KeyCode::Char('l') if ctrl => return vec![Effect::Redraw],
            KeyCode::Char('z') if ctrl => return vec![Effect::Suspend],
            KeyCode::Char('j') if ctrl => self.composer.newline(),
            KeyCode::Char('a') if ctrl => self.composer.home(),
            KeyCode::Char('e') if ctrl => self.composer.end(),
            KeyCode::Char('u') if ctrl => {
                self.composer.clear_to_history();
            }
            KeyCode::Enter if alt || key.modifiers.contains(KeyModifiers::SHIFT) => {
                self.composer.newline();
            }
            KeyCode::Enter | KeyCode::Tab if self.complete_file() => {}
            KeyCode::Enter => return self.submit(false),
            KeyCode::Tab => {
                let popup = self.popup();
                if let Some(entry) =
                    popup.get(self.popup_selected.min(popup.len().saturating_sub(1)))
                {
                    let space = if entry.args.is_empty() { "" } else { " " };
                    self.composer.set_text(&format!("/{}{space}", entry.name));
                    return Vec::new();
                }
                return self.submit(self.running());
            }
            KeyCode::Esc => return self.escape(now),
            KeyCode::Up if alt => return self.withdraw_last(),
            KeyCode::Up => {
                let n = self.popup_len();
                if n > 0 {
                    self.popup_selected = (self.popup_selected + n - 1) % n;
                } else {
                    self.composer.up();
                }
            }
            KeyCode::Down => {
                let n = self.popup_len();
                if n > 0 {
                    self.popup_selected = (self.popup_selected + 1) % n;
                } else {
                    self.composer.down();
                }
            }
            KeyCode::PageUp => self.scroll_up(self.page.saturating_sub(2).max(1)),
            KeyCode::PageDown => self.scroll_down(self.page.saturating_sub(2).max(1)),
            KeyCode::End if self.scroll > 0 && self.composer.is_empty() => {
                self.scroll_down(usize::MAX)
            }
            KeyCode::Left => self.composer.left(),
            KeyCode::Right => self.composer.right(),
            KeyCode::Home => self.composer.home(),
            KeyCode::End => self.composer.end(),
            KeyCode::Backspace => {
                self.composer.backspace();
                self.popup_dismissed = false;
            }
            KeyCode::Delete => self.composer.delete(),
            KeyCode::Char(c) if !ctrl => {
                let mut buf = [0u8; 4];
                self.composer.insert(c.encode_utf8(&mut buf));
                self.last_typed = Some(now);
                self.popup_dismissed = false;
                self.popup_selected = 0;
            }
            _ => {}
        }
        Vec::new()
    }

    /// Keys during a history search: typing narrows, Ctrl+R goes to the next older match,
    /// Enter (or any movement) keeps the match as the draft, Esc puts the draft back.
    fn search_key(&mut self, key: KeyEvent) {
        let Some(search) = &mut self.search else {
            return;
        };
        match key.code {
            KeyCode::Char('r') if key.modifiers.contains(KeyModifiers::CONTROL) => search.nth += 1,
            KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => {
                search.query.push(c);
                search.nth = 0;
            }
            KeyCode::Backspace => {
                search.query.pop();
                search.nth = 0;
            }
            KeyCode::Esc | KeyCode::Char('g') => {
                let draft = std::mem::take(&mut search.draft);
                self.composer.set_text(&draft);
                self.search = None;
                return;
            }
            _ => {
                self.search = None;
                return;
            }
        }
        let query = search.query.to_lowercase();
        let found = self
            .composer
            .history()
            .iter()
            .rev()
            .filter(|h| h.to_lowercase().contains(&query))
            .nth(search.nth)
            .cloned();
        match found {
            Some(entry) => {
                search.failed = false;
                self.composer.set_text(&entry);
            }
            None => {
                search.failed = true;
                search.nth = search.nth.saturating_sub(1);
            }
        }
    }

    /// Ctrl+C: closes what is open, cancels a turn, clears a draft; twice exits.
    fn interrupt(&mut self, now: Instant) -> Vec<Effect> {
        let again = self
            .interrupt_at
            .is_some_and(|t| now.saturating_duration_since(t) < DOUBLE_PRESS);
        if again {
            self.exit = true;
            return vec![Effect::Exit];
        }
        self.interrupt_at = Some(now);
        if self.overlay.take().is_some() {
            self.hint("ctrl+c again to exit", now);
            return Vec::new();
        }
        if self.busy.is_some() {
            self.hint("stopping · ctrl+c again to exit", now);
            return vec![Effect::CancelBusy];
        }
        if self.running() {
            self.hint("cancelled · ctrl+c again to exit", now);
            return self.cancel();
        }
        if !self.composer.is_empty() {
            self.composer.clear_to_history();
        }
        self.hint("ctrl+c again to exit", now);
        Vec::new()
    }

    /// Esc: closes the popup, cancels a turn, or (pressed twice) clears the draft.
    fn escape(&mut self, now: Instant) -> Vec<Effect> {
        if self.popup_len() > 0 {
            self.popup_dismissed = true;
            return Vec::new();
        }
        if self.scroll > 0 {
            self.scroll_down(usize::MAX);
            return Vec::new();
        }
        if self.busy.is_some() {
            return vec![Effect::CancelBusy];
        }
        if self.running() {
            return self.cancel();
        }
        let again = self
            .esc_at
            .is_some_and(|t| now.saturating_duration_since(t) < ESC_CLEAR);
        if !self.composer.is_empty() {
            if again {
                self.composer.clear_to_history();
                self.esc_at = None;
            } else {
                self.esc_at = Some(now);
                self.hint("esc again to clear the draft (it stays in history)", now);
            }
        } else if self.session.is_some() {
            // On an empty composer, Esc twice opens the rewind picker.
            if again {
                self.esc_at = None;
                return self.command(Command::Rewind(None));
            }
            self.esc_at = Some(now);
            self.hint("esc again to rewind to an earlier turn", now);
        }
        Vec::new()
    }

    /// Cancels the turn; the inbox is cleared with it, so what was pending returns to the
    /// draft (in order, before what is being typed).
    fn cancel(&mut self) -> Vec<Effect> {
        // Commands that waited for the turn to end go with it.
        for command in self.deferred.drain(..) {
            self.transcript.notice(format!(
                "{} not run: the turn was cancelled",
                command.describe()
            ));
        }
        let returned: Vec<String> = self.pending.drain(..).map(|p| p.text).collect();
        if !returned.is_empty() {
            let mut text = returned.join("\n");
            if !self.composer.is_empty() {
                text.push('\n');
                text.push_str(self.composer.text());
            }
            self.composer.set_text(&text);
        }
        for card in self.cards.drain(..) {
            let _ = card.ask.reply.send(Answer::Deny(None));
        }
        for card in self.questions.drain(..) {
            card.finish(dsh_tools::QuestionOutcome::Cancelled);
        }
        vec![Effect::Cancel]
    }

    /// Alt+Up: the newest queued follow-up back into the draft.
    fn withdraw_last(&mut self) -> Vec<Effect> {
        let Some(i) = self
            .pending
            .iter()
            .rposition(|p| !p.steer && p.id.is_some())
        else {
            return Vec::new();
        };
        let p = self.pending.remove(i);
        self.composer.set_text(&p.text);
        p.id.map(Effect::Withdraw).into_iter().collect()
    }

    /// Enter (or Tab to queue).
    fn submit(&mut self, queue: bool) -> Vec<Effect> {
        // Enter on the popup runs the selected command (every argument is optional); an
        // exact name is listed first, so it is what runs.
        let popup = self.popup();
        if let Some(entry) = popup.get(self.popup_selected.min(popup.len().saturating_sub(1))) {
            self.composer.set_text(&format!("/{}", entry.name));
        }
        let Some(text) = self.composer.take() else {
            return Vec::new();
        };
        self.popup_selected = 0;
        self.popup_dismissed = false;
        match commands::parse(&text) {
            Submitted::Say(text) if self.busy.is_some() => {
                // Nothing starts under a compaction: the draft waits (esc stops it).
                self.composer.set_text(&text);
                let what = self.busy.as_ref().map_or("working", |b| b.what.as_str());
                let hint = format!(
                    "{} · send when it is done (esc stops it)",
                    what.to_lowercase()
                );
                self.hint = Some((hint, Instant::now() + DOUBLE_PRESS));
                Vec::new()
            }
            Submitted::Say(text) => self.say(text, queue),
            Submitted::Invalid(message) => {
                self.transcript.error(message);
                Vec::new()
            }
            Submitted::Custom(line) => {
                let name = line
                    .trim_start_matches('/')
                    .split_whitespace()
                    .next()
                    .unwrap_or("");
                if self.custom.iter().any(|e| e.name == name) {
                    vec![Effect::Expand { line, queue }]
                } else {
                    self.transcript
                        .error(format!("unknown command /{name} (try /help)"));
                    Vec::new()
                }
            }
            Submitted::Command(command) => self.command(command),
        }
    }

    /// Puts an image read from the clipboard (saved at `path`) into the draft as
    /// `[Clipboard image]`, which stands for the mention that attaches it on submit.
    pub fn attach_clipboard_image(&mut self, path: &std::path::Path) {
        match crate::attach::mention_for(path, &self.info.cwd) {
            Some(mention) => {
                self.composer.fold("[Clipboard image]".to_owned(), mention);
                self.popup_dismissed = false;
            }
            None => self
                .transcript
                .error(format!("cannot attach {}: unusable name", path.display())),
        }
    }

    /// Sends `text` (or queues it): a new turn when idle, a steer or a follow-up in the
    /// pending strip while a turn runs.
    pub fn say(&mut self, text: String, queue: bool) -> Vec<Effect> {
        if self.running() {
            self.pending.push(Pending {
                steer: !queue,
                text: text.clone(),
                id: None,
            });
        }
        self.scroll_down(usize::MAX);
        if queue {
            vec![Effect::Queue(text)]
        } else {
            vec![Effect::Send(text)]
        }
    }

    /// Keys while a question card has focus; false lets the key through to the composer.
    fn question_key(&mut self, key: KeyEvent, now: Instant) -> bool {
        let armed = self.card_armed(now);
        let card_key = match key.code {
            KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => CardKey::Char(c),
            KeyCode::Enter => CardKey::Enter,
            KeyCode::Esc => CardKey::Esc,
            KeyCode::Backspace => CardKey::Backspace,
            _ => return false,
        };
        let Some(card) = self.questions.front_mut() else {
            return false;
        };
        match card.key(card_key, armed) {
            Step::Ignored => false,
            Step::Kept => true,
            Step::Done => {
                if let Some(card) = self.questions.pop_front() {
                    card.close();
                }
                true
            }
        }
    }

    /// Keys while a card has focus; `None` lets the key through to the composer.
    fn card_key(&mut self, key: KeyEvent, now: Instant) -> Option<Vec<Effect>> {
        let card = self.cards.front_mut()?;
        if let Some(reason) = &mut card.reason {
            match key.code {
                KeyCode::Enter => {
                    let reason = reason.trim().to_owned();
                    let card = self.cards.pop_front()?;
                    // The approver steers the reason into the agent before it denies.
                    let _ = card
                        .ask
                        .reply
                        .send(Answer::Deny((!reason.is_empty()).then_some(reason)));
                    return Some(Vec::new());
                }
                KeyCode::Esc => card.reason = None,
                KeyCode::Backspace => {
                    reason.pop();
                }
                KeyCode::Char(c) => reason.push(c),
                _ => {}
            }
            return Some(Vec::new());
        }
        let answer_key = matches!(key.code, KeyCode::Char('y' | 'a' | 'n'));
        if !answer_key {
            return None;
        }
        if !card.armed(now, self.last_typed) {
            // Typed during arming: it was meant for the draft.
            return None;
        }
        let answer = match key.code {
            KeyCode::Char('y') => Answer::Once,
            KeyCode::Char('a') => Answer::Session,
            _ => {
                card.reason = Some(String::new());
                return Some(Vec::new());
            }
        };
        if let Some(card) = self.cards.pop_front() {
            let _ = card.ask.reply.send(answer);
        }
        Some(Vec::new())
    }

    fn overlay_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        let Some(overlay) = &mut self.overlay else {
            return Vec::new();
        };
        match overlay {
            Overlay::Help(scroll) => match key.code {
                KeyCode::Esc | KeyCode::Enter | KeyCode::Char('q') => self.overlay = None,
                // The view clamps the scroll to what the list and the screen leave.
                KeyCode::Down | KeyCode::Char('j') => *scroll = scroll.saturating_add(1),
                KeyCode::Up | KeyCode::Char('k') => *scroll = scroll.saturating_sub(1),
                KeyCode::PageDown | KeyCode::Char(' ') => *scroll = scroll.saturating_add(10),
                KeyCode::PageUp => *scroll = scroll.saturating_sub(10),
                KeyCode::Home => *scroll = 0,
                _ => {}
            },
            Overlay::Rewind(p) => match p.key(key) {
                Some(crate::rewind::PickerAction::Close) => self.overlay = None,
                Some(crate::rewind::PickerAction::Rewind(turn, scope)) => {
                    self.overlay = None;
                    return vec![Effect::Rewind(turn, scope)];
                }
                None => {}
            },
            Overlay::Picker(p) => {
                let rows = p.filtered().len();
                match key.code {
                    KeyCode::Enter => {
                        let chosen = p.filtered().get(p.selected).map(|e| e.id.to_string());
                        if let Some(id) = chosen {
                            self.overlay = None;
                            return self.command(Command::Resume(Some(id)));
                        }
                    }
                    code => {
                        if filter_key(code, &mut p.filter, &mut p.selected, rows) {
                            self.overlay = None;
                        }
                    }
                }
            }
            Overlay::Models(p) => {
                let rows = p.filtered().len();
                match key.code {
                    KeyCode::Enter => {
                        let chosen = p
                            .filtered()
                            .get(p.selected)
                            .map(|m| format!("{}/{}", m.provider, m.id));
                        if let Some(id) = chosen {
                            self.overlay = None;
                            return self.command(Command::Model(Some(id)));
                        }
                    }
                    code => {
                        if filter_key(code, &mut p.filter, &mut p.selected, rows) {
                            self.overlay = None;
                        }
                    }
                }
            }
        }
        Vec::new()
    }

    /// The turns for the rewind picker arrived.
    pub fn turns(&mut self, entries: Vec<crate::rewind::TurnEntry>) {
        if let Some(Overlay::Rewind(p)) = &mut self.overlay {
            p.fill(entries);
        }
    }

    /// The sessions listing arrived. A picker opened for a reference that named no session
    /// closes with that one error when its filter keeps nothing either.
    pub fn sessions(&mut self, entries: Vec<SessionEntry>) {
        if let Some(Overlay::Picker(p)) = &mut self.overlay {
            p.entries = Some(entries);
            if let Some(error) = p.unresolved.take()
                && p.filtered().is_empty()
            {
                self.overlay = None;
                self.transcript.error(error);
            }
        }
    }

    /// The help text: keys and commands (the session's own after the built-ins), from the
    /// tables that drive them.
    pub fn help_text(&self) -> Vec<String> {
        let mut out = vec!["Keys".to_owned()];
        for (key, what) in KEYS {
            out.push(format!("  {key:<18} {what}"));
        }
        out.push(String::new());
        out.push("Commands".to_owned());
        for e in commands::entries(&self.custom) {
            out.push(format!(
                "  /{:<21} {}",
                format!("{} {}", e.name, e.args).trim_end(),
                e.what
            ));
        }
        out
    }
}

/// A key in a filtered picker: typing filters, arrows move, Esc closes (returns true).
fn filter_key(code: KeyCode, filter: &mut String, selected: &mut usize, rows: usize) -> bool {
    match code {
        KeyCode::Esc => return true,
        KeyCode::Up => *selected = selected.saturating_sub(1),
        KeyCode::Down => *selected = (*selected + 1).min(rows.saturating_sub(1)),
        KeyCode::Backspace => {
            filter.pop();
            *selected = 0;
        }
        KeyCode::Char(c) => {
            filter.push(c);
            *selected = 0;
        }
        _ => {}
    }
    false
}

/// The keymap as `/help` shows it.
pub const KEYS: &[(&str, &str)] = &[
    (
        "Enter",
        "send; while the agent works: steer (joins at the next step)",
    ),
    (
        "Tab",
        "while the agent works: queue a follow-up for after the turn",
    ),
    (
        "Alt+Enter, Ctrl+J",
        "newline (Shift+Enter where the terminal tells it apart)",
    ),
    (
        "Esc",
        "cancel the turn · close a popup · twice: clear the draft",
    ),
    ("Ctrl+C", "cancel / clear; twice: exit"),
    ("Ctrl+D", "exit on an empty draft"),
    ("Up/Down", "history (first/last line)"),
    ("Alt+Up", "take the newest queued follow-up back"),
    ("PageUp/Down, wheel", "scroll; End or Esc follows again"),
    ("Ctrl+O", "expand or collapse tool output, diffs, reasoning"),
    ("Ctrl+Z", "suspend (fg resumes)"),
    ("Ctrl+V", "attach the clipboard's image"),
    ("@path", "complete a workspace file (tab or enter)"),
    (
        "Ctrl+R",
        "search history (again: older; enter keeps; esc back)",
    ),
    (
        "y / a / n",
        "approval card: once / this session / deny with a reason",
    ),
    (
        "1-9 · y / n",
        "question: pick or type an answer · plan: approve / revise",
    ),
];
