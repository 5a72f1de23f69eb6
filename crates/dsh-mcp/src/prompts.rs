//! Servers' prompts as slash commands: `/mcp__SERVER__PROMPT args` (Claude Code's naming).
//!
//! A person types the command; dsh gets the prompt from its server with the arguments mapped
//! to the prompt's declared ones and sends what the server answered as the person's message.
//! Arguments are either all `name=value` pairs (any order) or positional words in declared
//! order, the last declared argument taking the rest of the line, so a one-argument prompt
//! takes free text. A missing required argument is an error naming the usage.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{ContentBlock as McpContent, Prompt, PromptMessage, ResourceContents, Role};
use serde_json::{Map, Value};

use crate::naming::{PREFIX, SEPARATOR};
use crate::server::McpServer;

/// How long expanding waits for an announced prompts-list change to be listed again.
const RELIST_WAIT: Duration = Duration::from_secs(5);

/// One server prompt as a person's slash command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PromptCommand {
    /// The command name without the slash: `mcp__SERVER__PROMPT`.
    pub name: String,
    /// What the prompt does, as its server says.
    pub description: String,
    /// What to type after it: the declared arguments, optional ones in brackets.
    pub argument_hint: Option<String>,
}

/// The command name of `prompt` of `server`.
fn command_name(server: &str, prompt: &str) -> String {
    format!("{PREFIX}{server}{SEPARATOR}{prompt}")
}

/// Every prompt of `servers` as a command, in server order then the server's order.
pub fn prompt_commands(servers: &[Arc<McpServer>]) -> Vec<PromptCommand> {
    servers
        .iter()
        .flat_map(|server| {
            let name = server.config().name.clone();
            server
                .prompts()
                .iter()
                .map(|p| PromptCommand {
                    name: command_name(&name, &p.name),
                    description: p.description.clone().unwrap_or_else(|| {
                        format!("Prompt `{}` of the MCP server `{name}`.", p.name)
                    }),
                    argument_hint: hint(p),
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

fn hint(prompt: &Prompt) -> Option<String> {
    let arguments = prompt.arguments.as_deref().unwrap_or_default();
    if arguments.is_empty() {
        return None;
    }
    Some(
        arguments
            .iter()
            .map(|a| {
                if a.required == Some(true) {
                    format!("<{}>", a.name)
                } else {
                    format!("[{}]", a.name)
                }
            })
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// The message `line` stands for when it is `/mcp__SERVER__PROMPT args` naming a prompt of
/// one of `servers`: `None` for any other line; an error says why the server's prompt could
/// not be had (a missing argument, the server's own error).
pub async fn expand_prompt(
    servers: &[Arc<McpServer>],
    line: &str,
) -> Option<Result<String, String>> {
    let rest = line.trim_start().strip_prefix('/')?;
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let (name, text) = rest.split_at(end);
    let (server_name, prompt_name) = name.strip_prefix(PREFIX)?.split_once(SEPARATOR)?;
    let server = servers.iter().find(|s| s.config().name == server_name)?;
    let prompts = server.prompts_up_to_date(RELIST_WAIT).await;
    let prompt = prompts.iter().find(|p| p.name == prompt_name)?;
    Some(expand(server, prompt, name, text.trim()).await)
}

async fn expand(
    server: &McpServer,
    prompt: &Prompt,
    command: &str,
    text: &str,
) -> Result<String, String> {
    let arguments = map_arguments(prompt, text).map_err(|why| {
        let usage = hint(prompt).map(|h| format!(" {h}")).unwrap_or_default();
        format!("/{command}: {why} (usage: /{command}{usage})")
    })?;
    let result = server
        .get_prompt(&prompt.name, arguments)
        .await
        .map_err(|why| {
            format!(
                "MCP server `{}` could not give the prompt `{}`: {why}",
                server.config().name,
                prompt.name
            )
        })?;
    Ok(message_text(&result.messages))
}

/// `text` as the prompt's arguments.
pub(crate) fn map_arguments(prompt: &Prompt, text: &str) -> Result<Map<String, Value>, String> {
    let declared = prompt.arguments.as_deref().unwrap_or_default();
    let mut map = Map::new();
    let words: Vec<&str> = text.split_whitespace().collect();
    let named = !words.is_empty()
        && words.iter().all(|w| {
            w.split_once('=')
                .is_some_and(|(k, _)| declared.iter().any(|a| a.name == k))
        });
    if named {
        for word in words {
            if let Some((key, value)) = word.split_once('=') {
                map.insert(key.to_owned(), Value::String(value.to_owned()));
            }
        }
    } else if !text.is_empty() {
        if declared.is_empty() {
            return Err("this prompt takes no arguments".to_owned());
        }
        let mut rest = text;
        for (i, argument) in declared.iter().enumerate() {
            if rest.is_empty() {
                break;
            }
            let value = if i + 1 == declared.len() {
                std::mem::take(&mut rest)
            } else {
                let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                let (word, tail) = rest.split_at(end);
                rest = tail.trim_start();
                word
            };
            map.insert(argument.name.clone(), Value::String(value.to_owned()));
        }
    }
    let missing: Vec<&str> = declared
        .iter()
        .filter(|a| a.required == Some(true) && !map.contains_key(&a.name))
        .map(|a| a.name.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(format!("missing {}", missing.join(", ")));
    }
    Ok(map)
}

/// The prompt's messages as one message text: a lone user message as it is, several under
/// a line naming each one's role.
fn message_text(messages: &[PromptMessage]) -> String {
    let text = |m: &PromptMessage| match &m.content {
        McpContent::Text(text) => text.text.clone(),
        McpContent::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => {
                format!("[resource: {uri}]\n{text}")
            }
            ResourceContents::BlobResourceContents { uri, .. } => {
                format!("[resource: {uri}; binary, not included]")
            }
            _ => "[resource of a kind dsh does not show yet]".to_owned(),
        },
        McpContent::ResourceLink(link) => format!("[resource link: {}]", link.uri),
        McpContent::Image(image) => format!("[image: {}; not included]", image.mime_type),
        _ => "[content of a kind dsh does not show yet]".to_owned(),
    };
    match messages {
        [only] if only.role == Role::User => text(only),
        _ => messages
            .iter()
            .map(|m| {
                let role = if m.role == Role::User {
                    "user"
                } else {
                    "assistant"
                };
                format!("[{role}]\n{}", text(m))
            })
            .collect::<Vec<_>>()
            .join("\n\n"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use rmcp::model::PromptArgument;

    use super::*;

    fn review() -> Prompt {
        Prompt::new(
            "review",
            Some("r"),
            Some(vec![
                PromptArgument::new("file").with_required(true),
                PromptArgument::new("focus"),
            ]),
        )
    }

    #[test]
    fn positional_words_fill_the_declared_arguments_and_the_last_takes_the_rest() {
        let map = map_arguments(&review(), "src/a.rs error handling please").unwrap();
        assert_eq!(map["file"], "src/a.rs");
        assert_eq!(map["focus"], "error handling please");
        let map = map_arguments(&review(), "focus=tests file=b.rs").unwrap();
        assert_eq!(
            (map["file"].as_str(), map["focus"].as_str()),
            (Some("b.rs"), Some("tests"))
        );
    }

    #[test]
    fn a_missing_required_argument_or_an_unwanted_one_is_an_error() {
        assert_eq!(map_arguments(&review(), "").unwrap_err(), "missing file");
        assert_eq!(
            map_arguments(&review(), "focus=x").unwrap_err(),
            "missing file"
        );
        let bare = Prompt::new("bare", None::<String>, None);
        assert!(map_arguments(&bare, "").unwrap().is_empty());
        assert!(map_arguments(&bare, "x").is_err());
    }

    #[test]
    fn the_hint_brackets_optional_arguments() {
        assert_eq!(hint(&review()).as_deref(), Some("<file> [focus]"));
    }
}
