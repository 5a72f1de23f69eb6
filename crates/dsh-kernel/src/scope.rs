//! Scopes: ownership of effects, undone in reverse order.
//!
//! Every registration in dsh (a service, a listener, a tool, a prompt section, a whole plugin)
//! is an *effect* owned by a [`Scope`]. Disposing the scope undoes its child scopes first (newest
//! first) and then its own effects, last registered first, so teardown mirrors setup. Disposal is
//! idempotent and shared: every caller awaits the same completion, which is what lets several
//! owners (a handle, a caller's unload, a provider's unload) converge on one boundary.

use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use parking_lot::Mutex;

use crate::error::KernelError;

static NEXT_SCOPE: AtomicU64 = AtomicU64::new(1);

/// An undo action owned by a scope.
pub enum Effect {
    /// Runs synchronously.
    Sync(Box<dyn FnOnce() + Send>),
    /// Runs asynchronously; the scope awaits it before undoing earlier effects.
    Async(Box<dyn FnOnce() -> BoxFuture<'static, ()> + Send>),
}

impl Effect {
    /// Runs the effect, containing a panic so the rest of a teardown still happens.
    pub async fn run(self, scope: &str) {
        match self {
            Effect::Sync(f) => {
                if std::panic::catch_unwind(AssertUnwindSafe(f)).is_err() {
                    tracing::warn!(scope, "scope effect panicked during disposal");
                }
            }
            Effect::Async(f) => {
                let fut = std::panic::catch_unwind(AssertUnwindSafe(f));
                let ok = match fut {
                    Ok(fut) => AssertUnwindSafe(fut).catch_unwind().await.is_ok(),
                    Err(_) => false,
                };
                if !ok {
                    tracing::warn!(scope, "async scope effect panicked during disposal");
                }
            }
        }
    }
}

/// Identifies one effect inside its scope, so its owner can undo it early.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EffectId(u64);

/// A node of the ownership tree. Cheap to clone; clones are the same scope.
#[derive(Clone)]
pub struct Scope(Arc<ScopeInner>);

struct ScopeInner {
    id: u64,
    label: String,
    parent: Option<Weak<ScopeInner>>,
    state: Mutex<State>,
}

enum State {
    Active {
        effects: Vec<(EffectId, Effect)>,
        children: Vec<Scope>,
        next_effect: u64,
    },
    /// Disposal started; every caller awaits this one future.
    Disposing(Shared<BoxFuture<'static, ()>>),
}

impl Scope {
    /// A new root scope.
    pub fn root(label: impl Into<String>) -> Self {
        Self::with_parent(label.into(), None)
    }

    fn with_parent(label: String, parent: Option<Weak<ScopeInner>>) -> Self {
        Self(Arc::new(ScopeInner {
            id: NEXT_SCOPE.fetch_add(1, Ordering::Relaxed),
            label,
            parent,
            state: Mutex::new(State::Active {
                effects: Vec::new(),
                children: Vec::new(),
                next_effect: 0,
            }),
        }))
    }

    /// A child scope, disposed before this scope's own effects. Fails if this scope is
    /// disposed, so nothing can be attached to a dead owner.
    pub fn child(&self, label: impl Into<String>) -> Result<Scope, KernelError> {
        let child = Self::with_parent(label.into(), Some(Arc::downgrade(&self.0)));
        match &mut *self.0.state.lock() {
            State::Active { children, .. } => {
                children.push(child.clone());
                Ok(child)
            }
            State::Disposing(_) => Err(self.disposed_error()),
        }
    }

    /// The diagnostic label.
    pub fn label(&self) -> &str {
        &self.0.label
    }

    /// A process-unique number for this scope.
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// Whether registrations are still accepted.
    pub fn is_active(&self) -> bool {
        matches!(&*self.0.state.lock(), State::Active { .. })
    }

    /// Registers a synchronous undo action.
    pub fn defer(&self, f: impl FnOnce() + Send + 'static) -> Result<EffectId, KernelError> {
        self.add(Effect::Sync(Box::new(f)))
    }

    /// Registers an asynchronous undo action, awaited in LIFO order during disposal.
    pub fn defer_async<F, Fut>(&self, f: F) -> Result<EffectId, KernelError>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.add(Effect::Async(Box::new(move || f().boxed())))
    }

    /// Registers an effect.
    pub fn add(&self, effect: Effect) -> Result<EffectId, KernelError> {
        match &mut *self.0.state.lock() {
            State::Active {
                effects,
                next_effect,
                ..
            } => {
                let id = EffectId(*next_effect);
                *next_effect += 1;
                effects.push((id, effect));
                Ok(id)
            }
            State::Disposing(_) => Err(self.disposed_error()),
        }
    }

    /// Removes an effect without running it and hands it back, so its owner can run it now.
    /// `None` if the scope already ran (or is running) it.
    pub fn take_effect(&self, id: EffectId) -> Option<Effect> {
        match &mut *self.0.state.lock() {
            State::Active { effects, .. } => {
                let pos = effects.iter().position(|(e, _)| *e == id)?;
                Some(effects.remove(pos).1)
            }
            State::Disposing(_) => None,
        }
    }

    /// Disposes the scope: child scopes first (newest first), then its own effects in reverse
    /// registration order. Idempotent; concurrent callers all await the same completion.
    pub fn dispose(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut state = self.0.state.lock();
        match &mut *state {
            State::Disposing(shared) => shared.clone(),
            State::Active {
                effects, children, ..
            } => {
                let effects = std::mem::take(effects);
                let children = std::mem::take(children);
                let this = self.clone();
                let fut = async move {
                    for child in children.into_iter().rev() {
                        child.dispose().await;
                    }
                    for (_, effect) in effects.into_iter().rev() {
                        effect.run(this.label()).await;
                    }
                    this.detach_from_parent();
                }
                .boxed()
                .shared();
                *state = State::Disposing(fut.clone());
                fut
            }
        }
    }

    fn detach_from_parent(&self) {
        let Some(parent) = self.0.parent.as_ref().and_then(Weak::upgrade) else {
            return;
        };
        if let State::Active { children, .. } = &mut *parent.state.lock() {
            children.retain(|c| !Arc::ptr_eq(&c.0, &self.0));
        }
    }

    fn disposed_error(&self) -> KernelError {
        KernelError::ScopeDisposed {
            scope: self.0.label.clone(),
        }
    }

    /// Whether `self` and `other` are the same scope.
    pub fn same(&self, other: &Scope) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl fmt::Debug for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Scope({}#{})", self.0.label, self.0.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn log() -> Arc<Mutex<Vec<String>>> {
        Arc::new(Mutex::new(Vec::new()))
    }

    #[tokio::test]
    async fn effects_are_undone_last_first_after_children() {
        let out = log();
        let root = Scope::root("root");
        let o = out.clone();
        root.defer(move || o.lock().push("root-1".into())).unwrap();
        let child = root.child("child").unwrap();
        let o = out.clone();
        child
            .defer(move || o.lock().push("child-1".into()))
            .unwrap();
        let o = out.clone();
        root.defer_async(move || async move { o.lock().push("root-2".into()) })
            .unwrap();
        root.dispose().await;
        assert_eq!(*out.lock(), ["child-1", "root-2", "root-1"]);
    }

    #[tokio::test]
    async fn dispose_is_idempotent_and_shared_by_concurrent_callers() {
        let out = log();
        let scope = Scope::root("s");
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let o = out.clone();
        scope
            .defer_async(move || async move {
                let _ = rx.await;
                o.lock().push("done".into());
            })
            .unwrap();
        let first = tokio::spawn(scope.dispose());
        let second = tokio::spawn(scope.dispose());
        tokio::task::yield_now().await;
        assert!(!first.is_finished() && !second.is_finished());
        tx.send(()).unwrap();
        first.await.unwrap();
        second.await.unwrap();
        scope.dispose().await;
        assert_eq!(*out.lock(), ["done"]);
    }

    #[tokio::test]
    async fn registering_through_a_disposed_scope_fails() {
        let scope = Scope::root("gone");
        scope.dispose().await;
        assert!(matches!(
            scope.defer(|| {}),
            Err(KernelError::ScopeDisposed { .. })
        ));
        assert!(scope.child("late").is_err());
        assert!(!scope.is_active());
    }

    #[tokio::test]
    async fn a_panicking_effect_does_not_stop_the_teardown() {
        let out = log();
        let scope = Scope::root("s");
        let o = out.clone();
        scope.defer(move || o.lock().push("first".into())).unwrap();
        scope.defer(|| panic!("boom")).unwrap();
        scope.dispose().await;
        assert_eq!(*out.lock(), ["first"]);
    }

    #[tokio::test]
    async fn a_child_disposed_early_leaves_its_parent() {
        let root = Scope::root("root");
        let child = root.child("child").unwrap();
        child.dispose().await;
        match &*root.0.state.lock() {
            State::Active { children, .. } => assert!(children.is_empty()),
            State::Disposing(_) => panic!("root should be active"),
        }
    }

    #[tokio::test]
    async fn taken_effects_are_not_run_again_by_the_scope() {
        let out = log();
        let scope = Scope::root("s");
        let o = out.clone();
        let id = scope.defer(move || o.lock().push("x".into())).unwrap();
        scope.take_effect(id).unwrap().run("s").await;
        scope.dispose().await;
        assert_eq!(*out.lock(), ["x"]);
    }
}
