//! Permission rules in the spirit of Claude Code's: `Tool` or `Tool(specifier)`, where the
//! specifier is a command pattern for `bash` (`bash(git status*)`, `bash(npm run test *)`,
//! `bash(git:*)`) and a path glob for any other tool, matched against the paths its calls
//! declare they write or read (`write(/etc/**)`, `edit(src/**)`, `read(~/.ssh/*)`), or
//! `domain:HOST` for the hosts a call reaches (`web_fetch(domain:docs.rs)`); tool
//! names may use `*` (`mcp__github__*`), and a bare server name (`mcp__github`) names every
//! tool of that MCP server.
//!
//! Commands are split into their simple commands (across `&& || ; | &`, newlines, subshells,
//! `$( )`, backticks and `bash -c '…'`), so `deny bash(git push *)` also catches
//! `git status && git push origin` and `echo $(git push)`. A deny or ask rule decides when any
//! simple command matches; an allow rule only when every one matches and nothing in the
//! command resists static reading (substitutions, redirections, `eval`). Against a hostile
//! model rules are advisory (`/bin/rm`, `$X`): the sandbox is what enforces.

use std::fmt;
use std::path::{Path, PathBuf};

use globset::{Glob, GlobBuilder, GlobMatcher};
use serde::Serialize;

use crate::policy::{lexical, resolve_existing};

/// How the tools of MCP servers are named (`mcp__<server>__<tool>`, dsh-mcp's convention): the
/// guard treats them as tools it cannot see into (see [`crate::Guard::decide`]).
pub const MCP_TOOL_PREFIX: &str = "mcp__";

/// The server part of an MCP tool name (`github` in `mcp__github__create_issue`).
pub(crate) fn mcp_server(tool: &str) -> Option<&str> {
    let rest = tool.strip_prefix(MCP_TOOL_PREFIX)?;
    rest.split_once("__").map(|(server, _)| server)
}

/// What a matching rule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleAction {
    /// Run without asking (the sandbox still confines).
    Allow,
    /// Ask the user (or refuse, under `never`).
    Ask,
    /// Refuse, whatever the policy.
    Deny,
}

impl RuleAction {
    /// The config key and log spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleAction::Allow => "allow",
            RuleAction::Ask => "ask",
            RuleAction::Deny => "deny",
        }
    }
}

/// A rule that does not parse, with the character offset of the problem inside its text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RuleError {
    /// 0-based character offset within the rule text.
    pub offset: usize,
    /// What is wrong.
    pub message: String,
}

/// One parsed rule.
#[derive(Debug, Clone)]
pub struct Rule {
    text: String,
    tool: String,
    specifier: Option<Specifier>,
    /// Where the rule was written (`file:line:column`), for the decision log.
    pub origin: Option<String>,
}

#[derive(Debug, Clone)]
enum Specifier {
    /// A command pattern, `*` matching anything; a trailing ` *` also matches the bare prefix.
    Command(String),
    /// A path glob, resolved when matched (relative to the workspace, `~` to the home).
    Path(String),
    /// `domain:HOST` (exactly that host) or `domain:*.HOST` (its subdomains only), matched
    /// against the hosts a call reaches.
    Domain(String),
}

/// The facts of one call a rule is matched against.
#[derive(Debug, Clone, Copy)]
pub struct CallFacts<'a> {
    /// The tool's name.
    pub tool: &'a str,
    /// The command the call runs, as its tool declared it.
    pub command: Option<&'a str>,
    /// The absolute paths it declared it writes, then those it reads.
    pub paths: &'a [PathBuf],
    /// The hosts dsh connects to for it (lower case).
    pub hosts: &'a [String],
    /// The workspace, for relative path globs.
    pub workspace: &'a Path,
}

impl Rule {
    /// Parses `Tool` or `Tool(specifier)`.
    pub fn parse(text: &str) -> Result<Rule, RuleError> {
        let err = |offset, message: &str| RuleError {
            offset,
            message: message.to_owned(),
        };
        let (tool, specifier) = match text.find('(') {
            None => (text, None),
            Some(open) => {
                let Some(inner) = text[open + 1..].strip_suffix(')') else {
                    return Err(err(
                        text.chars().count(),
                        "missing `)` at the end of the rule",
                    ));
                };
                if inner.trim().is_empty() {
                    return Err(err(
                        open + 1,
                        "empty specifier; write `Tool` to match every call",
                    ));
                }
                (&text[..open], Some(inner))
            }
        };
        if tool.is_empty() {
            return Err(err(0, "missing tool name (e.g. `bash(git status)`)"));
        }
        if let Some(bad) = tool
            .char_indices()
            .find(|(_, c)| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '*')))
        {
            return Err(err(
                bad.0,
                "a tool name may hold only letters, digits, `_`, `-` and `*`",
            ));
        }
        let tool = tool.to_ascii_lowercase();
        let specifier = match specifier {
            None => None,
            Some(spec) if tool == "bash" => Some(Specifier::Command(command_pattern(spec))),
            Some(spec) if spec.starts_with("domain:") => {
                let domain = spec["domain:".len()..].trim().to_ascii_lowercase();
                let bare = domain.strip_prefix("*.").unwrap_or(&domain);
                if bare.is_empty() || bare.contains(['*', '/', ':', ' ']) {
                    return Err(err(
                        tool.len() + 1 + "domain:".len(),
                        "expected a host name after `domain:` (`example.com`, or `*.example.com` for its subdomains)",
                    ));
                }
                Some(Specifier::Domain(domain))
            }
            Some(spec) => {
                // Checked now so a bad glob is a config error, not a silent non-match.
                Glob::new(spec).map_err(|e| err(tool.len() + 1, &format!("bad path glob: {e}")))?;
                Some(Specifier::Path(spec.to_owned()))
            }
        };
        Ok(Rule {
            text: text.to_owned(),
            tool,
            specifier,
            origin: None,
        })
    }

    /// The rule as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether the rule names this call's tool (ignoring the specifier). `mcp__server`, which
    /// is no tool's name (server names cannot hold `__`), names every tool of that server.
    fn names_tool(&self, tool: &str) -> bool {
        let tool = tool.to_ascii_lowercase();
        wildcard(&self.tool, &tool)
            || (self.tool.starts_with(MCP_TOOL_PREFIX)
                && !self.tool[MCP_TOOL_PREFIX.len()..].contains("__")
                && wildcard(&format!("{}__*", self.tool), &tool))
    }

    /// For deny and ask: the tool matches and, for a command, any simple command matches.
    pub fn matches_any(&self, call: &CallFacts<'_>) -> bool {
        self.names_tool(call.tool)
            && match &self.specifier {
                None => true,
                Some(Specifier::Command(pattern)) => call.command.is_some_and(|command| {
                    command_matches(pattern, command.trim())
                        || simple_commands(command)
                            .iter()
                            .any(|c| command_matches(pattern, c))
                }),
                Some(Specifier::Path(glob)) => {
                    call.paths.iter().any(|path| path_matches(glob, path, call))
                }
                Some(Specifier::Domain(domain)) => {
                    call.hosts.iter().any(|host| domain_matches(domain, host))
                }
            }
    }

    /// For allow: the tool matches and, for a command, every simple command matches and the
    /// command is plainly readable.
    pub fn matches_all(&self, call: &CallFacts<'_>) -> bool {
        self.names_tool(call.tool)
            && match &self.specifier {
                None => true,
                Some(Specifier::Command(pattern)) => call.command.is_some_and(|command| {
                    plainly_readable(command)
                        && simple_commands(&without_harmless_redirections(command))
                            .iter()
                            .all(|c| command_matches(pattern, c))
                }),
                Some(Specifier::Path(glob)) => {
                    !call.paths.is_empty()
                        && call.paths.iter().all(|path| path_matches(glob, path, call))
                }
                Some(Specifier::Domain(domain)) => {
                    !call.hosts.is_empty()
                        && call.hosts.iter().all(|host| domain_matches(domain, host))
                }
            }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.origin {
            Some(origin) => write!(f, "{} ({origin})", self.text),
            None => f.write_str(&self.text),
        }
    }
}

/// `cmd:*` is Claude Code's spelling of `cmd *`.
fn command_pattern(spec: &str) -> String {
    match spec.strip_suffix(":*") {
        Some(prefix) => format!("{prefix} *"),
        None => spec.to_owned(),
    }
}

/// A command pattern against one command. A trailing ` *` also matches the bare command
/// (`ls *` matches `ls`). A trailing `*` right after a word (`git status*`) keeps the word
/// boundary: it matches `git status` and `git status --short`, never `git statusx`, whose
/// first word is another program or subcommand.
fn command_matches(pattern: &str, command: &str) -> bool {
    if let Some(bare) = pattern.strip_suffix(" *") {
        return wildcard(pattern, command) || wildcard(bare, command);
    }
    if let Some(word) = pattern.strip_suffix('*')
        && word.ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '-')
    {
        return wildcard(word, command) || wildcard(&format!("{word} *"), command);
    }
    wildcard(pattern, command)
}

/// `*` matches any run of characters (including none); everything else is literal.
fn wildcard(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, rest) = match parts.split_first() {
        Some(split) => split,
        None => return text.is_empty(),
    };
    let Some(mut remaining) = text.strip_prefix(first) else {
        return false;
    };
    let Some((last, middle)) = rest.split_last() else {
        return remaining.is_empty();
    };
    for part in middle {
        match remaining.find(part) {
            Some(at) => remaining = &remaining[at + part.len()..],
            None => return false,
        }
    }
    remaining.ends_with(last)
}

/// `example.com` is that host only; `*.example.com` its subdomains only (not the bare name).
fn domain_matches(domain: &str, host: &str) -> bool {
    match domain.strip_prefix("*.") {
        Some(parent) => host
            .strip_suffix(parent)
            .is_some_and(|sub| sub.len() > 1 && sub.ends_with('.')),
        None => host == domain,
    }
}

fn path_matches(glob: &str, path: &Path, call: &CallFacts<'_>) -> bool {
    let pattern = if let Some(rest) = glob.strip_prefix("~/") {
        match std::env::var_os("HOME") {
            Some(home) => PathBuf::from(home).join(rest),
            None => return false,
        }
    } else if Path::new(glob).is_absolute() {
        PathBuf::from(glob)
    } else {
        call.workspace.join(glob)
    };
    let Some(matcher) = glob_matcher(&lexical(&pattern)) else {
        return false;
    };
    matcher.is_match(lexical(path)) || matcher.is_match(resolve_existing(path))
}

/// `*` stays inside one path segment, `**` crosses them.
fn glob_matcher(pattern: &Path) -> Option<GlobMatcher> {
    let glob = GlobBuilder::new(pattern.to_str()?)
        .literal_separator(true)
        .build()
        .ok()?;
    Some(glob.compile_matcher())
}

/// Wrappers that run their arguments as a command.
const WRAPPERS: &[&str] = &[
    "timeout", "nice", "nohup", "time", "stdbuf", "env", "command",
];

/// The simple commands of a script, wrappers and `VAR=…` prefixes stripped, recursing into
/// `bash -c`/`sh -c` strings. A deliberately small reading of shell syntax: it over-splits
/// (inside quotes too), which can only make deny and ask rules match more.
pub(crate) fn simple_commands(script: &str) -> Vec<String> {
    let mut out = Vec::new();
    for piece in raw_pieces(script) {
        let command = strip_wrappers(&piece);
        for shell in ["bash -c ", "sh -c "] {
            if let Some(inner) = command.strip_prefix(shell) {
                out.extend(simple_commands(inner.trim_matches(['\'', '"', ' '])));
            }
        }
        out.push(command.to_owned());
    }
    out
}

/// The script cut at every separator, wrappers and assignments still in place.
fn raw_pieces(script: &str) -> Vec<String> {
    let separated: String = script
        .chars()
        .map(|c| match c {
            ';' | '&' | '|' | '\n' | '(' | ')' | '{' | '}' | '`' => '\n',
            other => other,
        })
        .collect();
    separated
        .split('\n')
        .map(|piece| piece.trim().trim_start_matches('$').trim().to_owned())
        .filter(|piece| !piece.is_empty())
        .collect()
}

fn strip_wrappers(mut command: &str) -> &str {
    loop {
        let (word, rest) = command.split_once(' ').unwrap_or((command, ""));
        let rest = rest.trim_start();
        let is_assignment = word.contains('=') && !word.starts_with('=');
        if WRAPPERS.contains(&word) || is_assignment {
            // `timeout 10 cmd`, `nice -n 5 cmd`: skip the wrapper's options and numbers too.
            let mut rest = rest;
            while let Some((arg, tail)) = rest.split_once(' ') {
                if arg.starts_with('-') || arg.parse::<f64>().is_ok() || arg.contains('=') {
                    rest = tail.trim_start();
                } else {
                    break;
                }
            }
            if rest.is_empty() {
                return command;
            }
            command = rest;
        } else {
            return command;
        }
    }
}

/// The only redirections an allow rule sees through: discarding output, and stderr joined
/// to stdout. Anything else (`>/dev/null_x`, `> out.txt`, `<<EOF`, `&>`) writes or reads
/// something the rule did not name.
const HARMLESS_REDIRECTIONS: &[&str] = &[">/dev/null", "2>/dev/null", "2>&1"];

/// `command` with its harmless redirections (whole words) left out, so `2>&1` is not read as
/// a background `&` followed by a command `1`.
/// Separators that may follow a word with no space (`>/dev/null;`); they are kept.
fn without_harmless_redirections(command: &str) -> String {
    command
        .split_whitespace()
        .map(|word| {
            let bare = word.trim_end_matches([';', '|', '&', ')']);
            if HARMLESS_REDIRECTIONS.contains(&bare) {
                &word[bare.len()..]
            } else {
                word
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Nothing in the command that a rule cannot see through: substitutions, redirections other
/// than exactly [`HARMLESS_REDIRECTIONS`] (each a whole word), `eval`/`source`/`exec`, variable
/// assignments.
pub(crate) fn plainly_readable(command: &str) -> bool {
    if ["$(", "`", "${"].iter().any(|t| command.contains(t)) {
        return false;
    }
    let redirections_are_harmless = command
        .split_whitespace()
        .map(|word| word.trim_end_matches([';', '|', '&', ')']))
        .filter(|word| word.contains(['>', '<']))
        .all(|word| HARMLESS_REDIRECTIONS.contains(&word));
    if !redirections_are_harmless {
        return false;
    }
    let assigns = |piece: &String| {
        let first = piece.split_whitespace().next().unwrap_or("");
        first.contains('=') || first == "env"
    };
    !raw_pieces(command).iter().any(assigns)
        && simple_commands(command).iter().all(|c| {
            let first = c.split_whitespace().next().unwrap_or("");
            !matches!(first, "eval" | "source" | "." | "exec" | "xargs") && !c.contains(" -exec")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts<'a>(tool: &'a str, command: Option<&'a str>, path: Option<&'a Path>) -> CallFacts<'a> {
        let paths: Vec<PathBuf> = path.map(Path::to_path_buf).into_iter().collect();
        CallFacts {
            tool,
            command,
            paths: Box::leak(paths.into_boxed_slice()),
            hosts: &[],
            workspace: Path::new("/ws"),
        }
    }

    #[test]
    fn domain_rules_match_a_host_exactly_or_its_subdomains_only() {
        let exact = Rule::parse("web_fetch(domain:Example.com)").unwrap();
        let subs = Rule::parse("web_fetch(domain:*.example.com)").unwrap();
        let facts = |hosts: &'static [String]| CallFacts {
            tool: "web_fetch",
            command: None,
            paths: &[],
            hosts,
            workspace: Path::new("/ws"),
        };
        let host =
            |h: &str| -> &'static [String] { Box::leak(vec![h.to_owned()].into_boxed_slice()) };
        assert!(exact.matches_all(&facts(host("example.com"))));
        assert!(!exact.matches_all(&facts(host("docs.example.com"))));
        assert!(!exact.matches_any(&facts(host("example.com.evil.org"))));
        assert!(subs.matches_all(&facts(host("docs.example.com"))));
        assert!(!subs.matches_all(&facts(host("example.com"))));
        assert!(!subs.matches_all(&facts(host("badexample.com"))));
        assert!(!exact.matches_all(&facts(&[])));
        assert_eq!(
            Rule::parse("web_fetch(domain:)").unwrap_err().offset,
            "web_fetch(domain:".len()
        );
    }

    fn bash(rule: &str, command: &str) -> (bool, bool) {
        let rule = Rule::parse(rule).unwrap();
        let call = facts("bash", Some(command), None);
        (rule.matches_any(&call), rule.matches_all(&call))
    }

    #[test]
    fn command_patterns_keep_the_word_boundary() {
        assert_eq!(bash("bash(ls *)", "ls -la"), (true, true));
        assert_eq!(bash("bash(ls *)", "ls"), (true, true));
        assert_eq!(bash("bash(ls *)", "lsof"), (false, false));
        assert_eq!(bash("bash(git:*)", "git status"), (true, true));
        assert_eq!(bash("bash(git status)", "git status -s"), (false, false));
        assert_eq!(bash("bash(git status*)", "git status -s"), (true, true));
        assert_eq!(bash("bash(git status*)", "git status"), (true, true));
        assert_eq!(bash("bash(git status*)", "git statusx"), (false, false));
        assert_eq!(bash("bash(git status *)", "git statusx"), (false, false));
        assert_eq!(bash("bash(./scripts/*)", "./scripts/test.sh"), (true, true));
    }

    #[test]
    fn only_exactly_the_harmless_redirections_keep_an_allow_rule() {
        for fine in [
            "git status >/dev/null",
            "git status 2>/dev/null",
            "git status 2>&1",
            "git status 2>/dev/null; git log >/dev/null",
        ] {
            assert!(
                bash("bash(git status*)", fine).1 || fine.contains("log"),
                "{fine}"
            );
        }
        assert!(bash("bash(git *)", "git status 2>/dev/null; git log >/dev/null").1);
        // Leaving a redirection out never joins two commands into one.
        assert!(!bash("bash(git status*)", "git status >/dev/null; rm -rf x").1);
        assert!(!bash("bash(git status*)", "git status 2>/dev/null;rm -rf x").1);
        for sneaky in [
            "git status >/dev/null_x",
            "git status > /dev/null",
            "git status &>/dev/null",
            "git status 1>/tmp/x",
            "git status >/dev/null>x",
            "git status <<EOF",
            "git status 2>&1>out",
        ] {
            assert!(!bash("bash(git status*)", sneaky).1, "{sneaky}");
        }
    }

    #[test]
    fn deny_patterns_see_every_simple_command() {
        for command in [
            "git status && git push origin",
            "echo $(git push)",
            "bash -c 'git push'",
            "timeout 5 git push",
            "FOO=1 git push",
        ] {
            assert!(bash("bash(git push *)", command).0, "{command}");
        }
    }

    #[test]
    fn allow_needs_every_command_to_match_and_a_plain_script() {
        assert!(bash("bash(git *)", "git status && git log").1);
        assert!(!bash("bash(git *)", "git status && rm -rf /").1);
        assert!(!bash("bash(git *)", "git log > out.txt").1);
        assert!(!bash("bash(git *)", "git log $(rm x)").1);
        assert!(!bash("bash(ls *)", "LD_PRELOAD=x ls").1);
    }

    #[test]
    fn path_globs_match_absolute_and_workspace_relative_paths() {
        let etc = Rule::parse("write(/etc/**)").unwrap();
        assert!(etc.matches_any(&facts("write", None, Some(Path::new("/etc/a/b")))));
        assert!(!etc.matches_any(&facts("write", None, Some(Path::new("/home/x")))));
        let src = Rule::parse("edit(src/*.rs)").unwrap();
        assert!(src.matches_any(&facts("edit", None, Some(Path::new("/ws/src/main.rs")))));
        assert!(!src.matches_any(&facts("edit", None, Some(Path::new("/ws/src/a/b.rs")))));
        assert!(!src.matches_any(&facts("write", None, Some(Path::new("/ws/src/main.rs")))));
    }

    #[test]
    fn tool_names_take_wildcards() {
        let rule = Rule::parse("mcp__github__*").unwrap();
        assert!(rule.matches_any(&facts("mcp__github__create_issue", None, None)));
        assert!(!rule.matches_any(&facts("mcp__gitlab__x", None, None)));
        let server = Rule::parse("mcp__github").unwrap();
        assert!(server.matches_all(&facts("mcp__github__create_issue", None, None)));
        assert!(!server.matches_any(&facts("mcp__githubx__y", None, None)));
        assert!(!server.matches_any(&facts("mcp__gitlab__github", None, None)));
        let tool = Rule::parse("mcp__github__create_issue").unwrap();
        assert!(tool.matches_any(&facts("mcp__github__create_issue", None, None)));
        assert!(!tool.matches_any(&facts("mcp__github__create_issue_comment", None, None)));
        assert!(
            Rule::parse("bash")
                .unwrap()
                .matches_all(&facts("bash", Some("x"), None))
        );
    }

    #[test]
    fn bad_rules_say_where() {
        assert_eq!(Rule::parse("bash(git").unwrap_err().offset, 8);
        assert_eq!(Rule::parse("ba sh").unwrap_err().offset, 2);
        assert_eq!(Rule::parse("bash()").unwrap_err().offset, 5);
        assert_eq!(Rule::parse("grep(a[)").unwrap_err().offset, 5);
        assert!(Rule::parse("").is_err());
    }
}
