//! What the editor offers a session: its files and its terminals, as routes behind the seams
//! the tools already use (`dyn FileAccess`, `dyn ShellExecutor`), installed per session.
//!
//! A client that offers nothing gets the local tools unchanged. The routes are registered
//! through the agent's scoped context, so they serve exactly that agent (not its subagents,
//! whose threads the editor does not show) and vanish with it.

use std::sync::Arc;

use dsh_kernel::{BoxError, Context};
use dsh_shell::ShellExecutor;
use dsh_tools::{FileAccess, Routes};

use crate::bridge::Bridge;
use crate::files::EditorFiles;
use crate::record::SessionState;
use crate::terminal::EditorTerminals;

/// The terminal routes and the local executor an editor terminal route delegates to.
type TerminalOffer = (Arc<Routes<dyn ShellExecutor>>, Arc<dyn ShellExecutor>);

/// The routes one session gets, decided from the client's capabilities when it is opened.
#[derive(Clone, Default)]
pub(crate) struct EditorOffer {
    files: Option<Arc<Routes<dyn FileAccess>>>,
    terminals: Option<TerminalOffer>,
}

impl EditorOffer {
    /// What the client offered in `initialize` and the bridge is configured to use. Files go
    /// through the editor only when it can both read and write them (one source of truth per
    /// session); terminals only when a local executor exists to resolve bounds and run
    /// background tasks.
    pub(crate) fn of(bridge: &Bridge) -> EditorOffer {
        let client = bridge.client_capabilities();
        let files =
            (bridge.options.editor_files && client.fs.read_text_file && client.fs.write_text_file)
                .then(|| bridge.file_routes.clone());
        let terminals = if bridge.options.editor_terminals && client.terminal {
            bridge
                .ctx
                .get::<dyn ShellExecutor>()
                .map(|local| (bridge.shell_routes.clone(), local))
        } else {
            None
        };
        EditorOffer { files, terminals }
    }

    /// Installs the routes for the agent whose scoped context is `ctx`.
    pub(crate) fn install(&self, ctx: &Context, state: &Arc<SessionState>) -> Result<(), BoxError> {
        if let Some(routes) = &self.files {
            let files = EditorFiles {
                session: state.id.clone(),
                conn: state.conn.clone(),
            };
            let _ = routes.route(ctx, Arc::new(files))?;
        }
        if let Some((routes, local)) = &self.terminals {
            let terminals = Arc::new(EditorTerminals::new(local.clone(), state));
            let _ = routes.route(ctx, terminals.clone())?;
            // The session's runs stop (killing their terminals) when the agent goes away.
            ctx.scope().defer(move || terminals.disposed.cancel())?;
        }
        Ok(())
    }
}
