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

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_kernel::ScopeTag;
    use dsh_session::{Session, SessionHeader, SessionMeta};

    fn caller(ctx: &Context) -> ToolCaller {
        let session = Session::new(
            SessionHeader::new("s".into(), 0, SessionMeta::default()),
            None,
        )
        .unwrap();
        ToolCaller {
            agent_id: "s".into(),
            session,
            ctx: ctx.clone(),
            cwd: None,
        }
    }

    #[test]
    fn a_route_serves_exactly_its_agent_until_its_scope_is_disposed() {
        let root = Context::new();
        let parent_tag = ScopeTag::new("parent");
        let parent = root.tagged_child("parent", parent_tag.clone()).unwrap();
        let child = root
            .tagged_child("child", ScopeTag::child_of(&parent_tag, "child"))
            .unwrap();
        let other = root.tagged_child("other", ScopeTag::new("other")).unwrap();
        let routes = Routes::<str>::shared(&root).unwrap();
        assert!(Arc::ptr_eq(&routes, &Routes::<str>::shared(&root).unwrap()));
        let _ = routes.route(&parent, Arc::from("editor")).unwrap();
        assert_eq!(
            routed::<str>(Some(&caller(&parent))).as_deref(),
            Some("editor")
        );
        // Neither a subagent nor another agent, nor an agentless call, is routed.
        assert!(routed::<str>(Some(&caller(&child))).is_none());
        assert!(routed::<str>(Some(&caller(&other))).is_none());
        assert!(routed::<str>(Some(&caller(&root))).is_none());
        assert!(routed::<str>(None).is_none());
        futures::executor::block_on(parent.scope().dispose());
        assert!(routed::<str>(Some(&caller(&parent))).is_none());
    }
}
