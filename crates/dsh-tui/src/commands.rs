//! Slash commands: the list the popup offers and `/help` prints, and parsing a submitted line.
//!
//! One table drives the popup, `/help` and parsing, so they cannot drift apart.

/// A slash command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// `/new`: a fresh session in the same directory.
    New,
    /// `/resume [ID|FILTER]`: the session picker, or resume the session an id or a unique
    /// prefix names (else the picker, filtered).
    Resume(Option<String>),
    /// `/compact [FOCUS]`: summarize the older history now (what to keep, optionally).
    Compact(Option<String>),
    /// `/context`: how full the window is and what fills it.
    Context,
    /// `/model [ID]`: the catalogue picker, or switch to `ID` (`provider/ID` for another
    /// provider's model).
    Model(Option<String>),
    /// `/mode [POLICY]`: the sandbox and approval policy, or switch the approval policy.
    Mode(Option<String>),
    /// `/cost`: tokens and cost of this session.
    Cost,
    /// `/export [PATH]`: the transcript as Markdown.
    Export(Option<String>),
    /// `/help`: keys and commands.
    Help,
    /// `/rewind [N]`: the turn picker, or rewind to the start of turn N.
    Rewind(Option<u64>),
    /// `/exit`.
    Exit,
}

impl Command {
    /// Whether it acts at once while a turn runs; the others wait for the turn to end (they
    /// would switch or rewrite what the turn works on).
    pub fn runs_while_busy(&self) -> bool {
        matches!(
            self,
            Command::Context
                | Command::Mode(_)
                | Command::Cost
                | Command::Export(_)
                | Command::Help
                | Command::Exit
                | Command::Model(None)
                // Refused, not deferred, while a turn runs: rewinding to a turn's start after
                // that turn's successors ran would undo work the person never saw.
                | Command::Rewind(_)
        )
    }

    /// How the command reads in the pending strip.
    pub fn describe(&self) -> String {
        let with = |name: &str, arg: &Option<String>| match arg {
            Some(a) => format!("/{name} {a}"),
            None => format!("/{name}"),
        };
        match self {
            Command::New => "/new".into(),
            Command::Resume(a) => with("resume", a),
            Command::Compact(a) => with("compact", a),
            Command::Context => "/context".into(),
            Command::Model(a) => with("model", a),
            Command::Mode(a) => with("mode", a),
            Command::Cost => "/cost".into(),
            Command::Export(a) => with("export", a),
            Command::Rewind(Some(n)) => format!("/rewind {n}"),
            Command::Rewind(None) => "/rewind".into(),
            Command::Help => "/help".into(),
            Command::Exit => "/exit".into(),
        }
    }
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

/// The commands: name, arguments, what it does. The order is the popup's for an empty filter.
pub const COMMANDS: &[(&str, &str, &str)] = &[
    ("new", "", "start a new session in this directory"),
    (
        "resume",
        "[ID|FILTER]",
        "continue a stored session (picker; id, prefix or filter)",
    ),
    (
        "compact",
        "[FOCUS]",
        "summarize older history now (optionally what to keep)",
    ),
    (
        "context",
        "",
        "how full the context window is and with what",
    ),
    (
        "model",
        "[ID]",
        "the catalogue (windows, prices); switch the model",
    ),
    (
        "mode",
        "[ask|auto|never]",
        "sandbox and approval policy; switch approvals",
    ),
    ("cost", "", "tokens and cost of this session"),
    ("export", "[PATH]", "save the transcript as Markdown"),
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
    let joined = (!rest.is_empty()).then(|| rest.join(" "));
    let command = match (name, rest.as_slice()) {
        ("new", []) => Command::New,
        ("resume", []) => Command::Resume(None),
        ("resume", [arg]) => Command::Resume(Some((*arg).to_owned())),
        ("compact", _) => Command::Compact(joined),
        ("context", []) => Command::Context,
        ("model", []) => Command::Model(None),
        ("model", [id]) => Command::Model(Some((*id).to_owned())),
        ("mode", []) => Command::Mode(None),
        ("mode", [policy]) => Command::Mode(Some((*policy).to_owned())),
        ("cost", []) => Command::Cost,
        ("export", []) => Command::Export(None),
        ("export", [path]) => Command::Export(Some((*path).to_owned())),
        ("help", []) => Command::Help,
        ("rewind", []) => Command::Rewind(None),
        ("rewind", [n]) if n.parse::<u64>().is_ok() => Command::Rewind(n.parse().ok()),
        ("rewind", _) => return Submitted::Invalid("usage: /rewind [TURN]".to_owned()),
        ("exit" | "quit", []) => Command::Exit,
        (known, _) => match COMMANDS.iter().find(|(n, _, _)| *n == known) {
            Some((n, args, _)) if !args.is_empty() => {
                return Submitted::Invalid(format!("usage: /{n} {args}"));
            }
            Some(_) => {
                return Submitted::Invalid(format!("usage: /{known} (it takes no arguments)"));
            }
            None if known == "quit" => {
                return Submitted::Invalid("usage: /quit (it takes no arguments)".into());
            }
            None => return Submitted::Invalid(format!("unknown command /{name} (try /help)")),
        },
    };
    Submitted::Command(command)
}

/// Commands matching a draft that starts with `/`: an exact name first, then prefixes, then
/// subsequences. An exact name always wins, so `/mode` + Enter runs `/mode`, never `/model`.
pub fn matches(draft: &str) -> Vec<&'static (&'static str, &'static str, &'static str)> {
    let Some(typed) = draft.strip_prefix('/') else {
        return Vec::new();
    };
    if typed.contains(char::is_whitespace) || typed.starts_with('/') {
        return Vec::new();
    }
    let exact = COMMANDS.iter().filter(|(n, _, _)| *n == typed);
    let prefix = COMMANDS
        .iter()
        .filter(|(n, _, _)| *n != typed && n.starts_with(typed));
    let fuzzy = COMMANDS
        .iter()
        .filter(|(n, _, _)| !n.starts_with(typed) && subsequence(typed, n));
    exact.chain(prefix).chain(fuzzy).collect()
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
            parse("/compact the parser  work"),
            Submitted::Command(Command::Compact(Some("the parser work".into())))
        );
        assert_eq!(
            parse("/model deepseek-v4-pro"),
            Submitted::Command(Command::Model(Some("deepseek-v4-pro".into())))
        );
        assert_eq!(
            parse("/usr/bin/cc fails"),
            Submitted::Say("/usr/bin/cc fails".into())
        );
        assert_eq!(parse("//exit"), Submitted::Say("/exit".into()));
        assert!(matches!(parse("/bogus"), Submitted::Invalid(_)));
        assert!(matches!(parse("/new now"), Submitted::Invalid(_)));
        assert_eq!(
            parse("/mode a b"),
            Submitted::Invalid("usage: /mode [ask|auto|never]".into())
        );
    }

    #[test]
    fn the_popup_puts_an_exact_name_first_then_prefixes_then_subsequences() {
        let names = |d: &str| matches(d).iter().map(|(n, _, _)| *n).collect::<Vec<_>>();
        assert_eq!(names("/re"), ["resume", "rewind"]);
        assert_eq!(names("/rew"), ["rewind"]);
        assert_eq!(names("/mo"), ["model", "mode"]);
        assert_eq!(names("/mode"), ["mode", "model"]);
        assert_eq!(names("/model"), ["model"]);
        assert_eq!(names("/xt"), ["context", "export", "exit"]);
        assert!(names("/new x").is_empty());
        assert_eq!(names("/").len(), COMMANDS.len());
    }
}
