//! The `ShellExecutor` service definition.

use async_trait::async_trait;
use tokio::sync::broadcast;

use crate::error::ShellError;
use crate::result::ShellRunResult;
use crate::spec::{ShellExecRequest, ShellExecSpec};
use crate::task::{TaskDone, TaskId, TaskInfo, TaskOutput};

/// Runs shell commands for tools: one foreground run at a time per call, background tasks with
/// owner tokens, all of it torn down by [`dispose`](Self::dispose).
///
/// It is a service definition so tools code against the seam, not a provider: the local
/// provider is [`LocalShellExecutor`](crate::LocalShellExecutor); a sandboxing one can wrap the
/// same contract. Object safe; stored and shared as `Arc<dyn ShellExecutor>`.
#[async_trait]
pub trait ShellExecutor: Send + Sync {
    /// Fills defaults and applies bounds. Separate from `run`/`start` so a tool can show or
    /// record exactly what will run (workdir, timeout) before it runs.
    fn resolve(&self, req: ShellExecRequest) -> Result<ShellExecSpec, ShellError>;

    /// Runs a command in the foreground and waits for it.
    ///
    /// Errors only for infrastructure failures: a bad workdir, a failed spawn, a token that was
    /// already cancelled, a disposed executor. A non-zero exit, a timeout and a cancellation all
    /// resolve to a [`ShellRunResult`], which arrives once the command's process group is gone.
    async fn run(&self, spec: ShellExecSpec) -> Result<ShellRunResult, ShellError>;

    /// Starts a background task and returns its id at once. Background tasks have no timeout;
    /// they end by themselves, by [`kill`](Self::kill), by the spec's cancellation token, or by
    /// disposal. Fails like [`run`](Self::run) for infrastructure problems.
    async fn start(&self, spec: ShellExecSpec) -> Result<TaskId, ShellError>;

    /// Consumes the task's output that was not read before (never re-delivered), together with
    /// its status. Still works after the task ended, so the final output is never lost (until
    /// the task's owner is [released](Self::release_owner)).
    fn read_output(&self, id: &TaskId) -> Result<TaskOutput, ShellError>;

    /// Starts the kill ladder on the task's whole process group. `Ok(false)` when the task has
    /// already ended or is already being stopped; `Ok(true)` at most once per task, and then its
    /// final status is `Killed`.
    fn kill(&self, id: &TaskId) -> Result<bool, ShellError>;

    /// Every background task this executor started, oldest first. Carries no owner (see
    /// [`owner_of`](Self::owner_of)); the tools filter by owner themselves.
    fn list(&self) -> Vec<TaskInfo>;

    /// The owner token the task was started with: the single read path for ownership.
    ///
    /// `None` both for unowned and for unknown tasks; an empty string is a real owner. The
    /// executor never interprets the token: the access policy lives in the tools.
    fn owner_of(&self, id: &TaskId) -> Option<String>;

    /// The holder of `owner` is gone for good (the bash tools call this when the agent with
    /// that id is disposed). Its running tasks are stopped with the kill ladder (final status
    /// `Killed`, announced like any end), and the records of all its tasks, with their output
    /// and spill files, are dropped as soon as each has ended; their ids then answer
    /// [`ShellError::UnknownTask`] and are never issued again.
    ///
    /// Without this, a gone owner's tasks would run until disposal with nobody allowed to read
    /// or stop them (the tools' owner fence refuses everyone else), and their records would be
    /// kept forever. The token is only compared, never interpreted. Unowned tasks are not
    /// touched. Returns how many tasks were still running.
    fn release_owner(&self, owner: &str) -> usize;

    /// Completion notices: one [`TaskDone`] per background task, when it ends. A receiver that
    /// falls more than a few hundred notices behind sees `Lagged` and loses the oldest.
    fn subscribe(&self) -> broadcast::Receiver<TaskDone>;

    /// Stops every command this executor started, foreground and background, and waits until
    /// they are all reaped. Idempotent and safe to call concurrently; afterwards `run` and
    /// `start` fail with [`ShellError::Disposed`] while reads of finished tasks keep working.
    async fn dispose(&self);
}
