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
    /// `/plan [on|off|TEXT]`: plan mode.
    Plan(PlanSwitch),
    /// `/help`: keys and commands.
    Help,
    /// `/exit`.
    Exit,
}

/// What `/plan` asks for (the line chat reads it the same way).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanSwitch {
    /// `/plan`: on when off, off when on.
    Toggle,
    /// `/plan on`.
    On,
    /// `/plan off`.
    Off,
    /// `/plan TEXT`: on, then TEXT is the prompt.
    With(String),
}

impl PlanSwitch {
    /// The switch `/plan` with `words` asks for.
    pub fn of(words: &[&str]) -> Self {
        match words {
            [] => PlanSwitch::Toggle,
            ["on"] => PlanSwitch::On,
            ["off"] => PlanSwitch::Off,
            words => PlanSwitch::With(words.join(" ")),
        }
    }

    /// Whether plan mode should be on afterwards, given whether it is on now.
    pub fn target(&self, on: bool) -> bool {
        match self {
            PlanSwitch::Toggle => !on,
            PlanSwitch::Off => false,
            PlanSwitch::On | PlanSwitch::With(_) => true,
        }
    }
}

/// A row of the command popup and of `/help`: a built-in command, or one of the session's own
/// (a custom command or a skill).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The name, without the slash.
    pub name: String,
    /// What follows the name (`[ID]`, an argument hint), or nothing.
    pub args: String,
    /// What it does.
    pub what: String,
}

impl Entry {
    fn builtin(&(name, args, what): &(&str, &str, &str)) -> Self {
        Self {
            name: name.to_owned(),
            args: args.to_owned(),
            what: what.to_owned(),
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
    /// `/name args` for a name no built-in has: the session's own command or skill, if it has
    /// one by that name (the whole line, trimmed).
    Custom(String),
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
        "plan",
        "[on|off|TEXT]",
        "plan mode: explore read-only, then approve a plan",
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
        ("plan", words) => Command::Plan(PlanSwitch::of(words)),
        ("help", []) => Command::Help,
        ("exit" | "quit", []) => Command::Exit,
        ("resume", _) => return Submitted::Invalid("usage: /resume [SESSION_ID]".to_owned()),
        (known, _) if COMMANDS.iter().any(|(n, _, _)| *n == known) || known == "quit" => {
            return Submitted::Invalid(format!("usage: /{known} (it takes no arguments)"));
        }
        _ => return Submitted::Custom(line.trim().to_owned()),
    };
    Submitted::Command(command)
}

/// Every command the popup and `/help` offer: the built-ins, then the session's own.
pub fn entries(custom: &[Entry]) -> Vec<Entry> {
    COMMANDS
        .iter()
        .map(Entry::builtin)
        .chain(custom.iter().cloned())
        .collect()
}

/// Commands matching a draft that starts with `/` (prefix, then subsequence), the built-ins
/// and then `custom` (the session's own commands and skills) in each group.
pub fn matches(draft: &str, custom: &[Entry]) -> Vec<Entry> {
    let Some(typed) = draft.strip_prefix('/') else {
        return Vec::new();
    };
    if typed.contains(char::is_whitespace) || typed.starts_with('/') {
        return Vec::new();
    }
    let all = entries(custom);
    let (mut prefix, rest): (Vec<Entry>, Vec<Entry>) =
        all.into_iter().partition(|e| e.name.starts_with(typed));
    prefix.extend(rest.into_iter().filter(|e| subsequence(typed, &e.name)));
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
        assert_eq!(parse("/bogus x"), Submitted::Custom("/bogus x".into()));
        assert!(matches!(parse("/new now"), Submitted::Invalid(_)));
        assert_eq!(
            parse("/plan the cache"),
            Submitted::Command(Command::Plan(PlanSwitch::With("the cache".into())))
        );
        assert_eq!(
            parse("/plan off"),
            Submitted::Command(Command::Plan(PlanSwitch::Off))
        );
    }

    #[test]
    fn the_popup_filters_by_prefix_then_subsequence() {
        let review = Entry {
            name: "review".into(),
            args: "FILE".into(),
            what: "Review a file".into(),
        };
        let custom = [review];
        let names = |d: &str| {
            matches(d, &custom)
                .into_iter()
                .map(|e| e.name)
                .collect::<Vec<_>>()
        };
        assert_eq!(names("/re"), ["resume", "review"]);
        assert_eq!(names("/mo"), ["model", "mode"]);
        assert_eq!(names("/xt"), ["exit"]);
        assert_eq!(names("/rvw"), ["review"]);
        assert!(names("/new x").is_empty());
        assert_eq!(names("/").len(), COMMANDS.len() + 1);
    }
}
