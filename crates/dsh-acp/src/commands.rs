//! Slash commands: what the editor offers in its prompt box (`available_commands_update`) and
//! what runs when a prompt is one of them, instead of a model request.
//!
//! A prompt is a command when its first word is `/name` for a command listed here; the rest
//! of the text is its argument. Its answer streams as an agent message and the prompt ends
//! `end_turn`. Adding a command is one entry in [`COMMANDS`] (a `/compact` runs the
//! compaction API the same way `/model` runs the model choice).

use agent_client_protocol::Error;
use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, ConfigOptionUpdate,
    SessionUpdate, UnstructuredCommandInput,
};

use crate::bridge::Bridge;
use crate::models;
use crate::modes::Mode;
use crate::record::SessionRecord;

/// One slash command.
struct SlashCommand {
    name: &'static str,
    description: &'static str,
    /// What to type after the name, shown by the editor.
    hint: &'static str,
    run: fn(&Bridge, &SessionRecord, &str) -> Result<String, Error>,
}

const COMMANDS: &[SlashCommand] = &[
    SlashCommand {
        name: "mode",
        description: "Show or switch the session mode (default, auto, read-only)",
        hint: "default | auto | read-only",
        run: mode,
    },
    SlashCommand {
        name: "model",
        description: "Show or switch the model of this session",
        hint: "model id",
        run: model,
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
    models::choose(bridge, &record.state, args)?;
    record
        .state
        .updates
        .update(SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(
            models::config_options(bridge, &record.state),
        )));
    Ok(format!("model: {args} (from the next request on)"))
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

/// Runs the command `prompt` names, if it names one: its answer text, or the error (a bad
/// argument) as text the person reads in the thread.
pub(crate) fn run(bridge: &Bridge, record: &SessionRecord, prompt: &str) -> Option<String> {
    let (command, args) = parse(prompt)?;
    Some(match (command.run)(bridge, record, args) {
        Ok(text) => text,
        Err(error) => format!("Error: {}", error.message),
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
