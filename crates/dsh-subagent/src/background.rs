//! The record of one background run, kept by the runtime (never by a tool), so its owner and
//! result survive an unmount and remount of the tools plugin.

use std::sync::Weak;

use dsh_agent::Agent;
use dsh_kernel::{EffectId, Scope};
use dsh_session::SessionId;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::outcome::SubagentOutcome;
use crate::task_id::SubagentTaskId;

/// Where a background run is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SubagentTaskStatus {
    /// The child is still working.
    Running,
    /// The child's run ended; it has been disposed.
    Finished(SubagentOutcome),
}

/// A view of one background run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubagentTaskSnapshot {
    /// The run's id.
    pub id: SubagentTaskId,
    /// The label it was started with.
    pub description: String,
    /// The child's session id.
    pub child: SessionId,
    /// Its status.
    pub status: SubagentTaskStatus,
}

#[derive(Default)]
struct RunState {
    outcome: Option<SubagentOutcome>,
    /// The result was handed to the owner (read, killed, or a waiter was present): no notice.
    reported: bool,
    /// `subagent_output` calls currently waiting for the end.
    waiting: usize,
    /// The owner is being torn down: nothing may be delivered to it.
    owner_gone: bool,
}

/// One background run. The owner is the parent's session id, stamped at start.
pub(crate) struct BackgroundRun {
    pub(crate) id: SubagentTaskId,
    pub(crate) description: String,
    pub(crate) owner: SessionId,
    pub(crate) parent: Weak<dyn Agent>,
    pub(crate) child: SessionId,
    /// Fired to stop the run (kill, owner teardown, runtime shutdown): the child is then
    /// cancelled with cause `parent`.
    pub(crate) stop: CancellationToken,
    /// The drain registered on the owner's scope while the run is live.
    pub(crate) owner_effect: Mutex<Option<(Scope, EffectId)>>,
    state: Mutex<RunState>,
    done: watch::Sender<bool>,
}

impl BackgroundRun {
    pub(crate) fn new(
        id: SubagentTaskId,
        description: String,
        parent: Weak<dyn Agent>,
        owner: SessionId,
        child: SessionId,
    ) -> Self {
        Self {
            id,
            description,
            owner,
            parent,
            child,
            stop: CancellationToken::new(),
            owner_effect: Mutex::new(None),
            state: Mutex::new(RunState::default()),
            done: watch::Sender::new(false),
        }
    }

    /// A snapshot; reading a finished run marks it reported when `report`.
    pub(crate) fn snapshot(&self, report: bool) -> SubagentTaskSnapshot {
        let mut state = self.state.lock();
        let status = match &state.outcome {
            Some(outcome) => SubagentTaskStatus::Finished(outcome.clone()),
            None => SubagentTaskStatus::Running,
        };
        if report && state.outcome.is_some() {
            state.reported = true;
        }
        SubagentTaskSnapshot {
            id: self.id.clone(),
            description: self.description.clone(),
            child: self.child.clone(),
            status,
        }
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.state.lock().outcome.is_some()
    }

    /// Records the end (first wins) and says whether the owner should get a notice: not when
    /// the result was already handed over, a waiter will hand it over, or the owner is gone.
    /// Waiters are released by [`close`](Self::close), once the notice (if any) is delivered.
    pub(crate) fn settle(&self, outcome: SubagentOutcome) -> bool {
        let mut state = self.state.lock();
        if state.outcome.is_some() {
            return false;
        }
        state.outcome = Some(outcome);
        if state.waiting > 0 {
            state.reported = true;
        }
        !state.reported && !state.owner_gone
    }

    /// The run is over and its notice delivered: releases every waiter.
    pub(crate) fn close(&self) {
        self.done.send_replace(true);
    }

    /// Kill requested: stop the run and suppress its notice (the owner asked for it).
    /// Returns `false` when the run had already ended.
    pub(crate) fn kill(&self) -> bool {
        {
            let mut state = self.state.lock();
            if state.outcome.is_some() {
                state.reported = true;
                return false;
            }
            state.reported = true;
        }
        self.stop.cancel();
        true
    }

    /// The owner is being torn down: stop the run and never deliver to the owner.
    pub(crate) fn owner_gone(&self) {
        self.state.lock().owner_gone = true;
        self.stop.cancel();
    }

    /// Resolves once the run has ended and its end was announced (or not) to the owner.
    pub(crate) async fn done(&self) {
        let mut rx = self.done.subscribe();
        // The sender lives in `self`, so it outlives this borrow.
        let _ = rx.wait_for(|done| *done).await;
    }

    /// Whether the run is over and its notice decided (see [`close`](Self::close)).
    pub(crate) fn is_closed(&self) -> bool {
        *self.done.borrow()
    }

    /// Marks a waiter present for the duration of the returned guard.
    pub(crate) fn waiter(&self) -> Waiter<'_> {
        self.state.lock().waiting += 1;
        Waiter(self)
    }
}

/// A present `subagent_output` waiter (see [`BackgroundRun::waiter`]).
pub(crate) struct Waiter<'a>(&'a BackgroundRun);

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        let mut state = self.0.state.lock();
        state.waiting = state.waiting.saturating_sub(1);
    }
}
