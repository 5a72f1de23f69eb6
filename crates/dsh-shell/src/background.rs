//! The executor's record of one background task.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::capture::StreamTail;
use crate::process::ExitInfo;
use crate::stop::{StopCause, StopLatch};
use crate::task::{TaskId, TaskInfo, TaskOutput, TaskStatus, render_delta};

/// A background task as the executor keeps it: identity, owner token, output and read cursors.
///
/// The owner lives here, in the executor, rather than in the bash tools, so ownership survives
/// an unload and remount of the tools plugin (seed decision 3).
///
/// What a record costs is bounded over its life: while the task runs and until its final
/// output is read, two output tails; once a read has delivered the terminal status, only the
/// small record (the tails are [released](StreamTail::release)); once its owner is
/// [released](crate::ShellExecutor::release_owner), nothing.
#[derive(Debug)]
pub(crate) struct BackgroundTask {
    pub id: TaskId,
    pub command: String,
    pub owner: Option<String>,
    pub stop: StopLatch,
    stdout: Arc<StreamTail>,
    stderr: Arc<StreamTail>,
    progress: Mutex<Progress>,
}

#[derive(Debug)]
struct Progress {
    status: TaskStatus,
    stdout_cursor: u64,
    stderr_cursor: u64,
    /// The owner was released while the task ran: the record goes when the task ends.
    /// Decided under the same lock as `status`, so a release racing the end is never lost.
    released: bool,
}

impl BackgroundTask {
    pub(crate) fn new(
        id: TaskId,
        command: String,
        owner: Option<String>,
        stdout: Arc<StreamTail>,
        stderr: Arc<StreamTail>,
    ) -> Self {
        Self {
            id,
            command,
            owner,
            stop: StopLatch::default(),
            stdout,
            stderr,
            progress: Mutex::new(Progress {
                status: TaskStatus::Running,
                stdout_cursor: 0,
                stderr_cursor: 0,
                released: false,
            }),
        }
    }

    pub(crate) fn info(&self) -> TaskInfo {
        TaskInfo {
            id: self.id.clone(),
            command: self.command.clone(),
            status: self.progress.lock().status.clone(),
        }
    }

    /// The consuming read.
    ///
    /// The status is taken first: it turns terminal only after the output is fully drained, so a
    /// read that reports a terminal status has delivered everything.
    pub(crate) fn read(&self) -> TaskOutput {
        let mut progress = self.progress.lock();
        let status = progress.status.clone();
        let out = self.stdout.read_from(progress.stdout_cursor);
        let err = self.stderr.read_from(progress.stderr_cursor);
        progress.stdout_cursor = out.next;
        progress.stderr_cursor = err.next;
        if !status.is_running() {
            // This read delivered everything that was left: nothing needs the tails any more.
            self.stdout.release();
            self.stderr.release();
        }
        TaskOutput {
            delta: render_delta(&out.text, &err.text),
            status,
            lossy: out.lossy || err.lossy,
            stdout_spill: out.spill,
            stderr_spill: err.spill,
        }
    }

    /// Records the end of the task (once its output is drained) and returns the final status,
    /// and whether the record is to be dropped now because its owner was released meanwhile.
    pub(crate) fn finish(&self, exit: &ExitInfo) -> (TaskStatus, bool) {
        let status = final_status(exit, self.stop.finish());
        let mut progress = self.progress.lock();
        progress.status = status.clone();
        (status, progress.released)
    }

    /// The task's owner is gone for good. A running task is stopped and marked so that its
    /// record is dropped when it ends (`true`); an ended one can be dropped at once (`false`).
    pub(crate) fn release(&self) -> bool {
        {
            let mut progress = self.progress.lock();
            if !progress.status.is_running() {
                return false;
            }
            progress.released = true;
        }
        self.stop.request(StopCause::Released);
        true
    }

    /// Deletes the task's spill files, whose record is being dropped: nobody can ask for them
    /// any more, and they may hold up to the spill cap each.
    pub(crate) fn remove_spills(&self) {
        for path in [self.stdout.take_spill(), self.stderr.take_spill()]
            .into_iter()
            .flatten()
        {
            if let Err(err) = std::fs::remove_file(&path) {
                tracing::warn!(%err, path = %path.display(), "removing a released task's spill file failed");
            }
        }
    }

    #[cfg(test)]
    fn buffered(&self) -> usize {
        self.stdout.buffered() + self.stderr.buffered()
    }
}

/// Any signal death, and any stop we caused, is `Killed`: a task stopped on request that then
/// exited 0 from a SIGTERM trap did not "complete".
fn final_status(exit: &ExitInfo, cause: Option<StopCause>) -> TaskStatus {
    match (exit, cause) {
        (ExitInfo::Signal(signal), _) => TaskStatus::Killed {
            signal: Some(signal.clone()),
        },
        (ExitInfo::Code(code), None) => TaskStatus::Completed { exit_code: *code },
        (ExitInfo::Code(_), Some(_)) | (ExitInfo::Unknown, _) => {
            TaskStatus::Killed { signal: None }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stopped_task_is_killed_even_when_it_exits_cleanly() {
        let status = final_status(&ExitInfo::Code(0), Some(StopCause::Killed));
        assert_eq!(status, TaskStatus::Killed { signal: None });
    }

    #[test]
    fn self_signal_is_killed_with_its_signal() {
        let status = final_status(&ExitInfo::Signal("SIGTERM".into()), None);
        assert_eq!(
            status,
            TaskStatus::Killed {
                signal: Some("SIGTERM".into())
            }
        );
    }

    fn task() -> BackgroundTask {
        BackgroundTask::new(
            TaskId::new("bash-1"),
            "cmd".into(),
            Some("a".into()),
            Arc::new(StreamTail::new(64)),
            Arc::new(StreamTail::new(64)),
        )
    }

    #[test]
    fn the_read_that_delivers_the_final_status_frees_the_output_tails() {
        let task = task();
        task.stdout.push(b"out\n");
        task.stderr.push(b"err\n");
        assert_eq!(task.read().delta, "out\n[stderr]\nerr\n");
        assert_eq!(task.buffered(), 8, "a running task keeps its tails");
        task.stdout.push(b"late\n");
        task.stdout.close();
        task.stderr.close();
        task.finish(&ExitInfo::Code(0));
        assert_eq!(task.buffered(), 13, "the unread final output is kept");
        let last = task.read();
        assert_eq!(last.delta, "late\n");
        assert_eq!(last.status, TaskStatus::Completed { exit_code: 0 });
        assert_eq!(task.buffered(), 0);
        let again = task.read();
        assert_eq!((again.delta.as_str(), again.lossy), ("", false));
        assert_eq!(again.status, TaskStatus::Completed { exit_code: 0 });
    }

    #[test]
    fn release_racing_the_end_is_decided_exactly_once() {
        let running = task();
        assert!(running.release(), "a running task stays until it ends");
        let (status, drop_now) = running.finish(&ExitInfo::Code(0));
        assert!(drop_now, "its end drops the record");
        assert_eq!(status, TaskStatus::Killed { signal: None });

        let ended = task();
        let (_, drop_now) = ended.finish(&ExitInfo::Code(0));
        assert!(!drop_now);
        assert!(
            !ended.release(),
            "an ended task is dropped by the release itself"
        );
    }

    #[test]
    fn natural_exit_is_completed_with_its_code() {
        assert_eq!(
            final_status(&ExitInfo::Code(3), None),
            TaskStatus::Completed { exit_code: 3 }
        );
    }
}
