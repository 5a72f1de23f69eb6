//! A list a server owns and may announce changes of (its tools, resources and prompts).
//!
//! The server says `notifications/…/list_changed`; the handler bumps the wanted generation;
//! a refresher task lists again and records the generation it listed for. Readers take the
//! current list without waiting, or wait (bounded) until every announced change is listed:
//! what a step boundary does for tools, and what the resource tools do before answering.

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::watch;

/// Asks the server (the list's owner) for the whole list again.
pub(crate) type Relist<O, T> = fn(Arc<O>) -> BoxFuture<'static, Result<Vec<T>, String>>;

/// One announced-and-relisted list of `T`.
pub(crate) struct Listing<T> {
    current: Mutex<(u64, Arc<Vec<T>>)>,
    wanted: watch::Sender<u64>,
    listed: watch::Sender<u64>,
}

impl<T: Send + Sync + 'static> Listing<T> {
    /// A listing whose first list (`initial`) covers the announcements up to `covered`;
    /// `wanted` is the sender the server's handler bumps.
    pub(crate) fn new(wanted: watch::Sender<u64>, covered: u64, initial: Vec<T>) -> Self {
        Self {
            current: Mutex::new((covered, Arc::new(initial))),
            wanted,
            listed: watch::channel(covered).0,
        }
    }

    /// The list now and the generation it was listed for.
    pub(crate) fn current(&self) -> (u64, Arc<Vec<T>>) {
        let current = self.current.lock();
        (current.0, current.1.clone())
    }

    /// Resolves once every announced change has been listed again (or after `limit`).
    pub(crate) async fn up_to_date(&self, limit: Duration) {
        let target = *self.wanted.borrow();
        let mut listed = self.listed.subscribe();
        let _ = tokio::time::timeout(limit, listed.wait_for(|g| *g >= target)).await;
    }

    /// Lists again whenever a change is announced, until `owner` is gone: `pick` finds this
    /// listing in it, `list` asks the server (bounded by `limit`; a failure keeps the old
    /// list). `what` names the list in the log.
    pub(crate) fn follow<O: Send + Sync + 'static>(
        owner: Weak<O>,
        pick: fn(&O) -> &Listing<T>,
        list: Relist<O, T>,
        limit: Duration,
        what: &'static str,
    ) {
        let Some(mut wanted) = owner.upgrade().map(|o| {
            let me = pick(&o);
            let mut wanted = me.wanted.subscribe();
            // A change announced during start-up, after the first list was asked for, is
            // pending already: subscribing marked it seen, and a reader waiting for it would
            // wait out its limit every time.
            if *wanted.borrow() != *me.listed.borrow() {
                wanted.mark_changed();
            }
            wanted
        }) else {
            return;
        };
        tokio::spawn(async move {
            while wanted.changed().await.is_ok() {
                let generation = *wanted.borrow_and_update();
                let Some(owner) = owner.upgrade() else {
                    return;
                };
                let listing = tokio::time::timeout(limit, list(owner.clone()));
                match listing
                    .await
                    .map_err(|_| "timed out".to_owned())
                    .and_then(|r| r)
                {
                    Ok(listed) => {
                        *pick(&owner).current.lock() = (generation, Arc::new(listed));
                    }
                    Err(error) => {
                        tracing::warn!(%error, "cannot list the changed {what}; keeping the old list");
                    }
                }
                pick(&owner).listed.send_replace(generation);
            }
        });
    }
}
