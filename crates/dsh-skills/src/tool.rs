//! The `skill` tool: the model loads a skill's instructions when its task matches the
//! skill's description.
//!
//! Progressive loading: the system prompt lists only names and descriptions (fixed for the
//! session); the instructions reach the context only when the model asks, as this tool's
//! result, and the skill's other files only when the instructions send the model to read them.

use std::sync::Arc;

use async_trait::async_trait;
use dsh_tools::{
    ToolCallContext, ToolEffects, ToolError, ToolKind, ToolOutput, ToolPresentation, TypedTool,
};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::catalog::Catalog;

/// The tool's name.
pub const SKILL_TOOL: &str = "skill";

const DESCRIPTION: &str = "Load a skill: its instructions and the folder holding its other \
files. Call it first when a task matches the description of one of the available skills, then \
follow what it returns.";

/// Arguments of `skill`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct SkillArgs {
    /// The skill's name, as listed among the available skills.
    pub name: String,
    /// What the skill should work on, when its instructions take arguments (`$ARGUMENTS`).
    #[serde(default)]
    pub arguments: Option<String>,
}

/// `skill` over one session's catalog.
#[derive(Debug, Clone)]
pub struct SkillTool {
    catalog: Arc<Catalog>,
}

impl SkillTool {
    /// The tool for a session whose skills are `catalog`.
    pub fn new(catalog: Arc<Catalog>) -> Self {
        Self { catalog }
    }

    fn unknown(&self, name: &str) -> ToolError {
        let names: Vec<&str> = self
            .catalog
            .model_skills()
            .map(|s| s.name.as_str())
            .collect();
        ToolError::coded(
            "SkillNotFoundError",
            "UNKNOWN_SKILL",
            format!(
                "there is no skill `{name}` (available: {})",
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            ),
        )
    }
}

#[async_trait]
impl TypedTool for SkillTool {
    type Args = SkillArgs;

    fn name(&self) -> &str {
        SKILL_TOOL
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn is_concurrency_safe(&self, _args: &SkillArgs) -> bool {
        true
    }

    fn effects(&self, args: &SkillArgs) -> ToolEffects {
        match self.catalog.model_skill(&args.name) {
            Some(skill) => ToolEffects::none().reads(&skill.file),
            None => ToolEffects::none(),
        }
    }

    fn present_call(&self, args: &SkillArgs) -> Option<ToolPresentation> {
        Some(ToolPresentation::Generic {
            title: format!("Skill {}", args.name),
            kind: ToolKind::Read,
        })
    }

    async fn run(&self, args: SkillArgs, _call: &ToolCallContext) -> Result<ToolOutput, ToolError> {
        let skill = self
            .catalog
            .model_skill(&args.name)
            .ok_or_else(|| self.unknown(&args.name))?;
        let file = skill.file.clone();
        // A read off the async runtime: the file is bounded and never blocks, but it is I/O.
        let loaded = tokio::task::spawn_blocking({
            let skill = skill.clone();
            move || skill.load()
        })
        .await
        .map_err(|e| ToolError::new(format!("reading {} failed: {e}", file.display())))?
        .map_err(|problem| {
            ToolError::coded(
                "SkillUnavailableError",
                "SKILL_UNAVAILABLE",
                format!("the skill `{}` cannot be loaded: {problem}", args.name),
            )
        })?;
        let body = match args.arguments.as_deref() {
            Some(arguments) => crate::expand::substitute(&loaded.body, arguments),
            None => loaded.body,
        };
        Ok(ToolOutput::text(format!(
            "<skill_content name=\"{name}\">\n<skill_folder>{dir}</skill_folder>\nPaths in these \
             instructions are relative to that folder; read its other files only when the \
             instructions call for them.\n\n{body}\n</skill_content>",
            name = skill.name,
            dir = skill.dir.display(),
        )))
    }
}
