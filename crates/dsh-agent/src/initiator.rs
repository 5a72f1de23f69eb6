//! The initiator scope: which agent started the driver work the current task is doing.
//!
//! Tools and services read it for attribution when no explicit agent was passed. It is
//! process-local and carries no authority: ambient presence proves neither liveness nor
//! permission, and every API that crosses a service, process, persistence or wire boundary
//! takes the agent explicitly instead.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::agent::AgentRef;
use crate::error::AgentError;

tokio::task_local! {
    static INITIATOR: Option<AgentRef>;
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Open,
    Closing,
    Disposed,
}

struct Inner {
    state: Mutex<State>,
    active: AtomicUsize,
    drained: Notify,
}

/// Boundaries that carry an initiating agent through asynchronous work.
pub struct InitiatorScope {
    inner: Arc<Inner>,
}

impl Default for InitiatorScope {
    fn default() -> Self {
        Self {
            inner: Arc::new(Inner {
                state: Mutex::new(State::Open),
                active: AtomicUsize::new(0),
                drained: Notify::new(),
            }),
        }
    }
}

struct ActiveGuard(Arc<Inner>);

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::AcqRel);
        self.0.drained.notify_waiters();
    }
}

impl InitiatorScope {
    /// The inherited initiator, if any.
    pub fn current(&self) -> Result<Option<AgentRef>, AgentError> {
        if *self.inner.state.lock() == State::Disposed {
            return Err(AgentError::InitiatorDisposed);
        }
        Ok(INITIATOR.try_with(Clone::clone).ok().flatten())
    }

    /// The inherited initiator, or [`AgentError::NoInitiator`].
    pub fn require(&self) -> Result<AgentRef, AgentError> {
        self.current()?.ok_or(AgentError::NoInitiator)
    }

    /// Runs `fut` with `agent` as the initiator (or none, to hide an inherited one). Nested
    /// boundaries restore the outer value when they finish; concurrent boundaries are
    /// isolated. Refused once the scope is closing.
    pub fn scope<F: Future>(
        &self,
        agent: Option<AgentRef>,
        fut: F,
    ) -> Result<impl Future<Output = F::Output> + use<F>, AgentError> {
        if *self.inner.state.lock() != State::Open {
            return Err(AgentError::InitiatorDisposed);
        }
        self.inner.active.fetch_add(1, Ordering::AcqRel);
        let guard = ActiveGuard(self.inner.clone());
        Ok(async move {
            let _guard = guard;
            INITIATOR.scope(agent, fut).await
        })
    }

    /// Runs `f` synchronously with `agent` as the initiator.
    pub fn scope_sync<R>(
        &self,
        agent: Option<AgentRef>,
        f: impl FnOnce() -> R,
    ) -> Result<R, AgentError> {
        if *self.inner.state.lock() != State::Open {
            return Err(AgentError::InitiatorDisposed);
        }
        Ok(INITIATOR.sync_scope(agent, f))
    }

    /// Closes the scope: new boundaries are refused, active ones drain, then reads fail. A
    /// boundary that itself triggered the close is not waited for (it cannot finish first).
    pub async fn close(&self) {
        {
            let mut state = self.inner.state.lock();
            if *state != State::Open {
                return;
            }
            *state = State::Closing;
        }
        let inside = usize::from(INITIATOR.try_with(|_| ()).is_ok());
        loop {
            let notified = self.inner.drained.notified();
            if self.inner.active.load(Ordering::Acquire) <= inside {
                break;
            }
            notified.await;
        }
        *self.inner.state.lock() = State::Disposed;
    }
}
