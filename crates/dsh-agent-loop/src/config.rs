//! Loop configuration.

use std::path::PathBuf;

use serde::Deserialize;

use crate::error::LoopError;

/// Configuration of the [`crate::AgentLoop`].
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct LoopConfig {
    /// Upper bound of parallel-safe tool calls in flight per step (1 = serial).
    #[serde(default = "default_parallel")]
    pub max_parallel_tool_calls: usize,
    /// Agents started with the loop and owned by it.
    #[serde(default)]
    pub agents: Vec<ConfiguredAgent>,
}

fn default_parallel() -> usize {
    10
}

impl Default for LoopConfig {
    fn default() -> Self {
        Self {
            max_parallel_tool_calls: default_parallel(),
            agents: Vec::new(),
        }
    }
}

/// One config-declared agent.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct ConfiguredAgent {
    /// A stable label; the session id is `<id>-session-<uuid>` unless `session_id` is given.
    pub id: String,
    /// An exact session id to use instead of a fresh one.
    pub session_id: Option<String>,
    /// Provider route.
    pub provider: Option<String>,
    /// Model id.
    pub model: Option<String>,
    /// Positive per-request output cap.
    pub max_tokens: Option<u32>,
    /// Load this persisted session instead of creating one (exclusive with `session_id`).
    pub resume_session_id: Option<String>,
    /// Workspace cwd of a fresh session (absolute).
    pub cwd: Option<PathBuf>,
}

impl LoopConfig {
    /// Rejects invalid values before anything starts.
    pub fn validate(&self) -> Result<(), LoopError> {
        if self.max_parallel_tool_calls == 0 {
            return Err(LoopError::Config(
                "maxParallelToolCalls must be a positive integer".into(),
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for a in &self.agents {
            if a.id.is_empty() {
                return Err(LoopError::Config("agents[].id must not be empty".into()));
            }
            if a.session_id.is_some() && a.resume_session_id.is_some() {
                return Err(LoopError::Config(format!(
                    "agent `{}`: session_id and resume_session_id are mutually exclusive",
                    a.id
                )));
            }
            if a.session_id.as_deref() == Some("") {
                return Err(LoopError::Config(format!(
                    "agent `{}`: session_id must not be empty",
                    a.id
                )));
            }
            if a.max_tokens == Some(0) {
                return Err(LoopError::Config(format!(
                    "agent `{}`: max_tokens must be positive",
                    a.id
                )));
            }
            if let Some(cwd) = &a.cwd
                && !cwd.is_absolute()
            {
                return Err(LoopError::Config(format!(
                    "agent `{}`: cwd must be absolute, got {}",
                    a.id,
                    cwd.display()
                )));
            }
            let key = a.session_id.clone().unwrap_or_else(|| a.id.clone());
            if !seen.insert(key.clone()) {
                return Err(LoopError::Config(format!("duplicate agent id `{key}`")));
            }
        }
        Ok(())
    }
}
