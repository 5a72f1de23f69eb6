//! `dsh hooks list` and `dsh hooks trust`, and the line that shows a hook's run in the
//! transcript.

use std::fmt::Write as _;
use std::path::Path;

use dsh_fs::{Trust, TrustRecord};
use dsh_harness::Settings;
use dsh_hooks::config::default_paths;
use dsh_hooks::{HookEvent, HookSet};

/// `dsh hooks list`: every hook that applies to `workspace`, by event, with its file.
pub fn list(settings: &Settings, workspace: &Path) -> anyhow::Result<String> {
    let (paths, set) = load(settings, workspace)?;
    let mut out = String::new();
    let _ = writeln!(out, "# hooks files, in the order they apply:");
    for path in &paths {
        let state = if !set.sources.contains(path) {
            "not found"
        } else if let Some(file) = set.untrusted.iter().find(|f| f.path == *path) {
            if file.changed {
                "read, CHANGED since trusted: runs sandboxed in `dsh run`, asked about elsewhere; \
                 `dsh hooks trust` trusts it"
            } else {
                "read, NOT trusted: runs sandboxed in `dsh run`, asked about elsewhere; \
                 `dsh hooks trust` trusts it"
            }
        } else if *path == own(settings) {
            "read, yours"
        } else {
            "read, trusted"
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

/// The user's own hooks file, which needs no trust.
fn own(settings: &Settings) -> std::path::PathBuf {
    settings.home.value.join("hooks.json")
}

/// The hooks files of `workspace` and their hooks, each file's trust judged by the record in
/// `$DSH_HOME`.
fn load(
    settings: &Settings,
    workspace: &Path,
) -> anyhow::Result<(Vec<std::path::PathBuf>, HookSet)> {
    let paths = default_paths(
        &settings.home.value,
        workspace,
        settings.hooks.claude_code.value,
    );
    let own = own(settings);
    let record = TrustRecord::new(&settings.home.value);
    // A broken record is an error here, where the user can fix it.
    record.entries()?;
    let set = HookSet::load_trusted(&paths, &|path, content| {
        if path == own {
            return Trust::Trusted;
        }
        record.check(path, content).unwrap_or(Trust::Unknown)
    })?;
    Ok((paths, set))
}

/// `dsh hooks trust`: records this workspace's hooks files, as they are now, as trusted.
pub fn trust(settings: &Settings, workspace: &Path) -> anyhow::Result<String> {
    let (_, set) = load(settings, workspace)?;
    let record = TrustRecord::new(&settings.home.value);
    let mut out = String::new();
    if set.untrusted.is_empty() {
        let _ = writeln!(
            out,
            "nothing to trust: every hooks file here is yours or trusted"
        );
        return Ok(out);
    }
    for file in &set.untrusted {
        record.trust(&file.path, &file.content)?;
        let _ = writeln!(
            out,
            "trusted {} (sha256 {})",
            file.path.display(),
            dsh_fs::content_hash(&file.content)
        );
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
