//! The plugin that provides the system prompt and its default sections.

use dsh_kernel::{BoxError, Context, Plugin};

use crate::config::SystemPromptConfig;
use crate::section::Section;
use crate::service::SystemPrompt;

/// Name of the harness identity section.
pub const IDENTITY_SECTION: &str = "harness:identity";
/// Order of the identity section: before everything a deployment contributes.
pub const IDENTITY_ORDER: i32 = -100;
/// The identity line every dsh agent starts with.
pub const IDENTITY_TEXT: &str = "You are an AI agent powered by DeepSeek Harness.";
/// Name of the deployment persona section; an agent shadows the persona by registering a
/// section of this name through its scoped context.
pub const PERSONA_SECTION: &str = "deployment:persona";
/// Order of the persona section.
pub const PERSONA_ORDER: i32 = 0;

/// Provides the [`SystemPrompt`] service and registers the default sections (identity, and
/// the deployment persona — registered even when empty so its slot can be shadowed; rendering
/// drops it while empty). Unmounting withdraws the service and its sections.
#[derive(Clone, Debug, Default)]
pub struct SystemPromptPlugin {
    /// The deployment's prompt configuration.
    pub config: SystemPromptConfig,
}

impl SystemPromptPlugin {
    /// A plugin with `config`.
    pub fn new(config: SystemPromptConfig) -> Self {
        Self { config }
    }
}

impl Plugin for SystemPromptPlugin {
    fn name(&self) -> &str {
        "system-prompt"
    }

    async fn apply(&self, ctx: &Context) -> Result<(), BoxError> {
        let prompt = SystemPrompt::new(ctx, self.config.clone())?;
        ctx.provide::<SystemPrompt>(prompt.clone())?;
        if self.config.include_identity {
            let _ = prompt.section(
                ctx,
                Section::new(IDENTITY_SECTION, IDENTITY_ORDER, IDENTITY_TEXT),
            )?;
        }
        let _ = prompt.section(
            ctx,
            Section::new(PERSONA_SECTION, PERSONA_ORDER, self.config.persona.clone()),
        )?;
        Ok(())
    }
}
