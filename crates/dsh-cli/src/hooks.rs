//! Command hooks in the binary: the `[hooks]` config section, mounting the hooks plugin, and
//! `dsh hooks list`.

use std::fmt::Write as _;
use std::path::Path;

use dsh_hooks::config::default_paths;
use dsh_hooks::{HookEvent, HookSet, HookSource, HooksOptions};
use serde::Deserialize;

use crate::config::{Settings, Source, Sourced};

/// `[hooks]` in config.toml.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileHooks {
    /// Also read Claude Code's `.claude/settings.json` and `.claude/settings.local.json`.
    claude_code: Option<bool>,
}

/// The effective `[hooks]` settings.
#[derive(Clone, Debug)]
pub struct HookSettings {
    /// Whether Claude Code's settings files are read too.
    pub claude_code: Sourced<bool>,
}

impl HookSettings {
    /// The settings from the file's section (defaults where it says nothing).
    pub fn from_file(file: &FileHooks) -> Self {
        Self {
            claude_code: match file.claude_code {
                Some(v) => Sourced::new(v, Source::File),
                None => Sourced::new(false, Source::Default),
            },
        }
    }

    /// The `[hooks]` part of `dsh config show`.
    pub fn render(&self, out: &mut String) {
        let _ = writeln!(out, "\n[hooks]");
        let _ = writeln!(
            out,
            "{:<48} # {}",
            format!("claude_code = {}", self.claude_code.value),
            self.claude_code.source
        );
    }
}

/// The hooks plugin's options for a front end: each agent reads the hooks of its own
/// workspace. `interactive` front ends also get idle notifications.
pub fn plugin_options(settings: &Settings, interactive: bool) -> HooksOptions {
    HooksOptions {
        source: HookSource::Files {
            dsh_home: settings.home.value.clone(),
            claude_code: settings.hooks.claude_code.value,
        },
        idle_notifications: interactive,
    }
}

/// `dsh hooks list`: every hook that applies to `workspace`, by event, with its file.
pub fn list(settings: &Settings, workspace: &Path) -> anyhow::Result<String> {
    let paths = default_paths(
        &settings.home.value,
        workspace,
        settings.hooks.claude_code.value,
    );
    let set = HookSet::load(&paths)?;
    let mut out = String::new();
    let _ = writeln!(out, "# hooks files, in the order they apply:");
    for path in &paths {
        let state = if set.sources.contains(path) {
            "read"
        } else {
            "not found"
        };
        let _ = writeln!(out, "#   {} ({state})", path.display());
    }
    if !settings.hooks.claude_code.value {
        let _ = writeln!(
            out,
            "#   (.claude/settings*.json are read with `[hooks] claude_code = true`)"
        );
    }
    if set.is_empty() {
        let _ = writeln!(out, "no hooks configured");
        return Ok(out);
    }
    for event in HookEvent::ALL {
        let hooks: Vec<_> = set.all().iter().filter(|h| h.event == event).collect();
        if hooks.is_empty() {
            continue;
        }
        let _ = writeln!(out, "{}:", event.name());
        for hook in hooks {
            let matcher = hook.matcher.text();
            let _ = writeln!(
                out,
                "  [{matcher}] {}  (timeout {} s, {})",
                hook.command,
                hook.timeout.as_secs_f64(),
                hook.source.display()
            );
        }
    }
    Ok(out)
}

/// One `hook/result` as a transcript line: `⚑ PreToolUse hook `cmd` → exit 2, block: reason`.
pub fn describe_result(data: &serde_json::Value) -> String {
    let event = data["event"].as_str().unwrap_or("?");
    let command = crate::render::one_line(data["command"].as_str().unwrap_or(""), 60);
    let how = if data["timedOut"] == true {
        "timed out".to_owned()
    } else if data["aborted"] == true {
        "stopped with the turn".to_owned()
    } else {
        match data["exitCode"].as_i64() {
            Some(code) => format!("exit {code}"),
            None => "did not run".to_owned(),
        }
    };
    let outcome = &data["outcome"];
    let mut line = format!("  ⚑ {event} hook `{command}` → {how}");
    if let Some(decision) = outcome["decision"].as_str().filter(|d| *d != "none") {
        line.push_str(&format!(", {decision}"));
    }
    let reasons: Vec<&str> = outcome["reasons"]
        .as_array()
        .map(|r| r.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    if !reasons.is_empty() {
        line.push_str(": ");
        line.push_str(&crate::render::one_line(&reasons.join(" "), 100));
    }
    line
}
