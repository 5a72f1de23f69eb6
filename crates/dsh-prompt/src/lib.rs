//! The system prompt of dsh.
//!
//! Everything the model is told before the conversation — who it is, the deployment's persona,
//! tool guidance, the tools it may call and the live runtime context — is contributed through a
//! [`dsh_kernel::Context`] to the [`SystemPrompt`] service. Every contribution is an effect of
//! the contributing scope: an agent's scoped context can shadow a global section for that agent
//! only, and disposing the agent's scope removes its contributions.
//!
//! - Contributions: [`Section`]s, [`ContextSection`]s (runtime context), prompt variables,
//!   [`ToolSchemaSource`]s and runtime-context suppression.
//! - [`SystemPrompt::assemble`] merges them for one [`AssemblyScope`] into a [`PromptAssembly`],
//!   orders tools canonically, and lets [`PromptAssemble`] waterfall listeners rewrite it.
//! - [`render`] and [`render_context`] turn an assembly into the system-prompt text and the
//!   runtime-context snapshot.
//! - [`SystemPromptPlugin`] provides the service and the default identity and persona sections.

mod assembly;
mod cancel;
mod config;
mod error;
mod event;
mod plugin;
mod render;
mod scope;
mod section;
mod service;
mod source;
mod tool_order;

pub use assembly::{AssembledContext, AssembledSection, PromptAssembly};
pub use cancel::assembly_cancellation;
pub use config::{SystemPromptConfig, TOOL_ORDER_REST};
pub use error::PromptError;
pub use event::PromptAssemble;
pub use plugin::{
    IDENTITY_ORDER, IDENTITY_SECTION, IDENTITY_TEXT, PERSONA_ORDER, PERSONA_SECTION,
    SystemPromptPlugin,
};
pub use render::{CONTEXT_PREAMBLE, render, render_context};
pub use scope::AssemblyScope;
pub use section::{ContextSection, Section, SectionText, VariableProvider};
pub use service::SystemPrompt;
pub use source::ToolSchemaSource;
