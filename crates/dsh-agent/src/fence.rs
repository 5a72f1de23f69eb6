//! Work that must be over before anything changes a session's workspace.
//!
//! A plugin that records the workspace beside other work (the turn checkpoint, taken while the
//! turn's first model request is built and sent) [`hold`](WorkspaceFence::hold)s the fence for
//! the session; whatever is about to change files on the session's behalf (its tool calls, its
//! hooks) [`pass`](WorkspaceFence::pass)es it first. The record then shows the workspace as it
//! was before the session touched it, as if it had been taken first, without the model request
//! waiting for it.

use std::collections::HashMap;
use std::future::Future;

use dsh_session::SessionId;
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use parking_lot::Mutex;

/// Pending work per session (see the module docs). Provided in the root context by the plugin
/// that holds it; absent, nothing is ever held.
#[derive(Default)]
pub struct WorkspaceFence {
    held: Mutex<HashMap<SessionId, Shared<BoxFuture<'static, ()>>>>,
}

impl std::fmt::Debug for WorkspaceFence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkspaceFence")
            .field("held", &self.held.lock().len())
            .finish()
    }
}

impl WorkspaceFence {
    /// Holds the fence of `session` until `work` is done; work held earlier is awaited first,
    /// so holders finish in the order they held.
    pub fn hold(&self, session: &SessionId, work: impl Future<Output = ()> + Send + 'static) {
        let mut held = self.held.lock();
        let before = held.remove(session);
        let work = async move {
            if let Some(before) = before {
                before.await;
            }
            work.await;
        }
        .boxed()
        .shared();
        held.insert(session.clone(), work);
    }

    /// Waits until nothing holds the fence of `session` (at once when nothing does). Several
    /// callers may wait at the same time; each returns only once the held work is done.
    pub async fn pass(&self, session: &SessionId) {
        let Some(work) = self.held.lock().get(session).cloned() else {
            return;
        };
        work.clone().await;
        // Forget finished work, unless someone held the fence again meanwhile.
        let mut held = self.held.lock();
        if held.get(session).is_some_and(|w| w.peek().is_some()) {
            held.remove(session);
        }
    }

    /// Whether work for `session` is still pending.
    pub fn is_held(&self, session: &SessionId) -> bool {
        self.held
            .lock()
            .get(session)
            .is_some_and(|w| w.peek().is_none())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::oneshot;

    #[tokio::test]
    async fn passing_waits_for_held_work_and_is_free_when_nothing_is_held() {
        let fence = std::sync::Arc::new(WorkspaceFence::default());
        let s = SessionId::new("s");
        fence.pass(&s).await;
        let (done, finished) = oneshot::channel::<()>();
        fence.hold(&s, async move {
            let _ = finished.await;
        });
        assert!(fence.is_held(&s));
        let passer = tokio::spawn({
            let fence = fence.clone();
            let s = s.clone();
            async move { fence.pass(&s).await }
        });
        tokio::task::yield_now().await;
        assert!(!passer.is_finished(), "passed while the work was pending");
        done.send(()).unwrap();
        bounded(passer).await;
        assert!(!fence.is_held(&s));
        // Another session was never held.
        fence.pass(&SessionId::new("other")).await;
    }

    #[tokio::test]
    async fn later_holders_finish_after_earlier_ones() {
        let fence = WorkspaceFence::default();
        let s = SessionId::new("s");
        let order = std::sync::Arc::new(Mutex::new(Vec::new()));
        let (first_go, first_wait) = oneshot::channel::<()>();
        let o = order.clone();
        fence.hold(&s, async move {
            let _ = first_wait.await;
            o.lock().push(1);
        });
        let o = order.clone();
        fence.hold(&s, async move { o.lock().push(2) });
        first_go.send(()).unwrap();
        fence.pass(&s).await;
        assert_eq!(*order.lock(), vec![1, 2]);
    }

    async fn bounded(task: tokio::task::JoinHandle<()>) {
        tokio::time::timeout(std::time::Duration::from_secs(10), task)
            .await
            .expect("bounded")
            .expect("joined");
    }
}
