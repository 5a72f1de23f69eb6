//! `dsh run`: one headless task (spec/edges.md §7.1).
//!
//! Contract: the final assistant text on stdout (`\n`-terminated, even when empty); exit 0 only
//! when the last turn completed, 1 otherwise (an error turn also prints `dsh: CODE: message`
//! on stderr); 2 for usage errors; 130 after SIGINT, 143 after SIGTERM. Standard input is read
//! only when it is a pipe or a file ([`crate::piped`]), never a terminal. Progress goes to
//! stderr only when stderr is a terminal (where the streamed answer is not printed again on
//! stdout when both are the same terminal); `--output-format stream-json` prints session events
//! as JSON lines on stdout instead of the answer.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;

use dsh_agent::{AgentHandle, AgentRef, CancelCause, CancelOptions};
use dsh_session::{
    ContentBlock, EventKind, Message, MessageSource, SessionEvent, SessionId, TurnEndReason,
};
use serde::Serialize;

use dsh_harness::config::{ConfigError, Overrides, Settings, process_env};
use dsh_harness::{
    FrontEnd, Harness, HarnessOptions, LocatedSession, SessionReference, SessionRequest,
    workspace_dir,
};

use crate::cli::{OutputFormat, RunArgs};
use crate::render::{Mode, Renderer};
use crate::signals::{Signals, Stop};
use crate::sink::Sink;
use dsh_harness::usage::UsageFields;

pub use dsh_harness::DRAIN;

/// Exit status for usage errors.
pub const USAGE: i32 = 2;

/// Runs `dsh run`; returns the exit status.
pub fn main(
    args: RunArgs,
    settings: Result<Settings, ConfigError>,
    flags: Overrides,
    cwd: Option<PathBuf>,
) -> i32 {
    let task = match crate::piped::task(&args.task) {
        crate::piped::Task::Text(task) => task,
        crate::piped::Task::Usage(message) => {
            eprintln!("dsh: {message}\n\nUsage: dsh run [OPTIONS] <TASK>...");
            return USAGE;
        }
        crate::piped::Task::Failed(e) => {
            eprintln!("dsh: {e:#}");
            return 1;
        }
    };
    let settings = match settings {
        Ok(s) => s,
        Err(e) => {
            eprintln!("dsh: {e}");
            return 1;
        }
    };
    let reference = crate::reference(args.resume.clone(), args.continue_last);
    // A new session uses the configured route: its key is checked before anything starts. A
    // resumed one keeps its own route, which the harness checks when it opens it.
    if reference == SessionReference::New
        && let Err(e) = settings.check_credentials(&process_env)
    {
        eprintln!("dsh: {e}");
        return 1;
    }
    let explicit_cwd = cwd.is_some();
    let cwd = match workspace_dir(cwd) {
        Ok(cwd) => cwd,
        Err(e) => {
            eprintln!("dsh: {e}");
            return 1;
        }
    };
    let request = SessionRequest {
        // A resumed session keeps its own directory; the harness says so when --cwd named
        // another one.
        cwd: (explicit_cwd || !matches!(reference, SessionReference::Resume(_))).then_some(cwd),
        reference,
        max_turns: args.max_turns,
        plan: args.plan,
        ..SessionRequest::default()
    };
    let runtime = match crate::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("dsh: cannot start the async runtime: {e}");
            return 1;
        }
    };
    runtime.block_on(async move {
        let signals = match Signals::install() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("dsh: cannot install signal handlers: {e}");
                return 1;
            }
        };
        let options = HarnessOptions::new(FrontEnd::Headless).with_flags(flags);
        let harness = match Harness::start(settings, options).await {
            Ok(h) => h,
            Err(e) => {
                eprintln!("dsh: {:#}", anyhow::Error::new(e));
                return 1;
            }
        };
        for notice in harness.notices() {
            eprintln!("dsh: {notice}");
        }
        let code = drive(&harness, &args, task, request, signals.clone()).await;
        signals.exit_on_next();
        harness
            .shutdown_by(tokio::time::Instant::now() + DRAIN)
            .await;
        code
    })
}

/// The outcome the contract reports: the final text and the last turn's end.
#[derive(Debug, Default, PartialEq)]
pub struct Outcome {
    /// Text of the last non-empty assistant message after the run's first `turn/start`.
    pub text: String,
    /// How the last turn ended (`None`: no turn ran).
    pub reason: Option<TurnEndReason>,
}

impl Outcome {
    /// Scans the events this run appended.
    pub fn of(events: &[Arc<SessionEvent>]) -> Self {
        let mut out = Self::default();
        let mut started = false;
        for e in events {
            match &e.kind {
                EventKind::TurnStart(_) => started = true,
                EventKind::AssistantMessage(m) if started => {
                    let text = m.message.text();
                    if !text.is_empty() {
                        out.text = text;
                    }
                }
                EventKind::TurnEnd(t) => out.reason = Some(t.reason.clone()),
                _ => {}
            }
        }
        out
    }

    /// 0 only for a completed last turn.
    pub fn exit_code(&self) -> i32 {
        match self.reason {
            Some(TurnEndReason::Completed) => 0,
            _ => 1,
        }
    }
}

/// The final line of `--output-format stream-json` (the only output of `json`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResultLine<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    session_id: &'a str,
    exit_code: i32,
    reason: Option<&'a TurnEndReason>,
    text: &'a str,
    /// What this run's provider calls reported.
    usage: UsageFields,
    /// What they cost, when every model's prices are known.
    #[serde(skip_serializing_if = "Option::is_none")]
    cost_usd: Option<f64>,
    /// Wall time of the run.
    duration_ms: u64,
}

/// What a run used, for the result line.
#[derive(Default)]
struct Spent {
    usage: UsageFields,
    cost_usd: Option<f64>,
    duration_ms: u64,
}

/// Prints the final `result` line of stream-json. Also printed when the run fails before any
/// turn (`reason: null`), so a consumer always finds the run's outcome as the last line.
fn print_result_line(
    id: &SessionId,
    code: i32,
    reason: Option<&TurnEndReason>,
    text: &str,
    spent: Spent,
) {
    let line = ResultLine {
        kind: "result",
        session_id: id.as_str(),
        exit_code: code,
        reason,
        text,
        usage: spent.usage,
        cost_usd: spent.cost_usd,
        duration_ms: spent.duration_ms,
    };
    match serde_json::to_string(&line) {
        Ok(json) => crate::stdout::write_line(&json),
        Err(e) => tracing::warn!(error = %e, "cannot serialize the result line"),
    }
}

async fn drive(
    harness: &Harness,
    args: &RunArgs,
    task: String,
    request: SessionRequest,
    mut signals: Signals,
) -> i32 {
    let started = std::time::Instant::now();
    let elapsed = || Spent {
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        ..Spent::default()
    };
    let machine = matches!(
        args.output_format,
        OutputFormat::StreamJson | OutputFormat::Json
    );
    let located = match harness.locate(&request).await {
        Ok(located) => located,
        Err(e) => {
            if args.output_format == OutputFormat::StreamJson {
                let named = SessionId::new(args.resume.as_deref().unwrap_or_default());
                print_result_line(&named, 1, None, "", elapsed());
            }
            eprintln!("dsh: {:#}", anyhow::Error::new(e));
            return 1;
        }
    };
    let LocatedSession { id, .. } = located.clone();
    let ctx = harness.context();
    let progress = args.output_format == OutputFormat::Text && std::io::stderr().is_terminal();
    let sink = match args.output_format {
        OutputFormat::StreamJson => Some(Sink::stream_json(ctx, id.clone())),
        OutputFormat::Text if progress => Some(Sink::render(
            ctx,
            id.clone(),
            Renderer::new(Mode::Live),
            |text| {
                let mut err = std::io::stderr().lock();
                let _ = err.write_all(text.as_bytes());
                let _ = err.flush();
            },
        )),
        OutputFormat::Text | OutputFormat::Json => None,
    };
    let sink = match sink.transpose() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("dsh: {e:#}");
            return 1;
        }
    };
    let opened = match harness.open_located(located, request).await {
        Ok(opened) => opened,
        Err(e) => {
            if let Some(sink) = sink {
                sink.close();
            }
            if machine {
                print_result_line(&id, 1, None, "", elapsed());
            }
            eprintln!("dsh: {:#}", anyhow::Error::new(e));
            return 1;
        }
    };
    for notice in &opened.notices {
        eprintln!("dsh: {notice}");
    }
    let handle = opened.handle;
    let agent = handle.agent().clone();
    // `/name args` runs a custom command or a skill of the session's catalog, or an MCP
    // server's prompt.
    let task = match harness.expand_line(&id, &task).await {
        None => task,
        Some(Ok(prompt)) => prompt,
        Some(Err(problem)) => {
            if let Some(sink) = sink {
                sink.close();
            }
            if machine {
                print_result_line(&id, 1, None, "", elapsed());
            }
            eprintln!("dsh: {problem}");
            handle.dispose().await;
            return 1;
        }
    };
    agent.when_idle().await;
    // Start-up is over: from here on a signal stops the turn gracefully.
    signals.graceful();
    let first_seq = agent.session().len();
    let message = match harness.attach_image_files(&id, &args.images) {
        Ok(images) if images.is_empty() => Ok(Message::user_text(task)),
        Ok(images) => {
            let mut content = vec![ContentBlock::text(task)];
            content.extend(images);
            Ok(Message::user(content, MessageSource::User))
        }
        Err(e) => Err(anyhow::Error::new(e)),
    };
    if let Err(e) = message.and_then(|m| agent.followup(m).map_err(anyhow::Error::new)) {
        if let Some(sink) = sink {
            sink.close();
        }
        if machine {
            print_result_line(&id, 1, None, "", elapsed());
        }
        eprintln!("dsh: {e:#}");
        return 1;
    }
    let stop = tokio::select! {
        () = harness.when_quiet(&agent) => None,
        stop = signals.first() => Some(stop),
    };
    if let Some(stop) = stop {
        drain(&handle, &agent, stop).await;
    }
    signals.exit_on_next();
    // A disposed agent (SIGTERM) already flushed its session while detaching it.
    if agent.session().is_attached()
        && let Err(error) = harness.core().store.flush(agent.session()).await
    {
        tracing::warn!(%error, "flushing the session failed");
    }
    let mut outcome = Outcome::of(&agent.session().events_from(first_seq));
    // In plan mode the answer is the plan the agent proposed, not its closing remark.
    if let Some(plan) = dsh_plan::events::last_plan(&agent.session().events_from(first_seq)) {
        outcome.text = plan;
    }
    if let Some(sink) = sink {
        sink.close();
    }
    let mut code = stop.map_or_else(|| outcome.exit_code(), Stop::exit_code);
    match args.output_format {
        // The answer streamed on stderr is already on the screen stdout would print to.
        OutputFormat::Text if progress && crate::terminal::same_terminal() => {}
        OutputFormat::Text => crate::stdout::write_line(&outcome.text),
        OutputFormat::StreamJson | OutputFormat::Json => {
            let events = agent.session().events();
            let (usage, cost_usd) =
                dsh_harness::usage::of(&events, first_seq, &harness.settings().catalog);
            let spent = Spent {
                usage,
                cost_usd,
                ..elapsed()
            };
            print_result_line(&id, code, outcome.reason.as_ref(), &outcome.text, spent);
        }
    }
    if let Some(TurnEndReason::Error { error }) = &outcome.reason {
        eprintln!("dsh: {error}");
    }
    // On a terminal the live feed already said so; elsewhere exit 1 must not be silent.
    if outcome.reason == Some(TurnEndReason::MaxTokens) && !progress {
        eprintln!(
            "dsh: the answer stopped at the output-token limit (raise `max_tokens` under \
             [defaults] in config.toml)"
        );
    }
    // The session is saved (flushed above); the answer was not delivered.
    if let Some(e) = crate::stdout::failure() {
        eprintln!("dsh: cannot write to stdout: {e}");
        if code == 0 {
            code = 1;
        }
    }
    if progress {
        if let Some(compaction) = harness.compaction() {
            let context = compaction.context_use(agent.session());
            let line = dsh_harness::usage::summary_line(
                agent.session(),
                &context,
                &harness.settings().catalog,
            );
            eprintln!("dsh: {line}");
        }
        eprintln!("dsh: session {id}");
    }
    if tokio::time::timeout(DRAIN, handle.dispose()).await.is_err() {
        tracing::warn!(session = %id, "the agent did not stop within {DRAIN:?}");
    }
    code
}

/// The graceful stop of one run: SIGINT cancels the turn the way a person would (`user`);
/// SIGTERM tears the agent down (`disposed`). Either way the drain is bounded.
async fn drain(handle: &AgentHandle, agent: &AgentRef, stop: Stop) {
    let drained = match stop {
        Stop::Interrupt => {
            agent.cancel(CancelCause::User, CancelOptions::default());
            tokio::time::timeout(DRAIN, agent.when_idle()).await
        }
        Stop::Terminate => tokio::time::timeout(DRAIN, handle.dispose()).await,
    };
    if drained.is_err() {
        tracing::warn!(agent = %agent.id(), "the turn did not stop within {DRAIN:?}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_session::{AssistantMessage, TurnEnd, TurnStart};

    fn ev(seq: u64, kind: EventKind) -> Arc<SessionEvent> {
        Arc::new(SessionEvent {
            seq,
            time: 0,
            kind,
            ignorable: false,
            source_event_seqs: None,
            surface_op: None,
        })
    }

    fn said(text: &str) -> EventKind {
        EventKind::AssistantMessage(AssistantMessage {
            turn: 1,
            step: 1,
            message: Arc::new(Message::assistant(
                vec![dsh_session::ContentBlock::text(text)],
                "p",
                "m",
            )),
            usage: None,
            interrupted: false,
        })
    }

    #[test]
    fn the_last_non_empty_message_after_the_first_turn_start_wins() {
        let events = [
            ev(0, said("before any turn")),
            ev(1, EventKind::TurnStart(TurnStart { turn: 1 })),
            ev(2, said("first")),
            ev(3, said("")),
            ev(
                4,
                EventKind::TurnEnd(TurnEnd {
                    turn: 1,
                    reason: TurnEndReason::Completed,
                }),
            ),
        ];
        let o = Outcome::of(&events);
        assert_eq!(o.text, "first");
        assert_eq!(o.exit_code(), 0);
        assert_eq!(Outcome::of(&events[..1]).exit_code(), 1);
    }
}
