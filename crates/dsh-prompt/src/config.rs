//! Deployment configuration of the system prompt.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::error::PromptError;

/// The `tool_order` entry meaning "every tool not listed, lexicographically, goes here".
/// Without it, unlisted tools follow the listed ones.
pub const TOOL_ORDER_REST: &str = "*";

/// What a deployment says about its system prompt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SystemPromptConfig {
    /// Include the fixed harness identity line (order −100). Default true.
    pub include_identity: bool,
    /// The deployment persona (order 0); an empty persona renders nothing.
    pub persona: String,
    /// Model-facing tool order: listed names first (or around [`TOOL_ORDER_REST`]), the rest
    /// lexicographically. `None` means purely lexicographic. A name no tool source knows makes
    /// assembly fail, so a typo is caught instead of silently ignored.
    pub tool_order: Option<Vec<String>>,
}

impl Default for SystemPromptConfig {
    fn default() -> Self {
        Self {
            include_identity: true,
            persona: String::new(),
            tool_order: None,
        }
    }
}

impl SystemPromptConfig {
    /// Checks what can be checked before any tool is registered: no entry twice.
    pub fn validate(&self) -> Result<(), PromptError> {
        if let Some(order) = &self.tool_order {
            let mut seen = HashSet::new();
            for name in order {
                if !seen.insert(name.as_str()) {
                    return Err(PromptError::InvalidToolOrder {
                        reason: format!("`{name}` is listed more than once"),
                    });
                }
            }
        }
        Ok(())
    }
}
