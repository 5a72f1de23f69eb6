//! The vocabulary of background tasks: ids, statuses, reads and completion notices.

use std::fmt;
use std::path::PathBuf;

/// Identifies a background task within one executor (`bash-1`, `bash-2`, ...).
///
/// Ids come from a per-executor counter, so they are predictable: knowing an id grants nothing.
/// The owner fence in the bash tools (see [`ShellExecutor::owner_of`](crate::ShellExecutor::owner_of))
/// is the security boundary, not the id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId(String);

impl TaskId {
    /// Wraps an id given by a caller (for instance the model's `task_id` argument). Any string is
    /// accepted; an id this executor never issued is answered with
    /// [`ShellError::UnknownTask`](crate::ShellError::UnknownTask).
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// The id as text, for rendering to the model.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for TaskId {
    fn from(id: &str) -> Self {
        Self::new(id)
    }
}

impl From<String> for TaskId {
    fn from(id: String) -> Self {
        Self(id)
    }
}

/// Where a background task is in its life.
///
/// There is no "failed": a task that could not spawn never gets an id, and anything that ends by
/// a signal, or was stopped by [`kill`](crate::ShellExecutor::kill), cancellation or disposal,
/// is `Killed` so the model is never told a stopped command "completed".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskStatus {
    /// The command's `bash` has not been reaped yet.
    Running,
    /// `bash` exited on its own with this code.
    Completed {
        /// The exit code, `0` for success.
        exit_code: i32,
    },
    /// The task ended by a signal (its own or ours) or was stopped on request.
    Killed {
        /// The terminating signal, e.g. `"SIGTERM"`; `None` when the task was stopped on request
        /// but its `bash` still exited with a code (for instance a trapped SIGTERM).
        signal: Option<String>,
    },
}

impl TaskStatus {
    /// Whether the task is still running, which is when [`kill`](crate::ShellExecutor::kill)
    /// can still do something.
    pub fn is_running(&self) -> bool {
        matches!(self, TaskStatus::Running)
    }
}

/// One row of [`list`](crate::ShellExecutor::list).
///
/// Deliberately carries no owner: [`owner_of`](crate::ShellExecutor::owner_of) is the single
/// read path for the owner token (seed decision 3), so there is one place to audit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskInfo {
    /// The task's id.
    pub id: TaskId,
    /// The command line as given, for display.
    pub command: String,
    /// Its status at the time of the call.
    pub status: TaskStatus,
}

/// What one consuming [`read_output`](crate::ShellExecutor::read_output) returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskOutput {
    /// Output not delivered before: new stdout, then `"[stderr]\n"` and new stderr when stderr
    /// has new bytes (see [`render_delta`]).
    pub delta: String,
    /// The task's status, read before the output so that a terminal status guarantees the delta
    /// holds everything that was left.
    pub status: TaskStatus,
    /// Some unread output slid out of the in-memory tail before this read; the spill files (if
    /// any) hold all of it.
    pub lossy: bool,
    /// Full stdout on disk, once stdout outgrew its tail (and while it fits the spill cap).
    pub stdout_spill: Option<PathBuf>,
    /// Full stderr on disk, under the same rule.
    pub stderr_spill: Option<PathBuf>,
}

/// Sent on [`subscribe`](crate::ShellExecutor::subscribe) exactly once when a background task
/// finishes, so the bash tools can notify the owning agent without polling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskDone {
    /// The task that finished.
    pub id: TaskId,
    /// Its terminal status.
    pub status: TaskStatus,
    /// The owner token it was started with, so the notice can find the owning agent.
    pub owner: Option<String>,
}

/// Joins a stdout and a stderr delta into the one text a read delivers.
///
/// `[stderr]` must start on its own line so the model (and the UI) can tell the streams apart;
/// a newline is inserted only when the stdout part does not already end with one.
pub fn render_delta(stdout: &str, stderr: &str) -> String {
    let mut delta = String::with_capacity(stdout.len() + stderr.len() + 10);
    delta.push_str(stdout);
    if !stderr.is_empty() {
        if !delta.is_empty() && !delta.ends_with('\n') {
            delta.push('\n');
        }
        delta.push_str("[stderr]\n");
        delta.push_str(stderr);
    }
    delta
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stderr_section_starts_on_its_own_line() {
        assert_eq!(render_delta("out", "err"), "out\n[stderr]\nerr");
        assert_eq!(render_delta("out\n", "err"), "out\n[stderr]\nerr");
        assert_eq!(render_delta("", "err"), "[stderr]\nerr");
    }

    #[test]
    fn empty_stderr_adds_no_section() {
        assert_eq!(render_delta("out", ""), "out");
        assert_eq!(render_delta("", ""), "");
    }
}
