//! The output codec: what a finished hook process says, and how several answers merge.
//!
//! Claude Code's rules: exit 2 blocks, with stderr as the reason; exit 0 may print a JSON
//! object (`decision`, `reason`, `continue`, `stopReason`, `systemMessage`,
//! `hookSpecificOutput.{permissionDecision, permissionDecisionReason, additionalContext}`);
//! any other exit, a timeout or a failure to start is a non-blocking error shown to the user.
//! Several hooks merge most-restrictively: block/deny > ask > allow > no opinion.

use serde::Deserialize;
use serde_json::Value;

use crate::config::HookEvent;

/// A hook's verdict, ordered from least to most restrictive.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// The hook expressed no opinion.
    #[default]
    None,
    /// Let it through (a PreToolUse `allow`; other policy still applies).
    Allow,
    /// Ask the person (PreToolUse only).
    Ask,
    /// Block / deny.
    Block,
}

/// How one hook process ended, as the runner observed it.
#[derive(Clone, Debug)]
pub struct HookExit {
    /// The exit code, when it exited.
    pub code: Option<i32>,
    /// It was killed at its timeout.
    pub timed_out: bool,
    /// It was stopped because the turn was cancelled.
    pub aborted: bool,
    /// Standard output (tail).
    pub stdout: String,
    /// Standard error (tail).
    pub stderr: String,
}

/// What one hook (or several, merged) decided.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HookOutcome {
    /// The most restrictive decision.
    pub decision: Decision,
    /// Reasons given for the decision (for the model, or for the person on a prompt block).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// Context to add to the conversation.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub contexts: Vec<String>,
    /// `continue: false`: stop the agent, with this reason for the person.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop: Option<String>,
    /// Messages for the person (`systemMessage`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<String>,
    /// Non-blocking errors (other exits, timeouts, invalid JSON), for the person.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

impl HookOutcome {
    /// Folds `other` in: the stricter decision wins, everything else accumulates.
    pub fn merge(&mut self, other: HookOutcome) {
        self.decision = self.decision.max(other.decision);
        self.reasons.extend(other.reasons);
        self.contexts.extend(other.contexts);
        if self.stop.is_none() {
            self.stop = other.stop;
        }
        self.messages.extend(other.messages);
        self.errors.extend(other.errors);
    }

    /// The reasons as one text (blank-line separated), or `fallback` when none was given.
    pub fn reason_text(&self, fallback: &str) -> String {
        if self.reasons.is_empty() {
            fallback.to_owned()
        } else {
            self.reasons.join("\n\n")
        }
    }

    /// Whether the merged verdict blocks (deny / block).
    pub fn blocks(&self) -> bool {
        self.decision == Decision::Block
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct JsonOutput {
    #[serde(rename = "continue")]
    continue_: Option<bool>,
    stop_reason: Option<String>,
    system_message: Option<String>,
    decision: Option<String>,
    reason: Option<String>,
    hook_specific_output: Option<SpecificOutput>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct SpecificOutput {
    permission_decision: Option<String>,
    permission_decision_reason: Option<String>,
    additional_context: Option<String>,
}

/// Interprets one finished hook for `event`. `command` names it in error texts.
pub fn decode(event: HookEvent, command: &str, exit: &HookExit) -> HookOutcome {
    let mut out = HookOutcome::default();
    if exit.aborted {
        return out;
    }
    if exit.timed_out {
        out.errors.push(format!("hook `{command}` timed out"));
        return out;
    }
    match exit.code {
        Some(0) => decode_success(event, command, exit.stdout.trim(), &mut out),
        Some(2) => {
            out.decision = match event {
                // These cannot block anything: stderr is only shown to the person.
                HookEvent::SessionStart | HookEvent::PreCompact | HookEvent::Notification => {
                    out.errors.push(clean(&exit.stderr));
                    Decision::None
                }
                _ => Decision::Block,
            };
            if out.decision == Decision::Block {
                let reason = clean(&exit.stderr);
                out.reasons.push(if reason.is_empty() {
                    format!("blocked by hook `{command}`")
                } else {
                    reason
                });
            }
        }
        code => {
            let how = code.map_or("was killed by a signal".to_owned(), |c| {
                format!("exited with {c}")
            });
            let stderr = clean(&exit.stderr);
            out.errors.push(if stderr.is_empty() {
                format!("hook `{command}` {how}")
            } else {
                format!("hook `{command}` {how}: {stderr}")
            });
        }
    }
    out
}

fn decode_success(event: HookEvent, command: &str, stdout: &str, out: &mut HookOutcome) {
    if !stdout.starts_with('{') {
        // Plain stdout is context for the two events where Claude Code adds it.
        if matches!(event, HookEvent::UserPromptSubmit | HookEvent::SessionStart)
            && !stdout.is_empty()
        {
            out.contexts.push(stdout.to_owned());
        }
        return;
    }
    let json: JsonOutput =
        match serde_json::from_str::<Value>(stdout).and_then(serde_json::from_value) {
            Ok(json) => json,
            Err(e) => {
                out.errors
                    .push(format!("hook `{command}` printed invalid JSON: {e}"));
                return;
            }
        };
    if json.continue_ == Some(false) {
        out.stop = Some(
            json.stop_reason
                .clone()
                .unwrap_or_else(|| format!("stopped by hook `{command}`")),
        );
    }
    out.messages.extend(json.system_message);
    let specific = json.hook_specific_output.unwrap_or_default();
    out.contexts.extend(specific.additional_context);
    // `permissionDecision` is the current form; `decision` approve/block the legacy one.
    let (decision, reason) = match specific.permission_decision.as_deref() {
        Some(d) => (Some(d.to_owned()), specific.permission_decision_reason),
        None => (json.decision.clone(), json.reason.clone()),
    };
    let decision = match decision.as_deref() {
        Some("deny" | "block") => Decision::Block,
        Some("ask") if event == HookEvent::PreToolUse => Decision::Ask,
        Some("allow" | "approve") => Decision::Allow,
        Some(other) => {
            out.errors.push(format!(
                "hook `{command}` returned an unknown decision `{other}`"
            ));
            Decision::None
        }
        None => Decision::None,
    };
    // Blocking needs an event that can block.
    out.decision = match (event, decision) {
        (
            HookEvent::SessionStart | HookEvent::PreCompact | HookEvent::Notification,
            Decision::Block,
        ) => Decision::None,
        (_, d) => d,
    };
    if out.decision >= Decision::Ask
        && let Some(reason) = reason.filter(|r| !r.trim().is_empty())
    {
        out.reasons.push(reason);
    }
}

/// Trims a stream for showing: surrounding whitespace off, at most 2,000 characters.
fn clean(text: &str) -> String {
    dsh_session::clip_chars(text.trim(), 2_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exit(code: i32, stdout: &str, stderr: &str) -> HookExit {
        HookExit {
            code: Some(code),
            timed_out: false,
            aborted: false,
            stdout: stdout.into(),
            stderr: stderr.into(),
        }
    }

    #[test]
    fn exit_two_blocks_with_stderr_as_reason() {
        let o = decode(HookEvent::PreToolUse, "x", &exit(2, "", "no force push\n"));
        assert_eq!(o.decision, Decision::Block);
        assert_eq!(o.reasons, ["no force push"]);
    }

    #[test]
    fn permission_decision_deny_blocks_with_its_reason() {
        let out = r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"nope"}}"#;
        let o = decode(HookEvent::PreToolUse, "x", &exit(0, out, ""));
        assert_eq!(o.decision, Decision::Block);
        assert_eq!(o.reasons, ["nope"]);
    }

    #[test]
    fn legacy_decision_block_and_approve_are_understood() {
        let o = decode(
            HookEvent::PostToolUse,
            "x",
            &exit(0, r#"{"decision":"block","reason":"fix lint"}"#, ""),
        );
        assert!(o.blocks());
        assert_eq!(o.reasons, ["fix lint"]);
        let o = decode(
            HookEvent::PreToolUse,
            "x",
            &exit(0, r#"{"decision":"approve"}"#, ""),
        );
        assert_eq!(o.decision, Decision::Allow);
    }

    #[test]
    fn other_exit_codes_are_non_blocking_errors() {
        let o = decode(HookEvent::PreToolUse, "x", &exit(1, "", "oops"));
        assert_eq!(o.decision, Decision::None);
        assert_eq!(o.errors, ["hook `x` exited with 1: oops"]);
    }

    #[test]
    fn plain_stdout_is_context_only_for_prompt_and_session_start() {
        let o = decode(
            HookEvent::UserPromptSubmit,
            "x",
            &exit(0, "branch: main\n", ""),
        );
        assert_eq!(o.contexts, ["branch: main"]);
        let o = decode(HookEvent::PreToolUse, "x", &exit(0, "chatter", ""));
        assert!(o.contexts.is_empty());
    }

    #[test]
    fn continue_false_stops_with_its_reason() {
        let o = decode(
            HookEvent::PostToolUse,
            "x",
            &exit(0, r#"{"continue":false,"stopReason":"budget spent"}"#, ""),
        );
        assert_eq!(o.stop.as_deref(), Some("budget spent"));
    }

    #[test]
    fn invalid_json_is_a_non_blocking_error() {
        let o = decode(HookEvent::PreToolUse, "x", &exit(0, "{not json", ""));
        assert_eq!(o.decision, Decision::None);
        assert_eq!(o.errors.len(), 1);
    }

    #[test]
    fn session_start_cannot_block() {
        let o = decode(HookEvent::SessionStart, "x", &exit(2, "", "no"));
        assert_eq!(o.decision, Decision::None);
    }

    #[test]
    fn merge_is_most_restrictive_and_accumulates() {
        let mut a = HookOutcome {
            decision: Decision::Allow,
            contexts: vec!["a".into()],
            ..Default::default()
        };
        a.merge(HookOutcome {
            decision: Decision::Ask,
            reasons: vec!["r1".into()],
            contexts: vec!["b".into()],
            ..Default::default()
        });
        a.merge(HookOutcome {
            decision: Decision::Block,
            reasons: vec!["r2".into()],
            ..Default::default()
        });
        a.merge(HookOutcome::default());
        assert_eq!(a.decision, Decision::Block);
        assert_eq!(a.reason_text(""), "r1\n\nr2");
        assert_eq!(a.contexts, ["a", "b"]);
    }
}
