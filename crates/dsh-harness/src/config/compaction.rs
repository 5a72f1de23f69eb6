//! `[compaction]` in `config.toml`: when automatic compaction starts and how much recent
//! history it keeps verbatim.
//!
//! ```toml
//! [compaction]
//! threshold = 0.8      # compact when the next request would exceed this share of the window
//! keep_recent = 0.16   # keep this share of the window of the newest history verbatim
//! ```
//!
//! A higher threshold compacts less often, so more of each request is a cached prefix (cheaper
//! on providers that bill cache hits low) at the price of less headroom for one large tool
//! result; the defaults are those of spec/edges.md §6.2.

use std::fmt::Write as _;
use std::path::Path;

use dsh_compaction::CompactionConfig;
use serde::Deserialize;
use toml::Spanned;

use super::located;
use crate::error::{ConfigError, config_bail};

/// `[compaction]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileCompaction {
    threshold: Option<Spanned<f64>>,
    keep_recent: Option<Spanned<f64>>,
}

/// The policy `[compaction]` describes over the defaults. A threshold outside (0, 0.95] (past
/// 0.95 a single answer overflows before the check runs) or a kept share that is not below
/// the threshold (nothing would be left to summarize) is refused at its `file:line:column`.
pub(super) fn resolve(
    file: &FileCompaction,
    path: &Path,
    text: &str,
) -> Result<CompactionConfig, ConfigError> {
    let mut config = CompactionConfig::default();
    if let Some(t) = &file.threshold {
        let value = *t.get_ref();
        if !(value > 0.0 && value <= 0.95) {
            config_bail!(
                "invalid config file {}: compaction.threshold must be above 0 and at most 0.95 \
                 (a share of the context window), not {value}",
                located(path, text, t.span().start)
            );
        }
        config.threshold_ratio = value;
    }
    if let Some(k) = &file.keep_recent {
        let value = *k.get_ref();
        if !(0.0..config.threshold_ratio).contains(&value) {
            config_bail!(
                "invalid config file {}: compaction.keep_recent must be at least 0 and below \
                 the threshold ({}), not {value}",
                located(path, text, k.span().start),
                config.threshold_ratio
            );
        }
        config.retain_ratio = value;
    }
    Ok(config)
}

/// The policy's lines of `dsh config show`.
pub(super) fn render(out: &mut String, config: &CompactionConfig) {
    let _ = writeln!(
        out,
        "compaction: at {:.0}% of the window, keeping the newest {:.0}% verbatim",
        config.threshold_ratio * 100.0,
        config.retain_ratio * 100.0
    );
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use crate::config::{ConfigError, Settings};

    fn resolve(config: &str) -> Result<Settings, ConfigError> {
        crate::config::resolve_file_for_test(config)
    }

    #[test]
    fn a_compaction_table_sets_the_policy_and_config_show_prints_it() {
        let s = resolve("[compaction]\nthreshold = 0.9\nkeep_recent = 0.1\n").unwrap();
        assert_eq!(s.compaction.threshold_ratio, 0.9);
        assert_eq!(s.compaction.retain_ratio, 0.1);
        assert!(
            s.render(&|_| None)
                .contains("compaction: at 90% of the window, keeping the newest 10% verbatim")
        );
    }

    #[test]
    fn without_a_compaction_table_the_defaults_hold() {
        let s = resolve("").unwrap();
        assert_eq!(s.compaction, dsh_compaction::CompactionConfig::default());
    }

    #[test]
    fn an_impossible_policy_is_refused_where_it_is_written() {
        let e = resolve("[compaction]\nthreshold = 1.5\n").unwrap_err();
        let e = format!("{e:#}");
        assert!(e.contains("config.toml:2:13"), "{e}");
        assert!(e.contains("compaction.threshold"), "{e}");
        let e = format!(
            "{:#}",
            resolve("[compaction]\nthreshold = 0.5\nkeep_recent = 0.6\n").unwrap_err()
        );
        assert!(e.contains("config.toml:3:15"), "{e}");
        assert!(e.contains("below the threshold (0.5)"), "{e}");
        let e = format!(
            "{:#}",
            resolve("[compaction]\nthreshhold = 0.9\n").unwrap_err()
        );
        assert!(e.contains("threshhold"), "an unknown key is named: {e}");
    }
}
