//! Slash commands: what the editor offers in its prompt box (`available_commands_update`) and
//! what runs when a prompt is one of them, instead of a model request.
//!
//! A prompt is a command when its first word is `/name` for a command listed here; the rest
//! of the text is its argument. Its answer streams as an agent message and the prompt ends
//! `end_turn`. Adding a command is one entry in [`COMMANDS`]: a [`Runner::Now`] answers
//! inside the dispatch loop (`/mode`, `/model`); a [`Runner::Later`] waits on a service
//! (`/compact` makes a model call) and runs as the prompt's own work, holding the session's
//! prompt slot so no turn starts underneath it and `session/cancel` reaches it.

use agent_client_protocol::Error;
use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, ConfigOptionUpdate,
    SessionUpdate, UnstructuredCommandInput,
};

use std::sync::Arc;

use dsh_checkpoint::{Checkpoints, RewindRequest};
use dsh_compaction::Compaction;
use futures::FutureExt;
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::bridge::Bridge;
use crate::models;
use crate::modes::Mode;
use crate::record::SessionRecord;

/// A command's body that waits: it gets the session, its argument and the cancellation the
/// client's `session/cancel` fires.
type LaterFn =
    fn(&Bridge, Arc<SessionRecord>, String, CancellationToken) -> BoxFuture<'static, Answer>;

/// How a command runs.
enum Runner {
    /// Answers at once, inside the dispatch loop.
    Now(fn(&Bridge, &SessionRecord, &str) -> Result<String, Error>),
    /// Waits on a service, outside the dispatch loop.
    Later(LaterFn),
}

/// What a command that waited produced.
pub(crate) enum Answer {
    /// Text for the thread.
    Text(String),
    /// The client cancelled; nothing changed.
    Cancelled,
}

/// One slash command.
struct SlashCommand {
    name: &'static str,
    description: &'static str,
    /// What to type after the name, shown by the editor.
    hint: &'static str,
    run: Runner,
}

const COMMANDS: &[SlashCommand] = &[
    SlashCommand {
        name: "mode",
        description: "Show or switch the session mode (default, auto, read-only)",
        hint: "default | auto | read-only",
        run: Runner::Now(mode),
    },
    SlashCommand {
        name: "model",
        description: "Show or switch the model of this session",
        hint: "model id",
        run: Runner::Now(model),
    },
    SlashCommand {
        name: "compact",
        description: "Summarize older history now to free context (optionally with a focus)",
        hint: "what the summary should keep (optional)",
        run: Runner::Later(compact),
    },
    SlashCommand {
        name: "rewind",
        description: "List the turns, or put the files and the conversation back to the start of turn N",
        hint: "N [--files-only | --conversation-only] [--force] (nothing: list the turns)",
        run: Runner::Later(rewind),
    },
];

fn mode(_bridge: &Bridge, record: &SessionRecord, args: &str) -> Result<String, Error> {
    if args.is_empty() {
        let all: Vec<&str> = Mode::ALL.iter().map(|m| m.id()).collect();
        return Ok(format!(
            "mode: {} (available: {})",
            record.state.mode().id(),
            all.join(", ")
        ));
    }
    let mode = Mode::from_id(args).ok_or_else(|| {
        crate::errors::invalid(format!("unknown mode: {args} (default, auto, read-only)"))
    })?;
    record.state.switch_mode(mode);
    Ok(format!("mode: {}", mode.id()))
}

fn model(bridge: &Bridge, record: &SessionRecord, args: &str) -> Result<String, Error> {
    if args.is_empty() {
        return Ok(models::describe(bridge, &record.state));
    }
    models::choose(bridge, record, args)?;
    record
        .state
        .updates
        .update(SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(
            models::config_options(bridge, &record.state),
        )));
    Ok(format!("model: {args} (from the next request on)"))
}

fn compact(
    bridge: &Bridge,
    record: Arc<SessionRecord>,
    focus: String,
    cancel: CancellationToken,
) -> BoxFuture<'static, Answer> {
    let service = bridge.ctx.get::<Compaction>();
    async move {
        let Some(service) = service else {
            return Answer::Text("Error: compaction is not available in this session".into());
        };
        let focus = (!focus.is_empty()).then_some(focus.as_str());
        let outcome = service.compact_now(record.agent(), focus, &cancel).await;
        if cancel.is_cancelled() {
            return Answer::Cancelled;
        }
        Answer::Text(match outcome {
            Ok(o) if o.summarized => format!(
                "Compacted: about {} → {} tokens of context.",
                o.tokens_before, o.tokens_after
            ),
            Ok(_) => "Nothing to summarize yet: the history is all recent.".to_owned(),
            Err(e) => format!("Not compacted: {e}"),
        })
    }
    .boxed()
}

/// `/rewind`: holds the prompt slot like any waiting command, so no turn starts while files
/// are written back. The editor's thread keeps showing the rewound turns; the model no longer
/// sees them.
fn rewind(
    bridge: &Bridge,
    record: Arc<SessionRecord>,
    args: String,
    _cancel: CancellationToken,
) -> BoxFuture<'static, Answer> {
    let service = bridge.ctx.get::<Checkpoints>();
    async move {
        let Some(service) = service else {
            return Answer::Text("Error: checkpoints are not available in this session".into());
        };
        let session = record.agent().session().clone();
        let words: Vec<&str> = args.split_whitespace().collect();
        let request = match RewindRequest::parse_args(&words) {
            Ok(Some(request)) => request,
            Ok(None) => {
                let turns = service.turns(&session).await;
                if turns.is_empty() {
                    return Answer::Text("No turns to rewind to.".into());
                }
                let lines: Vec<String> = turns
                    .iter()
                    .map(|t| {
                        let files = t
                            .changed_files
                            .map_or_else(|| "no checkpoint".to_owned(), |n| format!("{n} file(s)"));
                        format!("{}. {} ({files})", t.turn, t.prompt)
                    })
                    .collect();
                return Answer::Text(format!(
                    "Turns (/rewind N goes back to the start of turn N):\n{}",
                    lines.join("\n")
                ));
            }
            Err(usage) => return Answer::Text(usage),
        };
        Answer::Text(match service.rewind(&session, request).await {
            Ok(report) => {
                let mut text = format!("Rewound to the start of turn {}.", request.to_turn);
                if !report.changed.is_empty() {
                    text.push_str(&format!(" Restored: {}.", report.changed.join(", ")));
                }
                if !report.left.is_empty() {
                    text.push_str(&format!(" Left as they are: {}.", report.left.join("; ")));
                }
                if report.conversation {
                    text.push_str(" The model no longer sees those turns.");
                }
                text
            }
            Err(e) => format!("Not rewound: {e}"),
        })
    }
    .boxed()
}

/// The `available_commands_update` sent after `session/new` and `session/load`.
pub(crate) fn advertised() -> SessionUpdate {
    let commands = COMMANDS
        .iter()
        .map(|c| {
            AvailableCommand::new(c.name, c.description).input(AvailableCommandInput::Unstructured(
                UnstructuredCommandInput::new(c.hint),
            ))
        })
        .collect();
    SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(commands))
}

/// The command a prompt names, with its argument: `None` for an ordinary prompt (a path like
/// `/usr/bin/env ...` is not a command).
fn parse(prompt: &str) -> Option<(&'static SlashCommand, &str)> {
    let text = prompt.trim_start();
    let rest = text.strip_prefix('/')?;
    let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let command = COMMANDS.iter().find(|c| c.name == name)?;
    Some((command, args.trim()))
}

/// What running a command gives the prompt handler.
pub(crate) enum Started {
    /// The answer text (or a bad argument's error, as text the person reads in the thread).
    Now(String),
    /// A command that waits: the handler takes the prompt slot, then starts it.
    Later(Pending),
}

/// A waiting command, not started yet.
pub(crate) struct Pending {
    run: LaterFn,
    args: String,
}

impl Pending {
    /// The command's work, obeying `cancel`.
    pub(crate) fn start(
        self,
        bridge: &Bridge,
        record: Arc<SessionRecord>,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Answer> {
        (self.run)(bridge, record, self.args, cancel)
    }
}

/// Runs the command `prompt` names, if it names one; a waiting one is only parsed.
pub(crate) fn run(bridge: &Bridge, record: &SessionRecord, prompt: &str) -> Option<Started> {
    let (command, args) = parse(prompt)?;
    Some(match &command.run {
        Runner::Now(run) => Started::Now(match run(bridge, record, args) {
            Ok(text) => text,
            Err(error) => format!("Error: {}", error.message),
        }),
        Runner::Later(run) => Started::Later(Pending {
            run: *run,
            args: args.to_owned(),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_leading_known_command_word_is_a_command() {
        assert_eq!(
            parse("/mode auto").map(|(c, a)| (c.name, a)),
            Some(("mode", "auto"))
        );
        assert_eq!(
            parse("  /model").map(|(c, a)| (c.name, a)),
            Some(("model", ""))
        );
        assert!(parse("/usr/bin/env true").is_none());
        assert!(parse("/unknown x").is_none());
        assert!(parse("please /mode auto").is_none());
    }
}
