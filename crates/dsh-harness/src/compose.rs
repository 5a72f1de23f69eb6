//! The composition root: one place that turns [`Settings`] into a running harness.
//!
//! Every front end (`dsh run`, the line chat, the terminal UI, `dsh acp`, `dsh web`) starts
//! a [`Harness`], so they agree on what an agent is: the core services (`mount_core`), every
//! configured provider route, the local shell executor under the guard, the builtin tools,
//! subagents, the web tools, compaction, MCP servers, hooks, session persistence (JSONL under
//! `$DSH_HOME/sessions`, or PostgreSQL), the persona and, per agent, its workspace's
//! instruction files. [`Harness::shutdown`] unwinds it in the order durability needs.

use std::sync::Arc;
use std::time::Duration;

use dsh_agent::{AgentPlanner, PromptImages};

use crate::images::ImageGate;
use dsh_agent_loop::{Core, CoreConfig, LoopConfig, mount_core};
use dsh_checkpoint::{CheckpointPlugin, Checkpoints};
use dsh_compaction::{Compaction, CompactionPlugin};
use dsh_fetch::WebPlugin;
use dsh_guard::{ApprovalPolicy, SandboxMode, SessionPolicies};
use dsh_hooks::HooksPlugin;
use dsh_kernel::{Context, PluginHandle};
use dsh_plan::PlanPlugin;
use dsh_prompt::{Section, SystemPromptConfig};
use dsh_session::Attachments;
use dsh_shell::{LocalShellExecutor, ShellConfig, ShellExecutor};
use dsh_skills::SkillsPlugin;
use dsh_store_jsonl::FileAttachments;
use dsh_subagent::{SubagentConfig, SubagentPlugin, SubagentRuntime};
use dsh_tools_builtin::BuiltinToolsPlugin;

use crate::config::web_search::WebSearchChoice;
use crate::config::{Overrides, Settings, Source, Sourced};
use crate::error::HarnessError;
use crate::planner::Planner;
use crate::routes::Routes;
use crate::store::Store;
use crate::switch::SessionChoices;

/// How long a front end waits for its agents to stop, drain and flush once a person asked
/// dsh to exit; past it dsh exits anyway (with a warning).
pub const DRAIN: Duration = Duration::from_secs(5);

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

/// Which kind of front end a harness serves. It decides who can be asked and what runs
/// beside the sessions the front end opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrontEnd {
    /// `dsh run` and embedding programs: nobody can be asked, so what would ask is refused
    /// with a reason the model can act on (approval `never`), except that an explicit
    /// `--sandbox danger-full-access` lets commands run (approval `auto`, ruling R16). One
    /// session; the config-declared agents do not start.
    Headless,
    /// The line chat and the terminal UI: a person answers approvals (`ask`); the
    /// config-declared agents start; idle notifications reach hooks.
    Interactive,
    /// An editor or a browser over ACP: asks through the client (`ask`); the config-declared
    /// agents start.
    Editor,
}

impl FrontEnd {
    fn long_lived(self) -> bool {
        !matches!(self, FrontEnd::Headless)
    }
}

/// How a front end starts its harness.
#[derive(Clone, Debug)]
pub struct HarnessOptions {
    /// Which front end it is.
    pub front_end: FrontEnd,
    /// The flags the settings were loaded with. A resumed session keeps its own route unless
    /// these name another provider or model.
    pub flags: Overrides,
}

impl HarnessOptions {
    /// Options for `front_end` with no flags.
    pub fn new(front_end: FrontEnd) -> Self {
        Self {
            front_end,
            flags: Overrides::default(),
        }
    }

    /// The same options with `flags`.
    pub fn with_flags(mut self, flags: Overrides) -> Self {
        self.flags = flags;
        self
    }
}

/// A composed harness: the services every session of one process shares, and the one way
/// to open a session ([`Harness::open`]).
pub struct Harness {
    pub(crate) ctx: Context,
    pub(crate) core: Core,
    pub(crate) store: Store,
    pub(crate) settings: Arc<Settings>,
    pub(crate) planner: Arc<Planner>,
    pub(crate) front_end: FrontEnd,
    pub(crate) approval: ApprovalPolicy,
    pub(crate) choices: Arc<SessionChoices>,
    pub(crate) images: Arc<ImageGate>,
    executor: Arc<LocalShellExecutor>,
    routes: Routes,
    notices: Vec<String>,
    persistence: PluginHandle,
    compaction: PluginHandle,
    checkpoints: PluginHandle,
    tools: PluginHandle,
    subagents: PluginHandle,
    web: PluginHandle,
    skills: PluginHandle,
    plan: PluginHandle,
    pub(crate) mcp: Option<PluginHandle>,
    hooks: PluginHandle,
    /// Keeps the guard's pipeline listeners registered.
    _guard: dsh_guard::Installed,
}

/// R16: an explicit `--sandbox danger-full-access` on a headless run, with no approval policy
/// named anywhere, means commands run: the person chose full access where nobody can be asked.
fn headless_full_access(settings: &mut Settings, notices: &mut Vec<String>) {
    let guard = &mut settings.guard;
    if guard.approval.is_none()
        && guard.sandbox.value == SandboxMode::DangerFullAccess
        && matches!(guard.sandbox.source, Source::Flag(_))
    {
        guard.approval = Some(Sourced::new(
            ApprovalPolicy::Auto,
            Source::Flag("--sandbox danger-full-access"),
        ));
        notices.push(
            "--sandbox danger-full-access: commands run without confinement or approval \
             (approval auto; pass --approval never to refuse what would need approval)"
                .to_owned(),
        );
    }
}

impl Harness {
    /// Composes a harness for `settings` (needs a tokio runtime). The store is checked
    /// (writable directory, reachable database) before anything else, so an unusable store is
    /// named before any provider is asked.
    pub async fn start(settings: Settings, options: HarnessOptions) -> Result<Self, HarnessError> {
        let store = Store::open(&settings)?;
        store.check().await?;
        let ctx = Context::new();
        let mut settings = settings;
        let mut notices = Vec::new();
        if options.front_end == FrontEnd::Headless {
            headless_full_access(&mut settings, &mut notices);
        }
        // A keyless local server nobody named a model for is asked for one first.
        settings.ask_server_for_model().await;
        if let Some(warning) =
            crate::config::models::unknown_model_warning(&settings.catalog, &settings.model.value)
        {
            tracing::warn!("{warning}");
        }
        let settings = Arc::new(settings);
        // Every configured key variable is hidden from commands, whatever its name.
        let shell = ShellConfig {
            hidden_env: settings
                .providers
                .values()
                .filter_map(|p| p.api_key_env.as_ref().map(|v| v.value.clone()))
                .chain(settings.store.password_env().map(str::to_owned))
                .chain(settings.web_search.as_ref().and_then(|s| match s {
                    WebSearchChoice::Api(api) => api.api_key_env.clone(),
                    WebSearchChoice::Provider(_) => None,
                }))
                .collect(),
            // Spill files in dsh's own home, which no sandboxed command may write.
            scratch_dir: Some(settings.home.value.join("scratch")),
            ..ShellConfig::default()
        };
        // What a killed dsh left in the scratch directory goes first (it ran no destructor).
        let scratch = settings.home.value.join("scratch");
        dsh_fs::sweep_dead(&scratch, &["dsh-shell", "dsh-results"]);
        // Every tool's oversized result is cut, the whole kept beside the commands' spills.
        ctx.provide(Arc::new(dsh_tools::ResultSpill::new(Some(
            settings.home.value.join("scratch"),
        ))))
        .map_err(|e| HarnessError::start("provide the result spill", e))?;
        // One set of per-session policies for the guard's decisions and the commands'
        // confinement, so a session narrowed to read-only (plan mode) is both.
        let policies = Arc::new(SessionPolicies::default());
        ctx.provide(policies.clone())
            .map_err(|e| HarnessError::start("provide the session policies", e))?;
        let default_approval = match options.front_end {
            FrontEnd::Headless => ApprovalPolicy::Never,
            FrontEnd::Interactive | FrontEnd::Editor => ApprovalPolicy::Ask,
        };
        let supervision = crate::guard::session_supervision(
            &ctx,
            &settings,
            policies,
            settings.guard.approval_or(default_approval),
        )?;
        let executor = Arc::new(
            LocalShellExecutor::new(shell)
                .map_err(|e| HarnessError::start("start the shell", e))?
                .with_supervision(supervision.clone()),
        );
        ctx.provide::<dyn ShellExecutor>(executor.clone())
            .map_err(|e| HarnessError::start("provide the shell", e))?;
        // Persistence first: it must hear every session event from the first agent on, and
        // it is unmounted last so the loop's final `turn/end`s are drained to disk.
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
        .map_err(|e| HarnessError::start("start the agent loop", e))?;
        let routes = Routes::register(&core.llm, &settings)?;
        // Images live beside the session files (with PostgreSQL too: the database keeps the
        // events, this directory their images), read back for every request that carries one.
        let attachments: Arc<dyn Attachments> =
            Arc::new(FileAttachments::beside_sessions(&settings.sessions_root()));
        ctx.provide::<dyn Attachments>(attachments.clone())
            .map_err(|e| HarnessError::start("provide the attachment store", e))?;
        core.llm.set_attachments(attachments.clone());
        // Every front end compacts: long sessions survive the model's window.
        let compaction = ctx
            .plugin(CompactionPlugin::new(settings.compaction.clone()))
            .await
            .map_err(|e| HarnessError::start("mount compaction", e))?;
        // Every front end checkpoints (unless `[checkpoints] enabled = false`): any session can
        // be rewound, files and conversation.
        let checkpoints = ctx
            .plugin(
                CheckpointPlugin::new(crate::rewind::checkpoint_config(&settings))
                    .recording(settings.checkpoints.enabled),
            )
            .await
            .map_err(|e| HarnessError::start("mount checkpoints", e))?;
        let tools = ctx
            .plugin(BuiltinToolsPlugin)
            .await
            .map_err(|e| HarnessError::start("mount the builtin tools", e))?;
        let subagents = ctx
            .plugin(SubagentPlugin::new(SubagentConfig::default()))
            .await
            .map_err(|e| HarnessError::start("mount subagents", e))?;
        let web = ctx
            .plugin(WebPlugin {
                search: match &settings.web_search {
                    Some(WebSearchChoice::Api(api)) => Some(api.config(&crate::env::process_env)?),
                    // The provider searches by itself: dsh offers no tool for it.
                    Some(WebSearchChoice::Provider(_)) | None => None,
                },
                ..WebPlugin::default()
            })
            .await
            .map_err(|e| HarnessError::start("mount the web tools", e))?;
        // Each session's skills and commands, found when its agent is set up.
        let skills = ctx
            .plugin(SkillsPlugin)
            .await
            .map_err(|e| HarnessError::start("mount skills", e))?;
        // After the session policies are provided (above), so plan mode confines commands.
        let plan = ctx
            .plugin(PlanPlugin)
            .await
            .map_err(|e| HarnessError::start("mount plan mode", e))?;
        let mcp = crate::mcp::mount(&ctx, &settings, supervision).await?;
        // After subagents, so the hooks' tool listeners nest inside the subagent plugin's
        // approval rewrite (a hook's `ask` in a child is refused like any child's ask). Idle
        // notifications only where a person waits at the prompt: the long-lived front ends.
        let hooks = ctx
            .plugin(HooksPlugin::new(crate::hooks::plugin_options(
                &settings,
                options.front_end.long_lived(),
            )))
            .await
            .map_err(|e| HarnessError::start("mount hooks", e))?;
        let approval = settings.guard.approval_or(default_approval);
        let guard = crate::guard::install(&ctx, &core.prompt, &settings, default_approval)?;
        for (name, order, text) in TOOL_SECTIONS {
            let _ = core
                .prompt
                .section(&ctx, Section::new(*name, *order, *text))
                .map_err(|e| HarnessError::start("add the tool guidance", e))?;
        }
        let planner = Arc::new(Planner::new(
            settings.clone(),
            options.flags.clone(),
            store.clone(),
        ));
        // Front ends that create agents themselves (the ACP bridge) plan them here too.
        ctx.provide::<dyn AgentPlanner>(planner.clone())
            .map_err(|e| HarnessError::start("provide the agent planner", e))?;
        // After the guard (which provides the per-session approval policies it clears).
        let choices = Arc::new(SessionChoices::default());
        choices.install(&ctx)?;
        // Front ends that build messages themselves (the ACP bridge) attach images here too.
        let images = Arc::new(ImageGate {
            settings: settings.clone(),
            choices: choices.clone(),
            registry: core.registry.clone(),
            attachments,
        });
        ctx.provide::<dyn PromptImages>(images.clone())
            .map_err(|e| HarnessError::start("provide the image attacher", e))?;
        // Only now is the harness complete: config-declared agents may run their first turn.
        if options.front_end.long_lived() {
            core.agent_loop.start_configured().await;
        }
        Ok(Self {
            ctx,
            core,
            store,
            settings,
            planner,
            front_end: options.front_end,
            approval,
            choices,
            images,
            executor,
            routes,
            notices,
            persistence,
            compaction,
            checkpoints,
            tools,
            subagents,
            web,
            skills,
            plan,
            mcp,
            hooks,
            _guard: guard,
        })
    }

    /// The root context every service is registered on (what `dsh acp` serves from, where a
    /// front end provides its approver and listens to `session/event`).
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The core services (session store, agent registry, LLM runtime, tools, prompt, loop).
    pub fn core(&self) -> &Core {
        &self.core
    }

    /// The settings the harness was started with (after start-up's own adjustments: a model
    /// asked from a local server, R16's approval).
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The session store, JSONL or PostgreSQL (also provided as `dyn Persistence`).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Which front end the harness serves.
    pub fn front_end(&self) -> FrontEnd {
        self.front_end
    }

    /// What start-up decided that the person should be told once (R16's full access).
    pub fn notices(&self) -> &[String] {
        &self.notices
    }

    /// Waits until the selected provider's HTTP client is built; the failure names what is
    /// wrong with its settings. Long-lived front ends check this at start, so a bad provider
    /// setting shows before the first message.
    pub async fn ready(&self) -> Result<(), HarnessError> {
        let name = &self.settings.provider.value;
        match self.routes.adapter(name) {
            Some(adapter) => adapter
                .ready()
                .await
                .map_err(|f| HarnessError::Route(format!("provider `{name}`: {f}"))),
            None => Err(HarnessError::Route(format!(
                "provider `{name}` is not registered"
            ))),
        }
    }

    /// The compaction service (`/compact`, context use), mounted for every agent.
    pub fn compaction(&self) -> Option<Arc<Compaction>> {
        self.ctx.get::<Compaction>()
    }

    /// The checkpoint service: rewind a live session (`/rewind`), list its turns, diff one.
    pub fn checkpoints(&self) -> Option<Arc<Checkpoints>> {
        self.ctx.get::<Checkpoints>()
    }

    /// Resolves once `agent` is idle and owns no live background subagent, so a headless
    /// run's final answer includes what its background children reported.
    pub async fn when_quiet(&self, agent: &dsh_agent::AgentRef) {
        match SubagentRuntime::of(&self.ctx) {
            Some(runtime) => runtime.when_quiet(agent).await,
            None => agent.when_idle().await,
        }
    }

    /// Tears everything down in the order durability needs: every agent stopped, drained and
    /// flushed (while persistence still listens), then subagent runs, the MCP servers, hooks,
    /// compaction, the tools, the core services, the provider routes, the shell (killing
    /// anything left running) and finally persistence, whose unmount drains every writer.
    pub async fn shutdown(&self) {
        self.core.agent_loop.shutdown().await;
        self.subagents.dispose().await;
        if let Some(mcp) = &self.mcp {
            mcp.dispose().await;
        }
        self.hooks.dispose().await;
        self.compaction.dispose().await;
        self.plan.dispose().await;
        self.skills.dispose().await;
        self.checkpoints.dispose().await;
        self.web.dispose().await;
        self.tools.dispose().await;
        self.core.shutdown().await;
        self.routes.unregister();
        self.executor.dispose().await;
        if let Some(spill) = self.ctx.get::<dsh_tools::ResultSpill>() {
            spill.clear();
        }
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
