//! The local provider: real `bash -c` processes on this machine.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::background::BackgroundTask;
use crate::config::ShellConfig;
use crate::driver::run_to_end;
use crate::env::child_env;
use crate::error::ShellError;
use crate::executor::ShellExecutor;
use crate::process::{CommandProcess, ExitInfo, Launch, OutputLimits};
use crate::result::ShellRunResult;
use crate::spec::{ShellExecRequest, ShellExecSpec, resolve_request};
use crate::spill::SpillDir;
use crate::stop::{StopCause, StopLatch};
use crate::supervise::Supervision;
use crate::task::{TaskDone, TaskId, TaskInfo, TaskOutput};

/// How many completion notices a slow subscriber may fall behind before it loses some.
const NOTICE_CAPACITY: usize = 256;

/// [`ShellExecutor`] running real `bash -c` processes, each in its own supervised process group.
///
/// - Each command runs in a process group led by a supervisor (crate docs, "Nothing outlives
///   dsh"): no process of a command survives the process holding the executor, even a `kill -9`
///   of it.
/// - Every command's group is killed and reaped before its result (or its `TaskDone`) is
///   delivered; leftovers in the group are SIGKILLed when `bash` ends.
/// - Dropping the executor without [`dispose`](ShellExecutor::dispose) still stops every
///   command (through the kill ladder, while the runtime runs; through the supervisors otherwise),
///   but only `dispose` waits for them. Dropping it also removes its spill directory.
/// - Each running command costs one `sh` supervisor process and one reaper thread (blocked in
///   `waitpid`), both gone when the command is.
/// - A finished background task keeps its output tails until a read has delivered its final
///   status, and its small record (id, command, owner, status) until its owner is released
///   with [`release_owner`](ShellExecutor::release_owner), which also deletes its spill files.
///   So an owner can always read its final output, and a gone owner leaves nothing behind.
#[derive(Debug)]
pub struct LocalShellExecutor {
    config: ShellConfig,
    /// Shared with the background drivers, which drop a released task's record when it ends.
    state: Arc<Mutex<State>>,
    /// Every command driver, foreground and background, so `dispose` can wait for all of them.
    drivers: TaskTracker,
    notices: broadcast::Sender<TaskDone>,
    spill_dir: Arc<SpillDir>,
    /// Starts commands under a confining supervisor program when set (dsh-guard).
    supervision: Option<Arc<dyn Supervision>>,
}

#[derive(Debug, Default)]
struct State {
    disposed: bool,
    /// Records of background tasks, oldest first (released owners' tasks are dropped).
    tasks: Vec<Arc<BackgroundTask>>,
    /// Number of the last task id issued. Ids are never reused, so an id held by a caller
    /// (or quoted in a transcript) never comes to name another owner's task.
    last_task: u64,
    /// Stop latches of foreground runs in flight, for `dispose`.
    foreground: HashMap<u64, Arc<StopLatch>>,
    next_foreground: u64,
}

impl LocalShellExecutor {
    /// Builds an executor; fails if `config` does not [`validate`](ShellConfig::validate).
    /// Needs no runtime until the first command.
    pub fn new(config: ShellConfig) -> Result<Self, ShellError> {
        config.validate()?;
        let spill_dir = Arc::new(SpillDir::new(config.scratch_dir.clone()));
        Ok(Self {
            config,
            state: Arc::default(),
            drivers: TaskTracker::new(),
            notices: broadcast::channel(NOTICE_CAPACITY).0,
            spill_dir,
            supervision: None,
        })
    }

    /// Runs every command under `supervision`'s supervisor program (sandbox and containment of
    /// every descendant) instead of the built-in `/bin/sh` group supervisor. A refusal by the
    /// supervision fails the command before anything is spawned.
    pub fn with_supervision(mut self, supervision: Arc<dyn Supervision>) -> Self {
        self.supervision = Some(supervision);
        self
    }

    /// The settings this executor was built with.
    pub fn config(&self) -> &ShellConfig {
        &self.config
    }

    fn task(&self, id: &TaskId) -> Option<Arc<BackgroundTask>> {
        self.state
            .lock()
            .tasks
            .iter()
            .find(|task| task.id == *id)
            .cloned()
    }

    /// Spawns the command while the caller holds the state lock, so a concurrent `dispose`
    /// either sees the command or has already refused it.
    fn spawn(&self, state: &State, spec: &ShellExecSpec) -> Result<CommandProcess, ShellError> {
        if state.disposed {
            return Err(ShellError::Disposed);
        }
        let env = child_env(std::env::vars_os(), &self.config.hidden_env, &spec.env);
        let launch = Launch {
            command: &spec.command,
            workdir: &spec.workdir,
            env: &env,
            unconfined: spec.unconfined,
            workspace: spec.workspace.as_deref(),
            session: spec.session.as_deref(),
            stdin: spec.stdin.as_deref(),
            untrusted: spec.untrusted,
        };
        let limits = OutputLimits {
            max_output_bytes: self.config.max_output_bytes,
            max_spill_bytes: self.config.max_spill_bytes,
            spill_dir: self.spill_dir.clone(),
            live: spec.live.clone(),
        };
        CommandProcess::spawn(&launch, &limits, self.supervision.as_deref())
    }

    /// Stops every command and marks the executor disposed; shared by `dispose` and `Drop`.
    fn stop_all(&self) {
        let mut state = self.state.lock();
        state.disposed = true;
        for task in &state.tasks {
            task.stop.request(StopCause::Disposed);
        }
        for stop in state.foreground.values() {
            stop.request(StopCause::Disposed);
        }
    }
}

/// The checks that need no lock and start nothing: a cancelled token, a command no argument
/// can carry and an unusable workdir are the caller's problem, reported before any process
/// exists.
fn preflight(spec: &ShellExecSpec) -> Result<(), ShellError> {
    if spec
        .cancel
        .as_ref()
        .is_some_and(CancellationToken::is_cancelled)
    {
        return Err(ShellError::Cancelled);
    }
    if spec.command.contains('\0') {
        return Err(ShellError::InvalidCommand(
            "it contains a NUL byte, which no command line can carry".into(),
        ));
    }
    match std::fs::metadata(&spec.workdir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(ShellError::BadWorkdir {
            path: spec.workdir.clone(),
            source: io::Error::new(io::ErrorKind::NotADirectory, "not a directory"),
        }),
        Err(source) => Err(ShellError::BadWorkdir {
            path: spec.workdir.clone(),
            source,
        }),
    }
}

#[async_trait]
impl ShellExecutor for LocalShellExecutor {
    fn resolve(&self, req: ShellExecRequest) -> Result<ShellExecSpec, ShellError> {
        resolve_request(&self.config, req)
    }

    async fn run(&self, spec: ShellExecSpec) -> Result<ShellRunResult, ShellError> {
        if spec.timeout.is_zero() {
            return Err(ShellError::ZeroTimeout);
        }
        // A hand-built spec may skip `resolve`; the cap applies all the same (and keeps the
        // deadline representable: `now + Duration::MAX` would overflow).
        let timeout = spec.timeout.min(self.config.max_timeout);
        preflight(&spec)?;
        let stop = Arc::new(StopLatch::default());
        let (key, driver) = {
            let mut state = self.state.lock();
            let process = self.spawn(&state, &spec)?;
            let key = state.next_foreground;
            state.next_foreground += 1;
            state.foreground.insert(key, stop.clone());
            let driver = self.drivers.spawn(drive_foreground(
                process,
                stop.clone(),
                spec.cancel,
                timeout,
                self.config.grace,
            ));
            (key, driver)
        };
        let mut guard = ForegroundGuard {
            state: &self.state,
            key,
            stop: &stop,
            settled: false,
        };
        let outcome = driver.await;
        guard.settled = true;
        drop(guard);
        match outcome {
            Ok(result) => Ok(result),
            Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
            // The runtime is shutting down and dropped the driver; the supervisor kills the group.
            Err(_) => Err(ShellError::Disposed),
        }
    }

    async fn start(&self, mut spec: ShellExecSpec) -> Result<TaskId, ShellError> {
        preflight(&spec)?;
        // A background task's output is read on request (`read_output`), never pushed.
        spec.live = None;
        let mut state = self.state.lock();
        let process = self.spawn(&state, &spec)?;
        state.last_task += 1;
        let id = TaskId::new(format!("bash-{}", state.last_task));
        let task = Arc::new(BackgroundTask::new(
            id.clone(),
            spec.command,
            spec.owner,
            process.stdout.clone(),
            process.stderr.clone(),
        ));
        state.tasks.push(task.clone());
        self.drivers.spawn(drive_background(
            task,
            process,
            spec.cancel,
            self.config.grace,
            self.notices.clone(),
            self.state.clone(),
        ));
        Ok(id)
    }

    fn read_output(&self, id: &TaskId) -> Result<TaskOutput, ShellError> {
        let task = self
            .task(id)
            .ok_or_else(|| ShellError::UnknownTask(id.clone()))?;
        Ok(task.read())
    }

    fn kill(&self, id: &TaskId) -> Result<bool, ShellError> {
        let task = self
            .task(id)
            .ok_or_else(|| ShellError::UnknownTask(id.clone()))?;
        Ok(task.stop.request(StopCause::Killed))
    }

    fn list(&self) -> Vec<TaskInfo> {
        let tasks = self.state.lock().tasks.clone();
        tasks.iter().map(|task| task.info()).collect()
    }

    fn owner_of(&self, id: &TaskId) -> Option<String> {
        self.task(id)?.owner.clone()
    }

    fn release_owner(&self, owner: &str) -> usize {
        let mut ended = Vec::new();
        let mut stopping = 0;
        self.state.lock().tasks.retain(|task| {
            if task.owner.as_deref() != Some(owner) {
                return true;
            }
            if task.release() {
                // Its driver drops the record once the group is reaped.
                stopping += 1;
                return true;
            }
            ended.push(task.clone());
            false
        });
        // File removal outside the state lock.
        for task in ended {
            task.remove_spills();
        }
        stopping
    }

    fn subscribe(&self) -> broadcast::Receiver<TaskDone> {
        self.notices.subscribe()
    }

    async fn dispose(&self) {
        self.stop_all();
        self.drivers.close();
        self.drivers.wait().await;
    }
}

impl Drop for LocalShellExecutor {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// Unregisters a foreground run, and stops its command if the `run` future was dropped before
/// the result arrived (a caller that gives up must not leave the command running).
struct ForegroundGuard<'a> {
    state: &'a Mutex<State>,
    key: u64,
    stop: &'a StopLatch,
    settled: bool,
}

impl Drop for ForegroundGuard<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.stop.request(StopCause::Cancelled);
        }
        self.state.lock().foreground.remove(&self.key);
    }
}

async fn drive_foreground(
    process: CommandProcess,
    stop: Arc<StopLatch>,
    cancel: Option<CancellationToken>,
    timeout: std::time::Duration,
    grace: std::time::Duration,
) -> ShellRunResult {
    let (stdout, stderr) = (process.stdout.clone(), process.stderr.clone());
    let leftovers = process.leftovers.clone();
    let exit = run_to_end(process, &stop, cancel.as_ref(), Some(timeout), grace).await;
    let cause = stop.finish();
    let (exit_code, signal) = match exit {
        ExitInfo::Code(code) => (Some(code), None),
        ExitInfo::Signal(signal) => (None, Some(signal)),
        ExitInfo::Unknown => (None, None),
    };
    ShellRunResult {
        exit_code,
        signal,
        timed_out: cause == Some(StopCause::Timeout),
        aborted: cause.is_some_and(|cause| cause != StopCause::Timeout),
        timeout,
        stdout: stdout.snapshot(),
        stderr: stderr.snapshot(),
        // The reaper stored it before sending the exit `run_to_end` waited for.
        leftovers: leftovers.load(std::sync::atomic::Ordering::Acquire),
    }
}

async fn drive_background(
    task: Arc<BackgroundTask>,
    process: CommandProcess,
    cancel: Option<CancellationToken>,
    grace: std::time::Duration,
    notices: broadcast::Sender<TaskDone>,
    state: Arc<Mutex<State>>,
) {
    let exit = run_to_end(process, &task.stop, cancel.as_ref(), None, grace).await;
    let (status, released) = task.finish(&exit);
    if released {
        state.lock().tasks.retain(|kept| !Arc::ptr_eq(kept, &task));
        task.remove_spills();
    }
    // No subscriber is fine: the status stays readable through `read_output` and `list`.
    let _ = notices.send(TaskDone {
        id: task.id.clone(),
        status,
        owner: task.owner.clone(),
    });
}
