//! Terminals through the editor: the [`ShellExecutor`] route of a session whose client
//! offered `terminal`.
//!
//! A foreground `bash` call runs as `bash -c <command>` in a terminal the editor creates
//! (`terminal/create`), which the call's card embeds so the person watches it live; the
//! executor waits for it (`terminal/wait_for_exit`) under the same timeout the local executor
//! applies, kills it (`terminal/kill`) on timeout, cancellation or disposal, reads its bounded
//! output (`terminal/output`, limited to the local executor's per-stream bound) and always
//! releases it (`terminal/release`): a terminal belongs to the one run that created it and
//! never outlives it. Everything else — defaults and bounds (`resolve`), background tasks
//! with their owners and notices — is the local executor's, so `bash_output`/`bash_kill` and
//! task ownership work exactly as without an editor.
//!
//! What dsh cannot enforce there: the editor spawns the process, with its own environment and
//! outside any sandbox dsh would set up for its own children. The secret scrub is applied as
//! far as dsh can see it: the editor started `dsh acp` with its environment, so every variable
//! dsh's own environment holds that the local executor would remove is unset for the command
//! (`env -u NAME … bash -c …`); a variable only the editor's terminal adds is beyond reach.
//! The approval policy and the session modes still apply, before the call runs.

use std::collections::HashMap;
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    CreateTerminalRequest, EnvVariable, KillTerminalRequest, ReleaseTerminalRequest, SessionUpdate,
    Terminal, TerminalExitStatus, TerminalId, TerminalOutputRequest, ToolCallContent, ToolCallId,
    ToolCallUpdate, ToolCallUpdateFields, WaitForTerminalExitRequest,
};
use async_trait::async_trait;
use dsh_session::CallId;
use dsh_shell::{
    CapturedOutput, ShellConfig, ShellError, ShellExecRequest, ShellExecSpec, ShellExecutor,
    ShellRunResult, TaskDone, TaskId, TaskInfo, TaskOutput,
};
use parking_lot::Mutex;
use std::sync::{Arc, Weak};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::record::{SessionState, wire_id};

/// How long a killed terminal gets to report its exit before its output is read anyway.
const KILL_GRACE: Duration = Duration::from_secs(5);

/// Which call is running in which editor terminal: the card of the call embeds the terminal
/// while it runs and keeps it when the result arrives.
#[derive(Default)]
pub(crate) struct TerminalCards {
    running: Mutex<Option<CallId>>,
    shown: Mutex<HashMap<CallId, TerminalId>>,
}

impl TerminalCards {
    /// Call `call` of the session started its body. Exclusive tools (`bash`) never overlap
    /// another call of the same agent, so the latest start is the one a terminal belongs to.
    pub(crate) fn started(&self, call: &CallId) {
        *self.running.lock() = Some(call.clone());
    }

    /// Call `call` finished its body.
    pub(crate) fn finished(&self, call: &CallId) {
        let mut running = self.running.lock();
        if running.as_ref() == Some(call) {
            *running = None;
        }
    }

    fn attach(&self, terminal: &TerminalId) -> Option<CallId> {
        let call = self.running.lock().clone()?;
        self.shown.lock().insert(call.clone(), terminal.clone());
        Some(call)
    }

    /// The terminal call `call` ran in, once: its result card shows the terminal again.
    pub(crate) fn take(&self, call: &CallId) -> Option<TerminalId> {
        self.shown.lock().remove(call)
    }
}

/// The card content that embeds `terminal`.
pub(crate) fn terminal_content(terminal: TerminalId) -> ToolCallContent {
    ToolCallContent::Terminal(Terminal::new(terminal))
}

/// The executor of one session whose editor runs its foreground commands.
pub(crate) struct EditorTerminals {
    /// The process's own executor: defaults, bounds, background tasks.
    pub(crate) local: Arc<dyn ShellExecutor>,
    pub(crate) state: Weak<SessionState>,
    /// Per-stream bound of the output kept, as the local executor's default.
    pub(crate) output_limit: u64,
    /// Inherited variables the command must not see (see the module docs).
    scrubbed: Vec<String>,
    pub(crate) disposed: CancellationToken,
}

impl EditorTerminals {
    /// A route for the session of `state`, delegating all but foreground runs to `local`.
    pub(crate) fn new(local: Arc<dyn ShellExecutor>, state: &Arc<SessionState>) -> Self {
        Self {
            local,
            state: Arc::downgrade(state),
            output_limit: ShellConfig::default().max_output_bytes as u64,
            scrubbed: scrubbed_names(),
            disposed: CancellationToken::new(),
        }
    }
}

/// The names in this process's environment that the local executor keeps from commands.
fn scrubbed_names() -> Vec<String> {
    let mut names: Vec<String> = std::env::vars_os()
        .map(|(name, _)| name)
        .filter(|name| dsh_shell::env::is_scrubbed(name))
        .filter_map(|name| name.into_string().ok())
        .collect();
    names.sort();
    names
}

/// The program and arguments that run `script` with `scrubbed` unset.
fn command_line(script: &str, scrubbed: &[String]) -> (String, Vec<String>) {
    let bash = ["bash".to_owned(), "-c".to_owned(), script.to_owned()];
    if scrubbed.is_empty() {
        return (bash[0].clone(), bash[1..].to_vec());
    }
    let mut args: Vec<String> = scrubbed
        .iter()
        .flat_map(|name| ["-u".to_owned(), name.clone()])
        .collect();
    args.extend(bash);
    ("env".to_owned(), args)
}

fn client_failure(what: &'static str, error: &agent_client_protocol::Error) -> ShellError {
    ShellError::Spawn {
        what,
        source: std::io::Error::other(format!("the editor refused: {}", error.message)),
    }
}

/// Why the wait for a terminal ended.
enum Ended {
    Exited(TerminalExitStatus),
    /// The editor failed the wait; the output may still say how it ended.
    Unknown,
    TimedOut,
    Aborted,
}

impl EditorTerminals {
    /// Waits for the terminal under the timeout, the cancellation and disposal; a run that is
    /// stopped is killed and given [`KILL_GRACE`] to report its exit.
    async fn wait(
        &self,
        state: &SessionState,
        terminal: &TerminalId,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Ended {
        let wait = state
            .conn
            .send_request(WaitForTerminalExitRequest::new(
                wire_id(&state.id),
                terminal.clone(),
            ))
            .block_task();
        tokio::pin!(wait);
        let ended = tokio::select! {
            exited = &mut wait => return match exited {
                Ok(response) => Ended::Exited(response.exit_status),
                Err(error) => {
                    tracing::debug!(session = %state.id, %error, "terminal/wait_for_exit failed");
                    Ended::Unknown
                }
            },
            () = tokio::time::sleep(timeout) => Ended::TimedOut,
            () = cancel.cancelled() => Ended::Aborted,
            () = self.disposed.cancelled() => Ended::Aborted,
        };
        let kill = KillTerminalRequest::new(wire_id(&state.id), terminal.clone());
        if let Err(error) = state.conn.send_request(kill).block_task().await {
            tracing::debug!(session = %state.id, %error, "terminal/kill failed");
        }
        // Bounded: an editor that never reports the exit must not hold the turn.
        let _ = tokio::time::timeout(KILL_GRACE, &mut wait).await;
        ended
    }

    async fn drive(
        &self,
        state: &SessionState,
        terminal: &TerminalId,
        spec: &ShellExecSpec,
        cancel: &CancellationToken,
    ) -> ShellRunResult {
        let ended = self.wait(state, terminal, spec.timeout, cancel).await;
        let output = state
            .conn
            .send_request(TerminalOutputRequest::new(
                wire_id(&state.id),
                terminal.clone(),
            ))
            .block_task()
            .await;
        let (text, truncated, reported) = match output {
            Ok(o) => (o.output, o.truncated, o.exit_status),
            Err(error) => (
                format!("(the editor did not return the output: {})", error.message),
                false,
                None,
            ),
        };
        let (status, timed_out, aborted) = match ended {
            Ended::Exited(status) => (Some(status), false, false),
            Ended::Unknown => (reported, false, false),
            Ended::TimedOut => (reported, true, false),
            Ended::Aborted => (reported, false, true),
        };
        let (exit_code, signal) = match status {
            Some(s) => (s.exit_code.and_then(|c| i32::try_from(c).ok()), s.signal),
            None => (None, None),
        };
        ShellRunResult {
            exit_code,
            signal,
            timed_out,
            aborted,
            timeout: spec.timeout,
            stdout: CapturedOutput {
                text,
                truncated,
                spill_path: None,
            },
            stderr: CapturedOutput::default(),
        }
    }
}

#[async_trait]
impl ShellExecutor for EditorTerminals {
    fn resolve(&self, req: ShellExecRequest) -> Result<ShellExecSpec, ShellError> {
        self.local.resolve(req)
    }

    async fn run(&self, spec: ShellExecSpec) -> Result<ShellRunResult, ShellError> {
        if self.disposed.is_cancelled() {
            return Err(ShellError::Disposed);
        }
        let cancel = spec.cancel.clone().unwrap_or_default();
        if cancel.is_cancelled() {
            return Err(ShellError::Cancelled);
        }
        let Some(state) = self.state.upgrade() else {
            return Err(ShellError::Disposed);
        };
        let env = spec
            .env
            .iter()
            .map(|(name, value)| EnvVariable::new(name.clone(), value.clone()))
            .collect();
        let (program, args) = command_line(&spec.command, &self.scrubbed);
        let create = CreateTerminalRequest::new(wire_id(&state.id), program)
            .args(args)
            .env(env)
            .cwd(spec.workdir.clone())
            .output_byte_limit(self.output_limit);
        let terminal = state
            .conn
            .send_request(create)
            .block_task()
            .await
            .map_err(|e| client_failure("a terminal in the editor", &e))?
            .terminal_id;
        if let Some(call) = state.terminals.attach(&terminal) {
            state
                .updates
                .update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                    ToolCallId::new(call.as_str()),
                    ToolCallUpdateFields::new().content(vec![terminal_content(terminal.clone())]),
                )));
        }
        // From here the terminal is this run's: it is released on every path.
        let result = self.drive(&state, &terminal, &spec, &cancel).await;
        let release = ReleaseTerminalRequest::new(wire_id(&state.id), terminal.clone());
        if let Err(error) = state.conn.send_request(release).block_task().await {
            tracing::debug!(session = %state.id, %error, "terminal/release failed");
        }
        Ok(result)
    }

    async fn start(&self, spec: ShellExecSpec) -> Result<TaskId, ShellError> {
        self.local.start(spec).await
    }

    fn read_output(&self, id: &TaskId) -> Result<TaskOutput, ShellError> {
        self.local.read_output(id)
    }

    fn kill(&self, id: &TaskId) -> Result<bool, ShellError> {
        self.local.kill(id)
    }

    fn list(&self) -> Vec<TaskInfo> {
        self.local.list()
    }

    fn owner_of(&self, id: &TaskId) -> Option<String> {
        self.local.owner_of(id)
    }

    fn release_owner(&self, owner: &str) -> usize {
        self.local.release_owner(owner)
    }

    fn subscribe(&self) -> broadcast::Receiver<TaskDone> {
        self.local.subscribe()
    }

    /// Stops this session's editor runs (each kills and releases its terminal); the local
    /// executor is the process's and is left alone.
    async fn dispose(&self) {
        self.disposed.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrubbed_variables_are_unset_before_bash_runs_the_script() {
        assert_eq!(
            command_line("echo hi", &[]),
            (
                "bash".to_owned(),
                vec!["-c".to_owned(), "echo hi".to_owned()]
            )
        );
        let (program, args) = command_line("echo hi", &["A_KEY".to_owned(), "B_TOKEN".to_owned()]);
        assert_eq!(program, "env");
        assert_eq!(
            args,
            ["-u", "A_KEY", "-u", "B_TOKEN", "bash", "-c", "echo hi"]
        );
    }
}
