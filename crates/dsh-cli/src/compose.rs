//! The composition root: one place that turns [`Settings`] into a running harness.
//!
//! Every front end of the binary (`dsh run`, the interactive chat, `dsh acp`) starts from
//! [`compose`], so they agree on what an agent is: the core services (`mount_core`), the
//! selected provider's adapter, the local shell executor, the builtin tools, subagents, session
//! persistence (JSONL under `$DSH_HOME/sessions`, or PostgreSQL: `store`), the persona and, per
//! agent, its workspace's `AGENTS.md`.
//! [`Composed::shutdown`] unwinds it in the order durability needs.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::Context as _;
use dsh_agent::events::{AgentPreStep, PreStepDecision};
use dsh_agent::{
    AgentError, AgentHandle, AgentOptions, CancelCause, CancelOptions, CreateAgentOptions,
    ResumeAgentOptions, Setup,
};
use dsh_agent_loop::{Core, CoreConfig, LoopConfig, mount_core};
use dsh_compaction::{Compaction, CompactionPlugin};
use dsh_hooks::HooksPlugin;
use dsh_kernel::{BoxError, Context, PluginHandle};
use dsh_llm::catalog::FactsOrigin;
use dsh_llm::{AdapterRegistration, ModelCatalog, ModelInfo};
use dsh_llm_anthropic::AnthropicConfig;
use dsh_llm_openai::{ApiKeySource, OpenAiAdapterConfig};
use dsh_prompt::{Section, SystemPromptConfig};
use dsh_session::{SessionId, SessionMeta};
use dsh_shell::{LocalShellExecutor, ShellConfig, ShellExecutor};
use dsh_subagent::{SubagentConfig, SubagentPlugin, SubagentRuntime};
use dsh_tools_builtin::BuiltinToolsPlugin;
use futures::FutureExt;

use crate::config::{ProviderKind, ProviderSettings, Settings, Source};
use crate::instructions;
use crate::lazy_adapter::{LazyAdapter, ProviderConfig};
use crate::run::DRAIN;

/// The persona every dsh coding agent gets (`{{model}}` and `{{cwd}}` are the agent's own).
pub const PERSONA: &str = "You are a coding agent powered by {{model}}, working directory {{cwd}}.";

/// Tool guidance sections (order 100–199 by convention).
const TOOL_SECTIONS: &[(&str, i32, &str)] = &[
    (
        "tool:bash",
        105,
        "Each `bash` call runs in a fresh `bash -c` (no shared cwd or variables between calls; \
         pass `workdir` instead of `cd`). Check the `[exit code: N]` marker at the end of every \
         result: no marker means the command exited 0.",
    ),
    (
        "tool:files",
        110,
        "Use `read`, `write` and `edit` for files and `glob`/`grep` to search; read a file \
         before you edit or overwrite it.",
    ),
];

/// How a front end wants the harness composed.
#[derive(Clone, Debug, Default)]
pub struct ComposeOptions {
    /// Start the `[[agents]]` of the config file with the loop (long-lived front ends only;
    /// `dsh run` drives exactly one agent of its own).
    pub start_configured_agents: bool,
    /// The front end's approval policy when none is configured (`None`: ask).
    pub approval: Option<dsh_guard::ApprovalPolicy>,
}

/// Per-agent options of [`Composed::create_agent`] and [`Composed::resume_agent`].
#[derive(Clone, Debug, Default)]
pub struct AgentSpec {
    /// Stop the agent (cancel with a hook cause) once it asks for more than this many model
    /// requests.
    pub max_turns: Option<u32>,
    /// Send this reasoning effort with every model request (`--effort`, `reasoning_effort`).
    pub reasoning_effort: Option<String>,
    /// `$DSH_HOME`, whose `AGENTS.md` holds the person's instructions for every project.
    pub home: Option<PathBuf>,
}

/// A composed harness.
pub struct Composed {
    /// The root context every service is registered on (what `dsh acp` serves from).
    pub ctx: Context,
    /// The core services (session store, agent registry, LLM runtime, tools, prompt, loop).
    pub core: Core,
    /// The session store, JSONL or PostgreSQL (also provided as `dyn Persistence`).
    pub store: crate::store::Store,
    /// The shell executor (also provided as `dyn ShellExecutor`).
    pub executor: Arc<LocalShellExecutor>,
    /// The settings it was composed from.
    pub settings: Settings,
    /// The provider adapter (built in the background).
    pub adapter: Arc<LazyAdapter>,
    persistence: PluginHandle,
    compaction: PluginHandle,
    tools: PluginHandle,
    subagents: PluginHandle,
    mcp: Option<PluginHandle>,
    hooks: PluginHandle,
    registration: AdapterRegistration,
    /// Keeps the guard's pipeline listeners registered.
    _guard: dsh_guard::Installed,
}

/// Builds the harness for `settings`. Needs a tokio runtime.
pub async fn compose(settings: &Settings, options: ComposeOptions) -> anyhow::Result<Composed> {
    let store = crate::store::Store::open(settings)?;
    store.check().await?;
    let ctx = Context::new();
    // A keyless local server nobody named a model for is asked for one first.
    let mut settings = settings.clone();
    settings.ask_server_for_model().await;
    let settings = &settings;
    if let Some(warning) =
        crate::config::models::unknown_model_warning(&settings.catalog, &settings.model.value)
    {
        tracing::warn!("{warning}");
    }
    let mut config = adapter_config(settings.selected(), settings.catalog.clone());
    if let (Some(effort), ProviderConfig::OpenAi(openai)) =
        (&settings.reasoning_effort, &mut config)
    {
        crate::effort::offer(openai, &settings.model.value, &effort.value);
    }
    // The HTTP client is built in the background (see `LazyAdapter`); the route is usable now.
    let lazy = Arc::new(LazyAdapter::spawn(config));
    // Every configured key variable is hidden from commands, whatever its name.
    let shell = ShellConfig {
        hidden_env: settings
            .providers
            .values()
            .filter_map(|p| p.api_key_env.as_ref().map(|v| v.value.clone()))
            .chain(settings.store.password_env().map(str::to_owned))
            .collect(),
        ..ShellConfig::default()
    };
    let executor = Arc::new(
        LocalShellExecutor::new(shell)
            .context("cannot start the shell")?
            .with_supervision(crate::guard::supervision(settings)),
    );
    ctx.provide::<dyn ShellExecutor>(executor.clone())?;
    // Persistence first: it must hear every session event from the first agent on, and it is
    // unmounted last so the loop's final `turn/end`s are drained to disk.
    let persistence = store.mount(&ctx).await?;
    let core = mount_core(
        &ctx,
        CoreConfig {
            loop_config: LoopConfig {
                max_parallel_tool_calls: settings.max_parallel_tool_calls.value,
                agents: settings.agents.clone(),
            },
            prompt: SystemPromptConfig {
                persona: PERSONA.to_owned(),
                ..SystemPromptConfig::default()
            },
            retry: true,
        },
    )
    .await
    .context("cannot start the agent loop")?;
    let adapter = core
        .llm
        .register_adapter(&[settings.provider.value.as_str()], lazy.clone())
        .with_context(|| format!("cannot register provider `{}`", settings.provider.value))?;
    // Every front end compacts: long sessions survive the model's window.
    let compaction = ctx
        .plugin(CompactionPlugin::new(settings.compaction.clone()))
        .await
        .context("cannot mount compaction")?;
    let tools = ctx
        .plugin(BuiltinToolsPlugin)
        .await
        .context("cannot mount the builtin tools")?;
    let subagents = ctx
        .plugin(SubagentPlugin::new(SubagentConfig::default()))
        .await
        .context("cannot mount subagents")?;
    let mcp = crate::mcp::mount(&ctx, settings).await?;
    // After subagents, so the hooks' tool listeners nest inside the subagent plugin's approval
    // rewrite (a hook's `ask` in a child is refused like any child's ask). Idle notifications
    // only where a person waits at the prompt: the long-lived front ends.
    let hooks = ctx
        .plugin(HooksPlugin::new(crate::hooks::plugin_options(
            settings,
            options.start_configured_agents,
        )))
        .await
        .context("cannot mount hooks")?;
    let approval = options.approval.unwrap_or(dsh_guard::ApprovalPolicy::Ask);
    let guard = crate::guard::install(&ctx, &core.prompt, settings, approval)?;
    for (name, order, text) in TOOL_SECTIONS {
        let _ = core
            .prompt
            .section(&ctx, Section::new(*name, *order, *text))?;
    }
    // Only now is the harness complete: config-declared agents may run their first turn.
    if options.start_configured_agents {
        core.agent_loop.start_configured().await;
    }
    Ok(Composed {
        ctx,
        core,
        store,
        executor,
        settings: settings.clone(),
        adapter: lazy,
        persistence,
        compaction,
        tools,
        subagents,
        mcp,
        hooks,
        registration: adapter,
        _guard: guard,
    })
}

/// The composition `dsh acp` serves from: the same harness as `dsh run` plus the
/// config-declared agents.
pub async fn compose_for_acp(settings: &Settings) -> anyhow::Result<Composed> {
    compose(
        settings,
        ComposeOptions {
            start_configured_agents: true,
            approval: None,
        },
    )
    .await
}

fn adapter_config(p: &ProviderSettings, catalog: ModelCatalog) -> ProviderConfig {
    let key = match &p.api_key_env {
        // The key was moved out of dsh's environment at start-up (`secrets`).
        Some(var) => crate::secrets::key_source(&var.value),
        None => ApiKeySource::NotRequired,
    };
    let base = p.base_url.value.clone();
    match p.kind.value {
        ProviderKind::Deepseek => ProviderConfig::OpenAi(configured_models(
            OpenAiAdapterConfig::deepseek(base, key).with_route(p.name.clone()),
            p,
            catalog,
        )),
        ProviderKind::OpenaiCompatible => ProviderConfig::OpenAi(configured_models(
            OpenAiAdapterConfig::openai_compatible(base, key).with_route(p.name.clone()),
            p,
            catalog,
        )),
        ProviderKind::OpenaiResponses => {
            let mut config =
                OpenAiAdapterConfig::openai_compatible(base, key).with_route(p.name.clone());
            config.models = dsh_llm_openai::openai_models();
            ProviderConfig::Responses(configured_models(config, p, catalog))
        }
        ProviderKind::Anthropic => {
            let mut config = AnthropicConfig::new(base, key).with_route(p.name.clone());
            // Listed models take the catalog's facts (the user's `[models."ID"]` included).
            config.models = listed_models(std::mem::take(&mut config.models), p)
                .into_iter()
                .map(|m| {
                    let facts = catalog.facts(&m.id);
                    match facts.origin {
                        FactsOrigin::Assumed => m,
                        _ => dsh_llm_anthropic::claude_info(&facts),
                    }
                })
                .collect();
            ProviderConfig::Anthropic(config)
        }
    }
}

/// The OpenAI-compatible route with the model catalog (the user's `[models."ID"]` included); a
/// configured model list replaces the advertised ids, facts still come from the catalog.
fn configured_models(
    config: OpenAiAdapterConfig,
    p: &ProviderSettings,
    catalog: ModelCatalog,
) -> OpenAiAdapterConfig {
    let mut config = config.with_catalog(catalog);
    if p.models.source != Source::Default {
        config.models = p.models.value.clone();
    }
    config
}

/// A configured model list replaces the catalog, keeping what the adapter knows about ids it
/// already lists.
fn listed_models(known: Vec<ModelInfo>, p: &ProviderSettings) -> Vec<ModelInfo> {
    if p.models.source == Source::Default {
        return known;
    }
    p.models
        .value
        .iter()
        .map(|id| {
            known
                .iter()
                .find(|m| &m.id == id)
                .cloned()
                .unwrap_or_else(|| ModelInfo::new(id.clone()))
        })
        .collect()
}

impl Composed {
    /// The route and output cap every agent of this composition uses.
    pub fn agent_options(&self) -> AgentOptions {
        AgentOptions {
            provider: Some(self.settings.provider.value.clone()),
            model: Some(self.settings.model.value.clone()),
            max_tokens: self.settings.max_tokens.as_ref().map(|m| m.value),
        }
    }

    /// The per-agent options every agent of this composition starts from (the configured
    /// reasoning effort); a front end adds its own (`dsh run --max-turns`).
    pub fn agent_spec(&self) -> AgentSpec {
        AgentSpec {
            max_turns: None,
            home: Some(self.settings.home.value.clone()),
            reasoning_effort: self
                .settings
                .reasoning_effort
                .as_ref()
                .map(|e| e.value.clone()),
        }
    }

    /// Creates a fresh persisted agent working in `cwd` (absolute).
    pub async fn create_agent(
        &self,
        id: SessionId,
        cwd: &Path,
        spec: &AgentSpec,
    ) -> Result<AgentHandle, AgentError> {
        self.core
            .registry
            .create(
                &self.ctx,
                CreateAgentOptions {
                    session_id: Some(id),
                    meta: SessionMeta {
                        cwd: Some(cwd.to_path_buf()),
                        ..SessionMeta::default()
                    },
                    agent_options: self.agent_options(),
                    setup: Some(agent_setup(spec)),
                    ..CreateAgentOptions::default()
                },
            )
            .await
    }

    /// Resumes a stored session; its `AGENTS.md` comes from the session's own cwd.
    pub async fn resume_agent(
        &self,
        id: SessionId,
        spec: &AgentSpec,
    ) -> Result<AgentHandle, AgentError> {
        let mut options = ResumeAgentOptions::new(id);
        options.agent_options = self.agent_options();
        options.setup = Some(agent_setup(spec));
        self.core.registry.resume(&self.ctx, options).await
    }

    /// The compaction service (`/compact`, context use), mounted for every agent.
    pub fn compaction(&self) -> Option<Arc<Compaction>> {
        self.ctx.get::<Compaction>()
    }

    /// Resolves once `agent` is idle and owns no live background subagent, so a headless run's
    /// final answer includes what its background children reported.
    pub async fn when_quiet(&self, agent: &dsh_agent::AgentRef) {
        match SubagentRuntime::of(&self.ctx) {
            Some(runtime) => runtime.when_quiet(agent).await,
            None => agent.when_idle().await,
        }
    }

    /// Tears everything down in the order durability needs: every agent stopped, drained and
    /// flushed (while persistence still listens), then subagent runs, the MCP servers, the tools, the core
    /// services, the adapter, the shell (killing anything left running) and finally
    /// persistence, whose unmount drains every session writer.
    pub async fn shutdown(&self) {
        self.core.agent_loop.shutdown().await;
        self.subagents.dispose().await;
        if let Some(mcp) = &self.mcp {
            mcp.dispose().await;
        }
        self.hooks.dispose().await;
        self.compaction.dispose().await;
        self.tools.dispose().await;
        self.core.shutdown().await;
        self.registration.unregister();
        self.executor.dispose().await;
        if let Err(error) = self.store.close().await {
            tracing::error!(%error, "draining session files failed");
        }
        self.persistence.dispose().await;
    }

    /// [`shutdown`](Self::shutdown), given up at `deadline` with a warning: an exit that a
    /// person asked for must not hang on an agent that will not stop.
    pub async fn shutdown_by(&self, deadline: tokio::time::Instant) {
        if tokio::time::timeout_at(deadline, self.shutdown())
            .await
            .is_err()
        {
            tracing::warn!("teardown did not finish within {DRAIN:?}; exiting anyway");
        }
    }
}

/// The per-agent composition: the `AGENTS.md` section of the agent's own working directory
/// (read from its session header, so fresh, resumed and ACP-created agents all get theirs) and
/// the model-request budget. Public for `dsh acp`, whose bridge runs it for every session.
pub fn agent_setup(spec: &AgentSpec) -> Setup {
    let max_turns = spec.max_turns;
    let effort = spec.reasoning_effort.clone();
    let home = spec.home.clone();
    Box::new(move |agent_ctx: Context| {
        async move {
            let cwd = dsh_agent::agent_of(&agent_ctx)
                .and_then(|agent| agent.session().header().cwd.clone());
            let section = cwd.and_then(|cwd| {
                instructions::render(&instructions::discover(&cwd, home.as_deref()))
            });
            if let Some(text) = section {
                let prompt = agent_ctx.require::<dsh_prompt::SystemPrompt>()?;
                let _ = prompt.variable(
                    &agent_ctx,
                    "agents_md",
                    Arc::new(move |_| Some(text.clone())),
                )?;
                // The text goes in through a variable because substituted values are never
                // interpolated again: `{{` in a project's AGENTS.md stays literal.
                let _ = prompt.section(
                    &agent_ctx,
                    Section::new("workspace:agents-md", 50, "{{agents_md}}"),
                )?;
            }
            if let Some(max) = max_turns {
                limit_model_requests(&agent_ctx, max)?;
            }
            if let Some(effort) = effort {
                crate::effort::apply(&agent_ctx, effort)?;
            }
            Ok(None)
        }
        .boxed()
    })
}

/// Cancels the agent with a hook cause when it proposes its `max + 1`-th model request (each
/// step is one request), so the turn ends `aborted{hook}` with a provider-valid log.
fn limit_model_requests(agent_ctx: &Context, max: u32) -> Result<(), BoxError> {
    let steps = Arc::new(AtomicU32::new(0));
    let _ = agent_ctx.on_waterfall::<AgentPreStep, _>(move |request, next| {
        let n = steps.fetch_add(1, Ordering::SeqCst) + 1;
        async move {
            if n > max {
                request.agent.cancel(
                    CancelCause::Hook {
                        reason: format!("--max-turns {max} reached"),
                    },
                    CancelOptions::default(),
                );
                return Ok(PreStepDecision::Reject);
            }
            next.run(request).await
        }
    })?;
    Ok(())
}
