//! Slash commands: the list the popup offers and `/help` prints, and parsing a submitted line.
//!
//! One table drives the popup, `/help` and parsing, so they cannot drift apart.

/// A slash command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// `/new`: a fresh session in the same directory.
    New,
    /// `/resume [ID]`: the session picker, or resume `ID` directly.
    Resume(Option<String>),
    /// `/model`: the model and the catalogue.
    Model,
    /// `/mode`: sandbox and approval mode.
    Mode,
    /// `/cost`: tokens and cost of this session.
    Cost,
    /// `/help`: keys and commands.
    Help,
    /// `/rewind [N]`: the turn picker, or rewind to the start of turn N.
    Rewind(Option<u64>),
    /// `/exit`.
    Exit,
}

/// What a submitted line is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Submitted {
    /// Text for the agent.
    Say(String),
    /// A command.
    Command(Command),
    /// An unknown or malformed command, with the message to show.
    Invalid(String),
}

/// The commands: name, arguments, what it does.
pub const COMMANDS: &[(&str, &str, &str)] = &[
    ("new", "", "start a new session in this directory"),
    ("resume", "[ID]", "pick a stored session to continue"),
    ("model", "", "show the model and the catalogue"),
    ("mode", "", "show the sandbox and approval mode"),
    ("cost", "", "tokens and cost of this session"),
    (
        "rewind",
        "[N]",
        "back to a turn's start (esc twice on an empty draft)",
    ),
    ("help", "", "keys and commands"),
    ("exit", "", "leave (also /quit, Ctrl+D on an empty draft)"),
];

/// A submitted line before its command is looked up: shared with the line chat, so both read
/// `//x`, paths and blank lines the same way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Typed<'a> {
    /// Nothing but whitespace.
    Empty,
    /// Text for the agent (`//x` already unescaped to `/x`).
    Say(String),
    /// `/name args…`.
    Command(&'a str, Vec<&'a str>),
}

/// Splits a line into text or a command: `//x` says `/x`, and a line starting with a path
/// (`/usr/bin/cc fails, why?`) is a message, not an unknown command.
pub fn classify(line: &str) -> Typed<'_> {
    let trimmed = line.trim();
    if trimmed.is_empty() {
        return Typed::Empty;
    }
    let Some(command) = trimmed.strip_prefix('/') else {
        return Typed::Say(line.trim_end().to_owned());
    };
    if command.starts_with('/') {
        return Typed::Say(command.to_owned());
    }
    let mut words = command.split_whitespace();
    let name = words.next().unwrap_or("");
    if name.contains('/') {
        return Typed::Say(line.trim_end().to_owned());
    }
    Typed::Command(name, words.collect())
}

/// Parses a submitted draft.
pub fn parse(line: &str) -> Submitted {
    let (name, rest) = match classify(line) {
        Typed::Empty => return Submitted::Say(String::new()),
        Typed::Say(text) => return Submitted::Say(text),
        Typed::Command(name, rest) => (name, rest),
    };
    let command = match (name, rest.as_slice()) {
        ("new", []) => Command::New,
        ("resume", []) => Command::Resume(None),
        ("resume", [id]) => Command::Resume(Some((*id).to_owned())),
        ("model", []) => Command::Model,
        ("mode", []) => Command::Mode,
        ("cost", []) => Command::Cost,
        ("help", []) => Command::Help,
        ("rewind", []) => Command::Rewind(None),
        ("rewind", [n]) if n.parse::<u64>().is_ok() => Command::Rewind(n.parse().ok()),
        ("rewind", _) => return Submitted::Invalid("usage: /rewind [TURN]".to_owned()),
        ("exit" | "quit", []) => Command::Exit,
        ("resume", _) => return Submitted::Invalid("usage: /resume [SESSION_ID]".to_owned()),
        (known, _) if COMMANDS.iter().any(|(n, _, _)| *n == known) || known == "quit" => {
            return Submitted::Invalid(format!("usage: /{known} (it takes no arguments)"));
        }
        _ => return Submitted::Invalid(format!("unknown command /{name} (try /help)")),
    };
    Submitted::Command(command)
}

/// Commands matching a draft that starts with `/` (exact, then prefix, then subsequence).
pub fn matches(draft: &str) -> Vec<&'static (&'static str, &'static str, &'static str)> {
    let Some(typed) = draft.strip_prefix('/') else {
        return Vec::new();
    };
    if typed.contains(char::is_whitespace) || typed.starts_with('/') {
        return Vec::new();
    }
    let mut prefix: Vec<_> = COMMANDS
        .iter()
        .filter(|(n, _, _)| n.starts_with(typed))
        .collect();
    let fuzzy = COMMANDS
        .iter()
        .filter(|(n, _, _)| !n.starts_with(typed) && subsequence(typed, n));
    prefix.extend(fuzzy);
    prefix
}

/// Whether `needle`'s characters appear in `hay` in order (case-insensitive).
pub fn subsequence(needle: &str, hay: &str) -> bool {
    let mut hay = hay.chars().flat_map(char::to_lowercase);
    needle
        .chars()
        .flat_map(char::to_lowercase)
        .all(|c| hay.any(|h| h == c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_and_paths_or_double_slashes_are_messages() {
        assert_eq!(parse("/exit"), Submitted::Command(Command::Exit));
        assert_eq!(parse("/resume"), Submitted::Command(Command::Resume(None)));
        assert_eq!(
            parse("/resume abc"),
            Submitted::Command(Command::Resume(Some("abc".into())))
        );
        assert_eq!(
            parse("/usr/bin/cc fails"),
            Submitted::Say("/usr/bin/cc fails".into())
        );
        assert_eq!(parse("//exit"), Submitted::Say("/exit".into()));
        assert!(matches!(parse("/bogus"), Submitted::Invalid(_)));
        assert!(matches!(parse("/new now"), Submitted::Invalid(_)));
    }

    #[test]
    fn the_popup_filters_by_prefix_then_subsequence() {
        let names = |d: &str| matches(d).iter().map(|(n, _, _)| *n).collect::<Vec<_>>();
        assert_eq!(names("/re"), ["resume", "rewind"]);
        assert_eq!(names("/rew"), ["rewind"]);
        assert_eq!(names("/mo"), ["model", "mode"]);
        assert_eq!(names("/xt"), ["exit"]);
        assert!(names("/new x").is_empty());
        assert_eq!(names("/").len(), COMMANDS.len());
    }
}
