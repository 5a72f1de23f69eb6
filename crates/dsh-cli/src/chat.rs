//! The interactive chat: `dsh` with no arguments in a terminal.
//!
//! Three parties, each on its own thread of control:
//! - the **editor** thread owns rustyline (an editable prompt with history) and turns what the
//!   person types into [`Input`]s; it keeps the prompt available while the agent works, so
//!   Enter while busy *steers* the running turn (the message is folded in at the next step
//!   boundary) and Ctrl-C cancels the turn, never the program;
//! - the **output** thread renders the current session's events ([`crate::render`]) and prints
//!   them above the prompt through rustyline's external printer, a line at a time;
//! - the **driver** (this module's async loop) owns the agent and runs the slash commands.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use dsh_agent::{AgentHandle, AgentStatus, CancelCause, CancelOptions};
use dsh_session::{Message, SessionId};
pub use dsh_tui::commands::PlanSwitch;
use dsh_tui::commands::Typed;
use parking_lot::Mutex;
use rustyline::error::ReadlineError;
use rustyline::{DefaultEditor, ExternalPrinter as _};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

use crate::render::{Mode, Renderer};
use crate::run::DRAIN;
use crate::sink::Sink;
use dsh_harness::config::{Overrides, Settings};
use dsh_harness::{Harness, SessionReference, SessionRequest};

/// What the person did at the prompt.
#[derive(Debug)]
enum Input {
    /// A submitted line.
    Line(String),
    /// Ctrl-C.
    Interrupt,
    /// Ctrl-D, or the terminal went away.
    Eof,
}

/// A parsed chat command.
#[derive(Debug, PartialEq, Eq)]
pub enum ChatCommand {
    /// Send text to the agent.
    Say(String),
    /// `/exit` (or `/quit`).
    Exit,
    /// `/new`: a fresh session in the same directory.
    New,
    /// `/resume ID`
    Resume(String),
    /// `/sessions`
    Sessions,
    /// `/cancel`: stop the running turn.
    Cancel,
    /// `/help`
    Help,
    /// `/compact [focus]`: summarize the oldest history now.
    Compact(Option<String>),
    /// `/context`: context use and session cost.
    Context,
    /// `/plan [on|off|TEXT]`: switch plan mode (TEXT: on, then send it).
    Plan(PlanSwitch),
    /// `/name args` for a name that is no built-in: a custom command or a skill, if the
    /// session has one by that name (the whole line).
    Other(String),
    /// `/rewind [N …]`: list the turns, or go back to the start of turn N.
    Rewind(Vec<String>),
    /// Nothing to do (an empty line).
    Nothing,
    /// An unknown or malformed command, with the message to show.
    Invalid(String),
}

const HELP: &str = "\
commands:
  /new          start a new session in this directory
  /resume ID    continue a stored session
  /sessions     list stored sessions
  /cancel       cancel the running turn (or press Ctrl-C)
  /compact [focus]  summarize the older history now (optionally what to keep)
  /context      context used and the session's cost
  /plan [on|off|TEXT]  plan mode: explore read-only, then approve a plan (TEXT: plan this)
  /rewind [N]   list the turns, or put files and conversation back to the start of turn N
                (--files-only, --conversation-only, --force)
  /exit         leave (or press Ctrl-D)
  //text        send a message that starts with /
Typing while the agent works steers the running turn: the message joins at the next step.";

/// Parses one submitted line (`//text` and paths are messages; see
/// [`dsh_tui::commands::classify`]).
pub fn parse(line: &str) -> ChatCommand {
    let (name, rest) = match dsh_tui::commands::classify(line) {
        Typed::Empty => return ChatCommand::Nothing,
        Typed::Say(text) => return ChatCommand::Say(text),
        Typed::Command(name, rest) => (name, rest),
    };
    match (name, rest.as_slice()) {
        ("exit" | "quit", []) => ChatCommand::Exit,
        ("new", []) => ChatCommand::New,
        ("sessions", []) => ChatCommand::Sessions,
        ("cancel", []) => ChatCommand::Cancel,
        ("help", []) => ChatCommand::Help,
        ("resume", [id]) => ChatCommand::Resume((*id).to_owned()),
        ("compact", []) => ChatCommand::Compact(None),
        ("compact", focus) => ChatCommand::Compact(Some(focus.join(" "))),
        ("context", []) => ChatCommand::Context,
        ("plan", words) => ChatCommand::Plan(PlanSwitch::of(words)),
        ("rewind", args) => ChatCommand::Rewind(args.iter().map(|a| (*a).to_owned()).collect()),
        ("resume", _) => ChatCommand::Invalid("usage: /resume SESSION_ID".to_owned()),
        ("exit" | "quit" | "new" | "sessions" | "cancel" | "help" | "context", _) => {
            ChatCommand::Invalid(format!("usage: /{name} (it takes no arguments)"))
        }
        _ => ChatCommand::Other(line.trim().to_owned()),
    }
}

/// Shared printer: rustyline's external printer prints above the prompt.
use dsh_chat::Printer;

/// Runs the chat; returns the exit status.
pub fn main(
    settings: Settings,
    flags: Overrides,
    cwd: Option<PathBuf>,
    reference: SessionReference,
    plan: bool,
) -> i32 {
    let first = reference.clone();
    // `--cwd` with `--resume` moves the resumed session there (only that first session:
    // `/resume` inside the chat keeps each session where it works).
    let move_to = cwd
        .clone()
        .filter(|_| matches!(reference, SessionReference::Resume(_)));
    crate::tui::start(settings, cwd, &reference, |settings, cwd, signals| {
        chat(settings, flags, cwd, first, move_to, signals, plan)
    })
}

async fn chat(
    settings: Settings,
    flags: Overrides,
    cwd: PathBuf,
    first: SessionReference,
    move_to: Option<PathBuf>,
    signals: crate::signals::Signals,
    plan: bool,
) -> anyhow::Result<()> {
    let mut editor = DefaultEditor::new().context("cannot open the terminal")?;
    let history = settings.home.value.join("history");
    // A FIFO or device in the history's place would hang the line editor's own open.
    let history_ok = match dsh_fs::check_placed(&history) {
        Ok(_) => true,
        Err(e) => {
            eprintln!("dsh: input history skipped: {e}");
            false
        }
    };
    if history_ok {
        let _ = editor.load_history(&history);
    }
    let mut external = editor
        .create_external_printer()
        .context("the chat needs a terminal on stdin and stdout")?;
    let printer: Printer = Arc::new(Mutex::new(Box::new(move |text: String| {
        let _ = external.print(text);
    })));
    let say = {
        let printer = printer.clone();
        move |text: &str| (printer.lock())(format!("{}\n", text.trim_end()))
    };

    let harness = crate::tui::start_harness(settings, flags).await?;
    let current: Arc<Mutex<Option<SessionId>>> = Arc::default();
    let sink = output_sink(&harness, current.clone(), printer.clone())?;
    let approver = dsh_chat::approve::install(&harness, printer.clone(), current.clone())
        .context("cannot provide the approval service")?;
    let questioner = dsh_chat::question::install(&harness, printer.clone(), current.clone())
        .context("cannot provide the question service")?;

    let mut sigint = signal(SignalKind::interrupt()).context("cannot handle Ctrl-C")?;
    let (tx, mut inputs) = mpsc::unbounded_channel();
    let editor_thread = std::thread::Builder::new()
        .name("dsh-editor".into())
        .spawn(move || edit_loop(editor, &history, &tx))
        .context("cannot start the editor")?;

    say(&format!(
        "dsh {} — {} via {} in {} (/help for commands)",
        env!("CARGO_PKG_VERSION"),
        harness.settings().model.value,
        harness.settings().provider.value,
        cwd.display()
    ));
    let mut first = session_request(first, &cwd, plan);
    if let Some(dir) = move_to {
        // `dsh chat --resume ID --cwd DIR`: that first session is moved to DIR.
        first = first.in_dir(dir);
    }
    let mut handle = open(&harness, first, &current, &say).await;
    if handle.is_none() {
        handle = open(
            &harness,
            session_request(SessionReference::New, &cwd, plan),
            &current,
            &say,
        )
        .await;
    }
    // Start-up is over: Ctrl-C cancels the turn from here on (`sigint`); SIGTERM still ends dsh.
    signals.interactive();
    loop {
        let input = tokio::select! {
            input = inputs.recv() => input.unwrap_or(Input::Eof),
            // Outside the prompt's raw mode a Ctrl-C arrives as a signal: same meaning.
            _ = sigint.recv() => Input::Interrupt,
        };
        let command = match input {
            Input::Eof => break,
            Input::Interrupt => ChatCommand::Cancel,
            // An open approval question takes the next line as its answer, as does a question
            // the agent asked.
            Input::Line(line) if approver.answer(&line) => continue,
            Input::Line(line) if questioner.answer(&line) => continue,
            Input::Line(line) => parse(&line),
        };
        match command {
            ChatCommand::Nothing => {}
            ChatCommand::Exit => break,
            ChatCommand::Help => say(&help(&harness, handle.as_ref())),
            ChatCommand::Invalid(message) => say(&message),
            ChatCommand::Cancel => match &handle {
                Some(h) if h.agent().status() == AgentStatus::Running => {
                    h.agent()
                        .cancel(CancelCause::User, CancelOptions::default());
                }
                _ => say("(nothing to cancel; /exit or Ctrl-D to leave)"),
            },
            ChatCommand::Compact(focus) => match &handle {
                Some(h) => {
                    say(&dsh_harness::usage::compact(&harness, h.agent(), focus.as_deref()).await)
                }
                None => say("no session; try /new"),
            },
            ChatCommand::Rewind(args) => match &handle {
                Some(h) => {
                    let args: Vec<&str> = args.iter().map(String::as_str).collect();
                    say(&crate::rewind::command(&harness, h.agent(), &args).await);
                }
                None => say("no session; try /new"),
            },
            ChatCommand::Context => match &handle {
                Some(h) => say(&dsh_harness::usage::context(&harness, h.agent())),
                None => say("no session; try /new"),
            },
            ChatCommand::Sessions => match crate::sessions::list(harness.store()).await {
                Ok(text) => say(&text),
                Err(e) => say(&format!("dsh: {e:#}")),
            },
            ChatCommand::New => {
                close(handle.take()).await;
                handle = open(
                    &harness,
                    session_request(SessionReference::New, &cwd, false),
                    &current,
                    &say,
                )
                .await;
            }
            ChatCommand::Resume(reference) => {
                // The reference is checked before the current session is given up: a typo
                // must not cost the conversation in progress.
                match harness
                    .locate(&SessionRequest::new(SessionReference::Resume(reference)))
                    .await
                {
                    Ok(located) => {
                        close(handle.take()).await;
                        let reference = SessionReference::Resume(located.id.to_string());
                        handle = open(
                            &harness,
                            session_request(reference, &cwd, false),
                            &current,
                            &say,
                        )
                        .await;
                        if handle.is_none() {
                            handle = open(
                                &harness,
                                session_request(SessionReference::New, &cwd, false),
                                &current,
                                &say,
                            )
                            .await;
                        }
                    }
                    Err(e) => say(&format!("dsh: {:#}", anyhow::Error::new(e))),
                }
            }
            ChatCommand::Say(text) => match &handle {
                Some(h) => send(h, text, &say),
                None => say("no session; try /new"),
            },
            ChatCommand::Plan(switch) => match &handle {
                Some(h) => switch_plan(&harness, h, switch, &say),
                None => say("no session; try /new"),
            },
            ChatCommand::Other(line) => {
                let expanded = match &handle {
                    Some(h) => harness.expand_line(h.agent().id(), &line).await,
                    None => None,
                };
                match (expanded, &handle) {
                    (Some(Ok(prompt)), Some(h)) => send(h, prompt, &say),
                    (Some(Err(problem)), _) => say(&format!("dsh: {problem}")),
                    _ => {
                        let name = line.split_whitespace().next().unwrap_or(&line);
                        say(&format!("unknown command {name} (try /help)"));
                    }
                }
            }
        }
    }
    if let Some(h) = &handle {
        say(&format!(
            "session {} (dsh chat --resume {0})",
            h.agent().id()
        ));
    }
    let _ = tokio::time::timeout(DRAIN, async {
        close(handle.take()).await;
        harness.shutdown().await;
    })
    .await;
    sink.close();
    let _ = editor_thread.join();
    Ok(())
}

/// Sends `text` to the chat's agent: a prompt when it is idle, steering when it works.
fn send(handle: &AgentHandle, text: String, say: &impl Fn(&str)) {
    let agent = handle.agent();
    let steering = agent.status() == AgentStatus::Running;
    let sent = if steering {
        agent.steer(Message::user_text(text))
    } else {
        agent.followup(Message::user_text(text))
    };
    match sent {
        Ok(_) if steering => say("(steering: joins the running turn at its next step)"),
        Ok(_) => {}
        Err(e) => say(&format!("dsh: {:#}", anyhow::Error::new(e))),
    }
}

/// `/plan`: switches plan mode of the chat's session (and sends the text of `/plan TEXT`).
fn switch_plan(harness: &Harness, handle: &AgentHandle, switch: PlanSwitch, say: &impl Fn(&str)) {
    let agent = handle.agent();
    let on = harness.plan_mode().is_some_and(|p| p.is_active(agent.id()));
    let target = switch.target(on);
    let text = match switch {
        PlanSwitch::With(text) => Some(text),
        _ => None,
    };
    match harness.set_plan(agent, target) {
        Ok(_) if target => say(
            "plan mode on: the agent explores read-only and proposes a plan for your approval \
             (/plan off to leave)",
        ),
        Ok(_) => say("plan mode off"),
        Err(e) => return say(&format!("dsh: {e}")),
    }
    if let Some(text) = text {
        send(handle, text, say);
    }
}

/// `/help`: the built-in commands, then the session's own commands and skills.
fn help(harness: &Harness, handle: Option<&AgentHandle>) -> String {
    let mut text = HELP.to_owned();
    let entries = handle
        .map(|h| harness.slash_entries(h.agent().id()))
        .unwrap_or_default();
    if !entries.is_empty() {
        text.push_str("\nthis project's commands, skills and MCP prompts:");
        for e in entries {
            let hint = e.argument_hint.map(|h| format!(" {h}")).unwrap_or_default();
            text.push_str(&format!("\n  /{}{hint}  {}", e.name, e.description));
        }
    }
    text
}

/// The request that opens `reference` in the chat: a resumed session works in its own
/// directory; the chat's (`cwd`) is for new ones (and `-c`). `plan` opens it in plan mode.
fn session_request(
    reference: SessionReference,
    cwd: &std::path::Path,
    plan: bool,
) -> SessionRequest {
    let mut request = match reference {
        SessionReference::Resume(_) => SessionRequest::new(reference),
        other => SessionRequest::new(other).in_dir(cwd),
    };
    request.plan = plan;
    request
}

/// Opens the chat's session (through the harness: the resume-route rule, prefixes, `-c`) and
/// points the output at it first, so nothing it logs while opening is missed.
async fn open(
    harness: &Harness,
    request: SessionRequest,
    current: &Mutex<Option<SessionId>>,
    say: &impl Fn(&str),
) -> Option<AgentHandle> {
    let failed = |e: dsh_harness::HarnessError| say(&format!("dsh: {:#}", anyhow::Error::new(e)));
    let located = match harness.locate(&request).await {
        Ok(located) => located,
        Err(e) => {
            failed(e);
            return None;
        }
    };
    *current.lock() = Some(located.id.clone());
    match harness.open_located(located, request).await {
        Ok(opened) => {
            for notice in &opened.notices {
                say(&format!("dsh: {notice}"));
            }
            if opened.resumed {
                let turns = opened.agent().session().last_turn();
                say(&format!("resumed session {} ({turns} turns)", opened.id()));
            }
            Some(opened.handle)
        }
        Err(e) => {
            failed(e);
            None
        }
    }
}

async fn close(handle: Option<AgentHandle>) {
    if let Some(h) = handle {
        h.dispose().await;
    }
}

/// Renders the current session's events above the prompt, a complete line at a time (a
/// partial line would be redrawn under the prompt on every delta).
fn output_sink(
    harness: &Harness,
    current: Arc<Mutex<Option<SessionId>>>,
    printer: Printer,
) -> anyhow::Result<Sink> {
    let mut renderer = Renderer::new(Mode::Live);
    let mut shown: Option<SessionId> = None;
    let mut pending = String::new();
    let filter = {
        let current = current.clone();
        move |id: &SessionId| current.lock().as_ref() == Some(id)
    };
    Sink::start(harness.context(), filter, move |event| {
        let id = current.lock().clone();
        if id != shown {
            // A new session: start from a clean line with fresh call bookkeeping.
            pending.clear();
            renderer = Renderer::new(Mode::Live);
            shown = id;
        }
        pending.push_str(&renderer.event(&event));
        if let Some(end) = pending.rfind('\n') {
            let lines: String = pending.drain(..=end).collect();
            (printer.lock())(lines);
        }
    })
}

/// The editor thread: reads lines until `/exit`, Ctrl-D or the driver goes away. Returning
/// (rather than being killed mid-read) is what restores the terminal's cooked mode.
fn edit_loop(
    mut editor: DefaultEditor,
    history: &std::path::Path,
    tx: &mpsc::UnboundedSender<Input>,
) {
    loop {
        match editor.readline("› ") {
            Ok(line) => {
                if !line.trim().is_empty() {
                    let _ = editor.add_history_entry(line.as_str());
                }
                let exit = parse(&line) == ChatCommand::Exit;
                if tx.send(Input::Line(line)).is_err() || exit {
                    break;
                }
            }
            Err(ReadlineError::Interrupted) => {
                if tx.send(Input::Interrupt).is_err() {
                    break;
                }
            }
            Err(_) => {
                let _ = tx.send(Input::Eof);
                break;
            }
        }
    }
    if let Some(dir) = history.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if dsh_fs::check_placed(history).is_ok() {
        let _ = editor.save_history(history);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slash_commands_parse_and_text_is_said() {
        assert_eq!(parse("  "), ChatCommand::Nothing);
        assert_eq!(parse("/exit"), ChatCommand::Exit);
        assert_eq!(parse("/quit"), ChatCommand::Exit);
        assert_eq!(parse("/new"), ChatCommand::New);
        assert_eq!(parse("/resume abc"), ChatCommand::Resume("abc".into()));
        assert_eq!(parse("/compact"), ChatCommand::Compact(None));
        assert_eq!(
            parse("/compact the parser  work"),
            ChatCommand::Compact(Some("the parser work".into()))
        );
        assert_eq!(parse("/context"), ChatCommand::Context);
        assert_eq!(parse("/rewind 2"), ChatCommand::Rewind(vec!["2".into()]));
        assert!(matches!(parse("/resume"), ChatCommand::Invalid(_)));
        assert_eq!(parse("/bogus"), ChatCommand::Other("/bogus".into()));
        assert_eq!(parse("/plan"), ChatCommand::Plan(PlanSwitch::Toggle));
        assert_eq!(parse("/plan off"), ChatCommand::Plan(PlanSwitch::Off));
        assert_eq!(
            parse("/plan the cache layer"),
            ChatCommand::Plan(PlanSwitch::With("the cache layer".into()))
        );
        assert_eq!(
            parse("fix the bug\n"),
            ChatCommand::Say("fix the bug".into())
        );
    }

    #[test]
    fn a_line_starting_with_a_path_or_a_double_slash_is_said_not_a_command() {
        assert_eq!(
            parse("/usr/bin/cc fails, why?"),
            ChatCommand::Say("/usr/bin/cc fails, why?".into())
        );
        assert_eq!(
            parse("//exit is a command here?"),
            ChatCommand::Say("/exit is a command here?".into())
        );
        assert_eq!(
            parse("/review now"),
            ChatCommand::Other("/review now".into())
        );
    }

    #[test]
    fn a_known_command_with_arguments_it_does_not_take_says_its_usage() {
        for (line, usage) in [
            ("/new now", "usage: /new"),
            ("/exit please", "usage: /exit"),
            ("/quit now", "usage: /quit"),
            ("/sessions all", "usage: /sessions"),
            ("/cancel it", "usage: /cancel"),
            ("/help me", "usage: /help"),
            ("/resume a b", "usage: /resume SESSION_ID"),
        ] {
            match parse(line) {
                ChatCommand::Invalid(message) => {
                    assert!(message.starts_with(usage), "{line}: {message}");
                    assert!(!message.contains("unknown"), "{line}: {message}");
                }
                other => panic!("{line}: {other:?}"),
            }
        }
        // A name that is no built-in may be a custom command: the session decides.
        assert_eq!(parse("/bogus x"), ChatCommand::Other("/bogus x".into()));
    }

    #[test]
    fn every_built_in_is_reserved_against_custom_commands() {
        for name in [
            "exit", "quit", "new", "resume", "sessions", "cancel", "help", "compact", "context",
            "plan",
        ] {
            assert!(dsh_skills::is_reserved(name), "{name}");
        }
    }
}
