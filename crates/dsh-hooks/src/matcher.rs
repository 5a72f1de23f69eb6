//! Matchers: which tool calls (or sources) a hook group runs for.
//!
//! Claude Code's rules: an absent, empty or `*` matcher matches everything; a matcher made only
//! of letters, digits, `_` and `|` is a list of exact names; anything else is a regular
//! expression. dsh anchors the expression at both ends, so `Bash` can never match `BashOutput`
//! by accident and `mcp__github__.*` means what it says.
//!
//! Tool names match under both spellings: dsh's (`bash`) and Claude Code's (`Bash`), so a
//! team's existing `.claude/settings.json` works unchanged.

use regex::Regex;

/// dsh's tool names and Claude Code's names for the same tools.
pub const TOOL_ALIASES: &[(&str, &str)] = &[
    ("bash", "Bash"),
    ("bash_output", "BashOutput"),
    ("bash_kill", "KillShell"),
    ("read", "Read"),
    ("write", "Write"),
    ("edit", "Edit"),
    ("glob", "Glob"),
    ("grep", "Grep"),
    ("subagent", "Task"),
    ("todo_write", "TodoWrite"),
];

/// Claude Code's name for a dsh tool (`bash` → `Bash`); other names (MCP tools, unknown tools)
/// are the same in both.
pub fn claude_code_name(dsh_name: &str) -> &str {
    TOOL_ALIASES
        .iter()
        .find(|(dsh, _)| *dsh == dsh_name)
        .map_or(dsh_name, |(_, cc)| cc)
}

fn dsh_name(name: &str) -> &str {
    TOOL_ALIASES
        .iter()
        .find(|(_, cc)| *cc == name)
        .map_or(name, |(dsh, _)| dsh)
}

/// A compiled matcher.
#[derive(Clone, Debug)]
pub enum Matcher {
    /// Matches everything.
    All,
    /// Exact names (either spelling).
    Names(Vec<String>),
    /// A regular expression, anchored at both ends.
    Pattern(Regex),
}

impl Matcher {
    /// Compiles Claude Code's matcher syntax; an invalid expression is an error.
    pub fn parse(text: &str) -> Result<Self, regex::Error> {
        let text = text.trim();
        if text.is_empty() || text == "*" {
            return Ok(Matcher::All);
        }
        if text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '|')
        {
            return Ok(Matcher::Names(
                text.split('|')
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect(),
            ));
        }
        Regex::new(&format!("^(?:{text})$")).map(Matcher::Pattern)
    }

    /// The matcher as the user wrote it (for listings).
    pub fn text(&self) -> String {
        match self {
            Matcher::All => "*".to_owned(),
            Matcher::Names(names) => names.join("|"),
            Matcher::Pattern(re) => {
                let s = re.as_str();
                s.strip_prefix("^(?:")
                    .and_then(|s| s.strip_suffix(")$"))
                    .unwrap_or(s)
                    .to_owned()
            }
        }
    }

    /// Whether `subject` (a dsh tool name, or an event source) is matched, under dsh's name or
    /// Claude Code's.
    pub fn matches(&self, subject: &str) -> bool {
        let spellings = [subject, claude_code_name(subject), dsh_name(subject)];
        match self {
            Matcher::All => true,
            Matcher::Names(names) => names
                .iter()
                .any(|n| spellings.iter().any(|s| s == n || dsh_name(n) == *s)),
            Matcher::Pattern(re) => spellings.iter().any(|s| re.is_match(s)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(text: &str) -> Matcher {
        Matcher::parse(text).unwrap()
    }

    #[test]
    fn empty_and_star_match_everything() {
        assert!(m("").matches("anything"));
        assert!(m("*").matches("mcp__x__y"));
    }

    #[test]
    fn claude_code_and_dsh_names_both_match() {
        assert!(m("Bash").matches("bash"));
        assert!(m("bash").matches("bash"));
        assert!(m("Task").matches("subagent"));
        assert!(m("bash|Edit").matches("edit"));
        assert!(!m("Bash").matches("bash_output"));
    }

    #[test]
    fn expressions_are_anchored() {
        assert!(m("mcp__github__.*").matches("mcp__github__create_issue"));
        assert!(!m("mcp__github__.*").matches("x_mcp__github__y"));
        assert!(m("Edit|Write.*").matches("write"));
        assert!(!m("B.sh").matches("bash_output"));
    }

    #[test]
    fn invalid_expression_is_an_error() {
        assert!(Matcher::parse("(unclosed").is_err());
    }
}
