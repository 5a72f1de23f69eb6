//! Skills and commands in a composition: the per-session catalog, its prompt section and the
//! `skill` tool.
//!
//! [`SkillsPlugin`] provides [`Catalogs`] (every live session's catalog, for the front ends'
//! command lists and `/name` expansion). [`attach`] runs in an agent's setup (the harness calls
//! it for every session it opens, the editor's included): it records the catalog and, when the
//! model has skills, adds the section and the tool through the agent's own scoped context, so
//! they are that agent's alone and leave with it.

use std::collections::HashMap;
use std::sync::Arc;

use dsh_agent::events::AgentDisposed;
use dsh_kernel::{BoxError, Context, Plugin};
use dsh_prompt::{Section, SystemPrompt};
use dsh_session::SessionId;
use dsh_tools::ToolRuntime;
use parking_lot::Mutex;

use crate::catalog::Catalog;
use crate::tool::SkillTool;

/// The catalog of every live session, by session.
#[derive(Debug, Default)]
pub struct Catalogs {
    by_session: Mutex<HashMap<SessionId, Arc<Catalog>>>,
}

impl Catalogs {
    /// The catalog `session` started with, while its agent lives.
    pub fn get(&self, session: &SessionId) -> Option<Arc<Catalog>> {
        self.by_session.lock().get(session).cloned()
    }

    fn insert(&self, session: SessionId, catalog: Arc<Catalog>) {
        self.by_session.lock().insert(session, catalog);
    }

    fn remove(&self, session: &SessionId) {
        self.by_session.lock().remove(session);
    }
}

/// Provides [`Catalogs`] and forgets a session's catalog when its agent is disposed.
#[derive(Clone, Debug, Default)]
pub struct SkillsPlugin;

impl Plugin for SkillsPlugin {
    fn name(&self) -> &str {
        "dsh-skills"
    }

    async fn apply(&self, ctx: &Context) -> Result<(), BoxError> {
        let catalogs = Arc::new(Catalogs::default());
        ctx.provide(catalogs.clone())?;
        let _ = ctx.on::<AgentDisposed>(move |agent| catalogs.remove(agent.id()))?;
        Ok(())
    }
}

/// Gives the agent of `agent_ctx` its catalog: recorded in [`Catalogs`] (when provided), and,
/// when the model has skills to load, the prompt section listing them and the `skill` tool.
pub fn attach(agent_ctx: &Context, catalog: Arc<Catalog>) -> Result<(), BoxError> {
    if let (Some(catalogs), Some(agent)) =
        (agent_ctx.get::<Catalogs>(), dsh_agent::agent_of(agent_ctx))
    {
        catalogs.insert(agent.id().clone(), catalog.clone());
    }
    let Some(text) = crate::prompt::render(&catalog) else {
        return Ok(());
    };
    let prompt = agent_ctx.require::<SystemPrompt>()?;
    // Through a variable: substituted text is never interpolated again, so `{{` in a
    // description stays literal.
    let _ = prompt.variable(agent_ctx, "skills", Arc::new(move |_| Some(text.clone())))?;
    let _ = prompt.section(
        agent_ctx,
        Section::new(crate::prompt::SECTION, crate::prompt::ORDER, "{{skills}}"),
    )?;
    let runtime = agent_ctx.require::<ToolRuntime>()?;
    let _ = runtime.register(agent_ctx, Arc::new(SkillTool::new(catalog)))?;
    Ok(())
}
