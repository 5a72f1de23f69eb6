//! Command hooks in the composition: the `[hooks]` config section and the hooks plugin's options.

use dsh_hooks::{HookSource, HooksOptions};
use serde::Deserialize;
use std::fmt::Write as _;

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
