//! `dsh hooks list`, and the line that shows a hook's run in the transcript.

use std::fmt::Write as _;
use std::path::Path;

use dsh_harness::Settings;
use dsh_hooks::config::default_paths;
use dsh_hooks::{HookEvent, HookSet};

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
