//! Hook configuration in Claude Code's `hooks` format, read from the files a user already has.
//!
//! ```json
//! {"hooks": {"PreToolUse": [{"matcher": "bash|Edit",
//!   "hooks": [{"type": "command", "command": "./check.sh", "timeout": 30}]}]}}
//! ```
//!
//! Several files apply at once, in the order they are given; within a file, groups and their
//! hooks keep their written order. That order is the order hooks run in.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::HooksError;
use crate::matcher::Matcher;

/// Timeout of a hook that names none (Claude Code uses 60 s too).
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(60);

/// The life events a hook can be attached to, with Claude Code's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HookEvent {
    /// A session started or resumed (its context joins the first request).
    SessionStart,
    /// A person's prompt is about to be sent (may block it or add context).
    UserPromptSubmit,
    /// A tool call is about to run (may deny it, ask, or let it through).
    PreToolUse,
    /// A tool call finished (may block its result with feedback, or add context).
    PostToolUse,
    /// The main agent is about to end its turn (may force another step).
    Stop,
    /// A subagent is about to end its turn (may force another step).
    SubagentStop,
    /// A compaction is about to run.
    PreCompact,
    /// dsh needs the person (an approval, or it is idle and waiting).
    Notification,
}

impl HookEvent {
    /// Every event, in the order `dsh hooks list` shows them.
    pub const ALL: [HookEvent; 8] = [
        HookEvent::SessionStart,
        HookEvent::UserPromptSubmit,
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::Stop,
        HookEvent::SubagentStop,
        HookEvent::PreCompact,
        HookEvent::Notification,
    ];

    /// Claude Code's name of the event (also `hook_event_name` in the hook's input).
    pub fn name(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "SessionStart",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::Stop => "Stop",
            HookEvent::SubagentStop => "SubagentStop",
            HookEvent::PreCompact => "PreCompact",
            HookEvent::Notification => "Notification",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.name() == name)
    }

    /// Whether a group's `matcher` filters this event (tool events match tool names, the others
    /// their source or trigger; the rest ignore it).
    pub fn uses_matcher(self) -> bool {
        matches!(
            self,
            HookEvent::PreToolUse
                | HookEvent::PostToolUse
                | HookEvent::SessionStart
                | HookEvent::PreCompact
                | HookEvent::Notification
        )
    }
}

/// One configured command hook.
#[derive(Clone, Debug)]
pub struct HookCommand {
    /// The event it runs on.
    pub event: HookEvent,
    /// Which calls (or sources) it runs for.
    pub matcher: Matcher,
    /// The script handed to `bash -c`.
    pub command: String,
    /// How long it may run before it is killed.
    pub timeout: Duration,
    /// The file it came from (shown by `dsh hooks list` and in the log).
    pub source: PathBuf,
    /// Whether its file is trusted: the user's own (`$DSH_HOME`), or a workspace file whose
    /// exact content the user trusted. An untrusted hook runs sandboxed or not at all.
    pub trusted: bool,
}

/// A workspace hooks file the user has not trusted (in this content), as it was read: trust
/// is recorded for exactly these bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UntrustedFile {
    /// The file.
    pub path: PathBuf,
    /// Its content when read.
    pub content: Vec<u8>,
    /// It was trusted before, with other content.
    pub changed: bool,
}

/// Every hook dsh will run, in run order.
#[derive(Clone, Debug, Default)]
pub struct HookSet {
    hooks: Vec<HookCommand>,
    /// Files that were read (existing ones only), in order.
    pub sources: Vec<PathBuf>,
    /// Why files in a hooks file's place were not read (not a regular file, too large).
    pub refused: Vec<String>,
    /// The files whose hooks are not trusted.
    pub untrusted: Vec<UntrustedFile>,
}

/// The most a hooks file may hold; a larger one is refused.
pub const HOOKS_FILE_LIMIT: u64 = 1 << 20;

impl HookSet {
    /// A set built from commands (tests and embedders).
    pub fn new(hooks: Vec<HookCommand>) -> Self {
        Self {
            hooks,
            sources: Vec::new(),
            refused: Vec::new(),
            untrusted: Vec::new(),
        }
    }

    /// Reads each existing file of `paths` in order; a missing file is skipped, an unreadable
    /// or malformed one is an error naming the file (and line:column for JSON errors), so a
    /// typo never silently disables a policy hook.
    pub fn load(paths: &[PathBuf]) -> Result<Self, HooksError> {
        Self::load_trusted(paths, &|_, _| dsh_fs::Trust::Trusted)
    }

    /// [`HookSet::load`], asking `trust` about each file's content: the hooks of a file that
    /// is not [`Trusted`](dsh_fs::Trust::Trusted) are marked untrusted, and the file is listed
    /// in [`HookSet::untrusted`] with the bytes that were read.
    pub fn load_trusted(
        paths: &[PathBuf],
        trust: &dyn Fn(&Path, &[u8]) -> dsh_fs::Trust,
    ) -> Result<Self, HooksError> {
        let mut set = HookSet::default();
        for path in paths {
            let bytes = match dsh_fs::read_placed(path, HOOKS_FILE_LIMIT, dsh_fs::Oversize::Refuse)
            {
                Ok(Some(file)) => file.bytes,
                Ok(None) => continue,
                Err(dsh_fs::PlacedError::Io { source, .. }) => {
                    return Err(HooksError::Read {
                        path: path.clone(),
                        source,
                    });
                }
                // Something planted in a hooks file's place (a FIFO, a directory, a device, a
                // huge file) is not a hooks file: the session goes on without it, said once.
                Err(refused) => {
                    tracing::warn!("hooks file skipped: {refused}");
                    set.refused.push(refused.to_string());
                    continue;
                }
            };
            let mut hooks = parse_file(path, &String::from_utf8_lossy(&bytes))?;
            let verdict = trust(path, &bytes);
            if verdict != dsh_fs::Trust::Trusted && !hooks.is_empty() {
                for hook in &mut hooks {
                    hook.trusted = false;
                }
                set.untrusted.push(UntrustedFile {
                    path: path.clone(),
                    content: bytes,
                    changed: verdict == dsh_fs::Trust::Changed,
                });
            }
            set.hooks.extend(hooks);
            set.sources.push(path.clone());
        }
        Ok(set)
    }

    /// All hooks, in run order.
    pub fn all(&self) -> &[HookCommand] {
        &self.hooks
    }

    /// Whether nothing is configured.
    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// The hooks of `event` whose matcher accepts `subject` (a tool name, a source), in order.
    pub fn matching<'a>(
        &'a self,
        event: HookEvent,
        subject: Option<&'a str>,
    ) -> impl Iterator<Item = &'a HookCommand> + 'a {
        self.hooks.iter().filter(move |h| {
            h.event == event
                && (!event.uses_matcher() || subject.is_none_or(|s| h.matcher.matches(s)))
        })
    }

    /// Whether any hook is attached to `event` (so a listener can skip all work otherwise).
    pub fn has(&self, event: HookEvent) -> bool {
        self.hooks.iter().any(|h| h.event == event)
    }
}

/// The files hooks are read from for a workspace, in the order they apply:
/// `$DSH_HOME/hooks.json`, `<workspace>/.dsh/hooks.json`, and with `claude_code`,
/// `<workspace>/.claude/settings.json` and `<workspace>/.claude/settings.local.json`.
pub fn default_paths(dsh_home: &Path, workspace: &Path, claude_code: bool) -> Vec<PathBuf> {
    let mut paths = vec![
        dsh_home.join("hooks.json"),
        workspace.join(".dsh").join("hooks.json"),
    ];
    if claude_code {
        paths.push(workspace.join(".claude").join("settings.json"));
        paths.push(workspace.join(".claude").join("settings.local.json"));
    }
    paths
}

#[derive(Deserialize)]
struct RawGroup {
    #[serde(default)]
    matcher: Option<String>,
    #[serde(default)]
    hooks: Vec<RawHook>,
}

#[derive(Deserialize)]
struct RawHook {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    timeout: Option<f64>,
}

/// Parses one file: a hooks file or a settings file, both with a top-level `hooks` object. A
/// settings file without `hooks` contributes nothing; unknown events are an error (a misspelt
/// `PreToolUSe` would otherwise never run), non-`command` hook types are skipped as Claude Code
/// does for types it cannot run.
pub fn parse_file(path: &Path, text: &str) -> Result<Vec<HookCommand>, HooksError> {
    let invalid = |message: String| HooksError::Invalid {
        path: path.to_path_buf(),
        message,
    };
    let root: Map<String, Value> = serde_json::from_str(text).map_err(|e| HooksError::Json {
        path: path.to_path_buf(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    let Some(hooks) = root.get("hooks") else {
        return Ok(Vec::new());
    };
    let Value::Object(events) = hooks else {
        return Err(invalid("`hooks` must be an object of events".into()));
    };
    let mut out = Vec::new();
    for (name, groups) in events {
        let event = HookEvent::from_name(name).ok_or_else(|| {
            invalid(format!(
                "unknown hook event `{name}` (known: {})",
                HookEvent::ALL.map(HookEvent::name).join(", ")
            ))
        })?;
        let groups: Vec<RawGroup> = serde_json::from_value(groups.clone())
            .map_err(|e| invalid(format!("hooks.{name}: {e}")))?;
        for (gi, group) in groups.into_iter().enumerate() {
            let matcher = Matcher::parse(group.matcher.as_deref().unwrap_or(""))
                .map_err(|e| invalid(format!("hooks.{name}[{gi}].matcher: {e}")))?;
            for (hi, hook) in group.hooks.into_iter().enumerate() {
                let at = format!("hooks.{name}[{gi}].hooks[{hi}]");
                if hook.kind != "command" {
                    tracing::warn!(
                        "{}: {at}: hook type `{}` is not supported; skipped",
                        path.display(),
                        hook.kind
                    );
                    continue;
                }
                let command = hook
                    .command
                    .filter(|c| !c.trim().is_empty())
                    .ok_or_else(|| invalid(format!("{at}: a command hook needs a `command`")))?;
                let timeout = match hook.timeout {
                    None => DEFAULT_HOOK_TIMEOUT,
                    Some(t) if t.is_finite() && t > 0.0 => Duration::from_secs_f64(t.min(86_400.0)),
                    Some(t) => {
                        return Err(invalid(format!(
                            "{at}.timeout: must be a positive number of seconds, got {t}"
                        )));
                    }
                };
                out.push(HookCommand {
                    event,
                    matcher: matcher.clone(),
                    command,
                    timeout,
                    source: path.to_path_buf(),
                    trusted: true,
                });
            }
        }
    }
    // JSON objects keep their written order (serde_json's preserve_order), so events in a file
    // stay in the order the user wrote them; run order only matters within one event.
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<HookCommand>, HooksError> {
        parse_file(Path::new("/x/hooks.json"), text)
    }

    #[test]
    fn claude_code_format_parses_with_default_timeout() {
        let hooks = parse(
            r#"{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[
                {"type":"command","command":"a.sh"},
                {"type":"command","command":"b.sh","timeout":5}]}]}}"#,
        )
        .unwrap();
        assert_eq!(hooks.len(), 2);
        assert_eq!(hooks[0].timeout, DEFAULT_HOOK_TIMEOUT);
        assert_eq!(hooks[1].timeout, Duration::from_secs(5));
        assert!(hooks[0].matcher.matches("bash"));
    }

    #[test]
    fn malformed_json_names_file_line_and_column() {
        let err = parse("{\n  \"hooks\": {,}\n}").unwrap_err().to_string();
        assert!(err.contains("/x/hooks.json:2:"), "{err}");
    }

    #[test]
    fn unknown_event_is_an_error_not_a_silent_skip() {
        let err = parse(r#"{"hooks":{"PreToolUSe":[]}}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown hook event `PreToolUSe`"), "{err}");
    }

    #[test]
    fn settings_file_without_hooks_contributes_nothing() {
        assert!(parse(r#"{"permissions":{}}"#).unwrap().is_empty());
    }

    #[test]
    fn command_hook_without_command_is_refused() {
        let err = parse(r#"{"hooks":{"Stop":[{"hooks":[{"type":"command"}]}]}}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("hooks.Stop[0].hooks[0]"), "{err}");
    }

    #[test]
    fn non_positive_timeout_is_refused() {
        let err = parse(
            r#"{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"x","timeout":0}]}]}}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("timeout"), "{err}");
    }

    #[test]
    fn missing_files_are_skipped_and_order_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.json");
        let b = dir.path().join("b.json");
        std::fs::write(
            &a,
            r#"{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"first"}]}]}}"#,
        )
        .unwrap();
        std::fs::write(
            &b,
            r#"{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"second"}]}]}}"#,
        )
        .unwrap();
        let set = HookSet::load(&[a.clone(), dir.path().join("missing.json"), b.clone()]).unwrap();
        let commands: Vec<_> = set
            .matching(HookEvent::Stop, None)
            .map(|h| h.command.as_str())
            .collect();
        assert_eq!(commands, ["first", "second"]);
        assert_eq!(set.sources, [a, b]);
    }
}
