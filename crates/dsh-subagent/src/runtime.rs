//! The `SubagentRuntime` service: delegation in the foreground, and background runs it owns.
//!
//! Background runs live here — a service provided once, like the shell executor — and never in
//! a tool, so a run's owner and result survive an unmount and remount of the tools plugin. The
//! runtime also installs the cancellation cascade and the wake-budget bookkeeping, so those
//! hold whichever tools are mounted.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dsh_agent::events::{AgentDisposed, InboxClaimed};
use dsh_agent::{AgentRef, AgentRegistry, same_agent};
use dsh_kernel::Context;
use dsh_session::{MessageSource, SessionId};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::approval::{self, LiveChildren};
use crate::background::BackgroundRun;
use crate::cascade;
use crate::config::SubagentConfig;
use crate::drive::finish;
use crate::error::SubagentError;
use crate::notice::{WakeBudget, deliver};
use crate::outcome::SubagentOutcome;
use crate::request::SubagentRequest;
use crate::spawn::{Spawned, spawn_child};
use crate::task_id::SubagentTaskId;

pub(crate) struct Runs {
    pub(crate) closed: bool,
    pub(crate) list: Vec<Arc<BackgroundRun>>,
}

pub(crate) struct Inner {
    ctx: Context,
    pub(crate) config: SubagentConfig,
    pub(crate) runs: Mutex<Runs>,
    next: AtomicU64,
    tracker: TaskTracker,
    wakes: WakeBudget,
    spawner: tokio::runtime::Handle,
    /// Children of this runtime that are live, for the global approval rewrite.
    live: LiveChildren,
}

/// Delegates tasks to child agents and owns background runs. Provide it before any approval
/// policy plugin (see the crate docs on approvals). Provided as
/// `ctx.provide::<SubagentRuntime>(arc)` by [`SubagentRuntime::provide`] (or by
/// [`crate::SubagentPlugin`] when nothing provided one before it).
pub struct SubagentRuntime {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SubagentRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubagentRuntime")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl SubagentRuntime {
    /// Builds the runtime and provides it through `ctx`, together with its listeners (the
    /// cancellation cascade, wake-budget resets, cleanup of a disposed owner's records). All of
    /// it is an effect of `ctx`'s scope; disposing that scope shuts the runtime down (every
    /// background run is stopped and awaited). Provide it from a scope that outlives the tools
    /// plugin so ownership survives a remount. Needs a tokio runtime.
    pub fn provide(ctx: &Context, config: SubagentConfig) -> Result<Arc<Self>, SubagentError> {
        let spawner =
            tokio::runtime::Handle::try_current().map_err(|_| SubagentError::NoTokioRuntime)?;
        let runtime = Arc::new(Self {
            inner: Arc::new(Inner {
                ctx: ctx.clone(),
                config,
                runs: Mutex::new(Runs {
                    closed: false,
                    list: Vec::new(),
                }),
                next: AtomicU64::new(1),
                tracker: TaskTracker::new(),
                wakes: WakeBudget::default(),
                spawner,
                live: LiveChildren::default(),
            }),
        });
        // Registered first so it runs last: listeners are gone and the service withdrawn
        // before the runs are drained.
        let on_unload = runtime.clone();
        ctx.scope()
            .defer_async(move || async move { on_unload.shutdown().await })?;
        let _ = cascade::install(ctx)?;
        let _ = approval::install_global(
            ctx,
            runtime.inner.live.clone(),
            runtime.inner.config.approvals,
        )?;
        let inner = runtime.inner.clone();
        let _ = ctx.global().on::<InboxClaimed>(move |claim| {
            if claim.message.source == MessageSource::User {
                inner.wakes.reset(claim.agent.id());
            }
        })?;
        let inner = runtime.inner.clone();
        let _ = ctx.global().on::<AgentDisposed>(move |agent| {
            inner.wakes.reset(agent.id());
            inner
                .runs
                .lock()
                .list
                .retain(|run| run.owner != *agent.id() || !run.is_finished());
        })?;
        ctx.provide::<SubagentRuntime>(runtime.clone())?;
        Ok(runtime)
    }

    /// The runtime provided in `ctx`, if any.
    pub fn of(ctx: &Context) -> Option<Arc<SubagentRuntime>> {
        ctx.get::<SubagentRuntime>()
    }

    /// Its configuration.
    pub fn config(&self) -> &SubagentConfig {
        &self.inner.config
    }

    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }

    /// Creates a child of `parent` for `request` and hands it the prompt, unless the runtime
    /// is shut down: the first half of both [`delegate`](Self::delegate) and
    /// [`start`](Self::start).
    async fn spawn(
        &self,
        parent: &AgentRef,
        request: &SubagentRequest,
        cancel: &CancellationToken,
    ) -> Result<Spawned, SubagentError> {
        if self.inner.runs.lock().closed {
            return Err(SubagentError::Closed);
        }
        spawn_child(
            parent,
            request,
            &self.inner.config,
            &self.inner.live,
            cancel,
        )
        .await
    }

    /// Delegates `request` to a new child of `parent` and waits for the child's run: the
    /// child is created through the factory with `parent`'s scoped context (so `parent` owns
    /// it), handed the prompt, awaited until idle, read, and always disposed. When `cancel`
    /// fires the child is cancelled with cause `parent` and its end is still awaited. A child
    /// that fails is an [`SubagentOutcome`], not an error.
    pub async fn delegate(
        &self,
        parent: &AgentRef,
        request: SubagentRequest,
        cancel: &CancellationToken,
    ) -> Result<SubagentOutcome, SubagentError> {
        let spawned = self.spawn(parent, &request, cancel).await?;
        Ok(finish(spawned, cancel).await)
    }

    /// Starts `request` as a background run owned by `parent` and returns its id once the
    /// child has been created and its first turn opened. The run continues in a task owned by
    /// this runtime; its end is announced to `parent` and readable with
    /// [`read`](Self::read) / [`wait`](Self::wait) behind the owner fence. `cancel` aborts the
    /// start only. The run is stopped (child cancelled with cause `parent`, then disposed) by
    /// [`kill`](Self::kill), by `parent`'s teardown, or by the runtime's shutdown.
    pub async fn start(
        &self,
        parent: &AgentRef,
        request: SubagentRequest,
        cancel: &CancellationToken,
    ) -> Result<SubagentTaskId, SubagentError> {
        Ok(self.start_run(parent, request, cancel).await?.0)
    }

    /// [`start`](Self::start), also naming the child's session (what `resume` takes later).
    pub async fn start_run(
        &self,
        parent: &AgentRef,
        request: SubagentRequest,
        cancel: &CancellationToken,
    ) -> Result<(SubagentTaskId, SessionId), SubagentError> {
        let spawned = self.spawn(parent, &request, cancel).await?;
        let child = spawned.handle.agent().id().clone();
        let id = SubagentTaskId::new(format!(
            "subagent-{}",
            self.inner.next.fetch_add(1, Ordering::Relaxed)
        ));
        let run = Arc::new(BackgroundRun::new(
            id.clone(),
            request.description,
            Arc::downgrade(parent),
            parent.id().clone(),
            spawned.handle.agent().id().clone(),
        ));
        // The owner's teardown stops the run and waits for it, before the owner's own
        // session detaches (its scope unwinds first).
        let drain = run.clone();
        let scope = parent.ctx().scope().clone();
        match scope.defer_async(move || async move {
            drain.owner_gone();
            drain.done().await;
        }) {
            Ok(effect) => *run.owner_effect.lock() = Some((scope, effect)),
            // The owner is already going: the run starts stopped and reports to nobody.
            Err(_) => run.owner_gone(),
        }
        let inner = self.inner.clone();
        let refused = {
            let mut runs = self.inner.runs.lock();
            if runs.closed {
                Some(spawned)
            } else {
                runs.list.push(run.clone());
                let task = inner.clone().run_background(run.clone(), spawned);
                self.inner.tracker.spawn_on(task, &inner.spawner);
                None
            }
        };
        if let Some(spawned) = refused {
            release_owner_effect(&run);
            run.owner_gone();
            drop(finish(spawned, &run.stop).await);
            run.close();
            return Err(SubagentError::Closed);
        }
        Ok((id, child))
    }

    /// Stops accepting runs, stops every live background run (each child is cancelled with
    /// cause `parent`, then disposed) and waits for them. Idempotent; called when the
    /// providing scope is disposed.
    pub async fn shutdown(&self) {
        let live: Vec<Arc<BackgroundRun>> = {
            let mut runs = self.inner.runs.lock();
            runs.closed = true;
            runs.list.clone()
        };
        for run in live {
            run.stop.cancel();
        }
        self.inner.tracker.close();
        self.inner.tracker.wait().await;
    }
}

/// Withdraws the owner drain of a run that no longer needs it.
fn release_owner_effect(run: &BackgroundRun) {
    let taken = run.owner_effect.lock().take();
    if let Some((scope, effect)) = taken {
        // `None` when the owner's teardown is already running the drain.
        drop(scope.take_effect(effect));
    }
}

impl Inner {
    async fn run_background(self: Arc<Self>, run: Arc<BackgroundRun>, spawned: Spawned) {
        let outcome = finish(spawned, &run.stop).await;
        release_owner_effect(&run);
        if run.settle(outcome.clone()) {
            self.notify(&run, &outcome);
        }
        run.close();
    }

    /// Announces the end of `run` to its owner if the owner is still the live agent it was.
    fn notify(&self, run: &BackgroundRun, outcome: &SubagentOutcome) {
        if self.runs.lock().closed {
            return;
        }
        let Some(owner) = run.parent.upgrade() else {
            return;
        };
        let live = self
            .ctx
            .get::<AgentRegistry>()
            .and_then(|registry| registry.get(owner.id()))
            .is_some_and(|registered| same_agent(&registered, &owner));
        if !live || !owner.ctx().is_active() {
            return;
        }
        deliver(
            &owner,
            run,
            outcome,
            &self.wakes,
            self.config.max_consecutive_wakes,
        );
    }
}
