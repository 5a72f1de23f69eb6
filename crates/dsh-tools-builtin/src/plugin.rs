//! The plugin that mounts the built-in tools.

use std::sync::Arc;

use dsh_agent::events::AgentDisposed;
use dsh_kernel::{BoxError, Context, Plugin};
use dsh_shell::ShellExecutor;
use dsh_tools::{Tool, ToolRuntime};

use crate::bash::BashTool;
use crate::bash_kill::BashKillTool;
use crate::bash_output::BashOutputTool;
use crate::edit::EditTool;
use crate::fence;
use crate::glob::GlobTool;
use crate::grep::GrepTool;
use crate::notice;
use crate::observe::FileObservations;
use crate::read::ReadTool;
use crate::read_image::ReadImageTool;
use crate::todo::TodoWriteTool;
use crate::write::WriteTool;

/// Registers `bash`, `bash_output`, `bash_kill`, `read`, `read_image`, `write`, `edit`, `glob`, `grep` and
/// `todo_write` in the [`ToolRuntime`] through the context it is applied with (global when applied on the
/// root context, one agent's when applied on its scoped context), provides the
/// [`FileObservations`] service unless one is already provided, announces the end of owned
/// background tasks to their agents, and stops and forgets the background tasks of a disposed
/// agent (see [`ShellExecutor::release_owner`]).
///
/// Mount it after the tool runtime and the shell executor (`dyn ShellExecutor`); without an
/// executor the bash tools answer with an error and no notices are sent. Unmounting undoes
/// all of it; mounting again works, and background tasks keep their owners throughout
/// because ownership lives in the executor (seed decision 3). The observation record is this
/// plugin's, so after a remount sessions read files again before changing them.
#[derive(Clone, Copy, Debug, Default)]
pub struct BuiltinToolsPlugin;

impl Plugin for BuiltinToolsPlugin {
    fn name(&self) -> &str {
        "dsh-tools-builtin"
    }

    async fn apply(&self, ctx: &Context) -> Result<(), BoxError> {
        let runtime = ctx.require::<ToolRuntime>()?;
        let observations = match ctx.get::<FileObservations>() {
            Some(existing) => existing,
            None => {
                let fresh = Arc::new(FileObservations::new());
                ctx.provide::<FileObservations>(fresh.clone())?;
                fresh
            }
        };
        {
            // An agent's observations die with it: a later agent under the same id starts
            // blind. So do its background tasks, which nobody else may read or stop.
            let observations = observations.clone();
            let lookup = ctx.clone();
            let _ = ctx.on_global::<AgentDisposed>(move |agent| {
                observations.forget_session(agent.id());
                fence::release_tasks_of(&lookup, agent.id());
            })?;
        }
        let tools: [Arc<dyn Tool>; 10] = [
            Arc::new(BashTool::new(ctx.clone())),
            Arc::new(BashOutputTool::new(ctx.clone())),
            Arc::new(BashKillTool::new(ctx.clone())),
            Arc::new(ReadTool::new(observations.clone())),
            Arc::new(ReadImageTool::new(ctx.clone())),
            Arc::new(WriteTool::new(observations.clone())),
            Arc::new(EditTool::new(observations)),
            Arc::new(GlobTool),
            Arc::new(GrepTool),
            Arc::new(TodoWriteTool),
        ];
        for tool in tools {
            let _ = runtime.register(ctx, tool)?;
        }
        match ctx.get::<dyn ShellExecutor>() {
            Some(executor) => notice::watch(ctx, executor.as_ref())?,
            None => tracing::debug!("no shell executor at mount: completion notices are off"),
        }
        Ok(())
    }
}
