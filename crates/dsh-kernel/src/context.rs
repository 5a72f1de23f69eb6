//! The context every plugin registers through.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use futures::FutureExt;

use crate::error::{BoxError, KernelError};
use crate::events::{EventBus, Next, Notification, Parallel, Remover, Serial, Waterfall};
use crate::plugin::{Plugin, PluginHandle};
use crate::scope::{EffectId, Scope};
use crate::services::Services;
use crate::tag::ScopeTag;

struct Runtime {
    services: Services,
    bus: Arc<EventBus>,
}

type Locals = Arc<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>;

/// A cheap-to-clone handle on the shared runtime (services and events), bound to the [`Scope`]
/// that owns whatever is registered through it and to an optional routing [`ScopeTag`].
///
/// Every registration is an effect of the context's scope: disposing the scope undoes it. A
/// context whose scope is disposed refuses new registrations with
/// [`KernelError::ScopeDisposed`].
#[derive(Clone)]
pub struct Context {
    rt: Arc<Runtime>,
    scope: Scope,
    tag: Option<ScopeTag>,
    locals: Locals,
}

impl Default for Context {
    fn default() -> Self {
        Self::new()
    }
}

impl Context {
    /// A fresh runtime with an untagged root scope.
    pub fn new() -> Self {
        Self {
            rt: Arc::new(Runtime {
                services: Services::default(),
                bus: Arc::new(EventBus::default()),
            }),
            scope: Scope::root("root"),
            tag: None,
            locals: Arc::default(),
        }
    }

    /// The scope that owns registrations made through this context.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// The routing tag, if this is a scoped context.
    pub fn tag(&self) -> Option<&ScopeTag> {
        self.tag.as_ref()
    }

    /// The event bus, for dispatching with an explicit carrier.
    pub fn events(&self) -> &EventBus {
        &self.rt.bus
    }

    /// Whether registrations are still accepted.
    pub fn is_active(&self) -> bool {
        self.scope.is_active()
    }

    /// A context over a new child scope (same tag): everything registered through it is undone
    /// when the child is disposed, or when this context's scope is.
    pub fn child(&self, label: impl Into<String>) -> Result<Context, KernelError> {
        Ok(Context {
            scope: self.scope.child(label)?,
            ..self.clone()
        })
    }

    /// A context over a new child scope carrying `tag`: registrations through it are scoped
    /// (visible only to that tag and its descendants) and owned by the new scope.
    pub fn tagged_child(
        &self,
        label: impl Into<String>,
        tag: ScopeTag,
    ) -> Result<Context, KernelError> {
        Ok(Context {
            scope: self.scope.child(label)?,
            tag: Some(tag),
            ..self.clone()
        })
    }

    /// A context over a new *root* scope sharing this runtime: nothing owns it implicitly.
    /// Used where teardown order matters more than tree structure (an agent's scope is unwound
    /// by the agent's own ordered teardown, not by its creator's scope disposing children).
    pub fn isolated(&self, label: impl Into<String>, tag: Option<ScopeTag>) -> Context {
        Context {
            scope: Scope::root(label),
            tag,
            ..self.clone()
        }
    }

    /// The same context, with a context-local value attached (e.g. the agent a scoped context
    /// belongs to). Derived contexts inherit it.
    pub fn with_local<T: Send + Sync + 'static>(&self, value: Arc<T>) -> Context {
        let mut locals = (*self.locals).clone();
        locals.insert(TypeId::of::<T>(), value);
        Context {
            locals: Arc::new(locals),
            ..self.clone()
        }
    }

    /// A context-local value attached with [`Context::with_local`].
    pub fn local<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        self.locals
            .get(&TypeId::of::<T>())
            .cloned()
            .and_then(|v| v.downcast::<T>().ok())
    }

    /// The same context, routed as untagged (global) while keeping the same owning scope.
    pub fn global(&self) -> Context {
        Context {
            tag: None,
            ..self.clone()
        }
    }

    // ---- services -------------------------------------------------------------------------

    /// Provides a service of type `T` (usually a trait object). The provision is an effect of
    /// this context's scope: disposing the scope withdraws it.
    pub fn provide<T: ?Sized + Send + Sync + 'static>(
        &self,
        value: Arc<T>,
    ) -> Result<(), KernelError> {
        let name = Services::name::<T>();
        if !self.scope.is_active() {
            return Err(KernelError::ScopeDisposed {
                scope: self.scope.label().to_owned(),
            });
        }
        let provision = self
            .rt
            .services
            .insert(value)
            .ok_or(KernelError::ServiceAlreadyProvided { service: name })?;
        let rt = self.rt.clone();
        let undo = move || rt.services.remove::<T>(provision);
        if let Err(e) = self.scope.defer(undo) {
            self.rt.services.remove::<T>(provision);
            return Err(e);
        }
        Ok(())
    }

    /// The service of type `T`, if provided.
    pub fn get<T: ?Sized + Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        self.rt.services.get::<T>()
    }

    /// The service of type `T`, or an error naming it.
    pub fn require<T: ?Sized + Send + Sync + 'static>(&self) -> Result<Arc<T>, KernelError> {
        self.get::<T>().ok_or(KernelError::MissingService {
            service: Services::name::<T>(),
        })
    }

    // ---- listeners ------------------------------------------------------------------------

    fn register(
        &self,
        tag: Option<ScopeTag>,
        add: impl FnOnce(Option<ScopeTag>) -> Remover,
    ) -> Result<Registration, KernelError> {
        if !self.scope.is_active() {
            return Err(KernelError::ScopeDisposed {
                scope: self.scope.label().to_owned(),
            });
        }
        let remover = add(tag);
        let undo = remover.clone();
        match self.scope.defer(move || undo()) {
            Ok(effect) => Ok(Registration {
                scope: self.scope.clone(),
                effect,
            }),
            Err(e) => {
                remover();
                Err(e)
            }
        }
    }

    /// Listens to a notification through this context (scoped if the context is tagged).
    pub fn on<E: Notification>(
        &self,
        f: impl Fn(&E::Payload) + Send + Sync + 'static,
    ) -> Result<Registration, KernelError> {
        self.on_fallible::<E>(move |p| {
            f(p);
            Ok(())
        })
    }

    /// Listens to a notification with a listener that may fail (a failure is logged, or is a
    /// veto where the dispatcher uses `try_emit`).
    pub fn on_fallible<E: Notification>(
        &self,
        f: impl Fn(&E::Payload) -> Result<(), BoxError> + Send + Sync + 'static,
    ) -> Result<Registration, KernelError> {
        let bus = self.rt.bus.clone();
        self.register(self.tag.clone(), move |tag| {
            bus.on_notification::<E>(tag, Box::new(f))
        })
    }

    /// Listens to a notification for every carrier, even through a tagged context.
    pub fn on_global<E: Notification>(
        &self,
        f: impl Fn(&E::Payload) + Send + Sync + 'static,
    ) -> Result<Registration, KernelError> {
        let bus = self.rt.bus.clone();
        self.register(None, move |tag| {
            bus.on_notification::<E>(
                tag,
                Box::new(move |p| {
                    f(p);
                    Ok(())
                }),
            )
        })
    }

    /// Listens to a serial event.
    pub fn on_serial<E: Serial, Fut>(
        &self,
        f: impl Fn(E::Payload) -> Fut + Send + Sync + 'static,
    ) -> Result<Registration, KernelError>
    where
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        let bus = self.rt.bus.clone();
        self.register(self.tag.clone(), move |tag| {
            bus.on_serial::<E>(tag, Box::new(move |p| f(p).boxed()))
        })
    }

    /// Listens to a parallel event.
    pub fn on_parallel<E: Parallel, Fut>(
        &self,
        f: impl Fn(E::Payload) -> Fut + Send + Sync + 'static,
    ) -> Result<Registration, KernelError>
    where
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        let bus = self.rt.bus.clone();
        self.register(self.tag.clone(), move |tag| {
            bus.on_parallel::<E>(tag, Box::new(move |p| f(p).boxed()))
        })
    }

    /// Adds middleware to a waterfall event.
    pub fn on_waterfall<E: Waterfall, Fut>(
        &self,
        f: impl Fn(E::Payload, Next<E>) -> Fut + Send + Sync + 'static,
    ) -> Result<Registration, KernelError>
    where
        Fut: Future<Output = Result<E::Output, BoxError>> + Send + 'static,
    {
        let bus = self.rt.bus.clone();
        self.register(self.tag.clone(), move |tag| {
            bus.on_waterfall::<E>(tag, Box::new(move |p, next| f(p, next).boxed()))
        })
    }

    // ---- dispatch (carrier = this context's tag) --------------------------------------------

    /// Emits a contained notification carried by this context's tag.
    pub fn emit<E: Notification>(&self, payload: &E::Payload) {
        self.rt.bus.emit::<E>(self.tag.as_ref(), payload);
    }

    /// Emits a vetoable notification carried by this context's tag.
    pub fn try_emit<E: Notification>(&self, payload: &E::Payload) -> Result<(), BoxError> {
        self.rt.bus.try_emit::<E>(self.tag.as_ref(), payload)
    }

    /// Runs a serial event carried by this context's tag.
    pub fn serial<E: Serial>(
        &self,
        payload: E::Payload,
    ) -> impl Future<Output = Result<(), BoxError>> + Send + 'static {
        self.rt.bus.serial::<E>(self.tag.as_ref(), payload)
    }

    /// Runs a parallel event carried by this context's tag.
    pub fn parallel<E: Parallel>(
        &self,
        payload: E::Payload,
    ) -> impl Future<Output = Result<(), BoxError>> + Send + 'static {
        self.rt.bus.parallel::<E>(self.tag.as_ref(), payload)
    }

    /// Runs a waterfall carried by this context's tag around `default`.
    pub fn waterfall<E: Waterfall>(
        &self,
        payload: E::Payload,
        default: impl FnOnce(
            E::Payload,
        )
            -> futures::future::BoxFuture<'static, Result<E::Output, BoxError>>
        + Send
        + 'static,
    ) -> futures::future::BoxFuture<'static, Result<E::Output, BoxError>> {
        self.rt
            .bus
            .waterfall::<E>(self.tag.as_ref(), payload, default)
    }

    // ---- plugins ----------------------------------------------------------------------------

    /// Mounts a plugin in a new child scope. If `apply` fails, everything it registered is
    /// rolled back before the error is returned. The handle's `dispose` unmounts it; mounting
    /// the same plugin again afterwards is supported.
    pub async fn plugin<P: Plugin>(&self, plugin: P) -> Result<PluginHandle, KernelError> {
        let name = plugin.name().to_owned();
        let ctx = self.child(format!("plugin:{name}"))?;
        match plugin.apply(&ctx).await {
            Ok(()) => Ok(PluginHandle::new(name, ctx)),
            Err(source) => {
                ctx.scope().dispose().await;
                Err(KernelError::PluginApply {
                    plugin: name,
                    source,
                })
            }
        }
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("scope", &self.scope)
            .field("tag", &self.tag)
            .finish_non_exhaustive()
    }
}

/// One registration (listener, registry entry): an effect of the scope it was made through.
/// Dropping it does nothing; [`Registration::dispose`] undoes it early.
#[must_use = "dropping a registration keeps it alive until its scope is disposed; bind it to `_` to say so"]
#[derive(Debug)]
pub struct Registration {
    scope: Scope,
    effect: EffectId,
}

impl Registration {
    /// Wraps an effect already added to `scope` (used by registries built on the kernel).
    pub fn from_effect(scope: Scope, effect: EffectId) -> Self {
        Self { scope, effect }
    }

    /// Undoes the registration now (no-op if its scope already undid it).
    pub async fn dispose(self) {
        if let Some(effect) = self.scope.take_effect(self.effect) {
            effect.run(self.scope.label()).await;
        }
    }
}
