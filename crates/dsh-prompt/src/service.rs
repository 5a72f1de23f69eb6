//! The `SystemPrompt` service: scoped contributions and assembly.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dsh_kernel::{Context, KernelError, Registration, ScopedRegistry};
use dsh_llm::ToolSchema;
use futures::FutureExt;

use crate::assembly::{AssembledContext, AssembledSection, PromptAssembly};
use crate::config::SystemPromptConfig;
use crate::error::PromptError;
use crate::event::PromptAssemble;
use crate::scope::AssemblyScope;
use crate::section::{ContextSection, Section, VariableProvider};
use crate::source::ToolSchemaSource;
use crate::tool_order::order_tools;

/// The registry of everything the model is told before the history.
///
/// Each contribution is registered *through a context*: it lands in that context's layer (the
/// global layer for an untagged context, the agent's layer for an agent's scoped context) and
/// is an effect of that context's scope, so disposing an agent's scope removes exactly what it
/// contributed (INV-SCOPE-2). Stored in the kernel as `ctx.provide::<SystemPrompt>(arc)`.
pub struct SystemPrompt {
    ctx: Context,
    tool_order: Option<Vec<String>>,
    sections: Arc<ScopedRegistry<Arc<Section>>>,
    contexts: Arc<ScopedRegistry<Arc<ContextSection>>>,
    variables: Arc<ScopedRegistry<VariableProvider>>,
    sources: Arc<ScopedRegistry<Arc<dyn ToolSchemaSource>>>,
    suppressors: Arc<ScopedRegistry<()>>,
    anonymous: AtomicU64,
}

impl SystemPrompt {
    /// A service dispatching its waterfall through `ctx`'s bus. It registers nothing by itself
    /// (the default sections come from [`crate::SystemPromptPlugin`]); `config` supplies the
    /// tool order, validated here so a malformed order fails at startup.
    pub fn new(ctx: &Context, config: SystemPromptConfig) -> Result<Arc<Self>, PromptError> {
        config.validate()?;
        Ok(Arc::new(Self {
            ctx: ctx.clone(),
            tool_order: config.tool_order,
            sections: ScopedRegistry::new(),
            contexts: ScopedRegistry::new(),
            variables: ScopedRegistry::new(),
            sources: ScopedRegistry::new(),
            suppressors: ScopedRegistry::new(),
            anonymous: AtomicU64::new(0),
        }))
    }

    fn anonymous_name(&self, kind: &str) -> String {
        format!("{kind}#{}", self.anonymous.fetch_add(1, Ordering::Relaxed))
    }

    /// Contributes a section through `ctx` (scoped to its tag, undone with its scope).
    pub fn section(&self, ctx: &Context, section: Section) -> Result<Registration, PromptError> {
        let name = section.name.clone();
        self.sections
            .register(ctx, name, Arc::new(section))
            .map_err(|e| duplicate("section", e))
    }

    /// Contributes runtime context through `ctx`.
    pub fn context(
        &self,
        ctx: &Context,
        context: ContextSection,
    ) -> Result<Registration, PromptError> {
        let name = context.name.clone();
        self.contexts
            .register(ctx, name, Arc::new(context))
            .map_err(|e| duplicate("context", e))
    }

    /// Registers a `{{name}}` variable through `ctx`; a scoped value shadows a global one.
    pub fn variable(
        &self,
        ctx: &Context,
        name: impl Into<String>,
        provider: VariableProvider,
    ) -> Result<Registration, PromptError> {
        let name = name.into();
        if !is_variable_name(&name) {
            return Err(PromptError::InvalidVariableName { name });
        }
        self.variables
            .register(ctx, name, provider)
            .map_err(|e| duplicate("variable", e))
    }

    /// Registers a tool-schema source through `ctx`. Global and matching scoped sources all
    /// contribute.
    pub fn tools(
        &self,
        ctx: &Context,
        source: Arc<dyn ToolSchemaSource>,
    ) -> Result<Registration, PromptError> {
        let name = self.anonymous_name("tools");
        Ok(self.sources.register(ctx, name, source)?)
    }

    /// Suppresses runtime context for `ctx`'s scope (every scope for an untagged context) for
    /// as long as the registration lives. Suppressors compose: context returns only when none
    /// is left. The services owning the facts keep running.
    pub fn suppress_runtime_context(&self, ctx: &Context) -> Result<Registration, PromptError> {
        let name = self.anonymous_name("suppress");
        Ok(self.suppressors.register(ctx, name, ())?)
    }

    /// Builds the assembly for `scope`: variables (global, then the tag's chain farthest
    /// first, nearer wins), sections and contexts merged by name and stably sorted by order,
    /// tool schemas in canonical order; then the scope-filtered [`PromptAssemble`] waterfall;
    /// then a complete section becomes the only section and suppressed contexts are dropped.
    pub async fn assemble(&self, scope: AssemblyScope) -> Result<PromptAssembly, PromptError> {
        let tag = scope.tag.clone();
        let tag = tag.as_ref();

        // Registries hand out snapshots, so no lock is held while providers run.
        let mut variables = BTreeMap::new();
        for (name, provider) in self.variables.visible(tag) {
            let value = contained("variable", &name, || provider(&scope))?;
            variables.insert(name, value);
        }

        let mut defs = self.sections.visible(tag);
        defs.sort_by_key(|(_, s)| s.order);
        let complete_names: Vec<String> = defs
            .iter()
            .filter(|(_, s)| s.complete)
            .map(|(n, _)| n.clone())
            .collect();
        if complete_names.len() > 1 {
            return Err(PromptError::MultipleComplete {
                names: complete_names,
            });
        }
        let mut sections = Vec::with_capacity(defs.len());
        for (name, def) in defs {
            let text = contained("section", &name, || def.text.resolve(&scope))?;
            sections.push(AssembledSection {
                name,
                text,
                complete: def.complete,
            });
        }
        let registered_complete = sections.iter().find(|s| s.complete).cloned();

        let mut ctx_defs = self.contexts.visible(tag);
        ctx_defs.sort_by_key(|(_, c)| c.order);
        let mut contexts = Vec::with_capacity(ctx_defs.len());
        for (name, def) in ctx_defs {
            let text = contained("context", &name, || def.text.resolve(&scope))?;
            contexts.push(AssembledContext { name, text });
        }

        let tools = self.collect_tools(tag)?;
        let suppressed = !self.suppressors.visible(tag).is_empty();

        let assembly = PromptAssembly {
            sections,
            contexts,
            tools,
            variables,
        };
        let dispatch = self
            .ctx
            .events()
            .waterfall::<PromptAssemble>(tag, assembly, |a| futures::future::ok(a).boxed());
        let mut out = crate::cancel::with_cancellation(scope.cancel.clone(), dispatch)
            .await
            .map_err(|source| PromptError::Listener { source })?;

        match registered_complete {
            // A dedicated prompt cannot be added to or replaced by listeners.
            Some(complete) => out.sections = vec![complete],
            None => {
                let names: Vec<String> = out
                    .sections
                    .iter()
                    .filter(|s| s.complete)
                    .map(|s| s.name.clone())
                    .collect();
                if names.len() > 1 {
                    return Err(PromptError::MultipleComplete { names });
                }
                if let Some(c) = out.sections.iter().find(|s| s.complete).cloned() {
                    out.sections = vec![c];
                }
            }
        }
        if suppressed {
            out.contexts.clear();
        }
        Ok(out)
    }

    fn collect_tools(
        &self,
        tag: Option<&dsh_kernel::ScopeTag>,
    ) -> Result<Vec<ToolSchema>, PromptError> {
        let mut collected: Vec<ToolSchema> = Vec::new();
        let mut seen = HashSet::new();
        let mut known = BTreeSet::new();
        for (name, source) in self.sources.visible(tag) {
            let (schemas, names) = contained("tool source", &name, || {
                (source.schemas(tag), source.known_names())
            })?;
            for schema in schemas {
                if !seen.insert(schema.name.clone()) {
                    return Err(PromptError::DuplicateTool { name: schema.name });
                }
                known.insert(schema.name.clone());
                // Only the model-facing fields; the copy is ours, so listeners cannot reach
                // back into a tool's definition.
                collected.push(ToolSchema {
                    name: schema.name,
                    description: schema.description,
                    parameters: schema.parameters,
                    needs_vision: schema.needs_vision,
                });
            }
            known.extend(names);
        }
        order_tools(collected, self.tool_order.as_deref(), &known)
    }
}

impl std::fmt::Debug for SystemPrompt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SystemPrompt")
            .field("tool_order", &self.tool_order)
            .finish_non_exhaustive()
    }
}

fn duplicate(kind: &'static str, e: KernelError) -> PromptError {
    match e {
        KernelError::DuplicateName { name } => PromptError::Duplicate { kind, name },
        other => PromptError::Kernel(other),
    }
}

fn contained<T>(kind: &'static str, name: &str, f: impl FnOnce() -> T) -> Result<T, PromptError> {
    std::panic::catch_unwind(AssertUnwindSafe(f)).map_err(|_| PromptError::ProviderPanicked {
        kind,
        name: name.to_owned(),
    })
}

/// Whether `name` is a valid `{{variable}}` name: `[a-z][a-z0-9_]*`.
pub(crate) fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}
