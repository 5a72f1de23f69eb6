//! Reading, waiting for and stopping background runs, behind the owner fence.
//!
//! The fence is the policy of seed decision 3, applied to subagent runs: a run is touched only
//! by the agent whose id is its owner (the parent that started it). A caller without an agent
//! never passes. Ids are predictable (`subagent-1`, …), so this check — not the id — is the
//! security boundary; an unknown id fails loudly.

use std::sync::Arc;
use std::time::Duration;

use dsh_agent::{AgentRef, AgentStatus};
use dsh_session::SessionId;
use tokio_util::sync::CancellationToken;

use crate::background::{BackgroundRun, SubagentTaskSnapshot};
use crate::error::SubagentError;
use crate::runtime::SubagentRuntime;
use crate::task_id::SubagentTaskId;

/// What [`SubagentRuntime::kill`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KillOutcome {
    /// The run was live: its child is being cancelled with cause `parent`. No completion
    /// notice follows; read the result with `read` or `wait`.
    Requested,
    /// The run had already ended; here is how.
    AlreadyFinished(SubagentTaskSnapshot),
}

impl SubagentRuntime {
    fn find(&self, id: &SubagentTaskId) -> Option<Arc<BackgroundRun>> {
        self.inner()
            .runs
            .lock()
            .list
            .iter()
            .find(|run| run.id == *id)
            .cloned()
    }

    /// The run `id`, if `caller` may touch it.
    fn fenced(
        &self,
        id: &SubagentTaskId,
        caller: Option<&SessionId>,
    ) -> Result<Arc<BackgroundRun>, SubagentError> {
        let run = self
            .find(id)
            .ok_or_else(|| SubagentError::UnknownTask(id.clone()))?;
        if caller != Some(&run.owner) {
            return Err(SubagentError::ForeignTask(id.clone()));
        }
        Ok(run)
    }

    /// The owner of run `id`: the single read path for ownership. `None` for an unknown id.
    pub fn owner_of(&self, id: &SubagentTaskId) -> Option<SessionId> {
        self.find(id).map(|run| run.owner.clone())
    }

    /// The run's current state. Reading a finished run hands its result over: no completion
    /// notice is sent for it afterwards.
    pub fn read(
        &self,
        id: &SubagentTaskId,
        caller: Option<&SessionId>,
    ) -> Result<SubagentTaskSnapshot, SubagentError> {
        Ok(self.fenced(id, caller)?.snapshot(true))
    }

    /// Waits until the run is over (its end recorded and any notice delivered), `cancel`
    /// fires, or `timeout` passes, then reads it like [`read`](Self::read). A run that ends
    /// while a waiter is present sends no notice: the waiter hands the result over.
    pub async fn wait(
        &self,
        id: &SubagentTaskId,
        caller: Option<&SessionId>,
        cancel: &CancellationToken,
        timeout: Duration,
    ) -> Result<SubagentTaskSnapshot, SubagentError> {
        let run = self.fenced(id, caller)?;
        {
            let _waiter = run.waiter();
            tokio::select! {
                () = run.done() => {}
                () = cancel.cancelled() => {}
                () = tokio::time::sleep(timeout) => {}
            }
        }
        Ok(run.snapshot(true))
    }

    /// Stops a live run (its child is cancelled with cause `parent`, then disposed); reports
    /// how a finished one ended.
    pub fn kill(
        &self,
        id: &SubagentTaskId,
        caller: Option<&SessionId>,
    ) -> Result<KillOutcome, SubagentError> {
        let run = self.fenced(id, caller)?;
        if run.kill() {
            Ok(KillOutcome::Requested)
        } else {
            Ok(KillOutcome::AlreadyFinished(run.snapshot(true)))
        }
    }

    /// Resolves once `agent` is idle and owns no live background run: every run it started
    /// has ended and its notice was delivered, and whatever turns those notices woke have
    /// finished. A headless front end awaits this (instead of `when_idle` alone) before it
    /// reads the final answer, so results of background subagents are not cut off by the
    /// agent's disposal.
    pub async fn when_quiet(&self, agent: &AgentRef) {
        loop {
            agent.when_idle().await;
            let live: Vec<Arc<BackgroundRun>> = self
                .inner()
                .runs
                .lock()
                .list
                .iter()
                .filter(|run| run.owner == *agent.id() && !run.is_closed())
                .cloned()
                .collect();
            if live.is_empty() {
                // A notice delivered before the last run closed may have woken the agent.
                if agent.status() == AgentStatus::Idle {
                    return;
                }
                continue;
            }
            for run in live {
                run.done().await;
            }
        }
    }

    /// The runs `caller` owns, oldest first (finished ones included until their owner is
    /// disposed).
    pub fn list(&self, caller: &SessionId) -> Vec<SubagentTaskSnapshot> {
        let runs: Vec<Arc<BackgroundRun>> = self
            .inner()
            .runs
            .lock()
            .list
            .iter()
            .filter(|run| run.owner == *caller)
            .cloned()
            .collect();
        runs.iter().map(|run| run.snapshot(false)).collect()
    }
}
