//! What the composition root provides the UI: agents, stored sessions and settings.
//!
//! The UI never builds a harness itself (dependencies point down: front ends sit on the seams,
//! `dsh-cli` composes), so creating, resuming and listing go through this small trait.

use std::path::PathBuf;

use async_trait::async_trait;
use dsh_agent::AgentHandle;
use dsh_kernel::Context;
use dsh_session::SessionId;

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
    /// Its context window, when known.
    pub context_window: Option<u64>,
    /// Its prices, when known.
    pub prices: Option<Prices>,
}

/// Settings the status line and `/model`, `/mode` show.
#[derive(Clone, Debug, Default)]
pub struct HostInfo {
    /// The model every agent of this UI uses.
    pub model: String,
    /// The provider route.
    pub provider: String,
    /// The working directory of new sessions.
    pub cwd: PathBuf,
    /// The sandbox and approval mode, as the user would name it.
    pub mode: String,
    /// The catalogue (the current model first when it is listed).
    pub models: Vec<ModelEntry>,
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

/// The composition root, as the UI sees it.
#[async_trait]
pub trait TuiHost: Send + Sync + 'static {
    /// The context whose `session/event` feed the UI listens to (and where it provides its
    /// approval service).
    fn ctx(&self) -> &Context;
    /// Settings to show.
    fn info(&self) -> HostInfo;
    /// A fresh agent in the host's working directory.
    async fn create(&self) -> Result<AgentHandle, HostError>;
    /// An agent continuing stored session `id`.
    async fn resume(&self, id: SessionId) -> Result<AgentHandle, HostError>;
    /// Stored sessions, most recently active first.
    async fn sessions(&self) -> Result<Vec<SessionEntry>, HostError>;
    /// The session's own slash commands (custom commands and skills), for the popup and
    /// `/help`. None by default.
    fn commands(&self, session: &SessionId) -> Vec<Entry> {
        let _ = session;
        Vec::new()
    }
    /// The prompt `/name args` stands for in `session`; `None` when it names none of the
    /// session's commands, an error when its file cannot be read now.
    fn expand(&self, session: &SessionId, line: &str) -> Option<Result<String, HostError>> {
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
