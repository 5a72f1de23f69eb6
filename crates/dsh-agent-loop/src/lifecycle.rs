//! One agent's ownership: its publication edges and the single, ordered, memoized teardown.
//!
//! Teardown order is load-bearing for durability (DESIGN R5): stop and drain the driver (its
//! final `turn/end` is appended and flushed while the session is still attached) → unwind the
//! agent's scope → detach the agent → detach the session. A handle's `dispose`, the owner's
//! scope disposal and the loop's unload all converge on this one boundary.

use std::sync::{Arc, Weak};

use dsh_agent::{Agent, AgentDetach, CancelCause, CancelOptions};
use dsh_kernel::{EffectId, Scope};
use dsh_session::SessionDetach;
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::driver::LoopAgent;
use crate::service::LoopInner;

pub(crate) struct Lifecycle {
    pub(crate) key: u64,
    pub(crate) agent: Arc<LoopAgent>,
    pub(crate) session_detach: Mutex<Option<SessionDetach>>,
    pub(crate) agent_detach: Mutex<Option<AgentDetach>>,
    /// Cancels unpublished setup; fired when teardown starts.
    pub(crate) creation: CancellationToken,
    pub(crate) owner_effect: Mutex<Option<(Scope, EffectId)>>,
    pub(crate) owner: Mutex<Option<Scope>>,
    done: Mutex<Option<Shared<BoxFuture<'static, ()>>>>,
    pub(crate) service: Weak<LoopInner>,
}

impl Lifecycle {
    pub(crate) fn new(key: u64, agent: Arc<LoopAgent>, service: Weak<LoopInner>) -> Self {
        Self {
            key,
            agent,
            session_detach: Mutex::new(None),
            agent_detach: Mutex::new(None),
            creation: CancellationToken::new(),
            owner_effect: Mutex::new(None),
            owner: Mutex::new(None),
            done: Mutex::new(None),
            service,
        }
    }

    /// The memoized teardown. Its synchronous prefix (creation aborted, driver cancelled with
    /// cause `disposed`, no new run allowed) happens before this returns, so disposal requested
    /// from a listener stops work immediately.
    pub(crate) fn dispose(self: &Arc<Self>) -> Shared<BoxFuture<'static, ()>> {
        let fut = {
            let mut done = self.done.lock();
            if let Some(fut) = done.as_ref() {
                return fut.clone();
            }
            // Before the teardown is published: another disposer may start it as soon as it
            // can see it, and by then no new run may start (or its `turn/end` could land after
            // the session detached) and setup must already be aborted.
            self.creation.cancel();
            self.agent.begin_disposal();
            let this = self.clone();
            let fut = async move { this.teardown().await }.boxed().shared();
            *done = Some(fut.clone());
            fut
        };
        // Outside the lock: cancelling emits events whose listeners may call `dispose` again.
        // A teardown another disposer started meanwhile waits for this run in `when_idle`.
        self.agent
            .cancel(CancelCause::Disposed, CancelOptions::default());
        fut
    }

    async fn teardown(self: Arc<Self>) {
        // 1. Stop and drain: true quiescence, including any replacement run.
        self.agent.when_idle().await;
        if self.agent.session.is_attached()
            && let Some(service) = self.service.upgrade()
            && let Err(e) = service.svc.store.flush(&self.agent.session).await
        {
            tracing::warn!(agent = %self.agent.id(), error = %e, "final flush failed");
        }
        // 2. Unwind the agent's scoped world.
        self.agent.ctx.scope().dispose().await;
        // 3. The agent leaves the registry (`agent/disposed`), then 4. the session leaves the
        // store (`session/disposed`).
        if let Some(d) = self.agent_detach.lock().take() {
            d.detach();
        }
        if let Some(d) = self.session_detach.lock().take() {
            d.detach();
        }
        if let Some(service) = self.service.upgrade() {
            service.lifecycles.lock().remove(&self.key);
        }
        // The owner no longer needs to tear this agent down.
        if let Some((scope, effect)) = self.owner_effect.lock().take() {
            drop(scope.take_effect(effect));
        }
    }
}
