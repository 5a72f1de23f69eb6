//! What the composition root provides the UI: agents, stored sessions, settings and the
//! session commands that need the harness (`/compact`, `/context`, `/model`, `/mode`).
//!
//! The UI never builds a harness itself (dependencies point down: front ends sit on the seams,
//! `dsh-cli` composes), so creating, resuming, listing and those commands go through this
//! small trait. Everything the status line shows about a session (its model, sandbox and
//! approval policy) is the host's answer for that session, asked again whenever it may have
//! changed, so the UI never shows a mode it assumed.

use std::path::PathBuf;

use async_trait::async_trait;
use dsh_agent::{AgentHandle, AgentRef};
use dsh_kernel::Context;
use dsh_session::SessionId;
use tokio_util::sync::CancellationToken;

use crate::commands::Entry;

/// A failure the host reports; the UI shows its message as an error notice.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HostError(pub String);

/// Per-million-token prices, for the status line's cost figure.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Prices {
    /// Dollars per million uncached input tokens.
    pub input: f64,
    /// Dollars per million input tokens served from the cache.
    pub cache_read: f64,
    /// Dollars per million output tokens.
    pub output: f64,
}

/// One model of the catalogue, for `/model`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelEntry {
    /// The model id.
    pub id: String,
    /// The provider route that serves it (empty when the host does not say).
    pub provider: String,
    /// Its context window, when known.
    pub context_window: Option<u64>,
    /// Its prices, when known.
    pub prices: Option<Prices>,
}

/// Settings the status line and `/model`, `/mode` show: the host's answer for one session
/// (or, before there is one, for a new session).
#[derive(Clone, Debug, Default)]
pub struct HostInfo {
    /// The model the session sends its next request to.
    pub model: String,
    /// The provider route.
    pub provider: String,
    /// The working directory of new sessions.
    pub cwd: PathBuf,
    /// The effective sandbox mode and approval policy, as a person names them
    /// (`workspace-write · ask · network off`).
    pub mode: String,
    /// The catalogue: every model the session may switch to, with windows and prices.
    pub models: Vec<ModelEntry>,
}

impl HostInfo {
    /// The catalogue entry of model `id` (on `provider`, when it is known).
    pub fn model_entry(&self, provider: Option<&str>, id: &str) -> Option<&ModelEntry> {
        self.models.iter().find(|m| {
            m.id == id && provider.is_none_or(|p| m.provider.is_empty() || m.provider == p)
        })
    }
}

/// One stored session for the `/resume` picker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionEntry {
    /// The session id.
    pub id: SessionId,
    /// The first thing the user asked, when there was one.
    pub first_prompt: Option<String>,
    /// Last activity, milliseconds since the epoch.
    pub last_activity: u64,
    /// Completed turns, when cheap to know.
    pub turns: Option<u64>,
}

/// One part of what the next request carries, for `/context`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ContextPart {
    /// What it is (`system prompt`, `bash result: cargo test`).
    pub label: String,
    /// Estimated tokens.
    pub tokens: u64,
}

/// `/context`: how full the window is and what fills it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ContextReport {
    /// Tokens the next request will carry (before new input).
    pub tokens: u64,
    /// The model's window, when known.
    pub window: Option<u64>,
    /// Whether `tokens` builds on the provider's own count (else a pure estimate).
    pub measured: bool,
    /// The system prompt, the tool schemas and the conversation, in that order.
    pub parts: Vec<ContextPart>,
    /// The largest single items of the conversation, largest first.
    pub largest: Vec<ContextPart>,
}

/// A model switch: the provider (or the session's own when `None`) and the model (or the
/// provider's default when `None`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelChoice {
    /// Provider route name.
    pub provider: Option<String>,
    /// Model id.
    pub model: Option<String>,
}

/// The composition root, as the UI sees it.
#[async_trait]
pub trait TuiHost: Send + Sync + 'static {
    /// The context whose `session/event` and `session/live` feeds the UI listens to (and
    /// where it provides its approval service).
    fn ctx(&self) -> &Context;
    /// What `session` runs under now (`None`: what a new session would).
    fn info(&self, session: Option<&SessionId>) -> HostInfo;
    /// A fresh agent in the host's working directory.
    async fn create(&self) -> Result<AgentHandle, HostError>;
    /// The stored session `reference` names (an id or a unique prefix of one), without
    /// opening it: a failure leaves whatever is open untouched.
    async fn locate(&self, reference: &str) -> Result<SessionId, HostError>;
    /// An agent continuing stored session `id`.
    async fn resume(&self, id: SessionId) -> Result<AgentHandle, HostError>;
    /// Stored sessions, most recently active first.
    async fn sessions(&self) -> Result<Vec<SessionEntry>, HostError>;
    /// `/compact [focus]`: summarizes `agent`'s older history now (it is idle); the answer
    /// says what changed. Stops early when `cancel` fires.
    async fn compact(
        &self,
        agent: AgentRef,
        focus: Option<String>,
        cancel: CancellationToken,
    ) -> Result<String, HostError> {
        let _ = (agent, focus, cancel);
        Err(HostError("compaction is not available here".into()))
    }
    /// `/context`: the window use of `agent`'s session and what fills it.
    fn context(&self, agent: &AgentRef) -> Result<ContextReport, HostError> {
        let _ = agent;
        Err(HostError("context use is not available here".into()))
    }
    /// `/model ID`: `agent`'s session sends its next request to `choice`, recorded so a
    /// resume keeps it.
    async fn switch_model(&self, agent: &AgentRef, choice: ModelChoice) -> Result<(), HostError> {
        let _ = (agent, choice);
        Err(HostError("switching models is not available here".into()))
    }
    /// `/mode POLICY`: how much `session` asks (`ask`, `auto`, `never`), over the configured
    /// policy until it closes; `None` goes back to the configured one.
    fn set_approval(&self, session: &SessionId, policy: Option<&str>) -> Result<(), HostError> {
        let _ = (session, policy);
        Err(HostError("switching modes is not available here".into()))
    }

    /// Image blocks for a prompt to `session` from the files `paths` (`@shot.png` in the
    /// draft), checked, scaled and stored; refused when the session's model reads no images.
    fn attach_images(
        &self,
        session: &SessionId,
        paths: &[std::path::PathBuf],
    ) -> Result<Vec<dsh_session::ContentBlock>, HostError> {
        let _ = (session, paths);
        Err(HostError("images are not available here".into()))
    }

    /// The turns `agent`'s session can be rewound to, oldest first (the `/rewind` picker).
    async fn turns(&self, agent: &AgentRef) -> Result<Vec<crate::rewind::TurnEntry>, HostError> {
        let _ = agent;
        Err(HostError("rewinding is not available here".into()))
    }
    /// Rewinds `agent`'s idle session to the start of `turn`; says what was done.
    async fn rewind(
        &self,
        agent: &AgentRef,
        turn: u64,
        scope: crate::rewind::RewindScope,
    ) -> Result<String, HostError> {
        let _ = (agent, turn, scope);
        Err(HostError("rewinding is not available here".into()))
    }
    /// The session's own slash commands (custom commands, skills and MCP servers' prompts),
    /// for the popup and `/help`. None by default.
    fn commands(&self, session: &SessionId) -> Vec<Entry> {
        let _ = session;
        Vec::new()
    }
    /// The prompt `/name args` stands for in `session`; `None` when it names none of the
    /// session's commands, an error when its file cannot be read now or an MCP server could
    /// not give its prompt.
    async fn expand(&self, session: &SessionId, line: &str) -> Option<Result<String, HostError>> {
        let _ = (session, line);
        None
    }
    /// Turns plan mode of `agent`'s session on or off (`/plan`); the session's log records
    /// it, and the UI shows it from there. Unsupported by default.
    fn set_plan(&self, agent: &AgentHandle, on: bool) -> Result<(), HostError> {
        let _ = (agent, on);
        Err(HostError("plan mode is not available here".to_owned()))
    }
}
