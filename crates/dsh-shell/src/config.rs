//! Executor-wide settings of the local provider.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::ShellError;

/// Settings of a [`LocalShellExecutor`](crate::LocalShellExecutor).
///
/// They are fixed for the executor's life so that every task it starts is bounded the same way:
/// how long a foreground command may run, how much output is kept in memory, how much may go to
/// a spill file, and how long a command gets to clean up after SIGTERM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellConfig {
    /// Workdir used when a request names none; `None` means the process's current directory,
    /// read at resolve time.
    pub default_workdir: Option<PathBuf>,
    /// Foreground timeout used when a request names none.
    pub default_timeout: Duration,
    /// Upper bound for a requested foreground timeout; larger requests are clamped, not refused,
    /// so a model asking for "a long time" still gets a bounded run.
    pub max_timeout: Duration,
    /// Size of the in-memory tail kept per stream (stdout and stderr each).
    pub max_output_bytes: usize,
    /// Largest spill file per stream; a stream that outgrows it loses its spill file rather than
    /// filling the disk.
    pub max_spill_bytes: u64,
    /// Time between SIGTERM and SIGKILL in the kill ladder.
    pub grace: Duration,
    /// Further variables never passed to commands, whatever they are called. The secret scrub
    /// goes by name (`KEY`, `SECRET`, `TOKEN`, `PASSWORD`); a front end adds the variables it
    /// knows hold credentials (a provider's configured key variable) so that a key kept under
    /// an innocent name still stays out of model-written commands.
    pub hidden_env: Vec<String>,
    /// Where the executor keeps its private scratch directory (spill files): a directory of
    /// its own, mode 0700, is made inside on first use. dsh passes `$DSH_HOME/scratch`, which
    /// no sandboxed command may write; `None` uses `$XDG_RUNTIME_DIR`, else the system temp
    /// dir. Files are created through the directory's descriptor, never by path, so renaming
    /// the directory and planting a symlink in its place redirects nothing.
    pub scratch_dir: Option<PathBuf>,
}

impl Default for ShellConfig {
    fn default() -> Self {
        Self {
            default_workdir: None,
            default_timeout: Duration::from_secs(120),
            max_timeout: Duration::from_secs(600),
            max_output_bytes: 64 * 1024,
            max_spill_bytes: 64 * 1024 * 1024,
            grace: Duration::from_secs(3),
            hidden_env: Vec::new(),
            scratch_dir: None,
        }
    }
}

impl ShellConfig {
    /// Checks that the settings describe a working executor.
    ///
    /// Called by [`LocalShellExecutor::new`](crate::LocalShellExecutor::new) so a bad config
    /// fails at load time, not on the first command.
    pub fn validate(&self) -> Result<(), ShellError> {
        let invalid = |msg: String| Err(ShellError::InvalidConfig(msg));
        if self.default_timeout.is_zero() {
            return invalid("default_timeout must be positive".into());
        }
        if self.max_timeout.is_zero() {
            return invalid("max_timeout must be positive".into());
        }
        if self.default_timeout > self.max_timeout {
            return invalid(format!(
                "default_timeout ({:?}) exceeds max_timeout ({:?})",
                self.default_timeout, self.max_timeout
            ));
        }
        if self.max_output_bytes == 0 {
            return invalid("max_output_bytes must be positive".into());
        }
        if self.max_spill_bytes < self.max_output_bytes as u64 {
            return invalid(format!(
                "max_spill_bytes ({}) is smaller than max_output_bytes ({}), so no spill file \
                 could ever hold a truncated stream",
                self.max_spill_bytes, self.max_output_bytes
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_config_is_valid() {
        ShellConfig::default().validate().unwrap();
    }

    #[test]
    fn zero_timeouts_are_rejected() {
        for config in [
            ShellConfig {
                default_timeout: Duration::ZERO,
                ..ShellConfig::default()
            },
            ShellConfig {
                max_timeout: Duration::ZERO,
                ..ShellConfig::default()
            },
        ] {
            let err = config.validate().unwrap_err();
            assert!(matches!(err, ShellError::InvalidConfig(_)), "{err}");
        }
    }

    #[test]
    fn default_timeout_above_cap_is_rejected() {
        let config = ShellConfig {
            default_timeout: Duration::from_secs(700),
            ..ShellConfig::default()
        };
        let err = config.validate().unwrap_err();
        assert!(err.to_string().contains("exceeds max_timeout"), "{err}");
    }

    #[test]
    fn output_limits_must_be_usable() {
        let zero_tail = ShellConfig {
            max_output_bytes: 0,
            ..ShellConfig::default()
        };
        assert!(zero_tail.validate().is_err());
        let tiny_spill = ShellConfig {
            max_output_bytes: 1000,
            max_spill_bytes: 999,
            ..ShellConfig::default()
        };
        assert!(tiny_spill.validate().is_err());
    }
}
