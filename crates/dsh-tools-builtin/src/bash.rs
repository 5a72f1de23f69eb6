//! The `bash` tool: one fresh `bash -c` per call through the `ShellExecutor` service, in the
//! foreground under a timeout or in the background as an owned task.

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use dsh_kernel::Context;
use dsh_shell::{LiveOutput, ShellError, ShellExecRequest};
use dsh_tools::{
    ToolCallContext, ToolCallResult, ToolEffects, ToolError, ToolOutput, ToolPresentation,
    TypedTool,
};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::fence::{executor, token_of};
use crate::path::{non_empty, normalize};
use crate::render::{exit_of, render_run, stopped_run};

const DESCRIPTION: &str = "\
Runs a shell command with `bash -c` and returns what it printed.

- Every call starts a fresh `bash -c` process: the working directory, shell variables and \
functions do not carry over between calls. Set `workdir` instead of running `cd` (a relative \
workdir is resolved against the session's working directory).
- A command that exits non-zero ends its result with `[exit code: N]`; one ended by a signal \
ends with `[killed by signal: SIG]`; no marker means exit code 0. Check the marker on every \
result.
- stderr follows stdout after a `[stderr]` line. `(no output)` means the command printed \
nothing.
- `timeout_ms` bounds a foreground command (the executor applies a default and a maximum); a \
command that hits it is stopped and its result says `[timed out after Nms]`.
- Long output keeps only its last part; the result then says `[output truncated; full output: \
<file>]`, and that file holds all of it (read it with `read` or `tail`).
- The command sees `DSH_SHELL=1` and `DSH_SESSION_ID` (this session's id); inherited variables \
that look like credentials are removed.
- For servers, watchers and other long-running commands set `run_in_background: true`: the call \
returns `started background task <id>` at once and the task runs without a timeout (it is \
stopped when this session ends). Read its new output with `bash_output(task_id)` and stop it \
with `bash_kill(task_id)`; you are told when it finishes.
- Commands may run in a sandbox that limits where they can write (and whether they reach the \
network): a write it blocks fails with `Permission denied`. To run one command outside it, set \
`escalate: true` with a `justification`; the user decides.
- Prefer the `read`, `write`, `edit`, `glob` and `grep` tools to `cat`, `sed`, `find` and \
`grep` here.";

/// Arguments of `bash`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct BashArgs {
    /// The command line, run as `bash -c <command>`.
    pub command: String,
    /// What the command does, in 5-10 words of active voice (shown to the user; does not
    /// affect execution).
    pub description: String,
    /// Foreground timeout in milliseconds (positive). Ignored for background tasks.
    #[serde(default)]
    pub timeout_ms: Option<f64>,
    /// Directory to run in; relative paths are resolved against the session's working
    /// directory.
    #[serde(default)]
    pub workdir: Option<String>,
    /// Start the command as a background task and return its id at once.
    #[serde(default)]
    pub run_in_background: bool,
    /// Ask to run this one command outside the sandbox (it needs to write outside the
    /// writable roots, or the network while it is off). Requires `justification`; the user is
    /// asked, and where nobody can be asked the call is refused with the reason.
    #[serde(default)]
    pub escalate: bool,
    /// Why the command must run outside the sandbox, shown verbatim to the user.
    #[serde(default)]
    pub justification: Option<String>,
}

/// The `bash` tool. Exclusive: a command may change anything, so no other call overlaps it.
#[derive(Debug, Clone)]
pub struct BashTool {
    ctx: Context,
}

impl BashTool {
    /// A tool that finds the `dyn ShellExecutor` service through `ctx` at each call.
    pub fn new(ctx: Context) -> Self {
        Self { ctx }
    }
}

/// `invalid timeout_ms` unless the value is a positive finite number of milliseconds.
///
/// A value too large for a `Duration` (`1e300`) means "as long as allowed": the executor caps
/// every timeout at its maximum anyway, and `Duration::from_secs_f64` would panic on it.
fn timeout_of(ms: Option<f64>) -> Result<Option<Duration>, ToolError> {
    match ms {
        None => Ok(None),
        Some(ms) if ms.is_finite() && ms > 0.0 => Ok(Some(
            Duration::try_from_secs_f64(ms / 1000.0).unwrap_or(Duration::MAX),
        )),
        Some(ms) => Err(ToolError::new(format!(
            "invalid timeout_ms: expected a positive number, got {ms}"
        ))),
    }
}

/// Explicit absolute wins; a relative workdir hangs off the session cwd; none means the
/// session cwd; without a session the executor's default applies (a relative workdir then
/// hangs off that default).
fn workdir_of(
    requested: Option<&str>,
    call: &ToolCallContext,
) -> Result<Option<PathBuf>, ToolError> {
    let session_cwd = call.caller().and_then(|c| c.cwd.clone());
    let requested = match requested {
        Some(dir) => Some(PathBuf::from(non_empty("workdir", dir)?)),
        None => None,
    };
    Ok(match (requested, session_cwd) {
        (Some(dir), _) if dir.is_absolute() => Some(normalize(&dir)),
        (Some(dir), Some(cwd)) => Some(normalize(&cwd.join(dir))),
        (Some(dir), None) => Some(dir),
        (None, cwd) => cwd,
    })
}

/// The managed `DSH_*` facts the command may rely on; set after the executor's scrub, so an
/// inherited `DSH_SESSION_ID` of an outer dsh can never leak in.
fn managed_env(call: &ToolCallContext) -> Vec<(String, String)> {
    let mut env = vec![("DSH_SHELL".to_owned(), "1".to_owned())];
    if let Some(caller) = call.caller() {
        env.push(("DSH_SESSION_ID".to_owned(), caller.agent_id.to_string()));
    }
    // The guard's supervision tells the network proxy which call a command's requests belong
    // to by it, so a host the proxy refuses is reported in this call's result.
    env.push(("DSH_CALL_ID".to_owned(), call.call_id().as_str().to_owned()));
    env
}

fn shell_failure(error: ShellError) -> ToolError {
    match error {
        ShellError::Cancelled => ToolError::aborted(),
        ShellError::Refused { code, message } => ToolError::coded("SandboxError", code, message),
        other => ToolError::new(other.to_string()),
    }
}

#[async_trait]
impl TypedTool for BashTool {
    type Args = BashArgs;

    fn name(&self) -> &str {
        "bash"
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn effects(&self, args: &BashArgs) -> ToolEffects {
        let runs = ToolEffects::none().runs(args.command.as_str());
        if args.escalate {
            runs.escalated(args.justification.as_deref().unwrap_or("").trim())
        } else {
            runs
        }
    }

    async fn run(&self, args: BashArgs, call: &ToolCallContext) -> Result<ToolOutput, ToolError> {
        non_empty("command", &args.command)?;
        non_empty("description", &args.description)?;
        let timeout = timeout_of(args.timeout_ms)?;
        let workdir = workdir_of(args.workdir.as_deref(), call)?;
        let executor = executor(&self.ctx, call.caller())?;
        let background = args.run_in_background;
        // A foreground command's output is shown while it runs (the live feed); a background
        // task's is read with `bash_output`.
        let live = if background { None } else { call.live_output() };
        let request = ShellExecRequest {
            command: args.command,
            workdir,
            timeout: if background { None } else { timeout },
            env: managed_env(call),
            owner: if background {
                token_of(call.caller())
            } else {
                None
            },
            // A background task outlives the call that started it: only `bash_kill`, its own
            // end or the executor's disposal stop it.
            cancel: (!background).then(|| call.cancel().clone()),
            // The guard's pre-execute policy only lets an escalation through once approved.
            unconfined: args.escalate,
            workspace: call.caller().and_then(|c| c.cwd.clone()),
            // The guard may confine one session more narrowly (plan mode: read-only).
            session: call.caller().map(|c| c.agent_id.to_string()),
            stdin: None,
            untrusted: false,
            live: live.as_ref().map(|feed| {
                let push = feed.pusher();
                LiveOutput::new(move |chunk| push.push(chunk))
            }),
        };
        let spec = executor.resolve(request).map_err(shell_failure)?;
        if background {
            // Checked before spawning so a cancelled call never leaves a task behind.
            if call.is_cancelled() {
                return Err(ToolError::aborted());
            }
            let id = executor.start(spec).await.map_err(shell_failure)?;
            return Ok(ToolOutput::text(format!("started background task {id}")));
        }
        let result = executor.run(spec).await;
        if let Some(feed) = live {
            // Every live update is out before the result is.
            feed.finish().await;
        }
        let result = result.map_err(shell_failure)?;
        if result.aborted {
            let error = if call.is_cancelled() {
                ToolError::aborted()
            } else {
                ToolError::new(
                    "the command was stopped because the shell executor is shutting down",
                )
            };
            return Err(stopped_run(error, &result));
        }
        Ok(ToolOutput::text(render_run(&result)))
    }

    fn present_call(&self, args: &BashArgs) -> Option<ToolPresentation> {
        Some(ToolPresentation::Terminal {
            command: args.command.clone(),
            output: None,
            exit: None,
        })
    }

    fn present_result(&self, args: &BashArgs, result: &ToolCallResult) -> Option<ToolPresentation> {
        let text = result.text();
        let exit = if result.is_error || args.run_in_background {
            None
        } else {
            exit_of(&text)
        };
        Some(ToolPresentation::Terminal {
            command: args.command.clone(),
            output: Some(text),
            exit,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_must_be_positive_and_finite() {
        assert_eq!(timeout_of(None).unwrap(), None);
        assert_eq!(
            timeout_of(Some(1500.0)).unwrap(),
            Some(Duration::from_millis(1500))
        );
        for bad in [0.0, -1.0, f64::INFINITY, f64::NAN] {
            let err = timeout_of(Some(bad)).unwrap_err();
            assert!(
                err.message
                    .starts_with("invalid timeout_ms: expected a positive number, got"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_timeout_too_large_for_a_duration_is_the_longest_one_not_a_panic() {
        assert_eq!(timeout_of(Some(1e300)).unwrap(), Some(Duration::MAX));
        assert_eq!(timeout_of(Some(f64::MAX)).unwrap(), Some(Duration::MAX));
    }
}
