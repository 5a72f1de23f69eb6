//! Command hooks in the composition: the `[hooks]` config section and the hooks plugin's options.

use std::sync::Arc;

use async_trait::async_trait;
use dsh_hooks::{HookSource, HookTrust, HooksOptions, TrustAnswer, TrustQuestion};
use dsh_session::CallId;
use dsh_tools::{ApprovalOutcome, ApprovalRequest, Approver, ToolEffects};
use serde::Deserialize;
use serde_json::json;
use std::fmt::Write as _;
use tokio_util::sync::CancellationToken;

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
/// workspace. `interactive` front ends also get idle notifications, and ask the person once
/// per workspace whether to trust its hooks; `dsh run` runs untrusted ones sandboxed.
pub fn plugin_options(settings: &Settings, interactive: bool) -> HooksOptions {
    HooksOptions {
        source: HookSource::Files {
            dsh_home: settings.home.value.clone(),
            claude_code: settings.hooks.claude_code.value,
        },
        idle_notifications: interactive,
        trust: interactive.then(|| Arc::new(AskThePerson) as Arc<dyn HookTrust>),
    }
}

/// Asks the person, through the front end's approver (the chat's prompt, the UI's dialog, the
/// editor's permission request), whether a workspace's hooks may run as their own commands.
#[derive(Debug)]
struct AskThePerson;

#[async_trait]
impl HookTrust for AskThePerson {
    async fn decide(&self, question: &TrustQuestion<'_>) -> TrustAnswer {
        let Some(approver) = question.ctx.get::<dyn Approver>() else {
            return TrustAnswer::Confine;
        };
        let files: Vec<String> = question
            .files
            .iter()
            .map(|f| {
                let changed = if f.changed {
                    " (changed since you trusted it)"
                } else {
                    ""
                };
                format!("{}{changed}", f.path.display())
            })
            .collect();
        let request = ApprovalRequest {
            agent_id: question.session.id().clone(),
            tool_name: "hooks".to_owned(),
            reason: Some(format!(
                "this workspace defines hooks ({}): {}. Trust them? Trusted, they run like your \
                 own commands (`dsh hooks trust` records the same); otherwise they do not run.",
                files.join(", "),
                question.commands.join("; ")
            )),
            call_id: CallId::new("dsh-hooks-trust"),
            arguments: Arc::new(json!({ "files": files, "commands": question.commands })),
            // Trusted hooks run commands; shown so as well.
            effects: ToolEffects::none().runs(question.commands.join("\n")),
            cancel: CancellationToken::new(),
        };
        match approver.request(request).await {
            ApprovalOutcome::AllowedOnce | ApprovalOutcome::AllowedForSession => TrustAnswer::Trust,
            ApprovalOutcome::Rejected | ApprovalOutcome::Cancelled => TrustAnswer::Skip,
            ApprovalOutcome::Unavailable => TrustAnswer::Confine,
        }
    }
}
