//! The event loop: one task owns the app; input, session events, approval questions and timers
//! arrive on channels; frames are coalesced to at most one per 16 ms.
//!
//! Session events reach the loop from a `session/event` listener that only forwards the
//! `Arc<SessionEvent>` (it runs inside the agent's append and must not block it). After each
//! event the loop drains what else is queued for up to 4 ms, so a burst of deltas becomes one
//! frame without starving typing. Idle means no frames; while a turn runs the spinner ticks
//! every 100 ms.

use std::io::{Stdout, Write as _, stdout};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossterm::event::EventStream;
use crossterm::terminal::{BeginSynchronizedUpdate, EndSynchronizedUpdate};
use dsh_agent::{AgentHandle, AgentStatus, CancelCause, CancelOptions};
use dsh_session::{
    LiveUpdate, Message, SessionEvent, SessionEventFired, SessionId, SessionLiveFired,
};
use dsh_tools::{Approver, Questioner};
use futures::StreamExt as _;
use parking_lot::Mutex;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::app::{App, Effect, Overlay, Picker};
use crate::approval::TuiApprover;
use crate::host::{HostError, SessionEntry, TuiHost};
use crate::question::TuiQuestioner;
use crate::terminal::{TerminalGuard, restore};
use crate::view;

/// At most one frame per this interval (60 fps).
const FRAME: Duration = Duration::from_micros(16_700);
/// After an event, queued events are folded into the same frame for at most this long.
const DRAIN: Duration = Duration::from_millis(4);
/// Spinner tick while a turn runs.
const TICK: Duration = Duration::from_millis(100);

/// Why the UI could not run.
#[derive(Debug, thiserror::Error)]
pub enum TuiError {
    /// The terminal could not be set up or written.
    #[error("terminal: {0}")]
    Terminal(#[from] std::io::Error),
    /// The host failed to provide what the UI needs.
    #[error("{0}")]
    Host(#[from] HostError),
    /// The session feed could not be subscribed.
    #[error("cannot listen to session events: {0}")]
    Feed(String),
}

/// How the UI ended.
#[derive(Debug, Default)]
pub struct TuiExit {
    /// The session on screen at exit (to print the resume hint).
    pub session: Option<SessionId>,
    /// Its last answer (printed on the main screen after exit).
    pub last_answer: Option<String>,
}

/// Options of a UI run.
#[derive(Debug, Default, Clone)]
pub struct TuiOptions {
    /// A session to resume instead of starting a new one: its id or a unique prefix.
    pub resume: Option<String>,
    /// Where prompt history lives (one JSON string per line), if anywhere.
    pub history: Option<PathBuf>,
    /// Push the keyboard enhancement flags (Shift+Enter distinguishable).
    pub keyboard_protocol: bool,
}

enum Msg {
    Event(SessionId, Arc<SessionEvent>, bool),
    Live(SessionId, LiveUpdate, bool),
    Files(Vec<String>),
    Sessions(Result<Vec<SessionEntry>, HostError>),
    Compacted(Result<String, HostError>),
    Turns(Result<Vec<crate::rewind::TurnEntry>, HostError>),
    /// An image read from the clipboard, saved where its mention points.
    Clipboard(Result<std::path::PathBuf, String>),
}

/// Whether `session` is the one on screen or one of its subagents (`Some(true)`).
fn shown(current: &Mutex<Option<SessionId>>, session: &dsh_session::Session) -> Option<bool> {
    let shown = current.lock().clone()?;
    let child = session.header().parent_session.as_ref() == Some(&shown);
    (*session.id() == shown || child).then_some(child)
}

/// Runs the UI until the person leaves; the terminal is restored on every way out.
pub async fn run(host: Arc<dyn TuiHost>, options: TuiOptions) -> Result<TuiExit, TuiError> {
    let (msg_tx, mut msgs) = mpsc::unbounded_channel::<Msg>();
    // Images pasted from the clipboard live here until the UI closes.
    let clips = Arc::new(dsh_fs::PrivateDir::new(None, "dsh-clipboard"));
    let current: Arc<Mutex<Option<SessionId>>> = Arc::default();
    let feed = {
        let current = current.clone();
        let tx = msg_tx.clone();
        host.ctx()
            .on_global::<SessionEventFired>(move |notice| {
                if let Some(child) = shown(&current, &notice.session) {
                    let _ = tx.send(Msg::Event(
                        notice.session.id().clone(),
                        notice.event.clone(),
                        child,
                    ));
                }
            })
            .map_err(|e| TuiError::Feed(e.to_string()))?
    };
    // Work in progress (a command's output while it runs): never logged, shown in its card.
    let live = {
        let current = current.clone();
        let tx = msg_tx.clone();
        host.ctx()
            .on_global::<SessionLiveFired>(move |notice| {
                if let Some(child) = shown(&current, &notice.session) {
                    let _ = tx.send(Msg::Live(
                        notice.session.id().clone(),
                        notice.update.clone(),
                        child,
                    ));
                }
            })
            .map_err(|e| TuiError::Feed(e.to_string()))?
    };
    let (approver, mut asks) = TuiApprover::new(Some(host.ctx().clone()));
    // Another front end (or a policy plugin) may own approvals already; then cards never show.
    let _ = host.ctx().provide::<dyn Approver>(Arc::new(approver));
    let (questioner, mut questions) = TuiQuestioner::new(current.clone());
    let _ = host.ctx().provide::<dyn Questioner>(Arc::new(questioner));

    crate::highlight::load_in_background();
    let first_info = host.info(None);
    {
        // The `@path` index, listed off the event loop.
        let tx = msg_tx.clone();
        let root = first_info.cwd.clone();
        tokio::task::spawn_blocking(move || {
            let _ = tx.send(Msg::Files(crate::files::list(&root)));
        });
    }
    let history = options
        .history
        .as_deref()
        .map(load_history)
        .unwrap_or_default();
    let mut saved = history.len();
    let mut app = App::new(first_info, history);
    app.no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let mut failed_resume = None;
    let mut handle = match options.resume.clone() {
        Some(reference) => {
            let resumed = match host.locate(reference.as_str()).await {
                Ok(id) => opened(&host, Some(id)).await,
                Err(e) => Err(e),
            };
            match resumed {
                Ok(h) => {
                    show(&host, &mut app, &current, &h);
                    Some(h)
                }
                Err(e) => {
                    failed_resume = Some(e.to_string());
                    None
                }
            }
        }
        None => None,
    };
    if handle.is_none() {
        handle = open(&host, &mut app, &current, None).await;
    }
    // Said after the new session is on screen (showing one starts a fresh transcript).
    if let Some(error) = failed_resume {
        app.transcript.error(error);
    }

    let mut guard = Some(TerminalGuard::enter(options.keyboard_protocol)?);
    // No `terminal.clear()`: it queries the cursor position, and entering already cleared.
    let mut terminal = Terminal::new(CrosstermBackend::new(stdout()))?;
    let mut input = EventStream::new();
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sighup = signal(SignalKind::hangup())?;
    // In raw mode Ctrl+C is a key; a SIGINT sent by `kill` must still restore before leaving.
    let mut sigint = signal(SignalKind::interrupt())?;
    let mut replayed_to = replayed(&handle);
    let mut last_frame: Option<Instant> = None;
    let mut dirty = true;
    let panic_for_test = std::env::var_os("DSH_TUI_TEST_PANIC").is_some();
    let mut compaction: Option<CancellationToken> = None;
    // Blocks highlighted in the background: redraw with their colours.
    let mut highlighted = crate::highlight::changes();

    while !app.exit {
        let now = Instant::now();
        if dirty && last_frame.is_none_or(|t| now.saturating_duration_since(t) >= FRAME) {
            draw(&mut terminal, &mut app)?;
            last_frame = Some(Instant::now());
            dirty = false;
            if panic_for_test {
                panic!("DSH_TUI_TEST_PANIC: a panic injected after the first frame");
            }
        }
        let deadline = match (dirty, last_frame) {
            (true, Some(t)) => t + FRAME,
            _ if app.running() || app.busy.is_some() || app.hint.is_some() => now + TICK,
            _ => now + Duration::from_secs(3600),
        };
        let mut effects = Vec::new();
        // Whether something may have changed what the session runs under (the status line).
        let mut refresh = false;
        tokio::select! {
            biased;
            event = input.next() => match event {
                Some(Ok(event)) => {
                    effects = app.handle(event, Instant::now());
                    dirty = true;
                }
                // The terminal went away: leave as if asked.
                Some(Err(_)) | None => app.exit = true,
            },
            Some(msg) = msgs.recv() => {
                let until = Instant::now() + DRAIN;
                let mut next = Some(msg);
                while let Some(msg) = next {
                    on_msg(&mut app, msg, replayed_to.as_ref());
                    next = if Instant::now() < until { msgs.try_recv().ok() } else { None };
                }
                dirty = true;
                refresh = true;
            }
            Ok(()) = highlighted.changed() => dirty = true,
            Some(ask) = asks.recv() => {
                app.ask(ask, Instant::now());
                dirty = true;
            }
            Some(ask) = questions.recv() => {
                app.question(ask, Instant::now());
                dirty = true;
            }
            _ = sigterm.recv() => app.exit = true,
            _ = sighup.recv() => app.exit = true,
            _ = sigint.recv() => app.exit = true,
            () = tokio::time::sleep_until(deadline.into()) => {
                if app.hint.as_ref().is_some_and(|(_, until)| Instant::now() >= *until) {
                    app.hint = None;
                }
                if app.prune_cards() || app.running() || app.busy.is_some() || app.hint.is_none() {
                    dirty = true;
                }
            }
        }
        // History is written as soon as a prompt is taken, before it is sent anywhere.
        let entries = app.composer.history();
        if let Some(path) = &options.history
            && entries.len() > saved
        {
            append_history(path, &entries[saved..]);
            saved = entries.len();
        }
        let mut queue: std::collections::VecDeque<Effect> = effects.into();
        queue.extend(app.take_due());
        while let Some(effect) = queue.pop_front() {
            refresh = true;
            match effect {
                Effect::Send(text) | Effect::Queue(text) if handle.is_none() => {
                    let _ = text;
                    app.transcript.error("no session; try /new");
                }
                Effect::Send(text) => send(host.as_ref(), &handle, &mut app, text, false),
                Effect::Queue(text) => send(host.as_ref(), &handle, &mut app, text, true),
                Effect::Withdraw(id) => {
                    if let Some(h) = &handle
                        && !matches!(h.agent().inbox().remove(&id), Ok(true))
                    {
                        app.transcript.notice("(already taken by the agent)");
                    }
                }
                Effect::Cancel => {
                    if let Some(h) = &handle {
                        h.agent()
                            .cancel(CancelCause::User, CancelOptions::default());
                    }
                }
                Effect::Exit => app.exit = true,
                Effect::New => {
                    close(handle.take()).await;
                    handle = open(&host, &mut app, &current, None).await;
                    replayed_to = replayed(&handle);
                }
                Effect::Resume(reference) => {
                    // The new session is opened before the one on screen is given up: a
                    // reference that names nothing (or a session that cannot be resumed)
                    // leaves everything as it was.
                    let resumed = match host.locate(&reference).await {
                        Ok(id) if app.session.as_ref() == Some(&id) => Ok(None),
                        Ok(id) => opened(&host, Some(id)).await.map(Some),
                        Err(e) => Err(e),
                    };
                    match resumed {
                        Ok(None) => {
                            let id = app.session.as_ref().map(ToString::to_string);
                            app.transcript
                                .notice(format!("already in session {}", id.unwrap_or_default()));
                        }
                        Ok(Some(h)) => {
                            close(handle.take()).await;
                            show(&host, &mut app, &current, &h);
                            handle = Some(h);
                            replayed_to = replayed(&handle);
                        }
                        Err(e) => {
                            // Maybe words of its first prompt: the picker, filtered by them;
                            // the one error when nothing matches either.
                            app.overlay = Some(Overlay::Picker(Picker {
                                filter: reference,
                                unresolved: Some(e.to_string()),
                                ..Picker::default()
                            }));
                            queue.push_back(Effect::ListSessions);
                        }
                    }
                }
                Effect::ListSessions => {
                    let host = host.clone();
                    let tx = msg_tx.clone();
                    tokio::spawn(async move {
                        let _ = tx.send(Msg::Sessions(host.sessions().await));
                    });
                }
                Effect::Compact(focus) => match &handle {
                    Some(h) => {
                        let token = CancellationToken::new();
                        compaction = Some(token.clone());
                        let host = host.clone();
                        let tx = msg_tx.clone();
                        let agent = h.agent().clone();
                        tokio::spawn(async move {
                            let outcome = host.compact(agent, focus, token).await;
                            let _ = tx.send(Msg::Compacted(outcome));
                        });
                    }
                    None => app.compacted(Err("no session; try /new".into())),
                },
                Effect::CancelBusy => {
                    if let Some(token) = &compaction {
                        token.cancel();
                    }
                }
                Effect::Context => match &handle {
                    Some(h) => match host.context(h.agent()) {
                        Ok(report) => app.show_context(&report),
                        Err(e) => app.transcript.error(e.to_string()),
                    },
                    None => app.transcript.error("no session; try /new"),
                },
                Effect::SwitchModel(choice) => match &handle {
                    Some(h) => match host.switch_model(h.agent(), choice).await {
                        Ok(()) => {
                            app.info = host.info(app.session.as_ref());
                            app.transcript.notice(format!(
                                "model: {} via {} from the next request on",
                                app.info.model, app.info.provider
                            ));
                        }
                        Err(e) => app.transcript.error(e.to_string()),
                    },
                    None => app.transcript.error("no session; try /new"),
                },
                Effect::SetApproval(policy) => match &app.session {
                    Some(id) => match host.set_approval(id, policy.as_deref()) {
                        Ok(()) => {
                            app.info = host.info(app.session.as_ref());
                            app.transcript.notice(format!("mode: {}", app.info.mode));
                        }
                        Err(e) => app.transcript.error(e.to_string()),
                    },
                    None => app.transcript.error("no session; try /new"),
                },
                Effect::Export(path) => export(&mut app, path),
                Effect::Suspend => {
                    drop(guard.take());
                    restore();
                    suspend();
                    guard = Some(TerminalGuard::enter(options.keyboard_protocol)?);
                    redraw(&mut terminal)?;
                }
                Effect::ListTurns => match &handle {
                    Some(h) => {
                        let (host, tx, agent) = (host.clone(), msg_tx.clone(), h.agent().clone());
                        tokio::spawn(async move {
                            let _ = tx.send(Msg::Turns(host.turns(&agent).await));
                        });
                    }
                    None => app.overlay = None,
                },
                Effect::Rewind(turn, scope) => {
                    if let Some(h) = &handle {
                        // Awaited here: no key may start a turn while files are written back.
                        match host.rewind(h.agent(), turn, scope).await {
                            Ok(text) => {
                                let session = h.agent().session().clone();
                                app.open(session.id().clone(), &session.events(), Instant::now());
                                replayed_to = replayed(&handle);
                                app.transcript.notice(text);
                            }
                            Err(e) => app.transcript.error(e.to_string()),
                        }
                    }
                }
                Effect::PasteImage => match crate::clipboard::ClipboardReader::from_env() {
                    Ok(reader) => {
                        let (tx, clips) = (msg_tx.clone(), clips.clone());
                        tokio::spawn(async move {
                            let saved = match reader.read_png().await {
                                Ok(png) => save_clipboard_image(&clips, &png),
                                Err(e) => Err(e.to_string()),
                            };
                            let _ = tx.send(Msg::Clipboard(saved));
                        });
                    }
                    Err(e) => app.transcript.error(e.to_string()),
                },
                Effect::Redraw => redraw(&mut terminal)?,
                Effect::Expand { line, queue } => {
                    let expanded = match app.session.as_ref() {
                        Some(id) => host.expand(id, &line).await,
                        None => None,
                    };
                    match expanded {
                        Some(Ok(prompt)) => {
                            for effect in app.say(prompt, queue) {
                                if let Effect::Send(text) | Effect::Queue(text) = effect {
                                    send(host.as_ref(), &handle, &mut app, text, queue);
                                }
                            }
                        }
                        Some(Err(e)) => app.transcript.error(e.to_string()),
                        None => {
                            let name = line.split_whitespace().next().unwrap_or(&line);
                            app.transcript.error(format!("unknown command {name}"));
                        }
                    }
                }
                Effect::Plan { on, then } => match &handle {
                    Some(h) => match host.set_plan(h, on) {
                        Ok(()) => {
                            if let Some(text) = then {
                                for effect in app.say(text, false) {
                                    if let Effect::Send(text) = effect {
                                        send(host.as_ref(), &handle, &mut app, text, false);
                                    }
                                }
                            }
                        }
                        Err(e) => app.transcript.error(e.to_string()),
                    },
                    None => app.transcript.error("no session; try /new"),
                },
            }
            if queue.is_empty() {
                queue.extend(app.take_due());
            }
        }
        if refresh {
            app.info = host.info(app.session.as_ref());
        }
    }
    // Leave the screen first: teardown may take a moment and the person asked to go.
    drop(terminal);
    drop(guard);
    restore();
    feed.dispose().await;
    live.dispose().await;
    if let Some(token) = compaction {
        token.cancel();
    }
    let exit = TuiExit {
        session: app.session.clone(),
        last_answer: app.transcript.last_answer().map(str::to_owned),
    };
    close(handle).await;
    Ok(exit)
}

/// Ctrl+Z: the terminal is already restored; stop like any job, and return when the shell
/// continues us (`fg`), to enter the screen again.
fn suspend() {
    let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGTSTP);
}

/// `/export [PATH]`: the transcript as Markdown, into a new file (never over an existing one).
fn export(app: &mut App, path: Option<String>) {
    let path = match path {
        Some(p) => std::path::PathBuf::from(p),
        None => {
            let id = app
                .session
                .as_ref()
                .map_or("transcript".to_owned(), ToString::to_string);
            std::path::PathBuf::from(format!("dsh-{id}.md"))
        }
    };
    let path = if path.is_absolute() {
        path
    } else {
        app.info.cwd.join(path)
    };
    let text = app.transcript.markdown();
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    match written {
        Ok(()) => app.transcript.notice(format!(
            "exported {} lines to {}",
            text.lines().count(),
            path.display()
        )),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => app.transcript.error(format!(
            "not exported: {} exists (name another file: /export PATH)",
            path.display()
        )),
        Err(e) => app
            .transcript
            .error(format!("not exported to {}: {e}", path.display())),
    }
}

fn draw(terminal: &mut Terminal<CrosstermBackend<Stdout>>, app: &mut App) -> std::io::Result<()> {
    // One synchronized update per frame: the terminal shows it whole or not at all.
    let mut out = stdout();
    crossterm::queue!(out, BeginSynchronizedUpdate)?;
    let now = Instant::now();
    terminal.draw(|frame| view::draw(frame, app, now))?;
    crossterm::queue!(out, EndSynchronizedUpdate)?;
    out.flush()
}

/// Clears the screen and forgets what is on it, so the next frame is drawn whole. Done through
/// `resize`, which (unlike `clear`) asks the terminal nothing.
fn redraw(terminal: &mut Terminal<CrosstermBackend<Stdout>>) -> std::io::Result<()> {
    let size = terminal.size()?;
    terminal.resize(ratatui::layout::Rect::new(0, 0, size.width, size.height))
}

/// Saves a clipboard image as a private file (0600 in a 0700 directory, removed when the UI
/// closes) for the mention that attaches it when the draft is sent.
fn save_clipboard_image(
    clips: &dsh_fs::PrivateDir,
    png: &[u8],
) -> Result<std::path::PathBuf, String> {
    use std::io::Write as _;
    let (mut file, path) = clips
        .create("clipboard.png")
        .map_err(|e| format!("cannot keep the clipboard image: {e}"))?;
    file.write_all(png)
        .map_err(|e| format!("cannot keep the clipboard image: {e}"))?;
    Ok(path)
}

fn on_msg(app: &mut App, msg: Msg, replayed_to: Option<&(SessionId, u64)>) {
    match msg {
        Msg::Event(session, event, child) => {
            if !child {
                if app.session.as_ref() != Some(&session) {
                    return;
                }
                // Already part of the replay the transcript was built from.
                if replayed_to.is_some_and(|(id, seq)| *id == session && event.seq <= *seq) {
                    return;
                }
            }
            app.session_event(&event, child, Instant::now());
        }
        Msg::Live(session, update, child) => {
            if child || app.session.as_ref() == Some(&session) {
                app.transcript.live(&update, child);
            }
        }
        Msg::Compacted(outcome) => app.compacted(outcome.map_err(|e| e.to_string())),
        Msg::Files(files) => app.files = Some(files),
        Msg::Sessions(Ok(entries)) => app.sessions(entries),
        Msg::Clipboard(Ok(path)) => app.attach_clipboard_image(&path),
        Msg::Clipboard(Err(e)) => app.transcript.error(e),
        Msg::Turns(Ok(entries)) => app.turns(entries),
        Msg::Turns(Err(e)) => {
            app.overlay = None;
            app.transcript.error(format!("cannot rewind: {e}"));
        }
        Msg::Sessions(Err(e)) => {
            app.overlay = None;
            app.transcript.error(format!("cannot list sessions: {e}"));
        }
    }
}

fn send(
    host: &dyn TuiHost,
    handle: &Option<AgentHandle>,
    app: &mut App,
    text: String,
    queue: bool,
) {
    let Some(h) = handle else {
        return;
    };
    let agent = h.agent();
    let steering = !queue && agent.status() == AgentStatus::Running;
    let images = crate::attach::image_mentions(&text, &app.info.cwd);
    let message = if images.is_empty() {
        Message::user_text(text.clone())
    } else {
        match host.attach_images(agent.session().id(), &images) {
            Ok(blocks) => {
                let mut content = vec![dsh_session::ContentBlock::text(text.clone())];
                content.extend(blocks);
                Message::user(content, dsh_session::MessageSource::User)
            }
            Err(e) => {
                // Nothing was sent: the message leaves the pending strip (history keeps it for
                // Up, to fix the mention or switch models).
                if let Some(i) = app
                    .pending
                    .iter()
                    .rposition(|p| p.id.is_none() && p.text == text)
                {
                    app.pending.remove(i);
                }
                app.transcript.error(format!("not sent: {e}"));
                return;
            }
        }
    };
    let sent = if steering {
        agent.steer(message)
    } else {
        agent.followup(message)
    };
    match sent {
        Ok(id) => {
            if let Some(p) = app
                .pending
                .iter_mut()
                .rev()
                .find(|p| p.id.is_none() && p.text == text)
            {
                p.id = Some(id);
            }
        }
        Err(e) => app.transcript.error(format!("cannot send: {e}")),
    }
}

/// The last seq of the session the app replayed, so the feed does not show it twice.
fn replayed(handle: &Option<AgentHandle>) -> Option<(SessionId, u64)> {
    let h = handle.as_ref()?;
    let session = h.agent().session();
    let last = session.events().last().map_or(0, |e| e.seq);
    Some((session.id().clone(), last))
}

/// Creates or resumes an agent and shows its session.
async fn open(
    host: &Arc<dyn TuiHost>,
    app: &mut App,
    current: &Mutex<Option<SessionId>>,
    resume: Option<SessionId>,
) -> Option<AgentHandle> {
    match opened(host, resume).await {
        Ok(h) => {
            show(host, app, current, &h);
            Some(h)
        }
        Err(e) => {
            app.transcript.error(e.to_string());
            None
        }
    }
}

/// Creates or resumes an agent without touching what is on screen.
async fn opened(
    host: &Arc<dyn TuiHost>,
    resume: Option<SessionId>,
) -> Result<AgentHandle, HostError> {
    match resume {
        Some(id) => host.resume(id).await,
        None => host.create().await,
    }
}

/// Puts `h`'s session on screen (its log so far replayed).
fn show(
    host: &Arc<dyn TuiHost>,
    app: &mut App,
    current: &Mutex<Option<SessionId>>,
    h: &AgentHandle,
) {
    let session = h.agent().session().clone();
    // The feed filter first, then the snapshot: an event appended in between is in both,
    // and the replay bound drops its second copy.
    *current.lock() = Some(session.id().clone());
    app.open(session.id().clone(), &session.events(), Instant::now());
    app.info = host.info(Some(session.id()));
    app.custom = host.commands(session.id());
}

async fn close(handle: Option<AgentHandle>) {
    if let Some(h) = handle {
        h.dispose().await;
    }
}

/// The history is read like every file dsh finds by its place: a FIFO or device there is
/// refused at once, never waited on (the last 8 MiB are plenty).
fn load_history(path: &std::path::Path) -> Vec<String> {
    match dsh_fs::read_placed(path, 8 << 20, dsh_fs::Oversize::Cut) {
        Ok(Some(file)) => String::from_utf8_lossy(&file.bytes)
            .lines()
            .filter_map(|l| serde_json::from_str::<String>(l).ok())
            .collect(),
        Ok(None) | Err(_) => Vec::new(),
    }
}

/// Appends `entries` to the history file.
fn append_history(path: &std::path::Path, entries: &[String]) {
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    // A FIFO planted in the history's place is refused instead of waited on.
    let Ok(mut file) = dsh_fs::append_placed(path) else {
        return;
    };
    for e in entries {
        if let Ok(line) = serde_json::to_string(e) {
            let _ = writeln!(file, "{line}");
        }
    }
}
