//! The effective configuration: `$DSH_HOME/config.toml`, then environment variables, then flags.
//!
//! Every value remembers where it came from ([`Source`]) so `dsh config show` can answer "why is
//! it using that model?" without guesswork. Keys themselves are never stored here: a provider
//! names the environment variable holding its key, and the adapter reads it per request.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use dsh_agent_loop::ConfiguredAgent;
use dsh_llm::ModelCatalog;
use serde::Deserialize;

pub use crate::error::ConfigError;
use crate::error::{config_bail, config_error};
pub use edit::{NewServer, add_mcp_server, remove_mcp_server};

pub mod checkpoints;
mod compaction;
mod edit;
mod effort;
mod empty;
pub mod guard;
mod mcp;
pub mod models;
mod route;
pub mod store;
pub mod web_search;

/// Where an effective value came from, in increasing precedence.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    /// Built into dsh.
    Default,
    /// The selected provider's default (its first listed model).
    ProviderDefault,
    /// `$DSH_HOME/config.toml`.
    File,
    /// An environment variable.
    Env(&'static str),
    /// A command-line flag.
    Flag(&'static str),
    /// Not set anywhere (a model the selected provider has no default for).
    Unset,
}

impl Source {
    /// Precedence rank: flags beat the environment, which beats the file.
    fn rank(&self) -> u8 {
        match self {
            Self::Default | Self::ProviderDefault | Self::Unset => 0,
            Self::File => 1,
            Self::Env(_) => 2,
            Self::Flag(_) => 3,
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Default => f.write_str("default"),
            Self::ProviderDefault => f.write_str("default of the provider"),
            Self::File => f.write_str("file"),
            Self::Env(name) => write!(f, "env {name}"),
            Self::Flag(name) => write!(f, "flag {name}"),
            Self::Unset => f.write_str("unset"),
        }
    }
}

/// A value and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sourced<T> {
    /// The value.
    pub value: T,
    /// Its origin.
    pub source: Source,
}

impl<T> Sourced<T> {
    /// A value from `source`.
    pub fn new(value: T, source: Source) -> Self {
        Self { value, source }
    }
}

/// The wire dialect of a provider.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProviderKind {
    /// DeepSeek's API (thinking, reasoning passback, cache-hit usage).
    Deepseek,
    /// Any OpenAI-compatible chat-completions server.
    OpenaiCompatible,
    /// Anthropic's Messages API (Claude; DeepSeek's Anthropic-compatible endpoint).
    Anthropic,
    /// OpenAI's Responses API (reasoning carried across the steps of a tool loop).
    OpenaiResponses,
}

impl ProviderKind {
    fn name(self) -> &'static str {
        match self {
            Self::Deepseek => "deepseek",
            Self::OpenaiCompatible => "openai-compatible",
            Self::Anthropic => "anthropic",
            Self::OpenaiResponses => "openai-responses",
        }
    }
}

/// One provider route as the composition root will register it.
#[derive(Clone, Debug)]
pub struct ProviderSettings {
    /// Route name (the table key).
    pub name: String,
    /// Dialect.
    pub kind: Sourced<ProviderKind>,
    /// API root.
    pub base_url: Sourced<String>,
    /// The environment variable holding the key; `None` for servers that need no key.
    pub api_key_env: Option<Sourced<String>>,
    /// Advertised models; the first is the provider's default model.
    pub models: Sourced<Vec<String>>,
}

/// Flags that override the file and the environment.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `--provider`
    pub provider: Option<String>,
    /// `--model`
    pub model: Option<String>,
    /// `--base-url` (applies to the selected provider)
    pub base_url: Option<String>,
    /// `--effort`
    pub effort: Option<String>,
    /// `--sandbox`
    pub sandbox: Option<dsh_guard::SandboxMode>,
    /// `--approval`
    pub approval: Option<dsh_guard::ApprovalPolicy>,
}

/// The effective configuration.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `$DSH_HOME` (default `~/.dsh`).
    pub home: Sourced<PathBuf>,
    /// The config file consulted.
    pub config_path: PathBuf,
    /// Whether it existed.
    pub config_found: bool,
    /// The selected provider route.
    pub provider: Sourced<String>,
    /// The selected model.
    pub model: Sourced<String>,
    /// Parallel-safe tool calls in flight per step.
    pub max_parallel_tool_calls: Sourced<usize>,
    /// Per-request output cap (`None`: the adapter's default).
    pub max_tokens: Option<Sourced<u32>>,
    /// Reasoning effort of the selected model (`None`: the model's default).
    pub reasoning_effort: Option<Sourced<String>>,
    /// Every known provider, builtin and configured.
    pub providers: BTreeMap<String, ProviderSettings>,
    /// Config-declared agents (`[[agents]]`), started by the loop in long-lived front ends.
    pub agents: Vec<ConfiguredAgent>,
    /// Model facts: the built-in catalog with the file's `[models."ID"]` overrides.
    pub catalog: ModelCatalog,
    /// `[sandbox]`, `[permissions]` and their flags.
    pub guard: guard::GuardSettings,
    /// MCP servers (`[mcp_servers.NAME]`), in name order.
    pub mcp_servers: Vec<dsh_mcp::ServerConfig>,
    /// `[hooks]`: where command hooks are read from.
    pub hooks: crate::hooks::HookSettings,
    /// `[compaction]`: when automatic compaction starts and what it keeps.
    pub compaction: dsh_compaction::CompactionConfig,
    /// `[store]` and `DSH_STORE_URL`: where sessions are kept.
    pub store: store::StoreSettings,
    /// `[checkpoints]`: whether the workspace is recorded for rewinds, and the size cap.
    pub checkpoints: checkpoints::CheckpointSettings,
    /// `[web_search]`: the search API of dsh's `web_search` tool, or the provider's own
    /// search (`None`: no search is offered).
    pub web_search: Option<web_search::WebSearchChoice>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    defaults: FileDefaults,
    #[serde(default)]
    providers: BTreeMap<String, FileProvider>,
    #[serde(default)]
    agents: Vec<ConfiguredAgent>,
    #[serde(default)]
    models: models::FileModels,
    #[serde(default)]
    sandbox: guard::FileSandbox,
    #[serde(default)]
    permissions: guard::FilePermissions,
    #[serde(default)]
    mcp_servers: BTreeMap<String, toml::Spanned<mcp::FileMcpServer>>,
    #[serde(default)]
    hooks: crate::hooks::FileHooks,
    #[serde(default)]
    compaction: compaction::FileCompaction,
    #[serde(default)]
    checkpoints: checkpoints::FileCheckpoints,
    #[serde(default)]
    store: Option<toml::Spanned<store::FileStore>>,
    #[serde(default)]
    web_search: web_search::FileWebSearch,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDefaults {
    provider: Option<String>,
    model: Option<toml::Spanned<String>>,
    max_parallel_tool_calls: Option<toml::Spanned<usize>>,
    max_tokens: Option<toml::Spanned<u32>>,
    reasoning_effort: Option<toml::Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileProvider {
    kind: Option<ProviderKind>,
    base_url: Option<String>,
    api_key_env: Option<String>,
    models: Option<Vec<toml::Spanned<String>>>,
    reasoning_effort: Option<toml::Spanned<String>>,
}

/// DeepSeek's public API root.
pub const DEEPSEEK_DEFAULT_BASE_URL: &str = "https://api.deepseek.com";
/// OpenAI's public API root.
pub const OPENAI_DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// llama.cpp's server default address (`llama-server --port 8080`).
pub const LOCAL_DEFAULT_BASE_URL: &str = "http://127.0.0.1:8080/v1";
/// The default provider route.
pub const DEFAULT_PROVIDER: &str = "deepseek";
/// The default model: DeepSeek V4 Flash, the first entry of the adapter's DeepSeek catalog.
pub const DEFAULT_MODEL: &str = "deepseek-v4-flash";

/// The builtin providers: `deepseek`, `openai` and `local` (an OpenAI-compatible server on
/// this machine that needs no key).
fn builtin_providers(env: &dyn Fn(&str) -> Option<String>) -> BTreeMap<String, ProviderSettings> {
    let base = |var: &'static str, default: &str| match env(var) {
        Some(v) => Sourced::new(v, Source::Env(var)),
        None => Sourced::new(default.to_owned(), Source::Default),
    };
    let mut out = BTreeMap::new();
    out.insert(
        "deepseek".to_owned(),
        ProviderSettings {
            name: "deepseek".to_owned(),
            kind: Sourced::new(ProviderKind::Deepseek, Source::Default),
            base_url: base("DEEPSEEK_BASE_URL", DEEPSEEK_DEFAULT_BASE_URL),
            api_key_env: Some(Sourced::new("DEEPSEEK_API_KEY".to_owned(), Source::Default)),
            models: Sourced::new(
                [
                    DEFAULT_MODEL,
                    "deepseek-v4-pro",
                    "deepseek-chat",
                    "deepseek-reasoner",
                ]
                .map(str::to_owned)
                .to_vec(),
                Source::Default,
            ),
        },
    );
    out.insert(
        "openai".to_owned(),
        ProviderSettings {
            name: "openai".to_owned(),
            kind: Sourced::new(ProviderKind::OpenaiCompatible, Source::Default),
            base_url: base("OPENAI_BASE_URL", OPENAI_DEFAULT_BASE_URL),
            api_key_env: Some(Sourced::new("OPENAI_API_KEY".to_owned(), Source::Default)),
            models: Sourced::new(Vec::new(), Source::Default),
        },
    );
    out.insert(
        "anthropic".to_owned(),
        ProviderSettings {
            name: "anthropic".to_owned(),
            kind: Sourced::new(ProviderKind::Anthropic, Source::Default),
            base_url: base(
                "ANTHROPIC_BASE_URL",
                dsh_llm_anthropic::ANTHROPIC_DEFAULT_BASE_URL,
            ),
            api_key_env: Some(Sourced::new(
                "ANTHROPIC_API_KEY".to_owned(),
                Source::Default,
            )),
            models: Sourced::new(
                dsh_llm_anthropic::anthropic_models()
                    .into_iter()
                    .map(|m| m.id)
                    .collect(),
                Source::Default,
            ),
        },
    );
    out.insert(
        "local".to_owned(),
        ProviderSettings {
            name: "local".to_owned(),
            kind: Sourced::new(ProviderKind::OpenaiCompatible, Source::Default),
            base_url: Sourced::new(LOCAL_DEFAULT_BASE_URL.to_owned(), Source::Default),
            api_key_env: None,
            models: Sourced::new(Vec::new(), Source::Default),
        },
    );
    out
}

/// The environment variables a builtin provider's base URL comes from; they beat the file.
fn base_url_env(provider: &str) -> Option<&'static str> {
    match provider {
        "deepseek" => Some("DEEPSEEK_BASE_URL"),
        "openai" => Some("OPENAI_BASE_URL"),
        "anthropic" => Some("ANTHROPIC_BASE_URL"),
        _ => None,
    }
}

/// The most a `config.toml` may hold; a larger file is refused (a cut TOML document would
/// mean something else).
pub const CONFIG_LIMIT: u64 = 1 << 20;

/// The text of the config file at `path`, `None` when there is none. Read like every file dsh
/// finds by its place ([`dsh_fs::read_placed`]): a FIFO, a directory or a device there is
/// refused at once instead of hanging start-up, and so is a file over [`CONFIG_LIMIT`].
pub fn read_config(path: &Path) -> Result<Option<String>, ConfigError> {
    let file = dsh_fs::read_placed(path, CONFIG_LIMIT, dsh_fs::Oversize::Refuse)
        .map_err(|e| config_error!("{e}"))?;
    file.map(|f| {
        String::from_utf8(f.bytes)
            .map_err(|_| config_error!("{} is not valid UTF-8", path.display()))
    })
    .transpose()
}

/// `$DSH_HOME`, else `$HOME/.dsh`.
pub fn dsh_home(env: &dyn Fn(&str) -> Option<String>) -> Result<Sourced<PathBuf>, ConfigError> {
    if let Some(home) = env("DSH_HOME") {
        return Ok(Sourced::new(PathBuf::from(home), Source::Env("DSH_HOME")));
    }
    match env("HOME") {
        Some(home) => Ok(Sourced::new(
            PathBuf::from(home).join(".dsh"),
            Source::Default,
        )),
        None => config_bail!("cannot find the dsh home: set DSH_HOME (or HOME)"),
    }
}

pub use crate::env::process_env;

impl Settings {
    /// Loads the effective configuration from the process environment and `flags`.
    pub fn load(flags: &Overrides) -> Result<Self, ConfigError> {
        Self::resolve(&process_env, flags)
    }

    /// Loads the effective configuration from `env` (a lookup returning `None` for unset or
    /// empty variables) and `flags`.
    pub fn resolve(
        env: &dyn Fn(&str) -> Option<String>,
        flags: &Overrides,
    ) -> Result<Self, ConfigError> {
        empty::refuse_empty_flag(flags)?;
        let home = dsh_home(env)?;
        let config_path = home.value.join("config.toml");
        let (text, config_found) = match read_config(&config_path)? {
            Some(text) => (text, true),
            None => (String::new(), false),
        };
        let file = if config_found {
            let file = parse_file(&config_path, &text)?;
            empty::refuse_empty_models(&config_path, &text, &file)?;
            file
        } else {
            FileConfig::default()
        };
        let mut providers = builtin_providers(env);
        let provider_efforts: BTreeMap<String, toml::Spanned<String>> = file
            .providers
            .iter()
            .filter_map(|(name, p)| Some((name.clone(), p.reasoning_effort.clone()?)))
            .collect();
        for (name, fp) in file.providers {
            let at = || {
                let line = line_of(&text, &format!("[providers.{name}]"));
                match line {
                    Some(l) => format!("{}:{l}", config_path.display()),
                    None => config_path.display().to_string(),
                }
            };
            let env_base = base_url_env(&name).and_then(|var| env(var).map(|v| (var, v)));
            match providers.get_mut(&name) {
                Some(p) => {
                    if let Some(kind) = fp.kind {
                        p.kind = Sourced::new(kind, Source::File);
                    }
                    if let Some(url) = fp.base_url
                        && env_base.is_none()
                    {
                        p.base_url = Sourced::new(url, Source::File);
                    }
                    if let Some(var) = fp.api_key_env {
                        p.api_key_env = (!var.is_empty()).then(|| Sourced::new(var, Source::File));
                    }
                    if let Some(models) = fp.models {
                        p.models = Sourced::new(unspan(models), Source::File);
                    }
                }
                None => {
                    let kind = fp.kind.ok_or_else(|| {
                        config_error!(
                            "invalid config file {}: providers.{name}: missing field `kind` \
                             (\"deepseek\" or \"openai-compatible\")",
                            at()
                        )
                    })?;
                    let base_url = fp.base_url.ok_or_else(|| {
                        config_error!(
                            "invalid config file {}: providers.{name}: missing field `base_url`",
                            at()
                        )
                    })?;
                    providers.insert(
                        name.clone(),
                        ProviderSettings {
                            name: name.clone(),
                            kind: Sourced::new(kind, Source::File),
                            base_url: Sourced::new(base_url, Source::File),
                            api_key_env: fp
                                .api_key_env
                                .filter(|v| !v.is_empty())
                                .map(|v| Sourced::new(v, Source::File)),
                            models: Sourced::new(
                                unspan(fp.models.unwrap_or_default()),
                                Source::File,
                            ),
                        },
                    );
                }
            }
        }

        let provider = pick(
            flags
                .provider
                .clone()
                .map(|v| (v, Source::Flag("--provider"))),
            env("DSH_PROVIDER").map(|v| (v, Source::Env("DSH_PROVIDER"))),
            file.defaults.provider.map(|v| (v, Source::File)),
            (DEFAULT_PROVIDER.to_owned(), Source::Default),
        );
        let Some(selected) = providers.get_mut(&provider.value) else {
            let known: Vec<&str> = providers.keys().map(String::as_str).collect();
            config_bail!(
                "unknown provider `{}` (from {}); known providers: {}; define others under \
                 [providers.NAME] in {}",
                provider.value,
                provider.source,
                known.join(", "),
                config_path.display()
            );
        };
        if let Some(url) = &flags.base_url {
            selected.base_url = Sourced::new(url.clone(), Source::Flag("--base-url"));
        }

        // A model chosen at a lower precedence than the provider was meant for another
        // provider: `--provider openai` must not send the file's DeepSeek model to OpenAI.
        let candidates = [
            flags.model.clone().map(|v| (v, Source::Flag("--model"))),
            env("DSH_MODEL").map(|v| (v, Source::Env("DSH_MODEL"))),
            file.defaults.model.map(|v| (v.into_inner(), Source::File)),
        ];
        let provider_default = selected.models.value.first().cloned();
        let explicit = candidates.iter().flatten().next().cloned();
        let model = match explicit {
            Some((value, source)) if source.rank() >= provider.source.rank() => {
                Sourced::new(value, source)
            }
            other => match (provider_default, other) {
                (Some(value), _) => Sourced::new(value, Source::ProviderDefault),
                (None, Some((value, source))) => Sourced::new(value, source),
                // Not an error yet: `config show` must still show everything else, and a
                // local server may name its own model (see `route`).
                (None, None) => Sourced::new(String::new(), Source::Unset),
            },
        };

        let max_parallel_tool_calls = match file.defaults.max_parallel_tool_calls {
            Some(n) if *n.get_ref() == 0 => config_bail!(
                "invalid config file {}: defaults.max_parallel_tool_calls must be positive",
                located(&config_path, &text, n.span().start)
            ),
            Some(n) => Sourced::new(n.into_inner(), Source::File),
            None => Sourced::new(10, Source::Default),
        };
        let mcp_servers = mcp::resolve(&config_path, &text, file.mcp_servers)?;
        let max_tokens = match file.defaults.max_tokens {
            Some(n) if *n.get_ref() == 0 => config_bail!(
                "invalid config file {}: defaults.max_tokens must be positive",
                located(&config_path, &text, n.span().start)
            ),
            other => other.map(|n| Sourced::new(n.into_inner(), Source::File)),
        };
        let reasoning_effort = effort::resolve(
            effort::EffortInputs {
                flag: flags.effort.as_deref(),
                env: env("DSH_EFFORT"),
                model: file
                    .models
                    .get(&model.value)
                    .and_then(|m| m.get_ref().reasoning_effort.as_ref()),
                provider: provider_efforts.get(&provider.value),
                defaults: file.defaults.reasoning_effort.as_ref(),
            },
            &config_path,
            &text,
        )?;
        let catalog = models::catalog(&file.models, &config_path, &text)?;
        let mut guard = guard::resolve(file.sandbox, file.permissions, flags, &config_path, &text)?;
        guard
            .rules
            .allow
            .extend(mcp::approval_rules(&config_path, &mcp_servers));
        let compaction = compaction::resolve(&file.compaction, &config_path, &text)?;
        let checkpoints = checkpoints::resolve(&file.checkpoints, &config_path, &text)?;
        let store = store::resolve(env, file.store, &config_path, &text)?;
        let web_search = web_search::resolve(&file.web_search, &config_path, &text)?;
        Ok(Self {
            home,
            config_path,
            config_found,
            provider,
            model,
            max_parallel_tool_calls,
            max_tokens,
            reasoning_effort,
            providers,
            agents: file.agents,
            catalog,
            guard,
            mcp_servers,
            hooks: crate::hooks::HookSettings::from_file(&file.hooks),
            compaction,
            store,
            checkpoints,
            web_search,
        })
    }

    /// The selected provider.
    pub fn selected(&self) -> &ProviderSettings {
        // `resolve` refuses a provider it does not know, so the lookup cannot fail; fall back
        // to any provider rather than panic should that ever change.
        self.providers
            .get(&self.provider.value)
            .or_else(|| self.providers.values().next())
            .unwrap_or_else(|| unreachable!("builtin providers are always present"))
    }

    /// Where sessions are stored.
    pub fn sessions_root(&self) -> PathBuf {
        self.home.value.join("sessions")
    }

    /// Where checkpoints are stored: one shadow repository per workspace.
    pub fn checkpoints_root(&self) -> PathBuf {
        self.home.value.join("checkpoints")
    }

    /// Fails, naming the variable to set, when the selected provider needs a key that is not
    /// in the environment. Checked before any request so a missing key never costs a round
    /// trip or a half-started session.
    /// The route is checked first ([`Settings::check_route`]).
    pub fn check_credentials(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        self.check_route()?;
        let p = self.selected();
        if let Some(var) = &p.api_key_env
            && env(&var.value).is_none()
        {
            config_bail!(
                "no API key for provider `{}`: set the {} environment variable",
                p.name,
                var.value
            );
        }
        Ok(())
    }

    /// `dsh config show`: the effective configuration as TOML, each value commented with its
    /// source, keys redacted.
    pub fn render(&self, env: &dyn Fn(&str) -> Option<String>) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let q = |s: &str| toml_string(s);
        let line = |out: &mut String, text: String, source: &dyn fmt::Display| {
            let _ = writeln!(out, "{text:<48} # {source}");
        };
        let _ = writeln!(out, "# effective dsh configuration");
        let _ = writeln!(
            out,
            "# DSH_HOME = {} ({})",
            self.home.value.display(),
            self.home.source
        );
        let _ = writeln!(
            out,
            "# config file: {} ({})",
            self.config_path.display(),
            if self.config_found {
                "found"
            } else {
                "not found"
            }
        );
        let _ = writeln!(out, "# sessions: {}", self.store_description());
        let _ = writeln!(out);
        let _ = writeln!(out, "[defaults]");
        line(
            &mut out,
            format!("provider = {}", q(&self.provider.value)),
            &self.provider.source,
        );
        match self.model.source {
            Source::Unset => {
                let _ = writeln!(out, "# model unset: {}", self.missing_model_note());
            }
            _ => line(
                &mut out,
                format!("model = {}", q(&self.model.value)),
                &self.model.source,
            ),
        }
        line(
            &mut out,
            format!(
                "max_parallel_tool_calls = {}",
                self.max_parallel_tool_calls.value
            ),
            &self.max_parallel_tool_calls.source,
        );
        match &self.max_tokens {
            Some(m) => line(&mut out, format!("max_tokens = {}", m.value), &m.source),
            None => line(
                &mut out,
                "# max_tokens unset".to_owned(),
                &"default: the model's own cap",
            ),
        }
        match &self.reasoning_effort {
            Some(e) => line(
                &mut out,
                format!("reasoning_effort = {}", q(&e.value)),
                &e.source,
            ),
            None => line(
                &mut out,
                "# reasoning_effort unset".to_owned(),
                &"default: the model's own",
            ),
        }
        for p in self.providers.values() {
            let _ = writeln!(out);
            let selected = if p.name == self.provider.value {
                "  # selected"
            } else {
                ""
            };
            let _ = writeln!(out, "[providers.{}]{selected}", p.name);
            line(
                &mut out,
                format!("kind = {}", q(p.kind.value.name())),
                &p.kind.source,
            );
            line(
                &mut out,
                format!("base_url = {}", q(&redact_url(&p.base_url.value))),
                &p.base_url.source,
            );
            match &p.api_key_env {
                Some(var) => {
                    line(
                        &mut out,
                        format!("api_key_env = {}", q(&var.value)),
                        &var.source,
                    );
                    let state = if env(&var.value).is_some() {
                        "set, redacted"
                    } else {
                        "NOT SET"
                    };
                    let _ = writeln!(out, "# api key: {state} (env {})", var.value);
                }
                None => {
                    let _ = writeln!(out, "# api key: not required");
                }
            }
            let models: Vec<String> = p.models.value.iter().map(|m| q(m)).collect();
            line(
                &mut out,
                format!("models = [{}]", models.join(", ")),
                &p.models.source,
            );
        }
        let _ = writeln!(out);
        out.push_str(&models::render(&self.catalog, &self.model.value));
        compaction::render(&mut out, &self.compaction);
        checkpoints::render(&mut out, &self.checkpoints, &self.checkpoints_root());
        web_search::render(&mut out, self.web_search.as_ref(), env);
        guard::render(&mut out, &self.guard, &dsh_guard::KernelProbe::default());
        for server in &self.mcp_servers {
            let _ = writeln!(out);
            let state = if server.enabled { "" } else { " (disabled)" };
            let _ = writeln!(
                out,
                "# mcp server `{}` (file){state}; `dsh mcp list` starts it",
                server.name
            );
        }
        if !self.agents.is_empty() {
            let _ = writeln!(out);
            let _ = writeln!(
                out,
                "# {} config-declared agent(s) under [[agents]] (file)",
                self.agents.len()
            );
            for a in &self.agents {
                let _ = writeln!(out, "#   {}", a.id);
            }
        }
        self.hooks.render(&mut out);
        out
    }
}

fn pick(
    flag: Option<(String, Source)>,
    env: Option<(String, Source)>,
    file: Option<(String, Source)>,
    default: (String, Source),
) -> Sourced<String> {
    let (value, source) = flag.or(env).or(file).unwrap_or(default);
    Sourced::new(value, source)
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

/// The 1-based line of the first line containing `needle`.
fn line_of(text: &str, needle: &str) -> Option<usize> {
    text.lines().position(|l| l.contains(needle)).map(|i| i + 1)
}

/// The values of a list read with their positions.
fn unspan(values: Vec<toml::Spanned<String>>) -> Vec<String> {
    values.into_iter().map(toml::Spanned::into_inner).collect()
}

/// Resolves `config` as the only `config.toml` of a fresh `DSH_HOME`, no flags or other
/// variables: what the per-table tests of the submodules start from.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) fn resolve_file_for_test(config: &str) -> Result<Settings, ConfigError> {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let dir = home.path().to_str().unwrap().to_owned();
    Settings::resolve(
        &move |k| (k == "DSH_HOME").then(|| dir.clone()),
        &Overrides::default(),
    )
}

/// `file:line:column` of the byte `offset` of the file's text.
fn located(path: &Path, text: &str, offset: usize) -> String {
    let (line, column) = line_column(text, offset);
    format!("{}:{line}:{column}", path.display())
}

/// A URL as `config show` prints it: credentials in its user-info part and its query (where
/// some servers take a key) are replaced by `***`. The adapter refuses such URLs anyway; this
/// keeps `config show`, which people paste into bug reports, from printing them first.
fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((_, host)) => format!("***@{host}"),
        None => authority.to_owned(),
    };
    let tail = match tail.split_once('?') {
        Some((path, _)) => format!("{path}?***"),
        None => tail.to_owned(),
    };
    match scheme {
        Some(scheme) => format!("{scheme}://{authority}{tail}"),
        None => format!("{authority}{tail}"),
    }
}

/// Parses the config file, turning toml's span into `file:line:column` plus the offending line.
fn parse_file(path: &Path, text: &str) -> Result<FileConfig, ConfigError> {
    toml::from_str::<FileConfig>(text).map_err(|e| {
        let (line, column) = e
            .span()
            .map(|span| line_column(text, span.start))
            .unwrap_or((1, 1));
        let snippet = text.lines().nth(line - 1).unwrap_or("").trim();
        config_error!(
            "invalid config file {}:{line}:{column}: {} (at `{snippet}`)",
            path.display(),
            e.message().trim()
        )
    })
}

fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| map.get(k).cloned()
    }

    fn home_with(config: Option<&str>) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        if let Some(text) = config {
            std::fs::write(dir.path().join("config.toml"), text).unwrap();
        }
        dir
    }

    #[test]
    fn defaults_select_deepseek_v4_flash() {
        let home = home_with(None);
        let env = env_of(&[("DSH_HOME", home.path().to_str().unwrap())]);
        let s = Settings::resolve(&env, &Overrides::default()).unwrap();
        assert_eq!(s.provider.value, "deepseek");
        assert_eq!(s.provider.source, Source::Default);
        assert_eq!(s.model.value, DEFAULT_MODEL);
        assert_eq!(s.selected().base_url.value, DEEPSEEK_DEFAULT_BASE_URL);
        assert!(!s.config_found);
    }

    #[test]
    fn flags_beat_env_which_beats_the_file() {
        let home = home_with(Some(
            "[defaults]\nprovider = \"openai\"\nmodel = \"from-file\"\n\
             [providers.deepseek]\nbase_url = \"http://file\"\n",
        ));
        let env = env_of(&[
            ("DSH_HOME", home.path().to_str().unwrap()),
            ("DSH_MODEL", "from-env"),
            ("DEEPSEEK_BASE_URL", "http://env"),
        ]);
        let s = Settings::resolve(&env, &Overrides::default()).unwrap();
        assert_eq!(s.provider.value, "openai");
        assert_eq!(s.model.value, "from-env");
        assert_eq!(s.providers["deepseek"].base_url.value, "http://env");
        let flags = Overrides {
            provider: Some("deepseek".into()),
            model: Some("from-flag".into()),
            base_url: Some("http://flag".into()),
            ..Overrides::default()
        };
        let s = Settings::resolve(&env, &flags).unwrap();
        assert_eq!(s.model.value, "from-flag");
        assert_eq!(s.model.source, Source::Flag("--model"));
        assert_eq!(s.selected().base_url.value, "http://flag");
    }

    #[test]
    fn a_provider_chosen_above_the_model_uses_its_own_default_model() {
        let home = home_with(Some("[defaults]\nmodel = \"gpt-x\"\n"));
        let env = env_of(&[("DSH_HOME", home.path().to_str().unwrap())]);
        let flags = Overrides {
            provider: Some("deepseek".into()),
            ..Overrides::default()
        };
        let s = Settings::resolve(&env, &flags).unwrap();
        assert_eq!(s.model.value, DEFAULT_MODEL);
        assert_eq!(s.model.source, Source::ProviderDefault);
    }

    #[test]
    fn configured_provider_needs_kind_and_base_url() {
        let home = home_with(Some("\n[providers.ollama]\nmodels = [\"x\"]\n"));
        let env = env_of(&[("DSH_HOME", home.path().to_str().unwrap())]);
        let err = Settings::resolve(&env, &Overrides::default()).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("config.toml:2"), "{msg}");
        assert!(msg.contains("kind"), "{msg}");
    }

    #[test]
    fn invalid_file_errors_name_file_line_and_field() {
        let home = home_with(Some("[defaults]\nprovider = \"deepseek\"\nmodle = \"x\"\n"));
        let env = env_of(&[("DSH_HOME", home.path().to_str().unwrap())]);
        let msg = Settings::resolve(&env, &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(msg.contains("config.toml:3:"), "{msg}");
        assert!(msg.contains("modle"), "{msg}");
    }

    #[test]
    fn missing_key_names_the_variable() {
        let home = home_with(None);
        let env = env_of(&[("DSH_HOME", home.path().to_str().unwrap())]);
        let s = Settings::resolve(&env, &Overrides::default()).unwrap();
        let msg = s.check_credentials(&env).unwrap_err().to_string();
        assert!(msg.contains("DEEPSEEK_API_KEY"), "{msg}");
        let local = Settings::resolve(
            &env,
            &Overrides {
                provider: Some("local".into()),
                model: Some("m".into()),
                ..Overrides::default()
            },
        )
        .unwrap();
        local.check_credentials(&env).unwrap();
    }

    #[test]
    fn render_redacts_credentials_in_base_urls() {
        assert_eq!(
            redact_url("https://user:sk-pass@host:8080/v1?key=sk-q#f"),
            "https://***@host:8080/v1?***"
        );
        assert_eq!(
            redact_url("http://127.0.0.1:11434/v1"),
            "http://127.0.0.1:11434/v1"
        );
        assert_eq!(redact_url("host/v1"), "host/v1");
    }

    #[test]
    fn render_redacts_keys_and_names_sources() {
        let home = home_with(None);
        let env = env_of(&[
            ("DSH_HOME", home.path().to_str().unwrap()),
            ("DEEPSEEK_API_KEY", "sk-very-secret"),
        ]);
        let s = Settings::resolve(&env, &Overrides::default()).unwrap();
        let text = s.render(&env);
        assert!(!text.contains("sk-very-secret"));
        assert!(text.contains("set, redacted"));
        assert!(text.contains("# default"));
    }
}
