//! The core composition: every service an agent needs, mounted on one context.
//!
//! Front ends (the CLI, the ACP server) and tests all start from here, then add adapters,
//! tools and persistence.

use std::sync::Arc;

use dsh_agent::AgentRegistry;
use dsh_kernel::{Context, PluginHandle};
use dsh_llm::Llm;
use dsh_prompt::{SystemPrompt, SystemPromptConfig, SystemPromptPlugin};
use dsh_session::SessionStore;
use dsh_tools::{ToolRuntime, ToolsPlugin};

use crate::config::LoopConfig;
use crate::error::LoopError;
use crate::retry::RetryPlugin;
use crate::service::{AgentLoop, AgentLoopPlugin};

/// What [`mount_core`] mounts.
#[derive(Clone, Debug)]
pub struct CoreConfig {
    /// The loop's configuration.
    pub loop_config: LoopConfig,
    /// The system prompt's configuration.
    pub prompt: SystemPromptConfig,
    /// Whether to mount the retry plugin.
    pub retry: bool,
}

impl Default for CoreConfig {
    fn default() -> Self {
        Self {
            loop_config: LoopConfig::default(),
            prompt: SystemPromptConfig::default(),
            retry: true,
        }
    }
}

/// The mounted core services.
pub struct Core {
    /// The root context they were mounted on.
    pub ctx: Context,
    /// Live sessions.
    pub store: Arc<SessionStore>,
    /// Live agents and the factory slot.
    pub registry: Arc<AgentRegistry>,
    /// The model runtime (register adapters here).
    pub llm: Arc<Llm>,
    /// The tool runtime (register tools here).
    pub tools: Arc<ToolRuntime>,
    /// The system prompt.
    pub prompt: Arc<SystemPrompt>,
    /// The loop (agent factory).
    pub agent_loop: Arc<AgentLoop>,
    plugins: Vec<PluginHandle>,
}

/// Mounts the session store, agent registry, LLM runtime, system prompt, tool runtime, retry
/// plugin and agent loop on `ctx`.
pub async fn mount_core(ctx: &Context, config: CoreConfig) -> Result<Core, LoopError> {
    let store = SessionStore::new(ctx);
    ctx.provide::<SessionStore>(store.clone())?;
    let registry = AgentRegistry::new(ctx);
    ctx.provide::<AgentRegistry>(registry.clone())?;
    let llm = Arc::new(Llm::new());
    ctx.provide::<Llm>(llm.clone())?;
    let mut plugins = Vec::new();
    let mount_error =
        |e: dsh_kernel::KernelError| LoopError::Config(format!("{e}: {}", source_chain(&e)));
    plugins.push(
        ctx.plugin(SystemPromptPlugin::new(config.prompt))
            .await
            .map_err(mount_error)?,
    );
    plugins.push(ctx.plugin(ToolsPlugin).await.map_err(mount_error)?);
    if config.retry {
        plugins.push(ctx.plugin(RetryPlugin::new()).await.map_err(mount_error)?);
    }
    plugins.push(
        ctx.plugin(AgentLoopPlugin::new(config.loop_config))
            .await
            .map_err(mount_error)?,
    );
    Ok(Core {
        ctx: ctx.clone(),
        store,
        registry,
        llm,
        tools: ctx.require::<ToolRuntime>()?,
        prompt: ctx.require::<SystemPrompt>()?,
        agent_loop: ctx.require::<AgentLoop>()?,
        plugins,
    })
}

fn source_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = Vec::new();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push(s.to_string());
        cur = s.source();
    }
    out.join(": ")
}

impl Core {
    /// Unmounts everything in reverse order: the loop first (disposing every agent it owns),
    /// then retry, tools and the prompt.
    pub async fn shutdown(&self) {
        for plugin in self.plugins.iter().rev() {
            plugin.dispose().await;
        }
    }
}
