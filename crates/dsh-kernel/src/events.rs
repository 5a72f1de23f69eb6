//! Typed events with one dispatch mode each, routed by scope tags.
//!
//! An event is a marker type implementing exactly one of [`Notification`] (synchronous fan-out,
//! each listener contained), [`Serial`] (awaited in order, errors propagate), [`Waterfall`]
//! (around-middleware with [`Next`]; the outermost return is authoritative) or [`Parallel`] (all
//! started, all awaited). The mode is part of the event's type, so a caller cannot dispatch an
//! event the wrong way.
//!
//! Routing: a listener registered through an untagged context hears every event; a listener
//! registered through a tagged context hears an event only when the event's carrier tag is its
//! own tag or a descendant of it. Listeners run with no lock held, so they may re-enter the bus
//! (register, dispatch, or call back into whatever emitted the event).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::FutureExt;
use futures::future::BoxFuture;
use parking_lot::RwLock;

use crate::error::BoxError;
use crate::tag::ScopeTag;

/// A synchronous notification. Listeners get `&Payload`; a failing or panicking listener is
/// logged and does not stop the others (see [`EventBus::emit`]), unless the dispatcher uses
/// [`EventBus::try_emit`], where the first failure is a veto.
pub trait Notification: 'static {
    /// Wire-style name used in logs (e.g. `agent/status`).
    const NAME: &'static str;
    /// What listeners receive.
    type Payload: 'static;
}

/// An event whose listeners are awaited one after another; the first error stops the chain and
/// propagates to the dispatcher.
pub trait Serial: 'static {
    /// Wire-style name used in logs.
    const NAME: &'static str;
    /// What each listener receives (cloned per listener).
    type Payload: Clone + Send + 'static;
}

/// An event whose listeners are started together and all awaited; the first error (in
/// registration order) propagates after every listener settled.
pub trait Parallel: 'static {
    /// Wire-style name used in logs.
    const NAME: &'static str;
    /// What each listener receives (cloned per listener).
    type Payload: Clone + Send + 'static;
}

/// Around-middleware: each listener receives the payload and a [`Next`] that runs the rest of
/// the chain down to the dispatcher's default. A listener that never calls `next` short-circuits
/// everything below it. The first registered listener is the outermost.
pub trait Waterfall: 'static {
    /// Wire-style name used in logs.
    const NAME: &'static str;
    /// What flows down the chain (a listener may pass a modified payload to `next`).
    type Payload: Send + 'static;
    /// What flows back up.
    type Output: Send + 'static;
}

type EmitFn<P> = dyn Fn(&P) -> Result<(), BoxError> + Send + Sync;
type AsyncFn<P> = dyn Fn(P) -> BoxFuture<'static, Result<(), BoxError>> + Send + Sync;
type WaterfallFn<E> = dyn Fn(
        <E as Waterfall>::Payload,
        Next<E>,
    ) -> BoxFuture<'static, Result<<E as Waterfall>::Output, BoxError>>
    + Send
    + Sync;
type DefaultFn<E> = Box<
    dyn FnOnce(
            <E as Waterfall>::Payload,
        ) -> BoxFuture<'static, Result<<E as Waterfall>::Output, BoxError>>
        + Send,
>;

struct Listener<F: ?Sized> {
    /// Registration order (the bus' counter).
    id: u64,
    f: Box<F>,
}

type List<F> = Arc<Vec<Arc<Listener<F>>>>;

/// The listeners of one event type. Tagged listeners are filed under their tag, so a dispatch
/// looks at the untagged ones and at those of its carrier's ancestry only, and a registration
/// copies only its own tag's list: with thousands of agents (an editor's sessions), each with
/// its own scoped listeners, neither grows with the number of agents.
struct Table<F: ?Sized> {
    untagged: List<F>,
    /// By [`ScopeTag::id`] (unique per tag, so equal ids are the same tag). A list that becomes
    /// empty is removed.
    tagged: HashMap<u64, List<F>>,
}

impl<F: ?Sized> Default for Table<F> {
    fn default() -> Self {
        Self {
            untagged: Arc::default(),
            tagged: HashMap::new(),
        }
    }
}

impl<F: ?Sized> Table<F> {
    fn list_mut(&mut self, tag: Option<u64>) -> &mut List<F> {
        match tag {
            None => &mut self.untagged,
            Some(id) => self.tagged.entry(id).or_default(),
        }
    }
}

/// The listener tables. One per [`crate::Context`] tree.
#[derive(Default)]
pub struct EventBus {
    lists: RwLock<HashMap<TypeId, Box<dyn Any + Send + Sync>>>,
    next_id: AtomicU64,
}

/// Removes one listener from the bus; held by the registration and by its scope effect.
pub(crate) type Remover = Arc<dyn Fn() + Send + Sync>;

fn panicked(event: &str) -> BoxError {
    format!("listener of `{event}` panicked").into()
}

impl EventBus {
    fn add<F: ?Sized + Send + Sync + 'static>(
        self: &Arc<Self>,
        key: TypeId,
        tag: Option<ScopeTag>,
        f: Box<F>,
    ) -> Remover {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let tag_id = tag.as_ref().map(ScopeTag::id);
        let listener = Arc::new(Listener { id, f });
        {
            let mut lists = self.lists.write();
            let slot = lists
                .entry(key)
                .or_insert_with(|| Box::new(Table::<F>::default()));
            if let Some(table) = slot.downcast_mut::<Table<F>>() {
                // Copy-on-write: dispatchers iterate a snapshot without holding the lock.
                let list = table.list_mut(tag_id);
                let mut next = (**list).clone();
                next.push(listener);
                *list = Arc::new(next);
            }
        }
        let bus = Arc::downgrade(self);
        Arc::new(move || {
            let Some(bus) = bus.upgrade() else { return };
            let mut lists = bus.lists.write();
            let Some(table) = lists
                .get_mut(&key)
                .and_then(|b| b.downcast_mut::<Table<F>>())
            else {
                return;
            };
            let list = match tag_id {
                None => &mut table.untagged,
                Some(t) => match table.tagged.get_mut(&t) {
                    Some(list) => list,
                    None => return,
                },
            };
            if list.iter().any(|l| l.id == id) {
                let next: Vec<_> = list.iter().filter(|l| l.id != id).cloned().collect();
                if next.is_empty()
                    && let Some(t) = tag_id
                {
                    table.tagged.remove(&t);
                } else {
                    *list = Arc::new(next);
                }
            }
        })
    }

    /// The listeners that hear an event carried by `carrier`, in registration order: the
    /// untagged ones and those filed under the carrier or one of its ancestors.
    fn admitted<F: ?Sized + Send + Sync + 'static>(
        &self,
        key: TypeId,
        carrier: Option<&ScopeTag>,
    ) -> Vec<Arc<Listener<F>>> {
        let lists = self.lists.read();
        let Some(table) = lists.get(&key).and_then(|b| b.downcast_ref::<Table<F>>()) else {
            return Vec::new();
        };
        let mut admitted: Vec<Arc<Listener<F>>> = table.untagged.iter().cloned().collect();
        let mut merged = !admitted.is_empty();
        let mut unordered = false;
        for tag in carrier.into_iter().flat_map(ScopeTag::chain) {
            if let Some(list) = table.tagged.get(&tag.id()) {
                unordered |= merged;
                merged = true;
                admitted.extend(list.iter().cloned());
            }
        }
        drop(lists);
        // Each list is in registration order (ids grow); merged, they must be too.
        if unordered {
            admitted.sort_unstable_by_key(|l| l.id);
        }
        admitted
    }

    /// Whether any listener hears an event carried by `carrier`.
    fn any_admitted<F: ?Sized + Send + Sync + 'static>(
        &self,
        key: TypeId,
        carrier: Option<&ScopeTag>,
    ) -> bool {
        let lists = self.lists.read();
        let Some(table) = lists.get(&key).and_then(|b| b.downcast_ref::<Table<F>>()) else {
            return false;
        };
        !table.untagged.is_empty()
            || carrier
                .into_iter()
                .flat_map(ScopeTag::chain)
                .any(|tag| table.tagged.contains_key(&tag.id()))
    }

    pub(crate) fn on_notification<E: Notification>(
        self: &Arc<Self>,
        tag: Option<ScopeTag>,
        f: Box<EmitFn<E::Payload>>,
    ) -> Remover {
        self.add::<EmitFn<E::Payload>>(TypeId::of::<E>(), tag, f)
    }

    pub(crate) fn on_serial<E: Serial>(
        self: &Arc<Self>,
        tag: Option<ScopeTag>,
        f: Box<AsyncFn<E::Payload>>,
    ) -> Remover {
        self.add::<AsyncFn<E::Payload>>(TypeId::of::<E>(), tag, f)
    }

    pub(crate) fn on_parallel<E: Parallel>(
        self: &Arc<Self>,
        tag: Option<ScopeTag>,
        f: Box<AsyncFn<E::Payload>>,
    ) -> Remover {
        self.add::<AsyncFn<E::Payload>>(TypeId::of::<E>(), tag, f)
    }

    pub(crate) fn on_waterfall<E: Waterfall>(
        self: &Arc<Self>,
        tag: Option<ScopeTag>,
        f: Box<WaterfallFn<E>>,
    ) -> Remover {
        self.add::<WaterfallFn<E>>(TypeId::of::<E>(), tag, f)
    }

    /// Delivers a notification to every admitted listener, synchronously and in registration
    /// order. A listener's error or panic is logged and the remaining listeners still run.
    pub fn emit<E: Notification>(&self, carrier: Option<&ScopeTag>, payload: &E::Payload) {
        for l in self.admitted::<EmitFn<E::Payload>>(TypeId::of::<E>(), carrier) {
            match std::panic::catch_unwind(AssertUnwindSafe(|| (l.f)(payload))) {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    tracing::warn!(event = E::NAME, %error, "event listener failed");
                }
                Err(_) => tracing::warn!(event = E::NAME, "event listener panicked"),
            }
        }
    }

    /// Delivers a notification, stopping at the first listener that fails or panics and
    /// returning that failure: a veto. Listeners before it have already observed the event.
    pub fn try_emit<E: Notification>(
        &self,
        carrier: Option<&ScopeTag>,
        payload: &E::Payload,
    ) -> Result<(), BoxError> {
        for l in self.admitted::<EmitFn<E::Payload>>(TypeId::of::<E>(), carrier) {
            match std::panic::catch_unwind(AssertUnwindSafe(|| (l.f)(payload))) {
                Ok(Ok(())) => {}
                Ok(Err(error)) => return Err(error),
                Err(_) => return Err(panicked(E::NAME)),
            }
        }
        Ok(())
    }

    /// Awaits each admitted listener in registration order; the first error stops the chain.
    pub fn serial<E: Serial>(
        &self,
        carrier: Option<&ScopeTag>,
        payload: E::Payload,
    ) -> impl Future<Output = Result<(), BoxError>> + Send + 'static {
        let listeners = self.admitted::<AsyncFn<E::Payload>>(TypeId::of::<E>(), carrier);
        async move {
            for l in listeners {
                start::<()>(|| (l.f)(payload.clone()), E::NAME).await?;
            }
            Ok(())
        }
    }

    /// Starts every admitted listener, awaits them all, then returns the first error in
    /// registration order.
    pub fn parallel<E: Parallel>(
        &self,
        carrier: Option<&ScopeTag>,
        payload: E::Payload,
    ) -> impl Future<Output = Result<(), BoxError>> + Send + 'static {
        let listeners = self.admitted::<AsyncFn<E::Payload>>(TypeId::of::<E>(), carrier);
        let futures: Vec<_> = listeners
            .iter()
            .map(|l| start::<()>(|| (l.f)(payload.clone()), E::NAME))
            .collect();
        async move {
            for result in futures::future::join_all(futures).await {
                result?;
            }
            Ok(())
        }
    }

    /// Runs the admitted middleware chain around `default`; returns the outermost result.
    pub fn waterfall<E: Waterfall>(
        &self,
        carrier: Option<&ScopeTag>,
        payload: E::Payload,
        default: impl FnOnce(E::Payload) -> BoxFuture<'static, Result<E::Output, BoxError>>
        + Send
        + 'static,
    ) -> BoxFuture<'static, Result<E::Output, BoxError>> {
        let chain = Arc::new(self.admitted::<WaterfallFn<E>>(TypeId::of::<E>(), carrier));
        Next::<E> {
            chain,
            index: 0,
            default: Box::new(default),
            _event: PhantomData,
        }
        .run(payload)
    }

    /// Whether a notification has any listener admitted for `carrier`, so an emitter can skip
    /// building an expensive payload nobody will read.
    pub fn has_listeners<E: Notification>(&self, carrier: Option<&ScopeTag>) -> bool {
        self.any_admitted::<EmitFn<E::Payload>>(TypeId::of::<E>(), carrier)
    }
}

/// Calls a listener and guards the future it returns; a panic while the listener builds its
/// future is reported like a panic inside it.
fn start<T>(
    call: impl FnOnce() -> BoxFuture<'static, Result<T, BoxError>>,
    name: &'static str,
) -> BoxFuture<'static, Result<T, BoxError>>
where
    T: Send + 'static,
{
    match std::panic::catch_unwind(AssertUnwindSafe(call)) {
        Ok(fut) => guard::<T>(fut, name),
        Err(_) => futures::future::ready(Err(panicked(name))).boxed(),
    }
}

fn guard<T>(
    fut: BoxFuture<'static, Result<T, BoxError>>,
    name: &'static str,
) -> BoxFuture<'static, Result<T, BoxError>>
where
    T: Send + 'static,
{
    AssertUnwindSafe(fut)
        .catch_unwind()
        .map(move |r| r.unwrap_or_else(|_| Err(panicked(name))))
        .boxed()
}

/// The rest of a waterfall chain, handed to each middleware listener. Calling [`Next::run`]
/// runs the inner listeners and finally the dispatcher's default; not calling it
/// short-circuits them.
pub struct Next<E: Waterfall> {
    chain: Arc<Vec<Arc<Listener<WaterfallFn<E>>>>>,
    index: usize,
    default: DefaultFn<E>,
    _event: PhantomData<fn() -> E>,
}

impl<E: Waterfall> Next<E> {
    /// Runs the rest of the chain with `payload` (possibly modified by the caller).
    pub fn run(self, payload: E::Payload) -> BoxFuture<'static, Result<E::Output, BoxError>> {
        match self.chain.get(self.index).cloned() {
            Some(listener) => {
                let next = Next {
                    chain: self.chain,
                    index: self.index + 1,
                    default: self.default,
                    _event: PhantomData,
                };
                let fut =
                    std::panic::catch_unwind(AssertUnwindSafe(|| (listener.f)(payload, next)));
                match fut {
                    Ok(fut) => guard::<E::Output>(fut, E::NAME),
                    Err(_) => futures::future::ready(Err(panicked(E::NAME))).boxed(),
                }
            }
            None => (self.default)(payload),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Ping;
    impl Notification for Ping {
        const NAME: &'static str = "test/ping";
        type Payload = ();
    }

    fn tagged_lists(bus: &EventBus) -> usize {
        bus.lists
            .read()
            .get(&TypeId::of::<Ping>())
            .and_then(|b| b.downcast_ref::<Table<EmitFn<()>>>())
            .map_or(0, |t| t.tagged.len())
    }

    /// A scope that comes and goes (an editor session) leaves no empty list behind: a process
    /// that opened and closed thousands of sessions does not keep a table entry for each.
    #[test]
    fn removing_a_tags_last_listener_drops_its_list() {
        let bus = Arc::new(EventBus::default());
        let tag = ScopeTag::new("session");
        let first = bus.on_notification::<Ping>(Some(tag.clone()), Box::new(|()| Ok(())));
        let second = bus.on_notification::<Ping>(Some(tag.clone()), Box::new(|()| Ok(())));
        assert_eq!(tagged_lists(&bus), 1);
        first();
        assert_eq!(tagged_lists(&bus), 1, "one listener is left");
        assert!(bus.any_admitted::<EmitFn<()>>(TypeId::of::<Ping>(), Some(&tag)));
        second();
        assert_eq!(tagged_lists(&bus), 0);
        assert!(!bus.any_admitted::<EmitFn<()>>(TypeId::of::<Ping>(), Some(&tag)));
    }
}
