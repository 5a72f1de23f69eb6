//! `[checkpoints]` in `config.toml`: whether dsh records the workspace before each turn (for
//! `dsh sessions rewind`) and the largest file it keeps.
//!
//! ```toml
//! [checkpoints]
//! enabled = true              # record checkpoints (default)
//! max_file_bytes = 10485760   # larger files are not checkpointed, and are named
//! ```

use std::fmt::Write as _;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::located;
use crate::error::{ConfigError, config_bail};

/// `[checkpoints]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileCheckpoints {
    enabled: Option<bool>,
    max_file_bytes: Option<Spanned<i64>>,
}

/// What `[checkpoints]` decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointSettings {
    /// Record checkpoints.
    pub enabled: bool,
    /// Files larger than this are left out.
    pub max_file_bytes: u64,
}

impl Default for CheckpointSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            max_file_bytes: dsh_checkpoint::DEFAULT_MAX_FILE_BYTES,
        }
    }
}

/// The settings `[checkpoints]` describes over the defaults; a cap below 1 byte is refused at
/// its `file:line:column`.
pub(super) fn resolve(
    file: &FileCheckpoints,
    path: &Path,
    text: &str,
) -> Result<CheckpointSettings, ConfigError> {
    let mut settings = CheckpointSettings::default();
    if let Some(enabled) = file.enabled {
        settings.enabled = enabled;
    }
    if let Some(cap) = &file.max_file_bytes {
        let value = *cap.get_ref();
        if value < 1 {
            config_bail!(
                "invalid config file {}: checkpoints.max_file_bytes must be at least 1, not {value}",
                located(path, text, cap.span().start)
            );
        }
        settings.max_file_bytes = value as u64;
    }
    Ok(settings)
}

/// The line of `dsh config show`.
pub(super) fn render(out: &mut String, settings: &CheckpointSettings, root: &Path) {
    if settings.enabled {
        let _ = writeln!(
            out,
            "checkpoints: before each turn, in {}, files up to {} bytes",
            root.display(),
            settings.max_file_bytes
        );
    } else {
        let _ = writeln!(out, "checkpoints: off (sessions cannot rewind files)");
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    fn resolve(config: &str) -> Result<crate::config::Settings, crate::config::ConfigError> {
        crate::config::resolve_file_for_test(config)
    }

    #[test]
    fn a_checkpoints_table_sets_them_and_a_bad_cap_is_refused_where_written() {
        let s = resolve("[checkpoints]\nenabled = false\nmax_file_bytes = 100\n").unwrap();
        assert!(!s.checkpoints.enabled);
        assert_eq!(s.checkpoints.max_file_bytes, 100);
        assert!(s.render(&|_| None).contains("checkpoints: off"));
        assert!(resolve("").unwrap().checkpoints.enabled);
        let e = format!(
            "{:#}",
            resolve("[checkpoints]\nmax_file_bytes = 0\n").unwrap_err()
        );
        assert!(e.contains("config.toml:2:18"), "{e}");
    }
}
