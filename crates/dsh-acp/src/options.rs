//! What a front end configures when it starts the bridge.

use std::fmt;
use std::sync::Arc;

use dsh_agent::{AgentOptions, Setup};
use dsh_llm::ModelCatalog;

/// Builds one extra composition step for every agent the bridge creates or resumes (for
/// example the CLI's per-workspace `AGENTS.md` section). It is called once per agent and the
/// returned [`Setup`] runs before the bridge's own wiring, while nothing is published yet.
pub type AgentSetupHook = Arc<dyn Fn() -> Setup + Send + Sync>;

/// Which tool calls of a bridge-owned session wait for the person at the editor.
///
/// Editors show a permission card (`session/request_permission`) for every call that needs
/// approval; a client error, a disconnect or a cancelled turn denies it (fail closed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ApprovalPolicy {
    /// Never ask: every tool runs (the session starts in the `auto` mode).
    Never,
    /// Ask before every call that may change something: one whose tool declares that it
    /// writes files or runs a command, or declares nothing ([`dsh_tools::ToolEffects`]); the
    /// session starts in the `default` mode. The editor default, because an editor user
    /// expects to see a change or a command before it happens.
    #[default]
    MutatingTools,
}

/// Configuration of [`crate::serve`].
#[derive(Clone)]
pub struct AcpOptions {
    /// Route and output cap of every agent the bridge creates or resumes.
    pub agent_options: AgentOptions,
    /// Which calls ask the client first (also the initial session mode).
    pub approval: ApprovalPolicy,
    /// Extra per-agent composition, run for every bridge-created or resumed agent.
    pub agent_setup: Option<AgentSetupHook>,
    /// Whether `read`/`write`/`edit` go through the editor (`fs/*`) when it offers that.
    pub editor_files: bool,
    /// Whether foreground `bash` runs in the editor's terminals when it offers them. A front
    /// end that sandboxes commands turns this off: dsh cannot confine a process the editor
    /// spawns.
    pub editor_terminals: bool,
    /// Variables an editor terminal unsets besides the credential-like ones still in dsh's
    /// environment: the editor started dsh with its own environment, which its terminals
    /// pass on, so secrets dsh moved out of its environment at start-up (and every configured
    /// key variable) must be named here to be kept from the command.
    pub terminal_unset: Vec<String>,
    /// Model facts whose prices put the session's running cost on every `usage_update`;
    /// `None` leaves the cost out.
    pub catalog: Option<ModelCatalog>,
    /// The implementation name reported by `initialize`.
    pub agent_name: String,
    /// The implementation version reported by `initialize`.
    pub agent_version: String,
}

impl Default for AcpOptions {
    fn default() -> Self {
        Self {
            agent_options: AgentOptions::default(),
            approval: ApprovalPolicy::default(),
            agent_setup: None,
            editor_files: true,
            editor_terminals: true,
            terminal_unset: Vec::new(),
            catalog: None,
            agent_name: "dsh".to_owned(),
            agent_version: env!("CARGO_PKG_VERSION").to_owned(),
        }
    }
}

impl AcpOptions {
    /// Options with `agent_options` as the route and every other field at its default.
    pub fn new(agent_options: AgentOptions) -> Self {
        Self {
            agent_options,
            ..Self::default()
        }
    }

    /// The same options with `hook` as the extra per-agent composition.
    pub fn with_agent_setup(mut self, hook: AgentSetupHook) -> Self {
        self.agent_setup = Some(hook);
        self
    }

    /// The same options with another approval policy.
    pub fn with_approval(mut self, approval: ApprovalPolicy) -> Self {
        self.approval = approval;
        self
    }
}

impl fmt::Debug for AcpOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AcpOptions")
            .field("agent_options", &self.agent_options)
            .field("approval", &self.approval)
            .field("agent_setup", &self.agent_setup.is_some())
            .field("editor_files", &self.editor_files)
            .field("editor_terminals", &self.editor_terminals)
            .field("catalog", &self.catalog.is_some())
            .field("agent_name", &self.agent_name)
            .field("agent_version", &self.agent_version)
            .finish()
    }
}
