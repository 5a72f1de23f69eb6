//! Per-agent routes: a service replaced for exactly one agent.
//!
//! Services in a context are process-wide (one per type). Some are not: an editor driving an
//! agent offers *its* buffers and *its* terminal for that agent's calls only, while every
//! other agent (its subagents included) keeps the local ones. A [`Routes`] service holds those
//! per-agent replacements, keyed by the agent's scope tag; a tool asks it for the caller's
//! route and falls back to the process-wide service when there is none.

use std::sync::Arc;

use dsh_kernel::{Context, KernelError, Registration, ScopedRegistry};

use crate::caller::ToolCaller;

/// The one entry name per layer: a route is "the" replacement of its service for that agent.
const ROUTE: &str = "route";

/// Per-agent replacements of service `T`, provided as `ctx.provide::<Routes<T>>(..)` by
/// whoever routes (see [`Routes::shared`]).
pub struct Routes<T: ?Sized> {
    registry: Arc<ScopedRegistry<Arc<T>>>,
}

impl<T: ?Sized + Send + Sync + 'static> Routes<T> {
    /// The `Routes<T>` service of `ctx`, provided now if nobody has yet. Two callers racing
    /// to provide it end up sharing whichever provision won.
    pub fn shared(ctx: &Context) -> Result<Arc<Routes<T>>, KernelError> {
        if let Some(routes) = ctx.get::<Routes<T>>() {
            return Ok(routes);
        }
        let routes = Arc::new(Routes {
            registry: ScopedRegistry::new(),
        });
        match ctx.provide::<Routes<T>>(routes.clone()) {
            Ok(()) => Ok(routes),
            Err(KernelError::ServiceAlreadyProvided { .. }) => ctx.require::<Routes<T>>(),
            Err(e) => Err(e),
        }
    }

    /// Routes the calls of the agent whose scoped context is `agent_ctx` to `service`, until
    /// that scope is disposed (or the registration is undone). Only tagged layers are ever
    /// consulted, so a route made through an untagged context replaces nothing for anyone.
    pub fn route(&self, agent_ctx: &Context, service: Arc<T>) -> Result<Registration, KernelError> {
        self.registry.register(agent_ctx, ROUTE, service)
    }

    /// The route of `caller`'s own agent. Descendants (subagents) are not routed: the editor
    /// that offered a buffer or a terminal is showing the parent's thread, not theirs.
    pub fn of(&self, caller: &ToolCaller) -> Option<Arc<T>> {
        let tag = caller.tag()?;
        self.registry
            .layer(Some(tag))
            .into_iter()
            .find_map(|(name, service)| (name == ROUTE).then_some(service))
    }
}

/// The route of `caller`'s agent for service `T`, if one is provided.
pub fn routed<T: ?Sized + Send + Sync + 'static>(caller: Option<&ToolCaller>) -> Option<Arc<T>> {
    let caller = caller?;
    caller.ctx.get::<Routes<T>>()?.of(caller)
}
