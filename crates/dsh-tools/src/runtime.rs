//! The scoped tool registry and its guards.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use dsh_kernel::{Context, KernelError, Registration, ScopeTag, ScopedRegistry};
use dsh_llm::ToolSchema;
use dsh_prompt::ToolSchemaSource;
use parking_lot::Mutex;

use crate::error::ToolsError;
use crate::events::{ToolsChange, ToolsChanged};
use crate::exec::ToolExec;
use crate::tool::Tool;

/// A monotonic guard: returns a denial reason, or `None` to leave the call alone. Guards
/// cannot allow, so no listener or guard order can turn a denial back into permission.
pub type Guard = Arc<dyn Fn(&ToolExec) -> Option<String> + Send + Sync>;

/// How the scheduler may run a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecutionMode {
    /// May overlap with neighbouring parallel-safe calls.
    Parallel,
    /// Runs alone and is an ordering barrier.
    Exclusive,
}

/// The tool registry and execution pipeline of a dsh runtime, provided as
/// `ctx.provide::<ToolRuntime>(arc)`.
///
/// Registrations are layered by scope tag: a tool registered through an agent's scoped context
/// is visible to that agent (and its descendants) only and shadows a global tool of the same
/// name for it; it disappears when the agent's scope is disposed.
pub struct ToolRuntime {
    pub(crate) ctx: Context,
    me: Weak<ToolRuntime>,
    pub(crate) tools: Arc<ScopedRegistry<Arc<dyn Tool>>>,
    guards: Arc<ScopedRegistry<Guard>>,
    /// How many layers hold each name, for `tool_order` validation across all scopes.
    known: Mutex<BTreeMap<String, usize>>,
    next_guard: AtomicU64,
}

impl ToolRuntime {
    /// A runtime dispatching its events through `ctx`'s bus.
    pub fn new(ctx: &Context) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            ctx: ctx.clone(),
            me: me.clone(),
            tools: ScopedRegistry::new(),
            guards: ScopedRegistry::new(),
            known: Mutex::new(BTreeMap::new()),
            next_guard: AtomicU64::new(0),
        })
    }

    /// Registers `tool` in `ctx`'s layer as an effect of `ctx`'s scope, and emits
    /// `tools/change`. A second tool of the same name in the same layer is an error.
    pub fn register(&self, ctx: &Context, tool: Arc<dyn Tool>) -> Result<Registration, ToolsError> {
        let name = tool.name().to_owned();
        // The rest marker of `tool_order` is not a tool name; reject it here rather than fail
        // every later prompt assembly.
        if name.is_empty()
            || name == dsh_prompt::TOOL_ORDER_REST
            || name.chars().any(char::is_whitespace)
        {
            return Err(ToolsError::InvalidName { name });
        }
        if !ctx.is_active() {
            return Err(KernelError::ScopeDisposed {
                scope: ctx.scope().label().to_owned(),
            }
            .into());
        }
        let tag = ctx.tag().cloned();
        let id = self.tools.insert(tag.as_ref(), name.clone(), tool)?;
        *self.known.lock().entry(name.clone()).or_default() += 1;
        let me = self.me.clone();
        let (undo_name, undo_tag) = (name.clone(), tag.clone());
        let effect = ctx.scope().defer(move || {
            if let Some(rt) = me.upgrade() {
                rt.unregister(id, undo_name, undo_tag);
            }
        });
        match effect {
            Ok(effect) => {
                self.notify(name, tag, true);
                Ok(Registration::from_effect(ctx.scope().clone(), effect))
            }
            Err(e) => {
                self.tools.remove(id);
                self.forget(&name);
                Err(e.into())
            }
        }
    }

    fn unregister(&self, id: u64, name: String, tag: Option<ScopeTag>) {
        if self.tools.remove(id) {
            self.forget(&name);
            self.notify(name, tag, false);
        }
    }

    fn forget(&self, name: &str) {
        let mut known = self.known.lock();
        if let Some(n) = known.get_mut(name) {
            *n -= 1;
            if *n == 0 {
                known.remove(name);
            }
        }
    }

    fn notify(&self, name: String, tag: Option<ScopeTag>, registered: bool) {
        let change = ToolsChanged {
            name,
            tag,
            registered,
        };
        self.ctx.events().emit::<ToolsChange>(None, &change);
    }

    /// The tool `name` as seen from `tag` (nearest layer wins; `None` = global view).
    pub fn get(&self, tag: Option<&ScopeTag>, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools.get(tag, name)
    }

    /// The model-facing schemas visible from `tag`: name, description and parameters only —
    /// never classifiers, presenters or other callbacks. Order is unspecified; the prompt
    /// orders tools canonically.
    pub fn schemas(&self, tag: Option<&ScopeTag>) -> Vec<ToolSchema> {
        self.tools
            .visible(tag)
            .into_iter()
            .map(|(name, tool)| ToolSchema {
                name,
                description: tool.description().to_owned(),
                parameters: tool.parameters(),
                needs_vision: tool.needs_vision(),
            })
            .collect()
    }

    /// How the scheduler may run `exec`: `Parallel` only if the tool visible to the caller
    /// says `true` for these arguments; an unknown tool or a panicking classifier is
    /// `Exclusive` (fail closed, INV-TOOL-1). Re-read before each start: an earlier call may
    /// have changed the registry.
    pub fn execution_mode(&self, exec: &ToolExec) -> ExecutionMode {
        let Some(tool) = self.get(exec.tag(), &exec.name) else {
            return ExecutionMode::Exclusive;
        };
        let args = exec.arguments.clone();
        match std::panic::catch_unwind(AssertUnwindSafe(|| tool.is_concurrency_safe(&args))) {
            Ok(true) => ExecutionMode::Parallel,
            _ => ExecutionMode::Exclusive,
        }
    }

    /// Adds a monotonic guard in `ctx`'s layer, evaluated after `tools/pre-execute` allowed a
    /// call: global guards first, then the caller's scope chain farthest-first; the first
    /// denial wins. A panicking guard denies.
    pub fn guard(
        &self,
        ctx: &Context,
        guard: impl Fn(&ToolExec) -> Option<String> + Send + Sync + 'static,
    ) -> Result<Registration, ToolsError> {
        let name = format!("guard#{}", self.next_guard.fetch_add(1, Ordering::Relaxed));
        Ok(self.guards.register(ctx, name, Arc::new(guard))?)
    }

    /// The first guard denial for `exec`, if any.
    pub(crate) fn guard_reason(&self, exec: &ToolExec) -> Option<String> {
        let mut layers = vec![self.guards.layer(None)];
        if let Some(tag) = exec.tag() {
            let chain: Vec<&ScopeTag> = tag.chain().collect();
            for t in chain.into_iter().rev() {
                layers.push(self.guards.layer(Some(t)));
            }
        }
        for (_, guard) in layers.into_iter().flatten() {
            match std::panic::catch_unwind(AssertUnwindSafe(|| guard(exec))) {
                Ok(None) => {}
                Ok(Some(reason)) => return Some(reason),
                Err(_) => {
                    return Some(format!(
                        "a guard failed while checking tool `{}`",
                        exec.name
                    ));
                }
            }
        }
        None
    }
}

impl ToolSchemaSource for ToolRuntime {
    fn schemas(&self, tag: Option<&ScopeTag>) -> Vec<ToolSchema> {
        ToolRuntime::schemas(self, tag)
    }

    fn known_names(&self) -> Vec<String> {
        self.known.lock().keys().cloned().collect()
    }
}

impl std::fmt::Debug for ToolRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRuntime").finish_non_exhaustive()
    }
}
