//! The caller-facing request and its resolved, fully explicit form.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::config::ShellConfig;
use crate::error::ShellError;
use crate::live::LiveOutput;

/// What a caller (usually the bash tool) asks for; every field but `command` may be left out.
///
/// Kept separate from [`ShellExecSpec`] so defaults and clamps are applied in exactly one place,
/// [`ShellExecutor::resolve`](crate::ShellExecutor::resolve).
#[derive(Debug, Clone, Default)]
pub struct ShellExecRequest {
    /// The script handed to `bash -c`.
    pub command: String,
    /// Where to run; relative paths are taken relative to the executor's default workdir.
    pub workdir: Option<PathBuf>,
    /// Foreground timeout; clamped to the executor's maximum; zero is an error. Background tasks
    /// have no timeout.
    pub timeout: Option<Duration>,
    /// Extra environment variables, applied after the secret scrub and the fixed overlay. For
    /// trusted callers only (the tool sets `DSH_SESSION_ID` and friends here; the model cannot).
    pub env: Vec<(String, String)>,
    /// Opaque owner token stored with a background task (the bash tool stamps the calling
    /// agent's session id). The executor never interprets it.
    pub owner: Option<String>,
    /// Stops the command (kill ladder) when cancelled; a token that is already cancelled makes
    /// `run`/`start` refuse without spawning anything.
    pub cancel: Option<CancellationToken>,
    /// Run this one command outside the sandbox (an approved escalation); it is still
    /// contained. Meaningless without a [`Supervision`](crate::Supervision).
    pub unconfined: bool,
    /// The session's workspace (writable under a confining sandbox), when known; a command's
    /// `workdir` never widens what it may write.
    pub workspace: Option<PathBuf>,
    /// The calling session's id, when known: a [`Supervision`](crate::Supervision) may
    /// confine one session's commands more narrowly than the rest (a session in plan mode
    /// runs them read-only). Set by trusted callers only (the tool stamps its caller's).
    pub session: Option<String>,
    /// What the command reads on its standard input, through a pipe; `None` is `/dev/null`.
    /// Hooks get their event this way, as Claude Code's do: nothing of it is ever on disk.
    pub stdin: Option<Vec<u8>>,
    /// The command comes from a source the user has not trusted (a workspace's hooks): it
    /// runs sandboxed even when the session's mode is `danger-full-access` (`workspace-write`
    /// at most). Meaningless without a [`Supervision`](crate::Supervision).
    pub untrusted: bool,
    /// Fed the output of a foreground run as it arrives (a front end shows it live); the
    /// result is the same with or without it. Ignored by background tasks, whose output is
    /// read with [`read_output`](crate::ShellExecutor::read_output).
    pub live: Option<LiveOutput>,
}

impl ShellExecRequest {
    /// A request for `command` with every other field left to the executor's defaults.
    pub fn new(command: impl Into<String>) -> Self {
        Self {
            command: command.into(),
            ..Self::default()
        }
    }
}

/// A request with every default filled in and every bound applied: what will actually run.
///
/// There is deliberately no `Default`: `owner` is a required-but-nullable field, so code that
/// builds a spec by hand has to write `owner: None` and a forgotten owner is visible in review
/// (seed decision 3).
#[derive(Debug, Clone)]
pub struct ShellExecSpec {
    /// The script handed to `bash -c`.
    pub command: String,
    /// Absolute working directory.
    pub workdir: PathBuf,
    /// Foreground timeout (ignored by `start`).
    pub timeout: Duration,
    /// Extra environment variables, applied last.
    pub env: Vec<(String, String)>,
    /// Owner token of a background task; see [`ShellExecutor::owner_of`](crate::ShellExecutor::owner_of).
    pub owner: Option<String>,
    /// Cancellation of this command.
    pub cancel: Option<CancellationToken>,
    /// Run this one command outside the sandbox (an approved escalation); it is still
    /// contained. Meaningless without a [`Supervision`](crate::Supervision).
    pub unconfined: bool,
    /// The session's workspace (writable under a confining sandbox), when known; a command's
    /// `workdir` never widens what it may write.
    pub workspace: Option<PathBuf>,
    /// The calling session's id, when known (see [`ShellExecRequest::session`]).
    pub session: Option<String>,
    /// The command's standard input (`/dev/null` when `None`).
    pub stdin: Option<Vec<u8>>,
    /// Sandboxed whatever the session's mode (see [`ShellExecRequest::untrusted`]).
    pub untrusted: bool,
    /// Fed the output of a foreground run as it arrives (ignored by `start`).
    pub live: Option<LiveOutput>,
}

/// Applies `config` to `req`: the shared implementation behind
/// [`ShellExecutor::resolve`](crate::ShellExecutor::resolve) for providers built on this
/// crate's config.
pub fn resolve_request(
    config: &ShellConfig,
    req: ShellExecRequest,
) -> Result<ShellExecSpec, ShellError> {
    let timeout = match req.timeout {
        None => config.default_timeout,
        Some(t) if t.is_zero() => return Err(ShellError::ZeroTimeout),
        Some(t) => t.min(config.max_timeout),
    };
    for (name, _) in &req.env {
        check_env_name(name)?;
    }
    let workdir = resolve_workdir(config, req.workdir.as_deref())?;
    Ok(ShellExecSpec {
        command: req.command,
        workdir,
        timeout,
        env: req.env,
        owner: req.owner,
        cancel: req.cancel,
        unconfined: req.unconfined,
        workspace: req.workspace,
        session: req.session,
        stdin: req.stdin,
        untrusted: req.untrusted,
        live: req.live,
    })
}

/// Request workdir, else configured workdir, else the process's current directory; relative
/// request paths hang off the default.
fn resolve_workdir(config: &ShellConfig, requested: Option<&Path>) -> Result<PathBuf, ShellError> {
    if let Some(path) = requested
        && path.is_absolute()
    {
        return Ok(path.to_path_buf());
    }
    let base = match &config.default_workdir {
        Some(dir) if dir.is_absolute() => dir.clone(),
        Some(dir) => current_dir()?.join(dir),
        None => current_dir()?,
    };
    Ok(match requested {
        Some(relative) => base.join(relative),
        None => base,
    })
}

fn current_dir() -> Result<PathBuf, ShellError> {
    std::env::current_dir().map_err(ShellError::NoDefaultWorkdir)
}

fn check_env_name(name: &str) -> Result<(), ShellError> {
    let reason = if name.is_empty() {
        "the name is empty"
    } else if name.contains('=') {
        "the name contains '='"
    } else if name.contains('\0') {
        "the name contains a NUL byte"
    } else {
        return Ok(());
    };
    Err(ShellError::InvalidEnv {
        name: name.to_owned(),
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_in(dir: &str) -> ShellConfig {
        ShellConfig {
            default_workdir: Some(dir.into()),
            ..ShellConfig::default()
        }
    }

    #[test]
    fn missing_timeout_gets_the_default() {
        let spec = resolve_request(&ShellConfig::default(), ShellExecRequest::new("true")).unwrap();
        assert_eq!(spec.timeout, Duration::from_secs(120));
    }

    #[test]
    fn timeout_is_capped_at_the_maximum() {
        let req = ShellExecRequest {
            timeout: Some(Duration::from_secs(3600)),
            ..ShellExecRequest::new("true")
        };
        let spec = resolve_request(&ShellConfig::default(), req).unwrap();
        assert_eq!(spec.timeout, Duration::from_secs(600));
    }

    #[test]
    fn zero_timeout_is_an_error() {
        let req = ShellExecRequest {
            timeout: Some(Duration::ZERO),
            ..ShellExecRequest::new("true")
        };
        let err = resolve_request(&ShellConfig::default(), req).unwrap_err();
        assert!(matches!(err, ShellError::ZeroTimeout));
    }

    #[test]
    fn workdir_prefers_request_then_config_then_cwd() {
        let req = ShellExecRequest {
            workdir: Some("/srv".into()),
            ..ShellExecRequest::new("x")
        };
        assert_eq!(
            resolve_request(&config_in("/tmp"), req).unwrap().workdir,
            Path::new("/srv")
        );

        let spec = resolve_request(&config_in("/tmp"), ShellExecRequest::new("x")).unwrap();
        assert_eq!(spec.workdir, Path::new("/tmp"));

        let spec = resolve_request(&ShellConfig::default(), ShellExecRequest::new("x")).unwrap();
        assert_eq!(spec.workdir, std::env::current_dir().unwrap());
    }

    #[test]
    fn relative_workdir_hangs_off_the_default() {
        let req = ShellExecRequest {
            workdir: Some("sub/dir".into()),
            ..ShellExecRequest::new("x")
        };
        let spec = resolve_request(&config_in("/tmp"), req).unwrap();
        assert_eq!(spec.workdir, Path::new("/tmp/sub/dir"));
    }

    #[test]
    fn owner_and_env_pass_through_unchanged() {
        let req = ShellExecRequest {
            owner: Some(String::new()),
            env: vec![("DSH_SESSION_ID".into(), "s1".into())],
            ..ShellExecRequest::new("x")
        };
        let spec = resolve_request(&ShellConfig::default(), req).unwrap();
        assert_eq!(spec.owner.as_deref(), Some(""));
        assert_eq!(
            spec.env,
            vec![("DSH_SESSION_ID".to_owned(), "s1".to_owned())]
        );
    }

    #[test]
    fn unusable_env_names_are_rejected_by_name() {
        for bad in ["", "A=B", "NUL\0"] {
            let req = ShellExecRequest {
                env: vec![(bad.into(), "v".into())],
                ..ShellExecRequest::new("x")
            };
            let err = resolve_request(&ShellConfig::default(), req).unwrap_err();
            assert!(
                matches!(err, ShellError::InvalidEnv { ref name, .. } if name == bad),
                "{err}"
            );
        }
    }
}
