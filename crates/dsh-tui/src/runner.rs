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
use dsh_session::{Message, SessionEvent, SessionEventFired, SessionId};
use dsh_tools::{Approver, Questioner};
use futures::StreamExt as _;
use parking_lot::Mutex;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

use crate::app::{App, Effect};
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
    /// A session to resume instead of starting a new one.
    pub resume: Option<SessionId>,
    /// Where prompt history lives (one JSON string per line), if anywhere.
    pub history: Option<PathBuf>,
    /// Push the keyboard enhancement flags (Shift+Enter distinguishable).
    pub keyboard_protocol: bool,
}

enum Msg {
    Event(SessionId, Arc<SessionEvent>, bool),
    Files(Vec<String>),
    Sessions(Result<Vec<SessionEntry>, HostError>),
}

/// Runs the UI until the person leaves; the terminal is restored on every way out.
pub async fn run(host: Arc<dyn TuiHost>, options: TuiOptions) -> Result<TuiExit, TuiError> {
    let (msg_tx, mut msgs) = mpsc::unbounded_channel::<Msg>();
    let current: Arc<Mutex<Option<SessionId>>> = Arc::default();
    let feed = {
        let current = current.clone();
        let tx = msg_tx.clone();
        host.ctx()
            .on_global::<SessionEventFired>(move |notice| {
                let Some(shown) = current.lock().clone() else {
                    return;
                };
                let session = &notice.session;
                let child = session.header().parent_session.as_ref() == Some(&shown);
                if *session.id() == shown || child {
                    let _ = tx.send(Msg::Event(
                        session.id().clone(),
                        notice.event.clone(),
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

    {
        // The `@path` index, listed off the event loop.
        let tx = msg_tx.clone();
        let root = host.info().cwd;
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
    let mut app = App::new(host.info(), history);
    app.no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let mut handle = open(&host, &mut app, &current, options.resume.clone()).await;
    if handle.is_none() && options.resume.is_some() {
        handle = open(&host, &mut app, &current, None).await;
    }

    let guard = TerminalGuard::enter(options.keyboard_protocol)?;
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
            _ if app.running() || app.hint.is_some() => now + TICK,
            _ => now + Duration::from_secs(3600),
        };
        let mut effects = Vec::new();
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
            }
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
                if app.prune_cards() || app.running() || app.hint.is_none() {
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
        for effect in effects {
            match effect {
                Effect::Send(text) | Effect::Queue(text) if handle.is_none() => {
                    let _ = text;
                    app.transcript.error("no session; try /new");
                }
                Effect::Send(text) => send(&handle, &mut app, text, false),
                Effect::Queue(text) => send(&handle, &mut app, text, true),
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
                Effect::Resume(id) => {
                    let previous = app.session.clone();
                    close(handle.take()).await;
                    handle = open(&host, &mut app, &current, Some(id)).await;
                    if handle.is_none() {
                        handle = open(&host, &mut app, &current, previous).await;
                    }
                    replayed_to = replayed(&handle);
                }
                Effect::ListSessions => {
                    let host = host.clone();
                    let tx = msg_tx.clone();
                    tokio::spawn(async move {
                        let _ = tx.send(Msg::Sessions(host.sessions().await));
                    });
                }
                Effect::Redraw => redraw(&mut terminal)?,
                Effect::Expand { line, queue } => {
                    let expanded = app.session.as_ref().and_then(|id| host.expand(id, &line));
                    match expanded {
                        Some(Ok(prompt)) => {
                            for effect in app.say(prompt, queue) {
                                if let Effect::Send(text) | Effect::Queue(text) = effect {
                                    send(&handle, &mut app, text, queue);
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
                                        send(&handle, &mut app, text, false);
                                    }
                                }
                            }
                        }
                        Err(e) => app.transcript.error(e.to_string()),
                    },
                    None => app.transcript.error("no session; try /new"),
                },
            }
        }
    }
    // Leave the screen first: teardown may take a moment and the person asked to go.
    drop(terminal);
    drop(guard);
    restore();
    feed.dispose().await;
    let exit = TuiExit {
        session: app.session.clone(),
        last_answer: app.transcript.last_answer().map(str::to_owned),
    };
    close(handle).await;
    Ok(exit)
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
        Msg::Files(files) => app.files = Some(files),
        Msg::Sessions(Ok(entries)) => app.sessions(entries),
        Msg::Sessions(Err(e)) => {
            app.overlay = None;
            app.transcript.error(format!("cannot list sessions: {e}"));
        }
    }
}

fn send(handle: &Option<AgentHandle>, app: &mut App, text: String, queue: bool) {
    let Some(h) = handle else {
        return;
    };
    let agent = h.agent();
    let steering = !queue && agent.status() == AgentStatus::Running;
    let message = Message::user_text(text.clone());
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
    let created = match resume {
        Some(id) => host.resume(id).await,
        None => host.create().await,
    };
    match created {
        Ok(h) => {
            let session = h.agent().session().clone();
            // The feed filter first, then the snapshot: an event appended in between is in
            // both, and the replay bound drops its second copy.
            *current.lock() = Some(session.id().clone());
            app.open(session.id().clone(), &session.events(), Instant::now());
            app.custom = host.commands(session.id());
            Some(h)
        }
        Err(e) => {
            app.transcript.error(e.to_string());
            None
        }
    }
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
